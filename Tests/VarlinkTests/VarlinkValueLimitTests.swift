import Foundation
import Testing
import Varlink

/// The bound on what a message costs decoded: the values a call decodes into are counted, and a message
/// over the limit is refused while it is parsed (1 MiB of `[{"":0},…]` would be ~28 MiB as a value tree).
struct VarlinkValueLimitTests {
    static func message(_ json: String) -> Data { Data(json.utf8) }

    /// A call whose parameter is `[{"":0},…]` with `count` elements: 2 values each, and 4 around them.
    static func objects(_ count: Int) -> Data {
        message(
            #"{"method":"org.example.A.Put","parameters":{"items":["#
                + Array(repeating: #"{"":0}"#, count: count).joined(separator: ",") + "]}}"
        )
    }

    @Test func everyValueIsCountedButNotTheKeys() throws {
        let decoded = try VarlinkCall.decodeCounting(
            Self.message(#"{"method":"org.example.A.Put","parameters":{"x":[1,2.5,{"k":null}],"y":"s","z":true}}"#),
            maximumValues: 100
        )
        // The message, method, parameters; x, 1, 2.5, {k}, null; y's string; z's bool.
        #expect(decoded.values == 10)
        #expect(decoded.call.method == "org.example.A.Put" && decoded.call.parameters["y"] == .string("s"))
    }

    @Test func aMessageAtTheLimitIsAcceptedAndOneValueMoreIsRefusedSayingWhatToDo() throws {
        // 4 + 2 × 510 = 1024 values.
        let atLimit = try VarlinkCall.decodeCounting(Self.objects(510), maximumValues: 1024)
        #expect(atLimit.values == 1024)
        #expect(atLimit.call.parameters["items"]?.array?.count == 510)
        do {
            _ = try VarlinkCall.decodeCounting(Self.objects(511), maximumValues: 1024)
            Issue.record("1026 values were accepted under a limit of 1024")
        } catch VarlinkProtocolError.Code.tooManyValues {
            // expected
        } catch {
            Issue.record("unexpected error \(error)")
        }
        #expect(throws: VarlinkProtocolError.self) {
            try VarlinkCall.decodeCounting(Self.objects(511), maximumValues: 1024)
        }
        do {
            _ = try VarlinkCall.decodeCounting(Self.objects(511), maximumValues: 1024)
        } catch {
            #expect(
                error.message
                    == "the message holds more than 1024 values (the limit: arrays, objects, strings, numbers); send fewer or smaller items per call"
            )
        }
    }

    @Test func theIssuesMegabyteOfEmptyKeyedObjectsIsRefused() throws {
        // ~1 MiB, ~300,000 values: refused at the 1025th.
        let attack = Self.objects(149_796)
        #expect(attack.count > 1_000_000)
        #expect(throws: VarlinkProtocolError.self) { try VarlinkCall.decodeCounting(attack, maximumValues: 1024) }
        // Without a limit (a client reading a trusted server's replies) it decodes as before.
        #expect(try VarlinkCall.decode(attack).parameters["items"]?.array?.count == 149_796)
    }
}
