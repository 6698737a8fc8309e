import NIOCore
import Varlink

/// One call as it came off the wire: the call and the size of its message (counted against the
/// queued-bytes limits until the call ends).
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

/// Splits a connection's bytes into varlink calls with `VarlinkFrameDecoder` (NUL-terminated messages of
/// at most `maximumMessageBytes`), and refuses the connection (`MessageDeadlinePassed`) when a message that
/// has started is not complete within `messageTimeout`: later bytes of it never push that deadline back,
/// so a peer that trickles bytes is closed like a silent one; each message has a deadline of its own, so a
/// peer that streams complete messages back to back is never cut off. Bytes that are not a varlink call are
/// thrown as `VarlinkProtocolError`; `CallQueueHandler` answers both. Once the connection is closing, bytes
/// are dropped unread.
struct VarlinkMessageDecoder: ByteToMessageDecoder {
    typealias InboundOut = ReceivedCall

    private var frames: VarlinkFrameDecoder
    private let messageTimeout: TimeAmount
    private let ledger: ConnectionLedger
    private var deadline: Scheduled<Void>?

    init(maximumMessageBytes: Int, messageTimeout: TimeAmount, ledger: ConnectionLedger) {
        frames = VarlinkFrameDecoder(maximumMessageBytes: maximumMessageBytes)
        self.messageTimeout = messageTimeout
        self.ledger = ledger
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if !ledger.isClosing { frames.append(buffer.readableBytesView) }
        buffer.moveReaderIndex(to: buffer.writerIndex)
        do {
            while !ledger.isClosing, let message = try frames.nextMessage() {
                // The message the deadline was for is complete: the bytes left start the next one, which
                // gets a deadline of its own.
                disarm()
                let call = try VarlinkCall.decode(message)
                context.fireChannelRead(Self.wrapInboundOut(ReceivedCall(call: call, bytes: message.count)))
            }
        } catch {
            disarm()
            throw error
        }
        ledger.noteBuffered(frames.bufferedByteCount)
        if ledger.isClosing { disarm() } else { armDeadline(context) }
        return .needMoreData
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
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
    private mutating func armDeadline(_ context: ChannelHandlerContext) {
        guard frames.bufferedByteCount > 0 else { return disarm() }
        guard deadline == nil else { return }
        let timeout = messageTimeout, ledger = self.ledger
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
