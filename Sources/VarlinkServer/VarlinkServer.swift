#if canImport(Glibc)
import Glibc
#endif
public import Logging
import NIOCore
import NIOPosix
import Synchronization
import Varlink

/// A varlink server on a Unix stream socket (SwiftNIO): one connection per client, the caller's
/// credentials from the kernel, `org.varlink.service` answered from `info`, every other call handed to
/// `handler` off the event loops. Limits (message size, idle connections, connection count, queued calls)
/// come from the configuration; a connection that breaks one is closed and the others keep being served.
public final class VarlinkServer: Sendable {
    /// Where the server listens.
    public enum Listener: Sendable {
        /// A socket file created at `path`, mode 0666: anyone may connect; the handler decides what each
        /// caller may do. The path's directory must be the server's own and not writable by others; a stale
        /// socket there is replaced, a live one (another server) or anything else refused; the socket is
        /// removed at shutdown if it is still this server's.
        case path(String)
        /// A listening socket inherited from systemd (socket activation).
        case inherited(descriptor: Int32)
    }

    private let configuration: VarlinkServerConfiguration
    private let info: VarlinkServiceInfo
    private let handler: any VarlinkMethodHandler
    private let logger: Logger
    private let group: MultiThreadedEventLoopGroup
    private let connections = Mutex<[UInt64: (channel: any Channel, state: ConnectionState, peer: PeerCredentials?)]>([:])
    private let nextConnectionID = Atomic<UInt64>(1)
    private let serverChannel = Mutex<(any Channel)?>(nil)
    private let usage = ServerUsage()
    /// The socket this server put at a path, removed at shutdown while it is still there.
    private let published = Mutex<(socket: SocketPath, identity: SocketPath.Identity)?>(nil)

    /// A server that has not started listening yet.
    /// - Parameter eventLoopThreads: threads for the sockets (the handler's work runs elsewhere).
    public init(configuration: VarlinkServerConfiguration, info: VarlinkServiceInfo, handler: any VarlinkMethodHandler,
                eventLoopThreads: Int = 1, logger: Logger) {
        self.configuration = configuration
        self.info = info
        self.handler = handler
        self.logger = logger
        group = MultiThreadedEventLoopGroup(numberOfThreads: eventLoopThreads)
    }

    /// The peers of the connections open now (as the kernel identified them), by connection id.
    public var connectedPeers: [(connectionID: UInt64, peer: PeerCredentials)] {
        connections.withLock { open in
            open.compactMap { id, connection in connection.peer.map { (id, $0) } }.sorted { $0.connectionID < $1.connectionID }
        }
    }

    /// Starts listening; returns once the socket accepts connections.
    public func start(_ listener: Listener) async throws {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { [self] channel in
                self.initialize(channel)
            }
        let channel: any Channel
        switch listener {
        case .path(let path):
            let socket = SocketPath(path: path)
            try socket.prepare()
            let staging = try socket.makeStagingDirectory()
            let staged = socket.staged(in: staging)
            do {
                channel = try await bootstrap.bind(unixDomainSocketPath: staged, cleanupExistingSocketFile: false).get()
            } catch {
                _ = rmdir(staging)
                throw VarlinkServerError("cannot listen on \(path): \(error)")
            }
            do {
                let identity = try socket.publish(staged, staging: staging)
                published.withLock { $0 = (socket, identity) }
            } catch {
                try? await channel.close()
                throw error
            }
        case .inherited(let descriptor):
            channel = try await bootstrap.withBoundSocket(descriptor).get()
        }
        serverChannel.withLock { $0 = channel }
        logger.debug("varlink server listening", metadata: ["varlink.listener": "\(listener)"])
    }

    /// Waits until the listening socket is closed (by `shutdown`).
    public func waitUntilClosed() async throws {
        guard let channel = serverChannel.withLock({ $0 }) else { return }
        try await channel.closeFuture.get()
    }

    /// Stops accepting, waits (up to the grace period) for calls in progress other than long-lived ones,
    /// then closes every connection and the event loops.
    public func shutdown() async {
        if let channel = serverChannel.withLock({ $0 }) { try? await channel.close() }
        let deadline = NIODeadline.now() + configuration.shutdownGracePeriod
        while NIODeadline.now() < deadline {
            let running = connections.withLock { $0.values.reduce(0) { $0 + $1.state.running.load(ordering: .relaxed) } }
            if running == 0 { break }
            try? await Task.sleep(for: .milliseconds(10))
        }
        let open = connections.withLock { $0.values.map(\.channel) }
        for channel in open { try? await channel.close() }
        if let (socket, identity) = published.withLock({ $0 }) { socket.remove(ifStill: identity) }
        try? await group.shutdownGracefully()
    }

    private func initialize(_ channel: any Channel) -> EventLoopFuture<Void> {
        let id = nextConnectionID.wrappingAdd(1, ordering: .relaxed).oldValue
        let state = ConnectionState()
        let settings = self.configuration, info = self.info, handler = self.handler, logger = self.logger, usage = self.usage
        return PeerCredentials.read(from: channel).flatMap { [self] peer in
            allowance(for: peer, on: channel.eventLoop).flatMapThrowing { [self] allowance in
                if let refusal = admit(id, channel: channel, state: state, peer: peer, allowance: allowance) {
                    logger.debug("varlink connection refused: too many connections",
                                 metadata: ["peer.uid": "\(peer.uid)", "varlink.limit": "\(refusal.limit)", "varlink.scope": "\(refusal.scope)"])
                    let reply = VarlinkReply(error: settings.tooManyConnectionsError,
                                             parameters: ["limit": .int(Int64(refusal.limit)), "scope": .string(refusal.scope)])
                    try channel.pipeline.syncOperations.addHandler(RefusingHandler(reply: reply))
                    return
                }
                channel.closeFuture.whenComplete { [self] _ in
                    _ = connections.withLock { $0.removeValue(forKey: id) }
                }
                try channel.pipeline.syncOperations.addHandler(VarlinkConnectionHandler(
                    configuration: settings, info: info, handler: handler,
                    context: VarlinkCallContext(peer: peer, connectionID: id), state: state, usage: usage, logger: logger))
            }
        }
    }

    /// The peer's allowance from the configuration's admission rule (asked off the event loop: it may
    /// read the service's policy), or every slot when there is no rule.
    private func allowance(for peer: PeerCredentials, on eventLoop: any EventLoop) -> EventLoopFuture<VarlinkConnectionAllowance> {
        guard let admission = configuration.admission else {
            return eventLoop.makeSucceededFuture(VarlinkConnectionAllowance(
                connectionsPerUser: configuration.maximumConnections, privileged: true, reservedConnections: 0))
        }
        return eventLoop.makeFutureWithTask { await admission.allowance(for: peer) }
    }

    /// Takes a slot for connection `id` if `peer` may have one: under the server's limit, outside the
    /// reserved slots unless privileged, and under its uid's share. Returns the limit that refused it.
    private func admit(_ id: UInt64, channel: any Channel, state: ConnectionState, peer: PeerCredentials,
                       allowance: VarlinkConnectionAllowance) -> (limit: Int, scope: String)? {
        let maximum = configuration.maximumConnections
        return connections.withLock { open -> (limit: Int, scope: String)? in
            if open.count >= maximum { return (maximum, "server") }
            // At most a quarter of the slots are kept: a small server still serves apps.
            let unreserved = maximum - min(allowance.reservedConnections, maximum / 4)
            if !allowance.privileged && open.count >= unreserved { return (unreserved, "reserved") }
            let mine = open.values.reduce(0) { $0 + ($1.peer?.uid == peer.uid ? 1 : 0) }
            if mine >= allowance.connectionsPerUser { return (allowance.connectionsPerUser, "user") }
            open[id] = (channel, state, peer)
            return nil
        }
    }
}

/// Answers a connection over the limit with one error reply, then closes it.
private final class RefusingHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let reply: VarlinkReply

    init(reply: VarlinkReply) { self.reply = reply }

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: reply.encoded()))).whenComplete { _ in channel.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

/// The server could not start.
public struct VarlinkServerError: Error, Sendable, CustomStringConvertible {
    /// What went wrong and what to do.
    public let message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}
