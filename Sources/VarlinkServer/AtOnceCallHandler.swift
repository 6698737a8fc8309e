import NIOCore
import Varlink

/// Answers a connection's call inside the read that received it, when the method handler can at once
/// (`VarlinkMethodHandler.replyAtOnce`): the reply is written from the socket's thread with no task and no hop.
/// Only when nothing is ahead of it — no earlier call of the connection queued or running (calls are answered
/// in order), the socket taking replies (the channel writable, fewer than `VarlinkServer.repliesBeforeFlush` bytes of replies
/// since the call task last waited for them) — and only a call that wants exactly one reply. Anything else,
/// and a call the handler cannot answer at once, goes on to the connection's call task as before.
final class AtOnceCallHandler: ChannelInboundHandler {
    typealias InboundIn = ReceivedCall
    typealias InboundOut = ReceivedCall
    typealias OutboundOut = ByteBuffer

    private let handler: any VarlinkMethodHandler
    private let callContext: VarlinkCallContext
    private let ledger: ConnectionLedger
    private let interfaces: Set<String>
    private let maximumReplyBytes: Int
    private let limitExceededError: String

    init(
        handler: any VarlinkMethodHandler,
        context: VarlinkCallContext,
        ledger: ConnectionLedger,
        interfaces: Set<String>,
        configuration: VarlinkServerConfiguration
    ) {
        self.handler = handler
        callContext = context
        self.ledger = ledger
        self.interfaces = interfaces
        maximumReplyBytes = configuration.maximumReplyBytes
        limitExceededError = configuration.limitExceededError
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let received = Self.unwrapInboundIn(data)
        let call = received.call
        guard !call.oneway, !call.more, !ledger.isClosing, context.channel.isWritable,
            ledger.queuedCalls == 1, ledger.repliesSinceFlush <= VarlinkServer.repliesBeforeFlush,
            interfaces.contains(call.interface),
            let reply = handler.replyAtOnce(to: call, context: callContext)
        else {
            context.fireChannelRead(data)
            return
        }
        let (bytes, _) = ReplyWriter.encode(
            reply,
            maximumBytes: maximumReplyBytes,
            limitExceededError: limitExceededError,
            ledger: ledger
        )
        context.writeAndFlush(Self.wrapOutboundOut(bytes), promise: nil)
        ledger.finish(bytes: received.bytes)
    }
}
