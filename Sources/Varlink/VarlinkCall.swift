public import Foundation

/// A method call as it arrives: `{"method": "iface.Method", "parameters": {…}, "more": true, "oneway": true}`.
public struct VarlinkCall: Sendable, Hashable {
    /// The fully qualified method name, e.g. `org.varlink.service.GetInfo`.
    public var method: String
    /// The call's parameters (an empty object when the call has none).
    public var parameters: [String: VarlinkValue]
    /// The caller accepts several replies, all but the last with `continues: true`.
    public var more: Bool
    /// The caller wants no reply at all.
    public var oneway: Bool
    /// The caller asks to leave varlink for another protocol after the reply (not supported by servers here).
    public var upgrade: Bool

    /// A call of `method` with `parameters`.
    public init(
        method: String,
        parameters: [String: VarlinkValue] = [:],
        more: Bool = false,
        oneway: Bool = false,
        upgrade: Bool = false
    ) {
        self.method = method
        self.parameters = parameters
        self.more = more
        self.oneway = oneway
        self.upgrade = upgrade
    }

    /// The interface part of `method` (`org.varlink.service` of `org.varlink.service.GetInfo`).
    public var interface: String { String(method.utf8[..<memberDot]) ?? "" }

    /// The member part of `method` (`GetInfo`).
    public var member: String {
        method.isEmpty ? "" : String(method.utf8[method.utf8.index(after: memberDot)...]) ?? ""
    }

    /// Where the member's dot is in `method` (its start when there is none).
    private var memberDot: String.Index { method.utf8.lastIndex(of: UInt8(ascii: ".")) ?? method.utf8.startIndex }

    /// Decodes one message (the bytes `VarlinkFrameDecoder` hands out). Unknown fields are ignored, as
    /// later versions of the protocol may add some.
    /// - Throws: `malformedJSON`, `notAnObject`, or `invalidField` naming the field.
    public static func decode(_ message: Data) throws(VarlinkProtocolError) -> VarlinkCall {
        try decodeCounting(message, maximumValues: .max).call
    }

    /// Decodes one message as `decode(_:)` does, refusing one that decodes into more than `maximumValues`
    /// JSON values (objects, arrays, strings, numbers, bools, nulls; keys not counted): a server bounds so
    /// what a call costs it decoded, not only on the wire. Returns the call and how many values it holds.
    /// - Throws: as `decode(_:)`, and `tooManyValues` over the limit.
    public static func decodeCounting(
        _ message: Data,
        maximumValues: Int
    ) throws(VarlinkProtocolError) -> (call: VarlinkCall, values: Int) {
        let (value, values) = try VarlinkJSONParser.parseCounting(message, maximumValues: maximumValues)
        guard let fields = value.object else {
            throw VarlinkProtocolError(.notAnObject, "the message is JSON \(value.typeName), not an object")
        }
        return (try call(from: fields), values)
    }

    private static func call(from fields: [String: VarlinkValue]) throws(VarlinkProtocolError) -> VarlinkCall {
        guard let method = fields["method"] else {
            throw VarlinkProtocolError(.invalidField, "the call has no \"method\"")
        }
        guard let name = method.string, VarlinkName.isQualifiedMethod(name) else {
            throw VarlinkProtocolError(
                .invalidField,
                "\"method\" must be a qualified method name such as org.example.Interface.Method"
            )
        }
        var call = VarlinkCall(method: name)
        switch fields["parameters"] {
        case nil, .null?: break
        case .object(let parameters)?: call.parameters = parameters
        case let other?:
            throw VarlinkProtocolError(.invalidField, "\"parameters\" must be an object, not \(other.typeName)")
        }
        call.more = try VarlinkMessage.flag("more", in: fields)
        call.oneway = try VarlinkMessage.flag("oneway", in: fields)
        call.upgrade = try VarlinkMessage.flag("upgrade", in: fields)
        return call
    }

    /// The call as it is sent: JSON and the terminating NUL.
    public func encoded() -> Data {
        var fields: [String: VarlinkValue] = ["method": .string(method)]
        if !parameters.isEmpty { fields["parameters"] = .object(parameters) }
        if more { fields["more"] = .bool(true) }
        if oneway { fields["oneway"] = .bool(true) }
        if upgrade { fields["upgrade"] = .bool(true) }
        return VarlinkMessage.encode(fields)
    }
}

/// Names in the varlink grammar.
enum VarlinkName {
    /// `iface.name.Member`: a reverse-domain interface (at least two dot-separated parts of letters, digits
    /// and `-`, starting with a letter) and a member starting with an upper-case letter.
    static func isQualifiedMethod(_ name: String) -> Bool {
        // On the name's UTF-8 bytes (every call's method passes here): the grammar is ASCII, so any other byte
        // refuses the name.
        var name = name
        return name.withUTF8 { bytes in
            guard let lastDot = bytes.lastIndex(of: UInt8(ascii: ".")) else { return false }
            let member = bytes[(lastDot + 1)...]
            guard let first = member.first, isUpper(first), member.allSatisfy({ isLetter($0) || isDigit($0) })
            else { return false }
            var parts = 0
            var partStart = bytes.startIndex
            while partStart <= lastDot {
                let end = bytes[partStart..<lastDot].firstIndex(of: UInt8(ascii: ".")) ?? lastDot
                let part = bytes[partStart..<end]
                guard let first = part.first, isLetter(first), part.last != UInt8(ascii: "-"),
                    part.allSatisfy({ isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "-") })
                else { return false }
                parts += 1
                partStart = end + 1
            }
            return parts >= 2
        }
    }

    private static func isUpper(_ byte: UInt8) -> Bool { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) }
    private static func isLetter(_ byte: UInt8) -> Bool {
        isUpper(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
    }
    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
}

/// Encoding and field access shared by calls and replies.
enum VarlinkMessage {
    static func object(_ message: Data) throws(VarlinkProtocolError) -> [String: VarlinkValue] {
        let value = try VarlinkJSONParser.parse(message)
        guard let fields = value.object else {
            throw VarlinkProtocolError(.notAnObject, "the message is JSON \(value.typeName), not an object")
        }
        return fields
    }

    static func flag(_ name: String, in fields: [String: VarlinkValue]) throws(VarlinkProtocolError) -> Bool {
        switch fields[name] {
        case nil, .null?: return false
        case .bool(let flag)?: return flag
        case let other?: throw VarlinkProtocolError(.invalidField, "\"\(name)\" must be a bool, not \(other.typeName)")
        }
    }

    static func encode(_ fields: [String: VarlinkValue]) -> Data {
        VarlinkJSONWriter.message(.object(fields))
    }
}
