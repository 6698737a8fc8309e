import Foundation
import NIOCore
import Varlink
import VarlinkNIO

/// One call as it came off the wire: the call and what it is counted as holding until it ends, in the
/// queued-bytes limits: its message's bytes and `heldBytesPerValue` for each value it decoded into.
struct ReceivedCall: Sendable {
    var call: VarlinkCall
    var bytes: Int
}

/// A message that started was not complete within the message timeout: the peer is told so and closed
/// (`CallQueueHandler`).
struct MessageDeadlinePassed: Error {
    var timeout: TimeAmount

    /// The `protocolError`'s reason.
    var reason: String {
        let milliseconds = timeout.nanoseconds / 1_000_000
        let limit = milliseconds % 1_000 == 0 ? "\(milliseconds / 1_000) s" : "\(milliseconds) ms"
        return "a message was left unfinished for \(limit) (the limit); send each call whole, without pausing inside it"
    }
}

/// The bytes of a message being received took its uid, or every uid together, over the queued-bytes limit:
/// the peer is told so (`reason`) and closed (`CallQueueHandler`).
struct QueueLimitExceeded: Error {
    var reason: String
}

/// Splits a connection's bytes into varlink calls with `VarlinkFraming` (NUL-terminated messages of at most
/// `maximumMessageBytes`, found where they lie in the channel's buffer: the bytes of an unfinished message
/// stay there, and count as queued; each message decodes into at most `maximumValues` values), and refuses the connection
/// (`MessageDeadlinePassed`) when a message that has started is not complete within `messageTimeout`: later
/// bytes of it never push that deadline back, so a peer that trickles bytes is closed like a silent one;
/// each message has a deadline of its own, so a peer that streams complete messages back to back is never
/// cut off. Bytes that are not a varlink call are thrown as `VarlinkProtocolError`, an unfinished message
/// over the queued-bytes limits (it counts as queued) as `QueueLimitExceeded`; `CallQueueHandler` answers
/// them all. Once the connection is closing, bytes are dropped unread.
struct VarlinkMessageDecoder: ByteToMessageDecoder {
    typealias InboundOut = ReceivedCall

    private var framing: VarlinkFraming
    private let maximumValues: Int
    private let messageTimeout: TimeAmount
    private let ledger: ConnectionLedger
    private var deadline: Scheduled<Void>?

    init(maximumMessageBytes: Int, maximumValues: Int, messageTimeout: TimeAmount, ledger: ConnectionLedger) {
        framing = VarlinkFraming(maximumMessageBytes: maximumMessageBytes)
        self.maximumValues = maximumValues
        self.messageTimeout = messageTimeout
        self.ledger = ledger
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        do {
            while !ledger.isClosing, let message = try framing.nextMessage(in: &buffer) {
                // The message the deadline was for is complete: the bytes left start the next one, which
                // gets a deadline of its own.
                disarm()
                // Its bytes are no longer an unfinished message's: they count as the call's from here.
                try noteBuffered(buffer)
                let (call, values) = try VarlinkCall.decodeCounting(
                    Data(message.readableBytesView),
                    maximumValues: maximumValues
                )
                let held = message.readableBytes + values * VarlinkServerConfiguration.heldBytesPerValue
                context.fireChannelRead(Self.wrapInboundOut(ReceivedCall(call: call, bytes: held)))
            }
            try noteBuffered(buffer)
        } catch {
            disarm()
            throw error
        }
        if ledger.isClosing {
            // Closing: what the peer still sends is dropped unread.
            buffer.moveReaderIndex(to: buffer.writerIndex)
            disarm()
        } else {
            armDeadline(context, buffered: buffer.readableBytes)
        }
        return .needMoreData
    }

    /// Counts the bytes of the unfinished message held now (what is readable in `buffer`) in the ledger.
    /// - Throws: `QueueLimitExceeded` when they take the uid or the server over its queued-bytes limit.
    private func noteBuffered(_ buffer: ByteBuffer) throws(QueueLimitExceeded) {
        if let reason = ledger.noteBuffered(ledger.isClosing ? 0 : buffer.readableBytes) {
            throw QueueLimitExceeded(reason: reason)
        }
    }

    mutating func decodeLast(
        context: ChannelHandlerContext,
        buffer: inout ByteBuffer,
        seenEOF: Bool
    ) throws -> DecodingState {
        _ = try decode(context: context, buffer: &buffer)
        // The peer stopped sending: what it left unfinished will never be completed, nor waited for.
        if seenEOF { disarm() }
        return .needMoreData
    }

    mutating func decoderRemoved(context: ChannelHandlerContext) {
        disarm()
    }

    /// Arms the message deadline when a message has started and none is armed; disarms it when no bytes
    /// of an unfinished message are left.
    private mutating func armDeadline(_ context: ChannelHandlerContext, buffered: Int) {
        guard buffered > 0 else { return disarm() }
        guard deadline == nil else { return }
        let timeout = messageTimeout
        let ledger = self.ledger
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: messageTimeout) {
            guard !ledger.isClosing else { return }
            context.fireErrorCaught(MessageDeadlinePassed(timeout: timeout))
        }
    }

    private mutating func disarm() {
        deadline?.cancel()
        deadline = nil
    }
}
