import Synchronization
import Testing
import Varlink

/// The generated server side: `Service` has one typed method per interface method, and `dispatch` routes
/// a decoded call to it, sends its reply (or each of a streaming method's replies), refuses a streaming
/// call without `more`, and turns what the method throws into the error reply.
@Suite struct GeneratedServiceTests {
    struct Refusal: VarlinkServiceError {
        let reply: VarlinkReply
        init(reply: VarlinkReply) { self.reply = reply }
    }

    /// A painter that says what it was asked and by whom (the context is the caller's name).
    struct Painter: Shapes.Service {
        typealias Context = String
        typealias Failure = Refusal

        func draw(
            _ parameters: Shapes.Draw.Parameters,
            context: String,
            replies: VarlinkReplyStream<Shapes.Draw.Reply>
        ) async throws(Refusal) {
            for shape in parameters.shapes { await replies.next(Shapes.Draw.Reply(drawn: shape)) }
            await replies.last(Shapes.Draw.Reply(count: parameters.shapes.count))
        }

        func nothing(
            _ parameters: Shapes.Nothing.Parameters,
            context: String
        ) async throws(Refusal) -> Shapes.Nothing.Reply {
            throw Refusal(
                reply: VarlinkReply(
                    error: "org.example.shapes.TooLarge",
                    parameters: ["area": .double(1), "by": .string(context)]
                )
            )
        }

        func paint(_ parameters: Shapes.Paint.Parameters, context: String) async throws(Refusal) -> Shapes.Paint.Reply {
            Shapes.Paint.Reply(
                colour: parameters.also?.last ?? parameters.colour,
                finishes: [context: parameters.finish ?? .matte]
            )
        }
    }

    /// Dispatches `call` as a server does: decoded first, each reply collected.
    static func dispatch(
        _ call: VarlinkCall,
        context: String = "ann"
    ) async throws -> (replies: [VarlinkReply], failure: VarlinkReply?) {
        let replies = Mutex<[VarlinkReply]>([])
        let decoded = try Shapes.Call(call)
        do throws(Refusal) {
            try await Painter().dispatch(decoded, more: call.more, context: context) { reply in
                replies.withLock { $0.append(reply) }
                return true
            }
            return (replies.withLock { $0 }, nil)
        } catch {
            return (replies.withLock { $0 }, error.reply)
        }
    }

    @Test func aPlainMethodGetsItsTypedParametersAndContextAndItsReplyIsSent() async throws {
        let call = VarlinkCall(
            Shapes.Paint.self,
            Shapes.Paint.Parameters(colour: .red, also: [.blue, .green], finish: .semiGloss)
        )
        let (replies, failure) = try await Self.dispatch(call, context: "bob")
        #expect(failure == nil)
        #expect(
            replies == [
                VarlinkReply(parameters: [
                    "colour": .string("green"), "finishes": .object(["bob": .string("semi_gloss")]),
                ])
            ]
        )
    }

    @Test func aStreamingMethodSendsEachReplyWithContinuesAndTheLastWithout() async throws {
        let square = GeneratedCodecTests.shape
        let call = VarlinkCall(Shapes.Draw.self, Shapes.Draw.Parameters(shapes: [square, square]), more: true)
        let (replies, failure) = try await Self.dispatch(call)
        #expect(failure == nil)
        #expect(replies.map(\.continues) == [true, true, false])
        #expect(
            try replies.map { try Shapes.Draw.Reply(varlinkFields: $0.parameters) }
                == [Shapes.Draw.Reply(drawn: square), Shapes.Draw.Reply(drawn: square), Shapes.Draw.Reply(count: 2)]
        )
        // Optional fields left nil are left out of a streamed reply.
        #expect(replies.last?.parameters == ["count": .int(2)])
    }

    @Test func aStreamingMethodCalledWithoutMoreIsRefusedWithExpectedMoreAndNotRun() async throws {
        let call = VarlinkCall(Shapes.Draw.self, Shapes.Draw.Parameters(shapes: [GeneratedCodecTests.shape]))
        let (replies, failure) = try await Self.dispatch(call)
        #expect(replies.isEmpty)
        #expect(failure == .expectedMore)
    }

    @Test func whatAMethodThrowsIsItsErrorReply() async throws {
        let (replies, failure) = try await Self.dispatch(
            VarlinkCall(Shapes.Nothing.self, Shapes.Nothing.Parameters()),
            context: "cy"
        )
        #expect(replies.isEmpty)
        #expect(failure?.error == "org.example.shapes.TooLarge")
        #expect(failure?.parameters["by"] == .string("cy"))
    }
}
