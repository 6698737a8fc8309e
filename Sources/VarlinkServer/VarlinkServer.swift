#if canImport(Glibc)
import Glibc
#endif
public import Logging
import NIOCore
import NIOPosix
import PathSafety
public import ServiceLifecycle
import Synchronization
import Varlink

/// A varlink server on a Unix stream socket (SwiftNIO), run as a ServiceLifecycle `Service`: one
/// connection per client, the caller's credentials from the kernel, `org.varlink.service` answered from
/// `info`, every other call handed to `handler` on threads of the server's own (so that a handler's
/// blocking work never holds Swift's cooperative pool). Limits (message size, idle connections,
/// connection count, queued calls, reply size and pace) come from the configuration; a connection that
/// breaks one is closed and the others keep being served.
///
/// `start(_:)` takes the socket; `run()` serves it until a graceful shutdown (or `shutdown()`), then stops
/// accepting, lets the calls in progress finish (up to `shutdownGracePeriod`, long-lived calls excepted)
/// and closes every connection.
public final class VarlinkServer: Service, Sendable {
    /// Where the server listens.
    public enum Listener: Sendable {
        /// A socket file created at `path`, mode 0666: anyone may connect; the handler decides what each
        /// caller may do. Every directory above the path must be owned by root or the server's uid and not
        /// writable by others (bar sticky ones such as `/tmp`); missing ones are created (0755); the path's
        /// directory must be the server's own and not writable by others; a stale
        /// socket there is replaced, a live one (another server) or anything else refused; the socket is
        /// removed at shutdown if it is still this server's.
        case path(String)
        /// A listening socket inherited from systemd (socket activation).
        case inherited(descriptor: Int32)
    }

    /// Where the server is in its life.
    private enum Phase {
        case created
        case listening(NIOAsyncChannel<AcceptedConnection, Never>)
        case running(any Channel)
        case stopped
    }

    let configuration: VarlinkServerConfiguration
    let info: VarlinkServiceInfo
    let handler: any VarlinkMethodHandler
    let logger: Logger
    let group: MultiThreadedEventLoopGroup
    let executor: VarlinkHandlerExecutor
    /// The server made `executor` (and stops it when it stops), as opposed to being given it.
    private let ownsExecutor: Bool
    let connections = Mutex<[UInt64: OpenConnection]>([:])
    let nextConnectionID = Atomic<UInt64>(1)
    let usage = ServerUsage()
    let callsInProgress = CallsInProgress()
    /// A shutdown began: it no longer accepts, and waits for the calls in progress.
    let stopping = Atomic<Bool>(false)
    private let phase = Mutex<Phase>(.created)
    /// The socket this server put at a path, removed at shutdown while it is still there.
    private let published = Mutex<(socket: SocketPath, identity: SocketPath.Identity, directory: SafeDirectory)?>(nil)

    /// A server that has not started listening yet.
    /// - Parameters:
    ///   - eventLoopThreads: threads for the sockets (the handler's work runs elsewhere).
    ///   - handlerThreads: threads the handler's calls run on, and admissions are decided on, when no
    ///     `handlerExecutor` is given: as many calls may block (on the store, a lock) at once before the
    ///     next waits for a thread.
    ///   - handlerExecutor: the executor to run the handler's calls and the admissions on, shared with the
    ///     caller's other blocking work (the caller stops it); by default the server makes its own.
    public init(configuration: VarlinkServerConfiguration, info: VarlinkServiceInfo, handler: any VarlinkMethodHandler,
                eventLoopThreads: Int = 1, handlerThreads: Int = 4, handlerExecutor: VarlinkHandlerExecutor? = nil, logger: Logger) {
        self.configuration = configuration
        self.info = info
        self.handler = handler
        self.logger = logger
        group = MultiThreadedEventLoopGroup(numberOfThreads: eventLoopThreads)
        executor = handlerExecutor ?? VarlinkHandlerExecutor(threads: handlerThreads)
        ownsExecutor = handlerExecutor == nil
    }

    /// The peers of the connections open now (as the kernel identified them), by connection id.
    public var connectedPeers: [(connectionID: UInt64, peer: PeerCredentials)] {
        connections.withLock { open in
            open.map { ($0.key, $0.value.peer) }.sorted { $0.connectionID < $1.connectionID }
        }
    }

    /// Takes the socket; returns once it accepts connections (the kernel queues them until `run()`).
    public func start(_ listener: Listener) async throws {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
        let initialize: @Sendable (any Channel) -> EventLoopFuture<AcceptedConnection> = { [self] channel in accept(channel) }
        let channel: NIOAsyncChannel<AcceptedConnection, Never>
        switch listener {
        case .path(let path):
            let socket = SocketPath(path: path)
            let directory = try socket.prepare()
            let staging = try socket.makeStagingDirectory(in: directory)
            do {
                channel = try await bootstrap.bind(unixDomainSocketPath: staging.bindPath, cleanupExistingSocketFile: false,
                                                   childChannelInitializer: initialize)
            } catch {
                try? directory.remove(staging.name, isDirectory: true)
                throw VarlinkServerError("cannot listen on \(path): \(error)")
            }
            do {
                let identity = try socket.publish(from: staging, to: directory)
                published.withLock { $0 = (socket, identity, directory) }
            } catch {
                try? await channel.channel.close()
                throw error
            }
        case .inherited(let descriptor):
            channel = try await bootstrap.bind(descriptor, childChannelInitializer: initialize)
        }
        phase.withLock { $0 = .listening(channel) }
        logger.debug("varlink server listening", metadata: ["varlink.listener": "\(listener)"])
    }

    /// Serves the socket taken by `start(_:)`: one child task per connection, until a graceful shutdown
    /// of the service group (or `shutdown()`); then stops accepting, waits up to the grace period for
    /// calls in progress other than long-lived ones, and closes every connection. Cancelled, it closes
    /// every connection at once. Returns once every connection is closed and the server's threads are
    /// stopped.
    public func run() async throws {
        let listening = phase.withLock { phase -> NIOAsyncChannel<AcceptedConnection, Never>? in
            guard case .listening(let channel) = phase else { return nil }
            phase = .running(channel.channel)
            return channel
        }
        guard let listening else { throw VarlinkServerError("the varlink server is not listening: start it first, once") }
        defer { logger.debug("varlink server stopped") }
        var failure: (any Error)?
        do {
            try await withThrowingDiscardingTaskGroup { connections in
                try await withGracefulShutdownHandler {
                    try await listening.executeThenClose { inbound in
                        for try await accepted in inbound {
                            guard case .admitted(let connection) = accepted else { continue }
                            connections.addTask { await self.serve(connection) }
                        }
                    }
                } onGracefulShutdown: {
                    self.shutdown()
                }
                // The socket is closed: the connections open now are the last ones.
                connections.addTask { await self.closeConnectionsOnceCallsEnd() }
            }
        } catch is CancellationError {
            // Cancelled: every connection's task was cancelled, and closed its connection.
        } catch {
            failure = error
        }
        removePublishedSocket()
        await stopThreads()
        if let failure { throw failure }
    }

    /// Stops accepting connections, as a graceful shutdown of the service group does: `run()` then lets
    /// the calls in progress finish (up to the grace period) and closes every connection before it
    /// returns. A server that was started and never run is closed here.
    public func shutdown() {
        stopping.store(true, ordering: .relaxed)
        let current = phase.withLock { phase -> Phase in
            defer { if case .listening = phase { phase = .stopped } }
            return phase
        }
        switch current {
        case .running(let channel):
            channel.close(promise: nil)
        case .listening(let channel):
            let server = self
            channel.channel.close().whenComplete { _ in
                server.removePublishedSocket()
                Task { await server.stopThreads() }
            }
        case .created, .stopped:
            break
        }
    }

    /// Waits (up to the grace period) for the calls in progress other than long-lived ones, then closes
    /// every connection: their tasks cancel what still runs and end.
    private func closeConnectionsOnceCallsEnd() async {
        await callsInProgress.waitUntilNone(atMost: .nanoseconds(configuration.shutdownGracePeriod.nanoseconds))
        for channel in connections.withLock({ $0.values.map(\.channel) }) { channel.close(promise: nil) }
    }

    private func removePublishedSocket() {
        if let (socket, identity, directory) = published.withLock({ published in defer { published = nil }; return published }) {
            socket.remove(ifStill: identity, in: directory)
        }
    }

    private func stopThreads() async {
        phase.withLock { $0 = .stopped }
        try? await group.shutdownGracefully()
        if ownsExecutor { await executor.shutdown() }
    }
}

/// The server could not start.
public struct VarlinkServerError: Error, Sendable, CustomStringConvertible {
    /// What went wrong and what to do.
    public let message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}
