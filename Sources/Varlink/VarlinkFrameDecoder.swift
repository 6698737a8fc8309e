public import Foundation

/// Splits a varlink byte stream into messages: each is a JSON object ended by one NUL byte. Bytes arrive
/// in any chunks; a message is handed out only when its NUL has arrived. A message longer than
/// `maximumMessageBytes` is refused as soon as that many bytes have arrived without a NUL, so a peer
/// cannot make the decoder hold more than the limit. The blocking client's framing; the NIO server and the
/// app's client frame in their channel's buffer with `VarlinkNIO.VarlinkFraming`, at the same limit.
public struct VarlinkFrameDecoder: Sendable {
    /// The default limit on one message: 1 MiB.
    public static let defaultMaximumMessageBytes = 1 << 20

    /// The largest message accepted, NUL not included.
    public let maximumMessageBytes: Int
    private var buffer: [UInt8] = []
    /// Where the search for the next NUL resumes (bytes before it hold none).
    private var scanned = 0

    /// A decoder refusing messages over `maximumMessageBytes`.
    public init(maximumMessageBytes: Int = defaultMaximumMessageBytes) {
        precondition(maximumMessageBytes > 0, "a varlink message limit must be positive")
        self.maximumMessageBytes = maximumMessageBytes
    }

    /// Bytes received and not yet handed out as a message.
    public var bufferedByteCount: Int { buffer.count }

    /// Adds received bytes.
    public mutating func append(_ bytes: some Sequence<UInt8>) {
        buffer.append(contentsOf: bytes)
    }

    /// The next complete message (its JSON bytes, without the NUL), or `nil` until more bytes arrive.
    /// - Throws: `messageTooLarge` when more than `maximumMessageBytes` arrived without a NUL.
    public mutating func nextMessage() throws(VarlinkProtocolError) -> Data? {
        let searchEnd = min(buffer.count, maximumMessageBytes + 1)
        if let end = buffer[scanned..<searchEnd].firstIndex(of: 0) {
            let message = Data(buffer[..<end])
            buffer.removeSubrange(...end)
            scanned = 0
            releaseSpareCapacity()
            return message
        }
        scanned = searchEnd
        if buffer.count > maximumMessageBytes {
            throw .messageTooLarge(maximumBytes: maximumMessageBytes)
        }
        return nil
    }

    /// Capacity kept for the bytes of the next message without allocating; a buffer that grew past it
    /// for a large message and holds far less now is given back, so that every connection that once
    /// received a large message does not keep its buffer for as long as it stays open.
    static let keptCapacity = 64 << 10

    private mutating func releaseSpareCapacity() {
        guard buffer.capacity > Self.keptCapacity, buffer.count < buffer.capacity / 4 else { return }
        buffer = buffer.isEmpty ? [] : Array(buffer)
    }
}
