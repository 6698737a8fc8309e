import NIOCore

/// Closes the connection when a write has not been taken by the peer (its socket) within `timeout`: a
/// peer that never reads cannot pile replies up in the server.
final class ReplyDeadlineHandler: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let timeout: TimeAmount

    init(timeout: TimeAmount) { self.timeout = timeout }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let written = promise ?? context.eventLoop.makePromise()
        let channel = context.channel
        let deadline = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        written.futureResult.whenComplete { _ in deadline.cancel() }
        context.write(data, promise: written)
    }
}
