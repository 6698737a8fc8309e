import NIOCore
import Varlink

/// Answers a connection over a connection limit with one error reply (`tooManyConnectionsError`), then
/// closes it once the reply is written, or after a second when the peer does not take it.
final class RefusingHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let reply: VarlinkReply

    init(reply: VarlinkReply) { self.reply = reply }

    func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(bytes: reply.encoded()))).whenComplete { _ in
            channel.close(promise: nil)
        }
        context.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}
