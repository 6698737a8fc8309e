import Foundation
import Logging
import NIOCore
import Synchronization
import Varlink

/// One client connection: splits the bytes into messages, decodes calls, queues them, and runs them one
/// at a time (in order) on a task of their own, off the event loop. Closes the connection on bytes that
/// are not varlink (after a `protocolError` reply), on too many queued calls, and when it sat idle.
final class VarlinkConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let configuration: VarlinkServerConfiguration
    private let info: VarlinkServiceInfo
    private let handler: any VarlinkMethodHandler
    private let context: VarlinkCallContext
    private let state: ConnectionState
    private let logger: Logger
    private var decoder: VarlinkFrameDecoder
    private var calls: AsyncStream<VarlinkCall>.Continuation?
    private var worker: Task<Void, Never>?
    private var idleTimer: Scheduled<Void>?
    private var closing = false

    init(configuration: VarlinkServerConfiguration, info: VarlinkServiceInfo, handler: any VarlinkMethodHandler,
         context: VarlinkCallContext, state: ConnectionState, logger: Logger) {
        self.configuration = configuration
        self.info = info
        self.handler = handler
        self.context = context
        self.state = state
        self.logger = logger
        decoder = VarlinkFrameDecoder(maximumMessageBytes: configuration.maximumMessageBytes)
    }

    func channelActive(context channelContext: ChannelHandlerContext) {
        let (stream, continuation) = AsyncStream<VarlinkCall>.makeStream()
        calls = continuation
        let channel = channelContext.channel
        let loopBound = NIOLoopBound(self, eventLoop: channelContext.eventLoop)
        let handler = self.handler, context = self.context, info = self.info, state = self.state
        let finished: @Sendable () -> Void = { channel.eventLoop.execute { loopBound.value.callFinished(channel: channel) } }
        worker = Self.startWorker(stream, handler: handler, context: context, info: info, state: state, channel: channel, finished: finished)
        scheduleIdleTimer(channelContext)
        channelContext.fireChannelActive()
    }

    func channelRead(context channelContext: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        let buffer = unwrapInboundIn(data)
        decoder.append(buffer.readableBytesView)
        do {
            while let message = try decoder.nextMessage() {
                let call = try VarlinkCall.decode(message)
                guard state.queued.wrappingAdd(1, ordering: .relaxed).newValue <= configuration.maximumQueuedCalls else {
                    logger.debug("varlink connection closed: too many queued calls", metadata: ["peer.uid": "\(context.peer.uid)"])
                    close(channelContext)
                    return
                }
                calls?.yield(call)
            }
        } catch {
            logger.debug("varlink connection closed: not a varlink message", metadata: ["peer.uid": "\(context.peer.uid)", "varlink.error": "\(error.code)"])
            let reply = VarlinkReply(error: configuration.protocolError, parameters: ["reason": .string(error.message)])
            channelContext.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: reply.encoded())), promise: nil)
            close(channelContext)
            return
        }
        scheduleIdleTimer(channelContext)
    }

    /// The peer stopped sending but still reads (`shutdown(SHUT_WR)`, `printf … | socat`): its calls are
    /// answered, then the connection is closed.
    func userInboundEventTriggered(context channelContext: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            calls?.finish()
            return
        }
        channelContext.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context channelContext: ChannelHandlerContext) {
        idleTimer?.cancel()
        calls?.finish()
        // A call in progress (an interactive sign-in) is cancelled: its peer is gone.
        worker?.cancel()
        let handler = self.handler, context = self.context, worker = self.worker
        Task {
            await worker?.value
            handler.connectionClosed(context)
        }
        channelContext.fireChannelInactive()
    }

    func errorCaught(context channelContext: ChannelHandlerContext, error: any Error) {
        logger.debug("varlink connection error", metadata: ["peer.uid": "\(context.peer.uid)", "error": "\(error)"])
        close(channelContext)
    }

    private func callFinished(channel: any Channel) {
        state.queued.subtract(1, ordering: .relaxed)
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
            guard handler.state.queued.load(ordering: .relaxed) == 0 else { return }
            handler.logger.debug("varlink connection closed: idle", metadata: ["peer.uid": "\(handler.context.peer.uid)"])
            handler.close(channelContext)
        }
    }

    private static func startWorker(_ stream: AsyncStream<VarlinkCall>, handler: any VarlinkMethodHandler, context: VarlinkCallContext,
                                    info: VarlinkServiceInfo, state: ConnectionState, channel: any Channel,
                                    finished: @escaping @Sendable () -> Void) -> Task<Void, Never> {
        Task {
            await serve(stream, handler: handler, context: context, info: info, state: state, channel: channel, finished: finished)
            // The calls ended: the peer stopped sending (half-close) and every reply is written, or the
            // connection is already gone.
            channel.close(promise: nil)
        }
    }

    /// Runs the connection's calls one after the other until the stream ends or the task is cancelled.
    private static func serve(_ stream: AsyncStream<VarlinkCall>, handler: any VarlinkMethodHandler, context: VarlinkCallContext,
                              info: VarlinkServiceInfo, state: ConnectionState, channel: any Channel,
                              finished: @Sendable () -> Void) async {
        for await call in stream {
            if Task.isCancelled { break }
            await run(call, handler: handler, context: context, info: info, state: state, channel: channel)
            finished()
        }
    }

    /// Runs one call: org.varlink.service here, everything else by the handler.
    private static func run(_ call: VarlinkCall, handler: any VarlinkMethodHandler, context: VarlinkCallContext,
                            info: VarlinkServiceInfo, state: ConnectionState, channel: any Channel) async {
        let replies = VarlinkReplies(oneway: call.oneway, more: call.more) { reply in
            guard channel.isActive else { return false }
            let bytes = ByteBuffer(bytes: reply.encoded())
            if reply.continues {
                do {
                    try await channel.writeAndFlush(bytes)
                    return true
                } catch {
                    return false
                }
            }
            channel.writeAndFlush(bytes, promise: nil)
            return true
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

/// What the server needs to know of a connection from outside its event loop.
final class ConnectionState: Sendable {
    /// Calls received and not yet answered (queued or running).
    let queued = Atomic<Int>(0)
    /// Calls running that a graceful shutdown waits for (not long-lived ones).
    let running = Atomic<Int>(0)
}
