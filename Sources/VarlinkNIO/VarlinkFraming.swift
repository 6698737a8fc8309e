public import NIOCore
public import Varlink

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Finds varlink messages (each a JSON object ended by one NUL byte) in a connection's `ByteBuffer`, where
/// they lie: a message is handed out as a slice of the buffer, nothing is copied to look for its end, and
/// bytes of a message whose NUL has not arrived stay in the buffer until it does. The search resumes where
/// the last one stopped, so a message that trickles in byte by byte is scanned once. More than
/// `maximumMessageBytes` readable without a NUL among them is refused (`messageTooLarge`) as soon as they
/// are there: with NIO's `ByteToMessageHandler` the buffer never holds more than the limit and one read.
///
/// The server's and the client's decoders both frame with this; the blocking client of `Varlink` (no
/// dependencies) has `VarlinkFrameDecoder`, which refuses with the same error at the same limit.
public struct VarlinkFraming: Sendable {
    /// The largest message accepted, NUL not included.
    public let maximumMessageBytes: Int
    /// How many of the buffer's readable bytes were searched for a NUL and hold none.
    private var scanned = 0

    /// Framing that refuses messages over `maximumMessageBytes`.
    public init(maximumMessageBytes: Int = VarlinkFrameDecoder.defaultMaximumMessageBytes) {
        precondition(maximumMessageBytes > 0, "a varlink message limit must be positive")
        self.maximumMessageBytes = maximumMessageBytes
    }

    /// The next complete message in `buffer` (its JSON bytes, a slice of `buffer`, without the NUL), the
    /// buffer's reader index moved past its NUL; `nil`, the buffer untouched, until the NUL arrives. The
    /// caller passes the same buffer each time, bytes only appended to it (as `ByteToMessageHandler` does).
    /// - Throws: `messageTooLarge` when more than `maximumMessageBytes` are readable without a NUL.
    public mutating func nextMessage(in buffer: inout ByteBuffer) throws(VarlinkProtocolError) -> ByteBuffer? {
        let readable = buffer.readableBytes
        // A buffer other than the one scanned (or one read from by someone else): search it all.
        if scanned > readable { scanned = 0 }
        let searchEnd = min(readable, maximumMessageBytes + 1)
        let start = scanned
        let length: Int? = buffer.withUnsafeReadableBytes { bytes in
            guard searchEnd > start, let base = bytes.baseAddress, let nul = memchr(base + start, 0, searchEnd - start)
            else { return nil }
            return base.distance(to: UnsafeRawPointer(nul))
        }
        guard let length else {
            scanned = searchEnd
            if readable > maximumMessageBytes { throw .messageTooLarge(maximumBytes: maximumMessageBytes) }
            return nil
        }
        scanned = 0
        let message = buffer.readSlice(length: length)
        buffer.moveReaderIndex(forwardBy: 1)
        Self.releaseSpareCapacity(of: &buffer)
        return message
    }

    /// Capacity a buffer keeps for the bytes of the next message.
    public static let keptCapacity = 64 << 10

    /// A buffer that grew past `keptCapacity` for a large message and holds far less now is replaced by a
    /// copy of what it holds, so that a connection that once received a large message does not keep its
    /// buffer for as long as it stays open. (A buffer left empty is dropped by `ByteToMessageHandler`.)
    private static func releaseSpareCapacity(of buffer: inout ByteBuffer) {
        guard buffer.capacity > keptCapacity, buffer.readableBytes > 0, buffer.readableBytes < buffer.capacity / 4
        else { return }
        buffer = ByteBuffer(bytes: buffer.readableBytesView)
    }
}
