import Foundation

/// Where a document that is not JSON goes wrong, as an editor shows it: line and column (both from 1,
/// columns in characters). The location comes from Foundation's parser (the byte offset its error names);
/// the text around it is never quoted, since a policy may hold a client secret.
struct JSONSyntaxLocation: Equatable, CustomStringConvertible {
    var line: Int
    var column: Int
    /// The document ended before the value did (an unclosed object, array or string).
    var atEnd: Bool

    var description: String { "line \(line), column \(column)" }

    /// The first syntax error of `data`, or nil when Foundation's parser accepts it or names no place.
    static func firstError(in data: Data) -> JSONSyntaxLocation? {
        let message: String
        do {
            _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            return nil
        } catch {
            message = ((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String) ?? "\(error)"
        }
        if let line = number(after: "line ", in: message), let column = number(after: "column ", in: message) {
            return JSONSyntaxLocation(line: line, column: column, atEnd: false)
        }
        if let offset = number(after: "character ", in: message) {
            return at(offset: offset, in: data, atEnd: offset >= data.count)
        }
        if message.localizedCaseInsensitiveContains("end of file")
            || message.localizedCaseInsensitiveContains("unexpected end")
        {
            return at(offset: data.count, in: data, atEnd: true)
        }
        return nil
    }

    /// The line and column of byte `offset` of `data` (the end of the document when it is past it).
    static func at(offset: Int, in data: Data, atEnd: Bool) -> JSONSyntaxLocation {
        let bytes = [UInt8](data.prefix(max(0, min(offset, data.count))))
        let lineStart = (bytes.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 }) ?? 0
        let line = bytes.reduce(1) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
        let column = String(decoding: bytes[lineStart...], as: UTF8.self).count + 1
        return JSONSyntaxLocation(line: line, column: column, atEnd: atEnd)
    }

    /// The decimal number right after the first `label` in `text`.
    private static func number(after label: String, in text: String) -> Int? {
        guard let range = text.range(of: label) else { return nil }
        let digits = text[range.upperBound...].prefix { $0.isASCII && $0.isNumber }
        return Int(digits)
    }
}
