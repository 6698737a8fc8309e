import Logging
import NIOCore
import Varlink

/// Admits a connection's calls to its queue (the calls' bytes and count, per connection and per uid, in
/// `ConnectionLedger`) and hands them on to the connection's call task. A call over a limit, or bytes that
/// are not a varlink call, get a `protocolError` reply saying why, written at once (ahead of the calls
/// still running), and the connection is closed once it is written (after a second at most). Closes an
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
            logger.debug("varlink connection closed: not a varlink message", metadata: ["varlink.error": "\(error.code)"])
            refuse(context, reason: error.message)
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

    /// Sends a `protocolError` reply saying why, then closes the connection.
    /// The close waits for the reply's write (a close with the write still pending would drop it).
    private func refuse(_ context: ChannelHandlerContext, reason: String) {
        guard ledger.beginClosing() else { return }
        let reply = VarlinkReply(error: protocolError, parameters: ["reason": .string(reason)])
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(ByteBuffer(bytes: reply.encoded()))).whenComplete { _ in
            channel.close(promise: nil)
        }
        // A peer that reads nothing does not hold the connection open: closed after a second regardless.
        context.eventLoop.scheduleTask(in: .seconds(1)) {
            channel.close(promise: nil)
        }
    }

    private func close(_ context: ChannelHandlerContext) {
        guard ledger.beginClosing() else { return }
        context.close(promise: nil)
    }
}
