import NIOCore
import NIOEmbedded
import Testing
import Varlink

@testable import VarlinkServer

/// The message deadline on a clock the test moves (`EmbeddedEventLoop.advanceTime`): a message left unfinished
/// for `messageTimeout` is cut off, and a peer whose every message completes in time is never cut off, however
/// long it streams. (On a real socket the same claims depended on how punctual a loaded machine's sleeps were.)
@Suite struct MessageDeadlineTests {
    static let timeout = TimeAmount.milliseconds(600)
    static let call = Array(
        VarlinkCall(method: "org.example.Echo.Echo", parameters: ["text": .string(String(repeating: "x", count: 64))])
            .encoded()
    )

    /// A channel with the server's decoder, as a connection of uid 1000 has it.
    static func channel() throws -> EmbeddedChannel {
        let ledger = ConnectionLedger(
            configuration: VarlinkServerConfiguration(errorInterface: "org.example.Echo"),
            uid: 1000,
            privileged: false,
            usage: ServerUsage()
        )
        let decoder = VarlinkMessageDecoder(
            maximumMessageBytes: 1 << 20,
            maximumValues: 1024,
            messageTimeout: timeout,
            ledger: ledger
        )
        return EmbeddedChannel(handler: ByteToMessageHandler(decoder))
    }

    static func write(_ bytes: some Sequence<UInt8>, to channel: EmbeddedChannel) throws {
        try channel.writeInbound(ByteBuffer(bytes: Array(bytes)))
    }

    @Test func messagesStreamedBackToBackAreNeverCutOffHoweverLongTheStreamRuns() throws {
        let channel = try Self.channel()
        defer { _ = try? channel.finish() }
        let half = Self.call.count / 2
        // Eight calls, each written with the first half of the next, 500 ms apart: a message is unfinished at
        // every moment for 4 s in all, none for longer than 500 ms.
        try Self.write(Self.call[..<half], to: channel)
        for _ in 0..<8 {
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
            try channel.throwIfErrorCaught()
            try Self.write(Self.call[half...] + Self.call[..<half], to: channel)
        }
        try Self.write(Self.call[half...], to: channel)
        var calls = 0
        while let received = try channel.readInbound(as: ReceivedCall.self) {
            #expect(received.call.method == "org.example.Echo.Echo")
            calls += 1
        }
        #expect(calls == 9)
        // Nothing is unfinished now: no deadline is left to fire, however long the peer stays quiet.
        channel.embeddedEventLoop.advanceTime(by: .seconds(3600))
        try channel.throwIfErrorCaught()
    }

    @Test func aMessageLeftUnfinishedIsCutOffAtItsDeadlineAndNotBefore() throws {
        let channel = try Self.channel()
        defer { _ = try? channel.finish() }
        let half = Self.call.count / 2
        try Self.write(Self.call[..<half], to: channel)
        // Later bytes of the same message never push its deadline back.
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(400))
        try Self.write(Self.call[half..<(half + 1)], to: channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(199))
        try channel.throwIfErrorCaught()
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(throws: MessageDeadlinePassed.self) { try channel.throwIfErrorCaught() }
    }
}
