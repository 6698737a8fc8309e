import NIOCore
import Varlink

/// How the replies of one connection leave: through the connection's outbound writer, at most
/// `maximumBytes` each (a larger one is replaced by `limitExceededError`, limit `replyBytes`). A reply
/// the peer does not take within the reply timeout closes the connection (`ReplyDeadlineHandler`).
struct ReplyWriter: Sendable {
    let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    let channel: any Channel
    let maximumBytes: Int
    let limitExceededError: String
    let ledger: ConnectionLedger

    /// Writes `reply` (or, over the size limit, the error that replaces it). False once the peer is gone
    /// or the call's replies must stop.
    func write(_ reply: VarlinkReply) async -> Bool {
        guard channel.isActive else { return false }
        let (bytes, keepGoing) = Self.encode(
            reply,
            maximumBytes: maximumBytes,
            limitExceededError: limitExceededError,
            ledger: ledger
        )
        do {
            try await outbound.write(bytes)
            return keepGoing
        } catch {
            return false
        }
    }

    /// The bytes of `reply`, or of the error that replaces it when it is over `maximumBytes` (`keepGoing` false
    /// then: the call's replies must stop), counted in `ledger` as a reply written.
    static func encode(
        _ reply: VarlinkReply,
        maximumBytes: Int,
        limitExceededError: String,
        ledger: ConnectionLedger
    ) -> (bytes: ByteBuffer, keepGoing: Bool) {
        var encoded = reply.encoded()
        ledger.noteReply(bytes: encoded.count)
        guard encoded.count > maximumBytes else { return (ByteBuffer(bytes: encoded), true) }
        encoded = VarlinkReply(
            error: limitExceededError,
            parameters: [
                "limit": .string("replyBytes"), "maximum": .int(Int64(maximumBytes)),
                "message": .string(
                    "the reply would be \(encoded.count) bytes, over the limit of \(maximumBytes); narrow the query (service, account, label or type) or ask without secrets"
                ),
            ]
        ).encoded()
        return (ByteBuffer(bytes: encoded), false)
    }

    /// Waits until every reply written so far has been taken by the socket (an empty write completes
    /// after those ahead of it); false when the connection closed first.
    func flushed() async -> Bool {
        do {
            try await channel.writeAndFlush(ByteBuffer()).get()
            return true
        } catch {
            return false
        }
    }
}
