import BrokerContract
import Foundation
import Testing
import Varlink
import VarlinkGenerator

/// The checked-in contracts are exactly what their interface files generate (as swift-openapi-generator's
/// ahead-of-time mode checks): an edit of the interface without regenerating, or of the generated file
/// by hand, fails here.
@Suite struct ContractGenerationTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func regenerated(_ interface: String, namespace: String?) throws -> String {
        let text = try String(contentsOf: root.appendingPathComponent(interface), encoding: .utf8)
        let output =
            interface.hasPrefix("Sources/")
            ? "Sources/BrokerContract/Broker1.swift" : "Tests/VarlinkGeneratorTests/Shapes.swift"
        return try SwiftContractGenerator(
            interface: VarlinkInterfaceDefinition(parsing: text),
            namespace: namespace,
            sourceName: URL(fileURLWithPath: interface).lastPathComponent,
            regenerateCommand:
                "swift run varlink-generate \(interface) \(output)\(namespace.map { " --namespace \($0)" } ?? "")"
        ).source()
    }

    @Test(arguments: [
        ("Sources/BrokerContract/org.sharedmode.Broker1.varlink", "Sources/BrokerContract/Broker1.swift", String?.none),
        (
            "Tests/VarlinkGeneratorTests/org.example.shapes.varlink", "Tests/VarlinkGeneratorTests/Shapes.swift",
            "Shapes"
        ),
    ])
    func theCheckedInContractIsWhatItsInterfaceGenerates(
        interface: String,
        generated: String,
        namespace: String?
    ) throws {
        let checkedIn = try String(contentsOf: Self.root.appendingPathComponent(generated), encoding: .utf8)
        let fresh = try Self.regenerated(interface, namespace: namespace)
        let firstDifference = zip(
            checkedIn.split(separator: "\n", omittingEmptySubsequences: false),
            fresh.split(separator: "\n", omittingEmptySubsequences: false)
        ).enumerated().first { $0.element.0 != $0.element.1 }
        #expect(
            checkedIn == fresh,
            """
            \(generated) differs from what \(interface) generates\(firstDifference.map { " (first at line \($0.offset + 1): \"\($0.element.0)\" vs \"\($0.element.1)\")" } ?? ""); \
            run `swift run varlink-generate \(interface) \(generated)\(namespace.map { " --namespace \($0)" } ?? "")`
            """
        )
    }

    /// What the formatter allows (`.swift-format`: 120 columns, checked by tools/test); only the documentation the interface
    /// file's comments give may be longer.
    @Test(arguments: ["Sources/BrokerContract/Broker1.swift", "Tests/VarlinkGeneratorTests/Shapes.swift"])
    func generatedCodeStaysWithin120Columns(generated: String) throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent(generated), encoding: .utf8)
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
        where line.count > 120 {
            let comment = line.drop { $0 == " " }.hasPrefix("//")
            #expect(comment, "\(generated):\(index + 1) has \(line.count) columns: \(line)")
        }
    }

    @Test func exactlyTheBrokersMethodsThatReplyMoreThanOnceStream() throws {
        let interface = try VarlinkInterfaceDefinition(parsing: Broker1.description)
        var streaming: [String] = []
        for case .method(let name, let documentation, _, _, true) in interface.members {
            streaming.append(name)
            #expect(
                documentation.joined(separator: " ").contains("call with `more`"),
                "\(name)'s documentation does not say to call it with more"
            )
        }
        #expect(
            streaming == [
                "SignInWithDeviceCode", "SignInWithBrowser", "SwitchWorker", "SubscribeAccountChanges",
                "AwaitLoginScreenDeviceCode",
            ]
        )
    }

    @Test func theBrokerContractHasEveryMethodAndErrorOfItsInterface() throws {
        let interface = try VarlinkInterfaceDefinition(parsing: Broker1.description)
        #expect(interface.name == Broker1.name)
        var methods: [String] = []
        var errors: [String] = []
        for member in interface.members {
            switch member {
            case .method(let name, _, _, _, _): methods.append(name)
            case .error(let name, _, _): errors.append(name)
            case .type: break
            }
        }
        #expect(methods.count == 27)
        // Every method decodes through the method enum, which names it back.
        for method in methods {
            let call = VarlinkCall(
                method: "\(Broker1.name).\(method)",
                parameters: [
                    "scopes": .array([]), "redirectUri": .string("http://127.0.0.1/"),
                    "service": .string("s"), "account": .string("a"), "secret": .string(""),
                    "username": .string("u"), "password": .string("p"), "signInId": .string("i"),
                    "loginScreen": .object(["service": .string("login")]), "sessionId": .string("1"),
                    "correlationId": .string("c"), "callerPidfd": .int(3),
                ]
            )
            #expect(try Broker1.Call(call).member == method)
        }
        // Every error decodes through the error enum and encodes back to the same reply.
        #expect(
            errors == [
                "CallerNotInPolicy", "KeychainError", "ProtocolError", "AccountError", "TooManyConnections",
                "LimitExceeded",
            ]
        )
        let keychain = Broker1.KeychainError(status: -25300, code: "itemNotFound", message: "no item")
        #expect(try Broker1.ErrorReply(keychain.reply) == .keychainError(keychain))
        #expect(try Broker1.ErrorReply(VarlinkReply(parameters: [:])) == nil)
        #expect(try Broker1.ErrorReply(.permissionDenied) == nil)
    }
}

/// The IDL parser: the grammar's shapes, the comments that become documentation, and errors with their line.
@Suite struct VarlinkIDLTests {
    @Test func theParserReadsEveryShapeAndTheDocumentation() throws {
        let text = try String(
            contentsOf: ContractGenerationTests.root.appendingPathComponent(
                "Tests/VarlinkGeneratorTests/org.example.shapes.varlink"
            ),
            encoding: .utf8
        )
        let interface = try VarlinkInterfaceDefinition(parsing: text)
        #expect(interface.name == "org.example.shapes")
        #expect(interface.documentation == ["Every shape of the varlink IDL the generator writes, for its tests."])
        guard case .type("Colour", ["A colour."], .enumeration(let colours)) = interface.members[0] else {
            Issue.record("the first member is \(interface.members[0])")
            return
        }
        #expect(colours == ["red", "green", "blue", "default"])
        guard case .type("Shape", _, .structure(let fields)) = interface.members[1] else {
            Issue.record("the second member is \(interface.members[1])")
            return
        }
        #expect(fields.first?.documentation == ["A name."])
        #expect(fields.first { $0.name == "grid" }?.type == .array(.array(.int)))
        #expect(fields.first { $0.name == "labels" }?.type == .array(.optional(.string)))
        #expect(fields.first { $0.name == "tags" }?.type == .map(.string))
        guard case .method("Draw", let documentation, let parameters, let reply, let streams) = interface.members[2]
        else {
            Issue.record("the third member is \(interface.members[2])")
            return
        }
        // `@streams` marks the method and is no documentation.
        #expect(documentation == ["Draws shapes; call with `more` for one reply per shape."])
        #expect(streams)
        #expect(parameters.map(\.name) == ["shapes", "scale"])
        #expect(reply.map(\.type) == [.optional(.named("Shape")), .optional(.int)])
        guard case .method("Nothing", [], [], [], false) = interface.members[3] else {
            Issue.record("the fourth member is \(interface.members[3])")
            return
        }
    }

    @Test(arguments: [
        ("interface org.a.b\nmethod M(a: string -> ()", 2, "expected \")\", found \"->\""),
        ("interface org.a.b\n\ntype T (a: [int]string)", 3, "a map's key must be string"),
        ("interface org.a.b\nmethod M() => ()", 2, "unexpected character \"=\""),
        ("method M() -> ()", 1, "expected interface"),
        ("interface org.a.b\nstruct S ()", 2, "expected type, method or error"),
    ])
    func aFileOffTheGrammarIsAnErrorNamingItsLine(text: String, line: Int, message: String) {
        #expect {
            _ = try VarlinkInterfaceDefinition(parsing: text)
        } throws: { error in
            guard let error = error as? VarlinkIDLError else { return false }
            return error.line == line && error.message.contains(message)
        }
    }

    @Test func aTypeTheInterfaceDoesNotDeclareIsRefusedByTheGenerator() throws {
        let interface = try VarlinkInterfaceDefinition(parsing: "interface org.a.b\nmethod M(a: Missing) -> ()")
        #expect(throws: VarlinkIDLError.self) {
            _ = try SwiftContractGenerator(interface: interface, sourceName: "x", regenerateCommand: "x").source()
        }
        let recursive = try VarlinkInterfaceDefinition(parsing: "interface org.a.b\ntype T (next: ?T)")
        #expect(throws: VarlinkIDLError.self) {
            _ = try SwiftContractGenerator(interface: recursive, sourceName: "x", regenerateCommand: "x").source()
        }
    }
}

/// Generated code decodes what it encodes, and names the field that is missing or mistyped, at any depth.
@Suite struct GeneratedCodecTests {
    static let shape = Shapes.Shape(
        name: "square",
        sides: 4,
        area: 2.5,
        closed: true,
        extra: .object(["k": .int(1)]),
        colour: .default,
        colours: [.red, .blue],
        tags: ["a": "b"],
        grid: [[1, 2], [3]],
        labels: ["x", nil],
        children: [
            Shapes.Shape(
                name: "child",
                sides: 3,
                area: 1,
                closed: false,
                extra: .bool(true),
                colour: .green,
                colours: [],
                tags: [:],
                grid: [],
                labels: [],
                children: []
            )
        ],
        default: nil
    )

    @Test func everyShapeRoundTrips() throws {
        let fields = Self.shape.varlinkFields
        #expect(fields["default"] == .null)
        #expect(fields["colour"] == .string("default"))
        #expect(try Shapes.Shape(varlinkFields: fields) == Self.shape)
        // Through the wire format too.
        let reply = try VarlinkReply.decode(
            Data(VarlinkReply(Shapes.Draw.Reply(drawn: Self.shape, count: 1)).encoded().dropLast())
        )
        #expect(
            try Shapes.Draw.Reply(varlinkFields: reply.parameters) == Shapes.Draw.Reply(drawn: Self.shape, count: 1)
        )
    }

    @Test func absentOptionalFieldsAreNullOrLeftOut() {
        let reply = Shapes.Draw.Reply(count: 2)
        #expect(reply.varlinkFields == ["drawn": .null, "count": .int(2)])
        #expect(reply.varlinkFields(omittingAbsent: true) == ["count": .int(2)])
        // An error leaves them out.
        #expect(Shapes.TooLarge(area: 3).reply.parameters == ["area": .double(3)])
    }

    @Test(arguments: [
        ("name", VarlinkValue.int(1)),
        ("sides", .string("4")),
        ("sides", .double(4.5)),
        ("colour", .int(1)),
        ("colours", .array([.string("red"), .int(1)])),
        ("grid", .array([.array([.string("x")])])),
        ("tags", .object(["a": .int(1)])),
        ("extra", .null),
        ("children", .array([.object(["name": .string("c")])])),
        ("default", .int(1)),
    ])
    func aMistypedOrMissingFieldIsNamed(field: String, value: VarlinkValue) {
        var fields = Self.shape.varlinkFields
        fields[field] = value
        let expected = field == "children" ? "children.sides" : field
        #expect(throws: VarlinkFieldError(field: expected)) { try Shapes.Shape(varlinkFields: fields) }
        fields[field] = nil
        if field != "default" {
            #expect(throws: VarlinkFieldError(field: field)) { try Shapes.Shape(varlinkFields: fields) }
        }
    }

    @Test func aNestedFieldIsNamedByItsPath() {
        var account = Broker1.Account(homeAccountId: "h", environment: "e", realm: "r").varlinkFields
        account["realm"] = .int(1)
        let result: [String: VarlinkValue] = [
            "result": .object([
                "accessToken": .string("t"), "scopes": .array([]), "source": .string("cache"),
                "correlationId": .string("c"),
                "account": .object(account),
            ])
        ]
        #expect(throws: VarlinkFieldError(field: "result.account.realm")) {
            try Broker1.AcquireTokenSilent.Reply(varlinkFields: result)
        }
    }

    @Test func aCallIsDecodedOrRefusedWithTheStandardError() throws {
        let call = VarlinkCall(
            method: "org.sharedmode.Broker1.AcquireTokenSilent",
            parameters: ["scopes": .array([.string("api://x/.default")])]
        )
        #expect(
            try Broker1.Call(call)
                == .acquireTokenSilent(Broker1.AcquireTokenSilent.Parameters(scopes: ["api://x/.default"]))
        )
        #expect(throws: VarlinkCallDecodingError.invalidParameter(VarlinkFieldError(field: "scopes"))) {
            try Broker1.Call(
                VarlinkCall(
                    method: "org.sharedmode.Broker1.AcquireTokenSilent",
                    parameters: ["forceRefresh": .bool(true)]
                )
            )
        }
        #expect(throws: VarlinkCallDecodingError.methodNotFound("org.sharedmode.Broker1.Nope")) {
            try Broker1.Call(VarlinkCall(method: "org.sharedmode.Broker1.Nope"))
        }
        #expect(
            VarlinkCallDecodingError.invalidParameter(VarlinkFieldError(field: "scopes")).reply
                == .invalidParameter("scopes")
        )
        // A typed call leaves out the parameters it does not give.
        let typed = VarlinkCall(
            Broker1.SignInWithDeviceCode.self,
            Broker1.SignInWithDeviceCode.Parameters(scopes: ["s"]),
            more: true
        )
        #expect(typed.parameters == ["scopes": .array([.string("s")])])
        #expect(typed.more)
    }
}
