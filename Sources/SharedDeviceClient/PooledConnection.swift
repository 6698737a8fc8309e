import NIOCore
import NIOPosix
import Synchronization
import Varlink
import VarlinkNIO

#if canImport(Glibc)
import Glibc
#endif

/// A connection to the broker kept open between single-reply calls, one call at a time. Cancelling the
/// call in flight closes it (so the broker drops that call, and only that one).
final class PooledConnection: Sendable {
    let channel: any Channel
    /// Who listens, as the kernel said when the connection was made.
    let peer: EventLoopFuture<VarlinkPeer>
    private let waiter: NIOLoopBound<ReplyWaiter>

    /// Connects to `path` (the caller checks the peer before the first exchange).
    static func open(_ path: String, group: any EventLoopGroup, maximumReplyBytes: Int) async throws -> PooledConnection
    {
        // The connection's own event loop, so the handler completes the promise without a hop.
        let loop = group.next()
        let peer = loop.makePromise(of: VarlinkPeer.self)
        // The waiter is kept from the initializer, not looked up in the pipeline afterwards: a broker that
        // refuses the connection (TooManyConnections, then the close) may have closed it by then, and its
        // handlers are gone from the pipeline while the refusal waits in the waiter for the first call.
        let installed = loop.makePromise(of: NIOLoopBound<ReplyWaiter>.self)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: loop).channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let waiter = ReplyWaiter()
                    try channel.pipeline.syncOperations.addHandlers([
                        PeerCredentialsCapture(peer),
                        ByteToMessageHandler(VarlinkMessageSplitter(maximumMessageBytes: maximumReplyBytes)), waiter,
                    ])
                    installed.succeed(NIOLoopBound(waiter, eventLoop: channel.eventLoop))
                }
            }.connect(unixDomainSocketPath: path).get()
        } catch {
            peer.fail(error)
            installed.fail(error)
            throw error
        }
        let waiter = try await installed.futureResult.get()
        return PooledConnection(channel: channel, peer: peer.futureResult, waiter: waiter)
    }

    private init(channel: any Channel, peer: EventLoopFuture<VarlinkPeer>, waiter: NIOLoopBound<ReplyWaiter>) {
        self.channel = channel
        self.peer = peer
        self.waiter = waiter
    }

    /// Sends `request` (a whole varlink message with its NUL) and returns the next message received.
    func exchange(_ request: ByteBuffer) async throws -> ByteBuffer {
        let promise = channel.eventLoop.makePromise(of: ByteBuffer.self)
        let channel = channel
        let waiter = waiter
        channel.eventLoop.execute {
            guard waiter.value.expect(promise) else { return }
            channel.writeAndFlush(request).whenFailure { promise.fail($0) }
        }
        return try await withTaskCancellationHandler {
            try await promise.futureResult.get()
        } onCancel: {
            channel.close(promise: nil)
        }
    }

    func close() {
        channel.close(promise: nil)
    }
}

/// Hands the next message of the connection to the call waiting for it; fails it when the connection goes.
/// A message that comes before any call (the broker refusing the connection: TooManyConnections, then the
/// close) is kept for the first call.
private final class ReplyWaiter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private var pending: EventLoopPromise<ByteBuffer>?
    private var unclaimed: ByteBuffer?
    private var closed = false

    /// Waits for the next message; false (and `promise` completed) when it is already known: a message
    /// that came first, or the connection's end.
    func expect(_ promise: EventLoopPromise<ByteBuffer>) -> Bool {
        if let unclaimed {
            self.unclaimed = nil
            promise.succeed(unclaimed)
            return false
        }
        guard !closed else {
            promise.fail(ChannelError.ioOnClosedChannel)
            return false
        }
        pending = promise
        return true
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let message = unwrapInboundIn(data)
        guard let pending else {
            // Nothing asked for it yet: kept for the next call; a second one means the connection is out of step.
            if unclaimed == nil { unclaimed = message } else { context.close(promise: nil) }
            return
        }
        self.pending = nil
        pending.succeed(message)
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        pending?.fail(ChannelError.ioOnClosedChannel)
        pending = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        pending?.fail(error)
        pending = nil
        context.close(promise: nil)
    }
}

/// The idle connections of one application, at most `capacity` of them.
final class ConnectionPool: Sendable {
    private let idle = Mutex<[PooledConnection]>([])
    let capacity: Int

    init(capacity: Int = 4) {
        self.capacity = capacity
    }

    /// An idle connection still open, if there is one.
    func take() -> PooledConnection? {
        while let connection = idle.withLock({ $0.popLast() }) {
            if connection.channel.isActive { return connection }
            connection.close()
        }
        return nil
    }

    /// Keeps `connection` for the next call, or closes it when the pool is full.
    func give(_ connection: PooledConnection) {
        let kept = idle.withLock { connections in
            guard connections.count < capacity else { return false }
            connections.append(connection)
            return true
        }
        if !kept { connection.close() }
    }

    deinit {
        for connection in idle.withLock({ $0 }) { connection.close() }
    }
}

/// Reads who listens (`SO_PEERCRED`) the moment the connection is made, before anything is read from it:
/// a broker that answers and closes at once (a refused connection) is still identified.
final class PeerCredentialsCapture: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private let promise: EventLoopPromise<VarlinkPeer>
    private var completed = false

    init(_ promise: EventLoopPromise<VarlinkPeer>) {
        self.promise = promise
    }

    func channelActive(context: ChannelHandlerContext) {
        complete(
            Result {
                guard let provider = context.channel as? any SocketOptionProvider else {
                    throw ChannelError.operationUnsupported
                }
                // On the event loop this reads the option at once. VarlinkPeer has `struct ucred`'s layout.
                var peer: VarlinkPeer?
                provider.unsafeGetSocketOption(
                    level: SocketOptionLevel(SOL_SOCKET),
                    name: SocketOptionName(SO_PEERCRED)
                )
                .whenSuccess { (value: VarlinkPeer) in peer = value }
                guard let peer else { throw ChannelError.ioOnClosedChannel }
                return peer
            }
        )
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        complete(.failure(ChannelError.ioOnClosedChannel))
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        complete(.failure(ChannelError.ioOnClosedChannel))
    }

    private func complete(_ result: Result<VarlinkPeer, any Error>) {
        guard !completed else { return }
        completed = true
        promise.completeWith(result)
    }
}
