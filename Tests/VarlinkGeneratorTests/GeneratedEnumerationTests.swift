import BrokerContract
import Testing
import Varlink
import VarlinkGenerator

/// Varlink enums: a case per declared value, any other string kept as `unknown` where a newer peer may
/// send it (replies, errors, the interface's types) and refused where the receiver must act on it (a
/// call's parameters), on the wire a JSON string either way.
@Suite struct GeneratedEnumerationTests {
    @Test func anEnumTypeIsParsedAndGeneratedWithACasePerValueAndUnknown() throws {
        let interface = try VarlinkInterfaceDefinition(
            parsing: "interface org.a.b\n# A mode.\ntype Mode (shared, private, semi_open)\n"
        )
        #expect(
            interface.members == [
                .type(
                    name: "Mode",
                    documentation: ["A mode."],
                    definition: .enumeration(["shared", "private", "semi_open"])
                )
            ]
        )
        let source = try SwiftContractGenerator(interface: interface, sourceName: "x", regenerateCommand: "x").source()
        #expect(source.contains("public enum Mode: VarlinkEnum, CustomStringConvertible {"))
        #expect(source.contains("case `private`"))
        #expect(source.contains("case \"semi_open\": self = .semiOpen"))
        #expect(source.contains("case unknown(String)"))
    }

    @Test func aValueNamedLikeTheCatchAllCaseIsRefusedByTheGenerator() throws {
        let interface = try VarlinkInterfaceDefinition(parsing: "interface org.a.b\ntype Mode (known, unknown)\n")
        #expect {
            _ = try SwiftContractGenerator(interface: interface, sourceName: "x", regenerateCommand: "x").source()
        } throws: { error in
            (error as? VarlinkIDLError)?.message.contains("unknown") == true
        }
    }

    @Test func everyDeclaredValueRoundTripsAsItsString() {
        for colour in Shapes.Colour.knownCases {
            #expect(Shapes.Colour(rawValue: colour.rawValue) == colour)
            #expect(colour.isKnown)
        }
        #expect(Shapes.Colour.default.rawValue == "default")
        #expect(Shapes.Finish.semiGloss.rawValue == "semi_gloss")
        #expect(Shapes.Finish(rawValue: "semi_gloss") == .semiGloss)
    }

    @Test func aValueAddedLaterIsKeptInAReplyAndInTheInterfacesTypes() throws {
        let reply = try Shapes.Paint.Reply(varlinkFields: [
            "colour": .string("ultraviolet"), "finishes": .object(["door": .string("satin")]),
        ])
        #expect(reply.colour == .unknown("ultraviolet"))
        #expect(!reply.colour.isKnown)
        #expect(reply.finishes == ["door": .unknown("satin")])
        // Sent on as it came.
        #expect(reply.varlinkFields["colour"] == .string("ultraviolet"))
        var fields = GeneratedCodecTests.shape.varlinkFields
        fields["colours"] = .array([.string("red"), .string("infrared")])
        #expect(try Shapes.Shape(varlinkFields: fields).colours == [.red, .unknown("infrared")])
        // The broker's events and errors too: an older client reads a newer broker's kinds and limits.
        let event = try Broker1.SubscribeAccountChanges.Reply(varlinkFields: [
            "event": .object(["kind": .string("deviceRetired"), "mode": .string("shared"), "sequence": .int(3)])
        ])
        #expect(event.event.kind == .unknown("deviceRetired"))
        let limit = try Broker1.ErrorReply(
            Broker1.LimitExceeded(limit: .unknown("tokensPerMinute"), maximum: 1, message: "m").reply
        )
        #expect(
            limit == .limitExceeded(Broker1.LimitExceeded(limit: .unknown("tokensPerMinute"), maximum: 1, message: "m"))
        )
    }

    @Test func aWrongTypeIsStillNamed() {
        #expect(throws: VarlinkFieldError(field: "colour")) {
            try Shapes.Paint.Reply(varlinkFields: ["colour": .int(1), "finishes": .object([:])])
        }
    }

    @Test(arguments: [
        (["colour": VarlinkValue.string("ultraviolet")], "colour"),
        (["colour": .string("red"), "also": .array([.string("blue"), .string("infrared")])], "also"),
        (["colour": .string("red"), "finish": .string("satin")], "finish"),
        (["colour": .string("RED")], "colour"),
    ])
    func aValueTheInterfaceDoesNotDeclareIsRefusedInACallsParameters(parameters: [String: VarlinkValue], field: String)
    {
        #expect(throws: VarlinkCallDecodingError.invalidParameter(VarlinkFieldError(field: field))) {
            try Shapes.Call(VarlinkCall(method: Shapes.Paint.qualifiedName, parameters: parameters))
        }
    }

    @Test func anUndeclaredValueInsideAStructAParameterHoldsIsRefusedByItsPath() throws {
        var child = GeneratedCodecTests.shape.children[0].varlinkFields
        child["colours"] = .array([.string("green"), .string("infrared")])
        var shape = GeneratedCodecTests.shape.varlinkFields
        shape["children"] = .array([.object(child)])
        let call = VarlinkCall(
            method: Shapes.Draw.qualifiedName,
            parameters: ["shapes": .array([.object(shape)])],
            more: true
        )
        #expect(throws: VarlinkCallDecodingError.invalidParameter(VarlinkFieldError(field: "shapes.children.colours")))
        {
            try Shapes.Call(call)
        }
        // The same struct in a reply keeps the value, and says where it is.
        let reply = try Shapes.Draw.Reply(varlinkFields: ["drawn": .object(shape)])
        #expect(reply.drawn?.children[0].colours == [.green, .unknown("infrared")])
        #expect(reply.firstUndeclaredEnumValue(path: "") == "drawn.children.colours")
        #expect(Shapes.Draw.Reply(drawn: GeneratedCodecTests.shape).firstUndeclaredEnumValue(path: "") == nil)
    }

    @Test func theBrokersParametersRefuseAnUnknownFlowWithInvalidParameter() throws {
        let call = VarlinkCall(
            method: Broker1.SwitchWorker.qualifiedName,
            parameters: ["scopes": .array([]), "flow": .string("telepathy")]
        )
        #expect(throws: VarlinkCallDecodingError.invalidParameter(VarlinkFieldError(field: "flow"))) {
            try Broker1.Call(call)
        }
        let known = VarlinkCall(
            method: Broker1.SwitchWorker.qualifiedName,
            parameters: ["scopes": .array([]), "flow": .string("browser")]
        )
        #expect(try Broker1.Call(known) == .switchWorker(Broker1.SwitchWorker.Parameters(scopes: [], flow: .browser)))
    }
}
