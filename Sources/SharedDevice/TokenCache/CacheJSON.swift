import Foundation

/// Reads and writes unified-cache JSON deterministically: object keys sorted by code point (as MSAL
/// Python's `sort_keys`), numbers that are whole written without a fraction, no escaped slashes.
/// The same value always gives the same bytes, which makes export → import → export byte-stable.
enum CacheJSON {
    /// Parses a JSON object; `nil` if `data` is not one.
    static func object(_ data: Data) -> [String: JSONValue]? {
        try? JSONDecoder().decode([String: JSONValue].self, from: data)
    }

    /// The compact text of `object` (how one entry is kept in a keychain item).
    static func compact(_ object: [String: JSONValue]) -> Data {
        var text = ""
        write(.object(object), indent: nil, into: &text)
        return Data(text.utf8)
    }

    /// The text of `object` indented by four spaces per level (how a cache file is exported).
    static func pretty(_ object: [String: JSONValue]) -> Data {
        var text = ""
        write(.object(object), indent: 0, into: &text)
        text += "\n"
        return Data(text.utf8)
    }

    private static func write(_ value: JSONValue, indent: Int?, into text: inout String) {
        switch value {
        case .null: text += "null"
        case .bool(let flag): text += flag ? "true" : "false"
        case .number(let number): text += format(number)
        case .string(let string): quote(string, into: &text)
        case .array(let elements):
            container("[", "]", elements, indent: indent, into: &text) { element, text in
                write(element, indent: indent.map { $0 + 1 }, into: &text)
            }
        case .object(let members):
            let keys = members.keys.sorted { $0.unicodeScalars.lexicographicallyPrecedes($1.unicodeScalars) }
            container("{", "}", keys, indent: indent, into: &text) { key, text in
                quote(key, into: &text)
                text += indent == nil ? ":" : ": "
                write(members[key]!, indent: indent.map { $0 + 1 }, into: &text)
            }
        }
    }

    private static func container<Element>(
        _ open: String,
        _ close: String,
        _ elements: [Element],
        indent: Int?,
        into text: inout String,
        _ body: (Element, inout String) -> Void
    ) {
        text += open
        guard !elements.isEmpty else {
            text += close
            return
        }
        for (position, element) in elements.enumerated() {
            if position > 0 { text += "," }
            if let indent { text += "\n" + String(repeating: " ", count: 4 * (indent + 1)) }
            body(element, &text)
        }
        if let indent { text += "\n" + String(repeating: " ", count: 4 * indent) }
        text += close
    }

    private static func format(_ number: Double) -> String {
        if number.rounded() == number, abs(number) < 9_007_199_254_740_992 { return String(Int64(number)) }
        return "\(number)"
    }

    private static func quote(_ string: String, into text: inout String) {
        text += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case "\u{08}": text += "\\b"
            case "\u{0C}": text += "\\f"
            case _ where scalar.value < 0x20: text += String(format: "\\u%04x", scalar.value)
            default: text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }
}
