import Foundation
import KeychainStore

/// How items and reports are shown: text for people, JSON for scripts. Secrets only when asked.
enum Output {
    static func print(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    /// A line for the person at the terminal while a command runs (a device code, a sign-out done):
    /// standard output, or standard error under `--json` so the JSON stays alone on standard output.
    static func progress(_ text: String, json: Bool) {
        if json { FileHandle.standardError.write(Data((text + "\n").utf8)) } else { print(text) }
    }

    static func json(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        print(String(decoding: try encoder.encode(value), as: UTF8.self))
    }

    /// One compact JSON object on one line (JSON Lines), flushed at once for followers.
    static func jsonLine(_ value: some Encodable) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        guard let data = try? encoder.encode(value) else { return }
        print(String(decoding: data, as: UTF8.self))
    }

    /// An item as JSON: attributes, and the secret (base64) only when `includeSecret` is set.
    struct ItemJSON: Encodable {
        var accessGroup: String
        var service: String
        var account: String
        var label: String?
        var type: UInt32?
        var generic: String?
        var creator: UInt32?
        var created: Date
        var modified: Date
        var secretBase64: String?

        init(_ metadata: ItemMetadata, secret: Data? = nil) {
            accessGroup = metadata.accessGroup
            service = metadata.service
            account = metadata.account
            label = metadata.label
            type = metadata.type
            generic = metadata.generic.map { String(decoding: $0, as: UTF8.self) }
            creator = metadata.creator
            created = metadata.creationDate
            modified = metadata.modificationDate
            secretBase64 = secret?.base64EncodedString()
        }
    }

    /// Item dates in text output: ISO 8601 in UTC, to the second. (`.iso8601`'s style resolves the
    /// time zone through the system's time zone data first, a quarter of a millisecond per process.)
    static let timestamp = Date.ISO8601FormatStyle(timeZone: .gmt)

    static func text(_ metadata: ItemMetadata, secret: Data? = nil) -> String {
        var lines = [
            "access group: \(metadata.accessGroup.forTerminal)",
            "service: \(metadata.service.forTerminal)",
            "account: \(metadata.account.forTerminal)",
        ]
        if let label = metadata.label { lines.append("label: \(label.forTerminal)") }
        if let type = metadata.type { lines.append("type: \(type)") }
        if let generic = metadata.generic {
            lines.append("generic: \(String(decoding: generic, as: UTF8.self).forTerminal)")
        }
        if let creator = metadata.creator { lines.append("creator: \(creator)") }
        lines.append("created: \(timestamp.format(metadata.creationDate))")
        lines.append("modified: \(timestamp.format(metadata.modificationDate))")
        if let secret {
            let shown = String(data: secret, encoding: .utf8)?.forTerminal ?? "0x" + Hex.encode(secret)
            lines.append("secret: \(shown)")
        }
        return lines.joined(separator: "\n")
    }
}
