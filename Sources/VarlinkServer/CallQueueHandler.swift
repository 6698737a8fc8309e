import Logging
import NIOCore
import Varlink

/// Admits a connection's calls to its queue (the calls' bytes and count, per connection and per uid, in
/// `ConnectionLedger`) and hands them on to the connection's call task. A call over a limit, bytes that
/// are not a varlink call, or a message left unfinished past its deadline get a `protocolError` reply saying why, written at once (ahead of the calls
/// still running); then the connection is closed for writing (the peer reads the reply, then the end) and
/// what the peer still sends is read and dropped, until it closes or two seconds pass. (A close with
/// unread bytes in the socket would reset the connection, and the peer could lose the reply.) Closes an
/// idle connection (`IdleStateHandler`'s event) when no call is queued or running.
final class CallQueueHandler: ChannelInboundHandler {
    typealias InboundIn = ReceivedCall
    typealias InboundOut = ReceivedCall
    typealias OutboundOut = ByteBuffer

    private let protocolError: String
    private let ledger: ConnectionLedger
    private let logger: Logger

    init(protocolError: String, ledger: ConnectionLedger, logger: Logger) {
        self.protocolError = protocolError
        self.ledger = ledger
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !ledger.isClosing else { return }
        let received = Self.unwrapInboundIn(data)
        if let refusal = ledger.admit(bytes: received.bytes) {
            logger.debug("varlink connection closed: over a queue limit", metadata: ["varlink.limit": "\(refusal)"])
            refuse(context, reason: refusal)
            return
        }
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !ledger.isClosing else { return }
        if let error = error as? VarlinkProtocolError {
            logger.debug(
                "varlink connection closed: not a varlink message",
                metadata: ["varlink.error": "\(error.code)"]
            )
            refuse(context, reason: error.message)
            return
        }
        if let error = error as? QueueLimitExceeded {
            logger.debug(
                "varlink connection closed: a message being received is over a queue limit",
                metadata: ["varlink.limit": "\(error.reason)"]
            )
            refuse(context, reason: error.reason)
            return
        }
        if let error = error as? MessageDeadlinePassed {
            logger.debug("varlink connection closed: a message left unfinished")
            refuse(context, reason: error.reason)
            return
        }
        logger.debug("varlink connection error", metadata: ["error": "\(error)"])
        close(context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .all {
            guard ledger.queuedCalls == 0 else { return }
            logger.debug("varlink connection closed: idle")
            close(context)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Calls still queued will never run: their bytes are no longer the uid's.
        ledger.release()
        context.fireChannelInactive()
    }

    /// Sends a `protocolError` reply saying why, then closes the connection: for writing once the reply is
    /// written (a close with the write still pending would drop it), entirely when the peer closes its end
    /// (its further calls are dropped meanwhile: `isClosing`) or after `lingerTime`.
    private func refuse(_ context: ChannelHandlerContext, reason: String) {
        guard ledger.beginClosing() else { return }
        let reply = VarlinkReply(error: protocolError, parameters: ["reason": .string(reason)])
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(bytes: reply.encoded()))).whenComplete { _ in
            let halfClosed = channel.eventLoop.makePromise(of: Void.self)
            halfClosed.futureResult.whenFailure { _ in channel.close(promise: nil) }
            channel.close(mode: .output, promise: halfClosed)
        }
        // A peer that reads nothing, or sends on and on, does not hold the connection open.
        context.eventLoop.scheduleTask(in: Self.lingerTime) {
            channel.close(promise: nil)
        }
    }

    /// How long a refused connection is kept for the peer to read its reply.
    static let lingerTime: TimeAmount = .seconds(2)

    private func close(_ context: ChannelHandlerContext) {
        guard ledger.beginClosing() else { return }
        context.close(promise: nil)
    }
}
