import Foundation

/// `application/x-www-form-urlencoded` (the WHATWG URL standard's byte serializer, which OAuth uses).
enum FormEncoding {
    private static let unreserved: CharacterSet = {
        var set = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)...Unicode.Scalar(127)))
        set.insert(charactersIn: "-._*")
        return set
    }()

    static func encode(_ fields: [(String, String)]) -> String {
        fields.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }

    static func escape(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: unreserved)!.replacingOccurrences(of: "%20", with: "+")
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
