import Logging
import NIOCore

/// Counts the replies written to a connection and not yet taken by its socket, per uid and over every uid
/// (`ServerUsage`), from the write until NIO has handed the bytes to the kernel (or dropped them with the
/// connection). A reply that would be held for a uid that leaves `maximumUnreadReplyBytesPerUser` unread
/// already (or, not for privileged peers, while every uid together leaves `maximumUnreadReplyBytesInTotal`)
/// is not held: the connection is closed, and what it held is given back. A peer that never reads so holds
/// a bounded share of the server's memory, for as long as the reply timeout at most.
final class UnreadReplyHandler: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let usage: ServerUsage
    private let uid: UInt32
    private let limit: Int
    private let totalLimit: Int?
    private let logger: Logger

    init(configuration: VarlinkServerConfiguration, uid: UInt32, privileged: Bool, usage: ServerUsage, logger: Logger) {
        self.usage = usage
        self.uid = uid
        limit = configuration.maximumUnreadReplyBytesPerUser
        totalLimit = privileged ? nil : configuration.maximumUnreadReplyBytesInTotal
        self.logger = logger
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let bytes = Self.unwrapOutboundIn(data).readableBytes
        guard bytes > 0 else { return context.write(data, promise: promise) }
        guard usage.reserveUnreadReply(bytes, for: uid, limit: limit, totalLimit: totalLimit) else {
            logger.debug(
                "varlink connection closed: replies left unread over the limit",
                metadata: ["varlink.unreadLimit": "\(limit)"]
            )
            promise?.fail(ChannelError.ioOnClosedChannel)
            context.close(promise: nil)
            return
        }
        let written = promise ?? context.eventLoop.makePromise()
        let usage = self.usage
        let uid = self.uid
        written.futureResult.whenComplete { _ in usage.releaseUnreadReply(bytes, for: uid) }
        context.write(data, promise: written)
    }
}
