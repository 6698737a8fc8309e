import Foundation
import NIOPosix
import Synchronization
import Testing
import Varlink
import VarlinkServer

#if canImport(Glibc)
import Glibc
#endif

/// Calls a handler answers at once (`VarlinkMethodHandler.replyAtOnce`), on a real socket: answered on the
/// socket's thread inside the read, never ahead of an earlier call of the connection still running, held to the
/// reply size limit, and off when the configuration says so.
@Suite struct AtOnceCallTests {
    typealias Server = VarlinkServerTests

    /// Answers `Echo` at once (`atOnce` true, and whether it ran on an event loop's thread) unless its text is
    /// "later"; everything else, and `Echo` when not at once (`atOnce` false), as `GateHandler` does.
    final class AtOnceHandler: VarlinkMethodHandler {
        let gated = Server.GateHandler()

        func replyAtOnce(to call: VarlinkCall, context: VarlinkCallContext) -> VarlinkReply? {
            guard call.member == "Echo", call.parameters["text"]?.string != "later" else { return nil }
            return VarlinkReply(parameters: [
                "text": call.parameters["text"] ?? .null, "atOnce": .bool(true),
                "onEventLoop": .bool(MultiThreadedEventLoopGroup.currentEventLoop != nil),
            ])
        }

        func handle(_ call: VarlinkCall, context: VarlinkCallContext, replies: VarlinkReplies) async {
            guard call.member == "Echo" else { return await gated.handle(call, context: context, replies: replies) }
            await replies.send(
                VarlinkReply(parameters: ["text": call.parameters["text"] ?? .null, "atOnce": .bool(false)])
            )
        }
    }

    static func echo(_ text: String) -> VarlinkCall {
        VarlinkCall(method: "org.example.Echo.Echo", parameters: ["text": .string(text)])
    }

    @Test(arguments: [true, false])
    func aCallTheHandlerCanAnswerAtOnceIsAnsweredOnTheSocketsThreadUnlessTurnedOff(answersAtOnce: Bool) async throws {
        let configure: (inout VarlinkServerConfiguration) -> Void = { $0.answersCallsAtOnce = answersAtOnce }
        try await Server.withServer(handler: AtOnceHandler(), configure: configure) { socket in
            let (first, second, later) = try await Server.blocking {
                let connection = try VarlinkConnection(unixSocketPath: socket)
                return (
                    try connection.call(Self.echo("one")), try connection.call(Self.echo("two")),
                    try connection.call(Self.echo("later"))
                )
            }
            for reply in [first, second] {
                #expect(reply.parameters["atOnce"]?.bool == answersAtOnce, "\(reply)")
                if answersAtOnce { #expect(reply.parameters["onEventLoop"]?.bool == true, "\(reply)") }
            }
            #expect([first, second].map { $0.parameters["text"]?.string } == ["one", "two"])
            #expect(later.parameters["atOnce"]?.bool == false && later.parameters["text"]?.string == "later")
        }
    }

    @Test func callsAnsweredAtOnceWaitForTheCallAheadOfThemAndKeepTheirOrder() async throws {
        let handler = AtOnceHandler()
        try await Server.withServer(handler: handler) { socket in
            let (repliedEarly, replies) = try await Server.blocking { () throws -> (Bool, [VarlinkReply]) in
                defer { handler.gated.gate.signal() }
                let connection = try VarlinkConnection(unixSocketPath: socket)
                // A call that blocks until the gate opens, then two the handler answers at once, pipelined.
                try connection.send(VarlinkCall(method: "org.example.Echo.Block"))
                try connection.send(Self.echo("a"))
                try connection.send(Self.echo("b"))
                while handler.gated.entered.load(ordering: .relaxed) == 0 { usleep(1_000) }
                // Nothing comes while the first call runs (a server answering out of order would reply at once).
                let repliedEarly = (try? connection.nextReply(timeout: .milliseconds(300))) != nil
                handler.gated.gate.signal()
                return (repliedEarly, try (0..<3).map { _ in try connection.nextReply(timeout: .seconds(120)) })
            }
            #expect(!repliedEarly, "a call answered at once overtook the call ahead of it")
            #expect(replies.map { $0.parameters["text"]?.string } == [nil, "a", "b"], "\(replies)")
            #expect(replies.dropFirst().allSatisfy { $0.parameters["atOnce"]?.bool == true }, "\(replies)")
        }
    }

    @Test func aReplyAtOnceOverTheReplyLimitIsReplacedByLimitExceeded() async throws {
        let configure: (inout VarlinkServerConfiguration) -> Void = { $0.maximumReplyBytes = 1_024 }
        try await Server.withServer(handler: AtOnceHandler(), configure: configure) { socket in
            let (large, small) = try await Server.blocking {
                let connection = try VarlinkConnection(unixSocketPath: socket)
                return (
                    try connection.call(Self.echo(String(repeating: "x", count: 4_096))),
                    try connection.call(Self.echo("fits"))
                )
            }
            #expect(large.error == "org.example.Echo.LimitExceeded", "\(large)")
            #expect(large.parameters["limit"]?.string == "replyBytes", "\(large)")
            #expect(small.parameters["text"]?.string == "fits" && small.parameters["atOnce"]?.bool == true)
        }
    }
}
