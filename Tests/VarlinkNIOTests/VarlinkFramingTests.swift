import NIOCore
import NIOEmbedded
import Testing
import Varlink
import VarlinkNIO

/// The NIO framing of the server and the client: messages found in the connection's buffer, whatever the
/// reads, and a message over the limit refused before the buffer holds more than it.
struct VarlinkFramingTests {
    static let one = #"{"method":"org.example.A.One"}"#
    static let two = #"{"method":"org.example.A.Two","parameters":{"text":"x"}}"#

    /// The messages `chunks` (read one after the other into one buffer, as `ByteToMessageHandler` does) frame into.
    static func frame(_ chunks: [[UInt8]], maximumMessageBytes: Int = 1 << 20) throws -> (messages: [String], left: Int)
    {
        var framing = VarlinkFraming(maximumMessageBytes: maximumMessageBytes)
        var buffer = ByteBuffer()
        var messages: [String] = []
        for chunk in chunks {
            buffer.writeBytes(chunk)
            while let message = try framing.nextMessage(in: &buffer) { messages.append(String(buffer: message)) }
        }
        return (messages, buffer.readableBytes)
    }

    @Test func aMessageSplitAcrossReadsComesOutWholeOnceItsNulArrives() throws {
        let stream = Array((Self.one + "\0" + Self.two + "\0").utf8)
        for size in [1, 2, 7, 31, stream.count] {
            let chunks = stride(from: 0, to: stream.count, by: size).map {
                Array(stream[$0..<min($0 + size, stream.count)])
            }
            let (messages, left) = try Self.frame(chunks)
            #expect(messages == [Self.one, Self.two], "in reads of \(size) bytes")
            #expect(left == 0)
        }
    }

    @Test func theBytesOfAnUnfinishedMessageStayInTheBuffer() throws {
        let (messages, left) = try Self.frame([Array((Self.one + "\0").utf8) + Array(Self.two.utf8.prefix(10))])
        #expect(messages == [Self.one])
        #expect(left == 10, "the next message's first bytes were taken out of the buffer")
    }

    @Test func manyMessagesInOneReadComeOutInOrder() throws {
        let texts = (0..<100).map { #"{"method":"org.example.A.N","parameters":{"n":\#($0)}}"# }
        let (messages, left) = try Self.frame([Array(texts.map { $0 + "\0" }.joined().utf8)])
        #expect(messages == texts)
        #expect(left == 0)
    }

    @Test func anEmptyMessageIsAnEmptyBuffer() throws {
        let (messages, left) = try Self.frame([[0, 0], Array((Self.one + "\0").utf8)])
        #expect(messages == ["", "", Self.one])
        #expect(left == 0)
    }

    @Test func aMessageOfExactlyTheLimitIsAccepted() throws {
        let (messages, _) = try Self.frame(
            [Array(repeating: UInt8(ascii: "a"), count: 16), [0]],
            maximumMessageBytes: 16
        )
        #expect(messages == [String(repeating: "a", count: 16)])
    }

    @Test func oneByteOverTheLimitWithoutANulIsRefusedAtOnce() throws {
        var framing = VarlinkFraming(maximumMessageBytes: 16)
        var buffer = ByteBuffer()
        buffer.writeBytes(Array(repeating: UInt8(ascii: "a"), count: 16))
        #expect(try framing.nextMessage(in: &buffer) == nil, "exactly the limit, its NUL still to come")
        buffer.writeBytes([UInt8(ascii: "a")])
        #expect(throws: VarlinkProtocolError.messageTooLarge(maximumBytes: 16)) { try framing.nextMessage(in: &buffer) }
        // A NUL past the limit does not make it acceptable.
        buffer.writeBytes([0])
        #expect(throws: VarlinkProtocolError.self) { try framing.nextMessage(in: &buffer) }
    }

    @Test func aMessageTooLargeIsRefusedBeforeTheBufferHoldsMoreThanTheLimitAndARead() throws {
        // A peer that sends without a NUL, in reads of 1000 bytes, to a limit of 4096: refused on the read that
        // takes the buffer over it, never later.
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(VarlinkMessageSplitter(maximumMessageBytes: 4096)))
        var sent = 0
        var refused: (any Error)?
        while refused == nil && sent < 1 << 20 {
            do {
                try channel.writeInbound(ByteBuffer(repeating: UInt8(ascii: "a"), count: 1000))
                sent += 1000
            } catch {
                refused = error
            }
        }
        #expect((refused as? VarlinkProtocolError)?.code == .messageTooLarge, "\(String(describing: refused))")
        #expect(sent == 4000, "refused after \(sent) bytes were buffered, not on the read over the limit")
        _ = try? channel.finish()
    }

    @Test func aBufferThatGrewForALargeMessageIsGivenBackOnceItHoldsLittle() throws {
        var framing = VarlinkFraming(maximumMessageBytes: 1 << 20)
        var buffer = ByteBuffer()
        buffer.writeBytes(Array(repeating: UInt8(ascii: "a"), count: 512 << 10) + [0] + Array(Self.one.utf8.prefix(10)))
        #expect(try framing.nextMessage(in: &buffer)?.readableBytes == 512 << 10)
        #expect(buffer.capacity <= VarlinkFraming.keptCapacity, "a buffer of \(buffer.capacity) bytes was kept for 10")
        buffer.writeBytes(Array(Self.one.utf8.dropFirst(10)) + [0])
        #expect(try framing.nextMessage(in: &buffer).map { String(buffer: $0) } == Self.one)
    }

    @Test func theSplitterHandsOnEveryMessageOfARead() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(VarlinkMessageSplitter(maximumMessageBytes: 1024)))
        try channel.writeInbound(ByteBuffer(string: Self.one + "\0" + Self.two + "\0" + "{\"meth"))
        #expect(try channel.readInbound(as: ByteBuffer.self).map { String(buffer: $0) } == Self.one)
        #expect(try channel.readInbound(as: ByteBuffer.self).map { String(buffer: $0) } == Self.two)
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        try channel.writeInbound(ByteBuffer(string: "od\":\"org.example.A.Three\"}\0"))
        #expect(
            try channel.readInbound(as: ByteBuffer.self).map { String(buffer: $0) }
                == #"{"method":"org.example.A.Three"}"#
        )
        _ = try channel.finish()
    }

    @Test func theFramingAgreesWithTheBlockingClientsDecoderOnRandomStreamsAndReads() throws {
        // A fixed seed: the same streams every run (a failure names the round to replay).
        var random = SplitMix64(seed: 0x5EED)
        for round in 0..<500 {
            let limit = Int(random.next() % 64) + 1
            let stream = (0..<Int(random.next() % 600)).map { _ in random.next() % 8 == 0 ? UInt8(0) : UInt8(ascii: "a")
            }
            var framing = VarlinkFraming(maximumMessageBytes: limit)
            var decoder = VarlinkFrameDecoder(maximumMessageBytes: limit)
            var buffer = ByteBuffer()
            var offset = 0
            var framed: [[UInt8]] = []
            var decoded: [[UInt8]] = []
            var framingRefused = false
            var decoderRefused = false
            while offset < stream.count && !framingRefused && !decoderRefused {
                let size = min(Int(random.next() % 80) + 1, stream.count - offset)
                let chunk = Array(stream[offset..<offset + size])
                offset += size
                buffer.writeBytes(chunk)
                decoder.append(chunk)
                do {
                    while let message = try framing.nextMessage(in: &buffer) {
                        framed.append(Array(message.readableBytesView))
                    }
                } catch {
                    framingRefused = true
                }
                do {
                    while let message = try decoder.nextMessage() { decoded.append(Array(message)) }
                } catch {
                    decoderRefused = true
                }
                #expect(
                    buffer.readableBytes <= limit || framingRefused,
                    "round \(round): \(buffer.readableBytes) bytes held over the limit of \(limit)"
                )
            }
            #expect(framed == decoded && framingRefused == decoderRefused, "round \(round): the two framings disagree")
        }
    }
}

/// A small deterministic generator (SplitMix64) for the random streams.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
