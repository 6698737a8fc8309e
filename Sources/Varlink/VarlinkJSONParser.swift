import Foundation

/// Parses a message's JSON straight into `VarlinkValue`, in one pass over the bytes.
///
/// Peer bytes do not go through `JSONDecoder`: decoding `VarlinkValue` with `Decodable` means trying each
/// JSON type in turn, and every failed try throws a `DecodingError` whose coding path Foundation builds
/// in O(depth²), so a value nested d levels deep costs O(d³): 1 KB of `[[[…]]]` held an event loop for
/// over a second. This parser takes RFC 8259 JSON (UTF-8, any value at the top, no trailing commas, no
/// byte order mark), nested at most `maximumDepth` levels. A number is an `int` when it is digits alone
/// within 64 bits, or an integer value up to 2^53 in any form (`5.0`, `1e2`), else a `double`; one beyond
/// `Double`'s range is refused. Of duplicate keys the first wins, as with `JSONDecoder`.
///
/// A value tree costs far more than its JSON: 1 MiB of `[{"":0},…]` is ~28 MiB decoded. `maximumValues`
/// bounds the values (every object, array, string, number, bool and null, keys not counted) a message may
/// decode into, so that what a peer's message costs decoded is bounded by its bytes and that count.
struct VarlinkJSONParser {
    /// The deepest nesting of arrays and objects accepted (varlink interfaces nest a few levels).
    static let maximumDepth = 64

    private let bytes: [UInt8]
    private let maximumValues: Int
    private var position = 0
    private var depth = 0
    /// Values decoded so far.
    private(set) var values = 0

    /// The value `data` holds.
    /// - Throws: `malformedJSON` when it is not one JSON value (whitespace around it aside), or nests
    ///   deeper than `maximumDepth`.
    static func parse(_ data: Data) throws(VarlinkProtocolError) -> VarlinkValue {
        try parseCounting(data, maximumValues: .max).value
    }

    /// The value `data` holds and how many values it decoded into.
    /// - Throws: as `parse(_:)`, and `tooManyValues` when it holds more than `maximumValues` values.
    static func parseCounting(
        _ data: Data,
        maximumValues: Int
    ) throws(VarlinkProtocolError) -> (value: VarlinkValue, values: Int) {
        var parser = VarlinkJSONParser(bytes: Array(data), maximumValues: maximumValues)
        parser.skipWhitespace()
        let value = try parser.value()
        parser.skipWhitespace()
        guard parser.position == parser.bytes.count else { throw malformed }
        return (value, parser.values)
    }

    private init(bytes: [UInt8], maximumValues: Int) {
        self.bytes = bytes
        self.maximumValues = maximumValues
    }

    private static var malformed: VarlinkProtocolError {
        VarlinkProtocolError(.malformedJSON, "the message is not valid JSON")
    }

    private var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    private mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { position += 1 }
    }

    private mutating func value() throws(VarlinkProtocolError) -> VarlinkValue {
        guard let byte = current else { throw Self.malformed }
        values += 1
        guard values <= maximumValues else {
            throw VarlinkProtocolError(
                .tooManyValues,
                "the message holds more than \(maximumValues) values (the limit: arrays, objects, strings, numbers); "
                    + "send fewer or smaller items per call"
            )
        }
        switch byte {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw Self.malformed
        }
    }

    private mutating func literal(_ word: String) throws(VarlinkProtocolError) {
        for expected in word.utf8 {
            guard current == expected else { throw Self.malformed }
            position += 1
        }
    }

    /// Consumes `byte` if it comes next.
    private mutating func consume(_ byte: UInt8) -> Bool {
        guard current == byte else { return false }
        position += 1
        return true
    }

    /// Consumes the bracket opening an array or object, one level deeper.
    private mutating func enter() throws(VarlinkProtocolError) {
        depth += 1
        guard depth <= Self.maximumDepth else {
            throw VarlinkProtocolError(
                .malformedJSON,
                "the message nests arrays and objects deeper than \(Self.maximumDepth) levels"
            )
        }
        position += 1
        skipWhitespace()
    }

    private mutating func array() throws(VarlinkProtocolError) -> VarlinkValue {
        try enter()
        var elements: [VarlinkValue] = []
        if !consume(UInt8(ascii: "]")) {
            repeat {
                skipWhitespace()
                elements.append(try value())
                skipWhitespace()
            } while consume(UInt8(ascii: ","))
            guard consume(UInt8(ascii: "]")) else { throw Self.malformed }
        }
        depth -= 1
        return .array(elements)
    }

    private mutating func object() throws(VarlinkProtocolError) -> VarlinkValue {
        try enter()
        var fields: [String: VarlinkValue] = [:]
        if !consume(UInt8(ascii: "}")) {
            repeat {
                skipWhitespace()
                guard current == UInt8(ascii: "\"") else { throw Self.malformed }
                let key = try string()
                skipWhitespace()
                guard consume(UInt8(ascii: ":")) else { throw Self.malformed }
                skipWhitespace()
                let field = try value()
                if fields[key] == nil { fields[key] = field }
                skipWhitespace()
            } while consume(UInt8(ascii: ","))
            guard consume(UInt8(ascii: "}")) else { throw Self.malformed }
        }
        depth -= 1
        return .object(fields)
    }

    /// A string, from its opening quote: valid UTF-8, no control characters, JSON escapes.
    private mutating func string() throws(VarlinkProtocolError) -> String {
        position += 1
        // Most strings (names, ids, tokens) hold no escape: made from their bytes in one step, valid UTF-8 or refused.
        let start = position
        while let byte = current, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\"), byte >= 0x20 { position += 1 }
        if current == UInt8(ascii: "\"") {
            guard let text = String(validating: bytes[start..<position], as: UTF8.self) else { throw Self.malformed }
            position += 1
            return text
        }
        var utf8: [UInt8] = []
        var run = start
        while true {
            guard let byte = current else { throw Self.malformed }
            switch byte {
            case UInt8(ascii: "\""):
                utf8.append(contentsOf: bytes[run..<position])
                position += 1
                let text = String(decoding: utf8, as: UTF8.self)
                // Invalid UTF-8 is repaired (with U+FFFD) by String(decoding:): refuse it instead.
                guard text.utf8.elementsEqual(utf8) else { throw Self.malformed }
                return text
            case UInt8(ascii: "\\"):
                utf8.append(contentsOf: bytes[run..<position])
                position += 1
                try escape(into: &utf8)
                run = position
            case 0..<0x20:
                throw Self.malformed
            default:
                position += 1
            }
        }
    }

    /// The escape after a backslash, appended to `utf8`.
    private mutating func escape(into utf8: inout [UInt8]) throws(VarlinkProtocolError) {
        guard let byte = current else { throw Self.malformed }
        position += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(byte)
        case UInt8(ascii: "b"): utf8.append(0x08)
        case UInt8(ascii: "f"): utf8.append(0x0C)
        case UInt8(ascii: "n"): utf8.append(0x0A)
        case UInt8(ascii: "r"): utf8.append(0x0D)
        case UInt8(ascii: "t"): utf8.append(0x09)
        case UInt8(ascii: "u"):
            var code = try hex4()
            if (0xD800...0xDBFF).contains(code) {
                // A high surrogate must be followed by an escaped low one.
                guard consume(UInt8(ascii: "\\")), consume(UInt8(ascii: "u")) else { throw Self.malformed }
                let low = try hex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw Self.malformed }
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let scalar = Unicode.Scalar(code) else { throw Self.malformed }  // a lone low surrogate
            UTF8.encode(scalar) { utf8.append($0) }
        default:
            throw Self.malformed
        }
    }

    private mutating func hex4() throws(VarlinkProtocolError) -> UInt32 {
        var code: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = current else { throw Self.malformed }
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw Self.malformed
            }
            code = code << 4 | UInt32(digit)
            position += 1
        }
        return code
    }

    private var atDigit: Bool { current.map { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) } ?? false }

    /// A number: `-`? (`0` | [1-9][0-9]*) (`.` [0-9]+)? ([eE] [+-]? [0-9]+)?.
    private mutating func number() throws(VarlinkProtocolError) -> VarlinkValue {
        let start = position
        _ = consume(UInt8(ascii: "-"))
        guard atDigit else { throw Self.malformed }
        if !consume(UInt8(ascii: "0")) {
            while atDigit { position += 1 }
        }
        var integral = true
        if consume(UInt8(ascii: ".")) {
            integral = false
            guard atDigit else { throw Self.malformed }
            while atDigit { position += 1 }
        }
        if consume(UInt8(ascii: "e")) || consume(UInt8(ascii: "E")) {
            integral = false
            if !consume(UInt8(ascii: "+")) { _ = consume(UInt8(ascii: "-")) }
            guard atDigit else { throw Self.malformed }
            while atDigit { position += 1 }
        }
        let text = String(decoding: bytes[start..<position], as: UTF8.self)
        if integral, let integer = Int64(text) { return .int(integer) }
        guard let number = Double(text), number.isFinite else { throw Self.malformed }
        // An integer value written with a fraction or exponent (`5.0`, `1e2`) is an int up to 2^53, the
        // doubles JSONEncoder writes as digits alone: so that what encoded() writes decodes the same.
        if number.magnitude <= 0x1p53, let integer = Int64(exactly: number) { return .int(integer) }
        return .double(number)
    }
}
