import Foundation
import Testing
import Varlink

/// The varlink wire format: NUL-terminated JSON objects, calls with `more`/`oneway`, replies with
/// `continues` or a qualified error, and a decoder that never holds more than its limit.
struct VarlinkFrameDecoderTests {
    @Test func messagesSplitAcrossChunksComeOutWholeAndInOrder() throws {
        var decoder = VarlinkFrameDecoder()
        let stream =
            Array(#"{"method":"org.example.A.One"}"#.utf8) + [0] + Array(#"{"method":"org.example.A.Two"}"#.utf8) + [0]
        var messages: [String] = []
        for chunk in stride(from: 0, to: stream.count, by: 7).map({ stream[$0..<min($0 + 7, stream.count)] }) {
            decoder.append(chunk)
            while let message = try decoder.nextMessage() { messages.append(String(decoding: message, as: UTF8.self)) }
        }
        #expect(messages == [#"{"method":"org.example.A.One"}"#, #"{"method":"org.example.A.Two"}"#])
        #expect(decoder.bufferedByteCount == 0)
        #expect(try decoder.nextMessage() == nil)
    }

    @Test func aMessageWithoutItsNulIsHeldUntilItArrives() throws {
        var decoder = VarlinkFrameDecoder()
        decoder.append(Array(#"{"method":"org.example.A.One"}"#.utf8))
        #expect(try decoder.nextMessage() == nil)
        decoder.append([0])
        #expect(
            try decoder.nextMessage().map { String(decoding: $0, as: UTF8.self) } == #"{"method":"org.example.A.One"}"#
        )
    }

    @Test func moreThanTheLimitWithoutANulIsRefusedAtTheLimit() throws {
        var decoder = VarlinkFrameDecoder(maximumMessageBytes: 16)
        decoder.append(Array(repeating: UInt8(ascii: "a"), count: 16))
        #expect(try decoder.nextMessage() == nil, "exactly the limit, its NUL still to come")
        decoder.append([UInt8(ascii: "a")])
        #expect(throws: VarlinkProtocolError.self) { try decoder.nextMessage() }
        do {
            _ = try decoder.nextMessage()
        } catch VarlinkProtocolError.Code.messageTooLarge {
            // expected: the decoder stays refused
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test func aMessageOfExactlyTheLimitIsAccepted() throws {
        var decoder = VarlinkFrameDecoder(maximumMessageBytes: 16)
        decoder.append(Array(repeating: UInt8(ascii: "a"), count: 16) + [0])
        #expect(try decoder.nextMessage()?.count == 16)
    }
}

struct VarlinkCallTests {
    @Test func aCallDecodesWithItsParametersAndFlags() throws {
        let call = try VarlinkCall.decode(
            Data(
                #"{"method":"com.contoso.Kiosk.Token","parameters":{"scopes":["User.Read"],"force":true},"more":true}"#
                    .utf8
            )
        )
        #expect(call.method == "com.contoso.Kiosk.Token")
        #expect(call.interface == "com.contoso.Kiosk")
        #expect(call.member == "Token")
        #expect(call.parameters == ["scopes": .array([.string("User.Read")]), "force": .bool(true)])
        #expect(call.more && !call.oneway && !call.upgrade)
    }

    @Test func aCallWithoutParametersHasAnEmptyObjectAndUnknownFieldsAreIgnored() throws {
        let call = try VarlinkCall.decode(Data(#"{"method":"org.varlink.service.GetInfo","future":1}"#.utf8))
        #expect(call.parameters.isEmpty)
        #expect(!call.more)
    }

    @Test(arguments: ["org.varlink.service.GetInfo", "io.systemd-x.v2.Get2", "a.b.C", "Org.Example9.Method"])
    func aQualifiedMethodNameIsAcceptedWithItsInterfaceAndMember(method: String) throws {
        let call = try VarlinkCall.decode(Data(#"{"method":"\#(method)"}"#.utf8))
        #expect(call.method == method)
        #expect(call.interface + "." + call.member == method)
        #expect(!call.member.contains("."))
    }

    @Test(arguments: [
        (#"not json"#, VarlinkProtocolError.Code.malformedJSON),
        (#"[1,2]"#, .notAnObject),
        (#""text""#, .notAnObject),
        (#"{"parameters":{}}"#, .invalidField),
        (#"{"method":42}"#, .invalidField),
        (#"{"method":"GetInfo"}"#, .invalidField),
        (#"{"method":"org.varlink.service.getInfo"}"#, .invalidField),
        (#"{"method":"org..service.GetInfo"}"#, .invalidField),
        (#"{"method":"org.GetInfo"}"#, .invalidField),
        (#"{"method":".org.service.GetInfo"}"#, .invalidField),
        (#"{"method":"org.service."}"#, .invalidField),
        (#"{"method":"org.service-.GetInfo"}"#, .invalidField),
        (#"{"method":"org.1service.GetInfo"}"#, .invalidField),
        (#"{"method":"org.service.Get-Info"}"#, .invalidField),
        (#"{"method":"org.sérvice.GetInfo"}"#, .invalidField),
        (#"{"method":"org.service.GetÏnfo"}"#, .invalidField),
        (#"{"method":"org.varlink.service.GetInfo","parameters":[]}"#, .invalidField),
        (#"{"method":"org.varlink.service.GetInfo","more":"yes"}"#, .invalidField),
        (#"{"method":"org.varlink.service.GetInfo","oneway":1}"#, .invalidField),
    ])
    func aMalformedCallIsRefusedWithItsClassAndWithoutEchoingIt(message: String, code: VarlinkProtocolError.Code) {
        do {
            _ = try VarlinkCall.decode(Data(message.utf8))
            Issue.record("\(message) was accepted")
        } catch {
            #expect(error.code == code, "\(message): \(error)")
            #expect(message.count < 8 || !error.message.contains(message), "the error echoes the message")
        }
    }

    @Test func anEncodedCallIsSortedJSONEndedByOneNulAndDecodesBack() throws {
        let call = VarlinkCall(
            method: "com.contoso.Kiosk.Subscribe",
            parameters: ["b": .int(2), "a": .double(0.5)],
            more: true
        )
        let bytes = call.encoded()
        #expect(bytes.last == 0)
        #expect(bytes.dropLast().contains(0) == false)
        #expect(
            String(decoding: bytes.dropLast(), as: UTF8.self)
                == #"{"method":"com.contoso.Kiosk.Subscribe","more":true,"parameters":{"a":0.5,"b":2}}"#
        )
        #expect(try VarlinkCall.decode(Data(bytes.dropLast())) == call)
    }
}

struct VarlinkReplyTests {
    @Test func aStreamedReplyCarriesContinues() throws {
        let reply = VarlinkReply(parameters: ["event": .string("signed_out")], continues: true)
        #expect(
            String(decoding: reply.encoded().dropLast(), as: UTF8.self)
                == #"{"continues":true,"parameters":{"event":"signed_out"}}"#
        )
        #expect(try VarlinkReply.decode(Data(reply.encoded().dropLast())) == reply)
    }

    @Test func standardErrorsHaveTheirQualifiedNamesAndParameters() throws {
        #expect(
            String(decoding: VarlinkReply.invalidParameter("scopes").encoded().dropLast(), as: UTF8.self)
                == #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"scopes"}}"#
        )
        #expect(VarlinkReply.methodNotFound("com.contoso.Kiosk.Nope").error == "org.varlink.service.MethodNotFound")
        #expect(
            VarlinkReply.interfaceNotFound("com.contoso.Nope").parameters == ["interface": .string("com.contoso.Nope")]
        )
        #expect(VarlinkReply.permissionDenied.error == "org.varlink.service.PermissionDenied")
        let decoded = try VarlinkReply.decode(
            Data(#"{"error":"org.varlink.service.MethodNotFound","parameters":{"method":"x.y.Z"}}"#.utf8)
        )
        #expect(
            decoded.error == "org.varlink.service.MethodNotFound" && decoded.parameters["method"] == .string("x.y.Z")
        )
    }

    @Test func numbersThatJSONCannotCarryBecomeNull() {
        let reply = VarlinkReply(parameters: ["x": .double(.nan), "y": .array([.double(.infinity)])])
        #expect(String(decoding: reply.encoded().dropLast(), as: UTF8.self) == #"{"parameters":{"x":null,"y":[null]}}"#)
    }
}

/// The JSON of messages: read in one pass, nesting bounded, numbers typed so that `encoded()` decodes back.
struct VarlinkJSONTests {
    @Test func deepNestingIsRefusedAtTheLimitWithoutDecodingIt() throws {
        func call(depth: Int) -> Data {
            // The call and its parameters are two levels; `x` holds the rest.
            let arrays = depth - 2
            return Data(
                (#"{"method":"a.b.C","parameters":{"x":"# + String(repeating: "[", count: arrays)
                    + String(repeating: "]", count: arrays) + "}}").utf8
            )
        }
        #expect(try VarlinkCall.decode(call(depth: 64)).parameters["x"] != nil)
        #expect(throws: VarlinkProtocolError.self) { try VarlinkCall.decode(call(depth: 65)) }
        // 512 levels in 1 KB took over a second through JSONDecoder (O(depth³)); now refused at once.
        do {
            _ = try VarlinkCall.decode(
                Data((String(repeating: "[", count: 512) + String(repeating: "]", count: 512)).utf8)
            )
            Issue.record("512 nested arrays were accepted")
        } catch {
            #expect(error.code == .malformedJSON)
        }
    }

    @Test(arguments: [
        ("5", VarlinkValue.int(5)), ("5.0", .int(5)), ("1e2", .int(100)), ("-0.0", .int(0)), ("1e-400", .int(0)),
        ("9223372036854775807", .int(.max)), ("-9223372036854775808", .int(.min)),
        ("9223372036854775808", .double(9_223_372_036_854_775_808)),
        ("-9223372036854775809", .double(-9_223_372_036_854_775_808)),
        ("9007199254740992.0", .int(9_007_199_254_740_992)), ("1e18", .double(1e18)), ("0.5", .double(0.5)),
        (#""caf\u00e9 \ud83d\ude00 \u0000 \/""#, .string("café 😀 \0 /")),
        (#""plain café 😀 text""#, .string("plain café 😀 text")),
        (#""a long run, then \"quoted\" and a tab\t""#, .string("a long run, then \"quoted\" and a tab\t")),
        ("[true,false,null]", .array([.bool(true), .bool(false), .null])),
        (#" { "a" : 1 , "a" : 2 } "#, .object(["a": .int(1)])),
    ])
    func valuesDecodeAndEncodeBack(json: String, value: VarlinkValue) throws {
        let call = try VarlinkCall.decode(Data(#"{"method":"a.b.C","parameters":{"v":\#(json)}}"#.utf8))
        #expect(call.parameters["v"] == value, "\(json)")
        #expect(try VarlinkCall.decode(Data(call.encoded().dropLast())) == call, "\(json) does not survive encoded()")
    }

    @Test(arguments: [
        "", "{", "{}x", "[1,]", #"{"a":1,}"#, "01", "1.", ".5", "+1", "-", "1e", "1e400", "NaN", "tru", "nul",
        #""\ud800""#, #""\udc00""#, #""\x""#, "\"\u{01}\"", "\u{FEFF}{}", #"{"a" 1}"#, #"{1:2}"#,
    ])
    func malformedJSONIsRefused(json: String) {
        do {
            _ = try VarlinkReply.decode(Data(#"{"parameters":{"v":\#(json)}}"#.utf8))
            Issue.record("\(json.debugDescription) was accepted")
        } catch {
            #expect(error.code == .malformedJSON, "\(json.debugDescription): \(error)")
        }
    }

    @Test func invalidUTF8IsRefused() {
        var bytes = Array(#"{"parameters":{"v":"a"#.utf8)
        bytes += [0xC3, 0x28] + Array(#""}}"#.utf8)
        #expect(throws: VarlinkProtocolError.self) { try VarlinkReply.decode(Data(bytes)) }
        // The same after an escape, and a raw control character, in a string with an escape or without.
        var escaped = Array(#"{"parameters":{"v":"a\n"#.utf8)
        escaped += [0xC3, 0x28] + Array(#""}}"#.utf8)
        #expect(throws: VarlinkProtocolError.self) { try VarlinkReply.decode(Data(escaped)) }
        for text in ["{\"parameters\":{\"v\":\"a\u{01}b\"}}", "{\"parameters\":{\"v\":\"a\\n\u{01}\"}}"] {
            #expect(throws: VarlinkProtocolError.self) { try VarlinkReply.decode(Data(text.utf8)) }
        }
    }
}
