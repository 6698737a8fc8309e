import Foundation

/// `application/x-www-form-urlencoded` (the WHATWG URL standard's byte serializer, which OAuth uses).
enum FormEncoding {
    private static let unreserved: CharacterSet = {
        var set = CharacterSet.alphanumerics.intersection(
            CharacterSet(charactersIn: Unicode.Scalar(0)...Unicode.Scalar(127))
        )
        set.insert(charactersIn: "-._*")
        return set
    }()

    /// A form body: spaces as `+`.
    static func encode(_ fields: [(String, String)]) -> String {
        fields.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }

    /// A URL query (the authorization and end-session URLs): spaces as `%20`, which every URL parser
    /// reads as a space (a `+` is a space only to form decoders).
    static func encodeQuery(_ fields: [(String, String)]) -> String {
        fields.map { "\(escape($0.0, spaceAsPlus: false))=\(escape($0.1, spaceAsPlus: false))" }.joined(separator: "&")
    }

    static func escape(_ value: String, spaceAsPlus: Bool = true) -> String {
        let escaped = value.addingPercentEncoding(withAllowedCharacters: unreserved)!
        return spaceAsPlus ? escaped.replacingOccurrences(of: "%20", with: "+") : escaped
    }

    /// Decodes a query string or form body into name → value (the first value wins).
    static func decode(_ query: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func unescape(_ part: Substring) -> String {
                String(part).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(part)
            }
            let name = unescape(parts[0])
            if fields[name] == nil { fields[name] = parts.count > 1 ? unescape(parts[1]) : "" }
        }
        return fields
    }
}
