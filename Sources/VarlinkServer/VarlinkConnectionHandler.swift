import Foundation
import Logging
import NIOCore
import Synchronization
import Varlink

/// One client connection: splits the bytes into messages, decodes calls, queues them, and runs them one
/// at a time (in order) on a task of their own, off the event loop. Closes the connection on bytes that
/// are not varlink (after a `protocolError` reply), on too many queued calls or bytes (after a
/// `protocolError` naming the limit), on a message left unfinished past `messageTimeout`, on a reply not
/// read within `replyTimeout`, and when it sat idle.
final class VarlinkConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// A decoded call and the size of its message (counted against the queued-bytes limits until it ends).
    struct QueuedCall: Sendable {
        var call: VarlinkCall
        var bytes: Int
    }

    private let configuration: VarlinkServerConfiguration
    private let info: VarlinkServiceInfo
    private let handler: any VarlinkMethodHandler
    private let context: VarlinkCallContext
    private let state: ConnectionState
    private let usage: ServerUsage
    private let logger: Logger
    private var decoder: VarlinkFrameDecoder
    private var calls: AsyncStream<QueuedCall>.Continuation?
    private var worker: Task<Void, Never>?
    private var idleTimer: Scheduled<Void>?
    private var messageTimer: Scheduled<Void>?
    private var closing = false
    /// This connection's calls queued or running (their bytes counted in `usage` until the connection ends).
    private var queue: VarlinkQueueBudget
    /// The most this connection ever held (queued calls and unfinished message): past
    /// `largeConnectionBytes` (or with a reply that large), the memory is handed back to the system when
    /// it closes.
    private var peakBytes = 0
    static let largeConnectionBytes = 256 << 10
    private var released = false

    init(configuration: VarlinkServerConfiguration, info: VarlinkServiceInfo, handler: any VarlinkMethodHandler,
         context: VarlinkCallContext, state: ConnectionState, usage: ServerUsage, logger: Logger) {
        self.configuration = configuration
        self.info = info
        self.handler = handler
        self.context = context
        self.state = state
        self.usage = usage
        self.logger = logger
        decoder = VarlinkFrameDecoder(maximumMessageBytes: configuration.maximumMessageBytes)
        queue = VarlinkQueueBudget(maximumCalls: configuration.maximumQueuedCalls, maximumBytes: configuration.maximumQueuedBytes)
    }

    func channelActive(context channelContext: ChannelHandlerContext) {
        let (stream, continuation) = AsyncStream<QueuedCall>.makeStream()
        calls = continuation
        let channel = channelContext.channel
        let loopBound = NIOLoopBound(self, eventLoop: channelContext.eventLoop)
        let finished: @Sendable (Int) -> Void = { bytes in channel.eventLoop.execute { loopBound.value.callFinished(bytes: bytes, channel: channel) } }
        let replies = ReplyLimits(maximumBytes: configuration.maximumReplyBytes, timeout: configuration.replyTimeout,
                                  limitExceededError: configuration.limitExceededError)
        worker = Self.startWorker(stream, handler: handler, context: context, info: info, state: state, replies: replies,
                                  channel: channel, finished: finished)
        scheduleIdleTimer(channelContext)
        channelContext.fireChannelActive()
    }

    func channelRead(context channelContext: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        let buffer = unwrapInboundIn(data)
        decoder.append(buffer.readableBytesView)
        var completed = false
        do {
            while let message = try decoder.nextMessage() {
                completed = true
                let call = try VarlinkCall.decode(message)
                if let refusal = admitToQueue(bytes: message.count) {
                    logger.debug("varlink connection closed: over a queue limit", metadata: ["peer.uid": "\(context.peer.uid)", "varlink.limit": "\(refusal)"])
                    refuse(channelContext, reason: refusal)
                    return
                }
                calls?.yield(QueuedCall(call: call, bytes: message.count))
            }
        } catch {
            logger.debug("varlink connection closed: not a varlink message", metadata: ["peer.uid": "\(context.peer.uid)", "varlink.error": "\(error.code)"])
            refuse(channelContext, reason: error.message)
            return
        }
        peakBytes = max(peakBytes, queue.bytes + decoder.bufferedByteCount)
        if completed { scheduleIdleTimer(channelContext) }
        scheduleMessageTimer(channelContext)
    }

    /// Counts a call of `bytes` against the connection's and the uid's limits; the limit it would break otherwise.
    private func admitToQueue(bytes: Int) -> String? {
        switch queue.admit(byteCount: bytes) {
        case .tooManyCalls?:
            return "more than \(configuration.maximumQueuedCalls) calls queued on one connection (the limit); wait for replies before sending more"
        case .tooManyBytes?:
            return "calls queued on one connection exceed \(configuration.maximumQueuedBytes) bytes (the limit); wait for replies before sending more"
        case nil:
            break
        }
        guard usage.reserveQueuedBytes(bytes, for: context.peer.uid, limit: configuration.maximumQueuedBytesPerUser) else {
            queue.finish(byteCount: bytes)
            return "calls queued by uid \(context.peer.uid) on all its connections exceed \(configuration.maximumQueuedBytesPerUser) bytes (the limit); wait for replies before sending more"
        }
        return nil
    }

    /// Sends a `protocolError` reply saying why, then closes the connection.
    /// The close waits for the reply's write (a close with the write still pending would drop it).
    private func refuse(_ channelContext: ChannelHandlerContext, reason: String) {
        guard !closing else { return }
        closing = true
        calls?.finish()
        let reply = VarlinkReply(error: configuration.protocolError, parameters: ["reason": .string(reason)])
        let loopBound = NIOLoopBound(channelContext, eventLoop: channelContext.eventLoop)
        channelContext.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: reply.encoded()))).whenComplete { _ in
            loopBound.value.close(promise: nil)
        }
        // A peer that reads nothing does not hold the connection open: closed after a second regardless.
        channelContext.eventLoop.scheduleTask(in: .seconds(1)) {
            loopBound.value.close(promise: nil)
        }
    }

    /// The peer stopped sending but still reads (`shutdown(SHUT_WR)`, `printf … | socat`): its calls are
    /// answered, then the connection is closed.
    func userInboundEventTriggered(context channelContext: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            messageTimer?.cancel()
            calls?.finish()
            return
        }
        channelContext.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context channelContext: ChannelHandlerContext) {
        idleTimer?.cancel()
        messageTimer?.cancel()
        calls?.finish()
        // Calls still queued will never run: their bytes are no longer the uid's.
        usage.releaseQueuedBytes(queue.bytes, for: context.peer.uid)
        released = true
        // A call in progress (an interactive sign-in) is cancelled: its peer is gone.
        worker?.cancel()
        let handler = self.handler, context = self.context, worker = self.worker, usage = self.usage
        let heldMegabytes = peakBytes >= Self.largeConnectionBytes || state.wroteLargeReply.load(ordering: .relaxed)
        Task {
            await worker?.value
            handler.connectionClosed(context)
            if heldMegabytes { usage.returnFreedMemory() }
        }
        channelContext.fireChannelInactive()
    }

    func errorCaught(context channelContext: ChannelHandlerContext, error: any Error) {
        logger.debug("varlink connection error", metadata: ["peer.uid": "\(context.peer.uid)", "error": "\(error)"])
        close(channelContext)
    }

    private func callFinished(bytes: Int, channel: any Channel) {
        queue.finish(byteCount: bytes)
        if !released { usage.releaseQueuedBytes(bytes, for: context.peer.uid) }
        if let context = try? channel.pipeline.syncOperations.context(handler: self) { scheduleIdleTimer(context) }
    }

    private func close(_ channelContext: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        calls?.finish()
        channelContext.close(promise: nil)
    }

    /// (Re)arms the idle timer: it closes the connection if, when it fires, no call is queued or running.
    private func scheduleIdleTimer(_ channelContext: ChannelHandlerContext) {
        idleTimer?.cancel()
        let loopBound = NIOLoopBound((self, channelContext), eventLoop: channelContext.eventLoop)
        idleTimer = channelContext.eventLoop.scheduleTask(in: configuration.idleTimeout) {
            let (handler, channelContext) = loopBound.value
            guard handler.queue.calls == 0 else { return }
            handler.logger.debug("varlink connection closed: idle", metadata: ["peer.uid": "\(handler.context.peer.uid)"])
            handler.close(channelContext)
        }
    }

    /// Arms the message deadline when a message has started and none is armed; disarms it when no bytes
    /// of an unfinished message are left. Later bytes of the same message never push the deadline back.
    private func scheduleMessageTimer(_ channelContext: ChannelHandlerContext) {
        guard decoder.bufferedByteCount > 0 else {
            messageTimer?.cancel()
            messageTimer = nil
            return
        }
        guard messageTimer == nil else { return }
        let loopBound = NIOLoopBound((self, channelContext), eventLoop: channelContext.eventLoop)
        messageTimer = channelContext.eventLoop.scheduleTask(in: configuration.messageTimeout) {
            let (handler, channelContext) = loopBound.value
            handler.logger.debug("varlink connection closed: a message left unfinished", metadata: ["peer.uid": "\(handler.context.peer.uid)"])
            handler.close(channelContext)
        }
    }

    private static func startWorker(_ stream: AsyncStream<QueuedCall>, handler: any VarlinkMethodHandler, context: VarlinkCallContext,
                                    info: VarlinkServiceInfo, state: ConnectionState, replies: ReplyLimits, channel: any Channel,
                                    finished: @escaping @Sendable (Int) -> Void) -> Task<Void, Never> {
        Task {
            for await queued in stream {
                if Task.isCancelled { break }
                await run(queued.call, handler: handler, context: context, info: info, state: state, limits: replies, channel: channel)
                finished(queued.bytes)
            }
            // The calls ended: the peer stopped sending (half-close) and every reply is written, or the
            // connection is already gone.
            channel.close(promise: nil)
        }
    }

    /// Runs one call: org.varlink.service here, everything else by the handler.
    private static func run(_ call: VarlinkCall, handler: any VarlinkMethodHandler, context: VarlinkCallContext,
                            info: VarlinkServiceInfo, state: ConnectionState, limits: ReplyLimits, channel: any Channel) async {
        let replies = VarlinkReplies(oneway: call.oneway, more: call.more) { reply in
            await limits.write(reply, to: channel, state: state)
        }
        if call.interface == "org.varlink.service" {
            await replies.send(info.answer(call))
        } else if !info.interfaces.contains(where: { $0.name == call.interface }) {
            await replies.send(.interfaceNotFound(call.interface))
        } else {
            state.running.add(handler.isLongLived(call) ? 0 : 1, ordering: .relaxed)
            await handler.handle(call, context: context, replies: replies)
            state.running.subtract(handler.isLongLived(call) ? 0 : 1, ordering: .relaxed)
        }
    }
}

/// How replies leave: at most `maximumBytes` each, and taken by the peer within `timeout`.
struct ReplyLimits: Sendable {
    var maximumBytes: Int
    var timeout: TimeAmount
    var limitExceededError: String

    /// Writes `reply` (or, over the size limit, the error that replaces it) and waits until the socket
    /// took it; a peer that does not read for `timeout` is disconnected. False once the peer is gone or
    /// the call's replies must stop.
    func write(_ reply: VarlinkReply, to channel: any Channel, state: ConnectionState) async -> Bool {
        guard channel.isActive else { return false }
        var encoded = reply.encoded()
        if encoded.count >= VarlinkConnectionHandler.largeConnectionBytes { state.wroteLargeReply.store(true, ordering: .relaxed) }
        var keepGoing = true
        if encoded.count > maximumBytes {
            encoded = VarlinkReply(error: limitExceededError, parameters: [
                "limit": .string("replyBytes"), "maximum": .int(Int64(maximumBytes)),
                "message": .string("the reply would be \(encoded.count) bytes, over the limit of \(maximumBytes); narrow the query (service, account, label or type) or ask without secrets"),
            ]).encoded()
            keepGoing = false
        }
        let written = channel.eventLoop.makePromise(of: Void.self)
        channel.writeAndFlush(ByteBuffer(bytes: encoded), promise: written)
        let deadline = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        do {
            try await written.futureResult.get()
            deadline.cancel()
            return keepGoing
        } catch {
            deadline.cancel()
            return false
        }
    }
}

/// What the server needs to know of a connection from outside its event loop.
final class ConnectionState: Sendable {
    /// Calls running that a graceful shutdown waits for (not long-lived ones).
    let running = Atomic<Int>(0)
    /// A reply of `VarlinkConnectionHandler.largeConnectionBytes` or more was built for the connection
    /// (its memory is handed back to the system once the connection closes).
    let wroteLargeReply = Atomic<Bool>(false)
}
