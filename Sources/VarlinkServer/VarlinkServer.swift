public import Logging
public import NIOCore
public import NIOPosix
import PathSafety
public import ServiceLifecycle
import Synchronization
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// A varlink server on a Unix stream socket (SwiftNIO), run as a ServiceLifecycle `Service`: one
/// connection per client, the caller's credentials from the kernel, `org.varlink.service` answered from
/// `info`, every other call handed to `handler` on threads of the server's own (so that a handler's
/// blocking work never holds Swift's cooperative pool). Limits (message size, idle connections,
/// connection count, queued calls, reply size and pace) come from the configuration; a connection that
/// breaks one is closed and the others keep being served.
///
/// `run()` takes the socket, calls `onServerRunning` once it accepts connections (the kernel queues them
/// until the hook returns), and serves it until a graceful shutdown (or `shutdown()`); then it stops
/// accepting, lets the calls in progress finish (up to `shutdownGracePeriod`, long-lived calls excepted)
/// and closes every connection. The sockets run on the event-loop group it is given (by default NIO's
/// shared one), which it never shuts down.
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

    /// Where the server is in its life: the one record of it.
    private enum State {
        /// Made; `run()` has not been called.
        case initial
        /// `run()` is taking the socket.
        case starting
        /// Accepting connections on the listening channel.
        case running(any Channel)
        /// A shutdown began: no longer accepting, the calls in progress finishing.
        case stopping
        /// Stopped, or shut down before it ran.
        case stopped
    }

    let listener: Listener
    let configuration: VarlinkServerConfiguration
    let info: VarlinkServiceInfo
    /// The names of `info`'s interfaces: the handler's calls are to one of these.
    let servedInterfaces: Set<String>
    let handler: any VarlinkMethodHandler
    let logger: Logger
    let eventLoopGroup: any EventLoopGroup
    let executor: VarlinkHandlerExecutor
    /// The server made `executor` (and stops it when it stops), as opposed to being given it.
    private let ownsExecutor: Bool
    /// The connections open now (the service's logic may hold the same registry).
    let connections: VarlinkConnectionRegistry
    let usage = ServerUsage()
    let callsInProgress = CallsInProgress()
    private let onServerRunning: (@Sendable () async -> Void)?
    private let state = Mutex<State>(.initial)

    /// A server that listens on `listener` once it runs.
    /// - Parameters:
    ///   - connections: where the server keeps its open connections; the service makes it and hands it to
    ///     its own logic too when that needs to know who is connected.
    ///   - eventLoopGroup: the event loops for the sockets (the handler's work runs elsewhere); not shut down
    ///     by the server.
    ///   - handlerThreads: threads the handler's calls run on, and admissions are decided on, when no
    ///     `handlerExecutor` is given: as many calls may block (on the store, a lock) at once before the
    ///     next waits for a thread.
    ///   - handlerExecutor: the executor to run the handler's calls and the admissions on, shared with the
    ///     caller's other blocking work (the caller stops it); by default the server makes its own.
    ///   - onServerRunning: called once the socket accepts connections, before the first is served (tell
    ///     systemd the service is ready here).
    public init(
        listener: Listener,
        configuration: VarlinkServerConfiguration,
        info: VarlinkServiceInfo,
        handler: any VarlinkMethodHandler,
        connections: VarlinkConnectionRegistry = VarlinkConnectionRegistry(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        handlerThreads: Int = 4,
        handlerExecutor: VarlinkHandlerExecutor? = nil,
        onServerRunning: (@Sendable () async -> Void)? = nil,
        logger: Logger
    ) {
        self.listener = listener
        self.configuration = configuration
        self.info = info
        servedInterfaces = Set(info.interfaces.map(\.name))
        self.handler = handler
        self.connections = connections
        self.eventLoopGroup = eventLoopGroup
        self.onServerRunning = onServerRunning
        self.logger = logger
        executor = handlerExecutor ?? VarlinkHandlerExecutor(threads: handlerThreads)
        ownsExecutor = handlerExecutor == nil
    }

    /// Takes the socket, calls `onServerRunning`, then serves: one child task per connection, until a
    /// graceful shutdown of the service group (or `shutdown()`); then stops accepting, waits up to the grace
    /// period for calls in progress other than long-lived ones, and closes every connection. Cancelled, it
    /// closes every connection at once. Returns once every connection is closed (at once if the server was
    /// shut down before it ran).
    /// - Throws: `VarlinkServerError` when the socket cannot be taken, or the server runs already.
    public func run() async throws {
        switch state.withLock({ state in
            defer { if case .initial = state { state = .starting } }
            return state
        }) {
        case .initial: break
        case .stopped: return await finish(removing: nil)
        case .starting, .running, .stopping: throw VarlinkServerError("the varlink server runs already: run it once")
        }
        let listening: NIOAsyncChannel<AcceptedConnection, Never>
        let published: PublishedSocket?
        do {
            (listening, published) = try await listen()
        } catch {
            await finish(removing: nil)
            throw error
        }
        let shutDownMeanwhile = state.withLock { state -> Bool in
            guard case .starting = state else { return true }
            state = .running(listening.channel)
            return false
        }
        logger.debug("varlink server listening", metadata: ["varlink.listener": "\(listener)"])
        var failure: (any Error)?
        do {
            try await withThrowingDiscardingTaskGroup { connections in
                try await withGracefulShutdownHandler {
                    try await listening.executeThenClose { inbound in
                        guard !shutDownMeanwhile else { return }
                        await onServerRunning?()
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
        await finish(removing: published)
        if let failure { throw failure }
    }

    /// Stops accepting connections, as a graceful shutdown of the service group does: `run()` then lets
    /// the calls in progress finish (up to the grace period) and closes every connection before it
    /// returns. A server shut down before it runs never listens.
    public func shutdown() {
        let listening = state.withLock { state -> (any Channel)? in
            switch state {
            case .initial:
                state = .stopped
                return nil
            case .starting:
                state = .stopping
                return nil
            case .running(let channel):
                state = .stopping
                return channel
            case .stopping, .stopped:
                return nil
            }
        }
        listening?.close(promise: nil)
    }

    /// A shutdown began (a call's replies are then taken before it counts as done).
    var isStopping: Bool {
        state.withLock { state in
            switch state {
            case .stopping, .stopped: true
            case .initial, .starting, .running: false
            }
        }
    }

    /// The socket this server put at a path, removed when it stops while it is still there.
    private struct PublishedSocket {
        var socket: SocketPath
        var identity: SocketPath.Identity
        var directory: SafeDirectory

        func remove() {
            socket.remove(ifStill: identity, in: directory)
        }
    }

    /// Takes the listener's socket: a path's is bound in a staging directory and published once it listens.
    private func listen() async throws -> (NIOAsyncChannel<AcceptedConnection, Never>, PublishedSocket?) {
        let bootstrap = ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
        let initialize: @Sendable (any Channel) -> EventLoopFuture<AcceptedConnection> = { [self] channel in
            accept(channel)
        }
        switch listener {
        case .path(let path):
            let socket = SocketPath(path: path)
            let directory = try socket.prepare()
            let staging = try socket.makeStagingDirectory(in: directory)
            let channel: NIOAsyncChannel<AcceptedConnection, Never>
            do {
                channel = try await bootstrap.bind(
                    unixDomainSocketPath: staging.bindPath,
                    cleanupExistingSocketFile: false,
                    childChannelInitializer: initialize
                )
            } catch {
                try? directory.remove(staging.name, isDirectory: true)
                throw VarlinkServerError("cannot listen on \(path): \(error)")
            }
            do {
                let identity = try socket.publish(from: staging, to: directory)
                return (channel, PublishedSocket(socket: socket, identity: identity, directory: directory))
            } catch {
                try? await channel.executeThenClose { _ in }
                throw error
            }
        case .inherited(let descriptor):
            return (try await bootstrap.bind(descriptor, childChannelInitializer: initialize), nil)
        }
    }

    /// Waits (up to the grace period) for the calls in progress other than long-lived ones, then closes
    /// every connection: their tasks cancel what still runs and end.
    private func closeConnectionsOnceCallsEnd() async {
        await callsInProgress.waitUntilNone(atMost: .nanoseconds(configuration.shutdownGracePeriod.nanoseconds))
        for channel in connections.channels { channel.close(promise: nil) }
    }

    /// The end of `run()`: the published socket removed, the server stopped, its own threads too.
    private func finish(removing published: PublishedSocket?) async {
        published?.remove()
        state.withLock { $0 = .stopped }
        if ownsExecutor { await executor.shutdown() }
        logger.debug("varlink server stopped")
    }
}

/// The server could not start.
public struct VarlinkServerError: Error, Sendable, CustomStringConvertible {
    /// What went wrong and what to do.
    public let message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}
