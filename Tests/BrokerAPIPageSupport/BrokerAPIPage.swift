public import Foundation

/// The recorded exchanges of `Sources/BrokerContract/broker-api.md`, read from the page: every fenced block
/// of `→`/`←` lines, with the `<!-- replay: … -->` (or `<!-- not replayed: … -->`) note before it.
public struct BrokerAPIPage {
    public static let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
        .appendingPathComponent("Sources/BrokerContract/broker-api.md")

    /// One message the app sends (nil: the broker speaks first, on connect) and the replies the page shows.
    public struct Message {
        public var send: String?
        public var replies: [String]

        public init(send: String?, replies: [String]) {
            self.send = send
            self.replies = replies
        }
    }

    /// How a block is replayed, from its note: `as scanner|timeclock|stranger|root`, `identity provider`,
    /// `nobody signed in`, `WORKER signed in`, `approve WORKER` (the worker approves the device code a reply
    /// shows), `browse WORKER` (the worker signs in at the authorization URL a reply shows), `meanwhile sign
    /// in WORKER` / `meanwhile sign out REASON` (done after the first reply, in order), `after N
    /// connections` (N others held open first), `deviced OPTIONS` (on a broker of its own started with
    /// them), `policy kiosk-password.json` (on a broker of its own on that policy, the password flow allowed),
    /// `given N secrets of B bytes labelled L` (the caller adds them first); clauses separated by `;`.
    public struct Note {
        public var caller = "scanner"
        public var identityProvider = false
        /// nil: any state; "": nobody signed in; else the worker signed in.
        public var signedIn: String?
        public var approve: String?
        public var browse: String?
        /// The worker declines in the browser: the provider sends them back to the redirect URI with `access_denied`.
        public var decline = false
        /// The provider revokes the signed-in worker's refresh tokens before the block (`tools/idp revoke`).
        public var refreshTokenRevoked = false
        /// Actions taken while the block runs, the `k`th once the `k+1`th reply came: `sign in WORKER`,
        /// `sign out REASON`, `idle N s` (the broker's clock set N s after the last activity), `activity`.
        public var meanwhile: [String] = []
        /// The block runs on a broker of its own whose idle clock the replay moves (`deviced --clock-file`).
        public var testClock = false
        /// The block needs a Microsoft Entra External ID authority (native authentication): it is replayed by
        /// `NativeAuthPageReplayTests` against the scripted Microsoft stand-in, not against the local provider.
        public var nativeAuthority = false
        public var held = 0
        /// Options of a broker of the block's own (none: the suite's broker).
        public var daemonArguments: [String] = []
        /// The policy of a broker of the block's own (in `policies/`; none: the suite's broker).
        public var policy: String?
        /// Items the caller adds before the block: how many, the bytes of each secret, their label.
        public var given: (count: Int, bytes: Int, label: String)?
        /// Why the block is not replayed (it is illustrative, or needs what the replay does not set up).
        public var notReplayed: String?
    }

    /// A block: its page line, its note, and its connections (the block's paragraphs), each a list of messages.
    public struct Exchange {
        public var line: Int
        public var note: Note
        public var connections: [[Message]]
    }

    /// A page whose notes or blocks the replay cannot read: where and why.
    public struct PageError: Error, CustomStringConvertible {
        public var line: Int
        public var message: String
        public var description: String { "broker-api.md line \(line): \(message)" }

        public init(line: Int, message: String) {
            self.line = line
            self.message = message
        }
    }

    public static func exchanges() throws -> [Exchange] {
        let lines = try String(contentsOf: path, encoding: .utf8).split(
            separator: "\n",
            omittingEmptySubsequences: false
        ).map(String.init)
        var exchanges: [Exchange] = []
        var index = 0
        while index < lines.count {
            guard lines[index].hasPrefix("```") else {
                index += 1
                continue
            }
            let fence = index
            let language = lines[index].dropFirst(3)
            var body: [String] = []
            index += 1
            while index < lines.count && !lines[index].hasPrefix("```") {
                body.append(lines[index])
                index += 1
            }
            index += 1
            guard language.isEmpty, body.contains(where: { $0.hasPrefix("→ ") || $0.hasPrefix("← ") }) else { continue }
            let noteLine = lines[..<fence].lastIndex { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
            guard let noteLine, let note = try note(lines[noteLine], line: noteLine + 1) else {
                throw PageError(
                    line: fence + 1,
                    message:
                        "a recorded exchange without a `<!-- replay: … -->` or `<!-- not replayed: … -->` note before it"
                )
            }
            var connections: [[Message]] = [[]]
            for (offset, text) in body.enumerated() {
                if text.trimmingCharacters(in: .whitespaces).isEmpty {
                    if !(connections.last ?? []).isEmpty { connections.append([]) }
                    continue
                }
                let lineNumber = fence + 2 + offset
                guard let direction = text.first, direction == "→" || direction == "←",
                    let end = text.range(of: "\\0", options: .backwards)
                else {
                    throw PageError(
                        line: lineNumber,
                        message: "a line of an exchange is `→ MESSAGE\\0` or `← MESSAGE\\0`"
                    )
                }
                let message = String(text[text.index(text.startIndex, offsetBy: 2)..<end.lowerBound])
                if direction == "→" {
                    connections[connections.count - 1].append(Message(send: expandingPadding(message), replies: []))
                } else if var last = connections[connections.count - 1].popLast() {
                    last.replies.append(message)
                    connections[connections.count - 1].append(last)
                } else {
                    connections[connections.count - 1].append(Message(send: nil, replies: [message]))
                }
            }
            exchanges.append(Exchange(line: fence + 1, note: note, connections: connections.filter { !$0.isEmpty }))
        }
        return exchanges
    }

    /// A message to send with its `xxx…(1 MB)` written out: that many `x`.
    public static func expandingPadding(_ message: String) -> String {
        let abbreviation = "xxx…(1 MB)"
        return message.replacingOccurrences(of: abbreviation, with: String(repeating: "x", count: 1_000_000))
    }

    public static func note(_ text: String, line: Int) throws -> Note? {
        let text = text.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("<!-- not replayed: "), text.hasSuffix(" -->") {
            return Note(notReplayed: String(text.dropFirst("<!-- not replayed: ".count).dropLast(4)))
        }
        guard text.hasPrefix("<!-- replay: "), text.hasSuffix(" -->") else { return nil }
        var note = Note()
        for clause in text.dropFirst("<!-- replay: ".count).dropLast(4).split(separator: ";") {
            let words = clause.split(separator: " ").map(String.init)
            switch words.count {
            case 2 where words[0] == "as" && ["scanner", "timeclock", "stranger", "root"].contains(words[1]):
                note.caller = words[1]
            case 2 where words == ["identity", "provider"]: note.identityProvider = true
            case 3 where words == ["nobody", "signed", "in"]: note.signedIn = ""
            case 3 where words[1...] == ["signed", "in"]: note.signedIn = words[0]
            case 2 where words[0] == "approve": note.approve = words[1]
            case 2 where words[0] == "browse": note.browse = words[1]
            case 1 where words[0] == "decline": note.decline = true
            case 2 where words == ["native", "authority"]: note.nativeAuthority = true
            case 3 where words == ["refresh", "token", "revoked"]: note.refreshTokenRevoked = true
            case 4 where words == ["on", "a", "test", "clock"]: note.testClock = true
            case 4 where words[0...1] == ["meanwhile", "idle"] && Int(words[2]) != nil && words[3] == "s",
                2 where words == ["meanwhile", "activity"]:
                note.meanwhile.append(words[1...].joined(separator: " "))
            case 4 where words[0...2] == ["meanwhile", "sign", "in"],
                4 where words[0...2] == ["meanwhile", "sign", "out"]:
                note.meanwhile.append(words[1...].joined(separator: " "))
            case 3
            where words[0] == "after" && ["connection", "connections"].contains(words[2]) && Int(words[1]) != nil:
                note.held = Int(words[1]) ?? 0
            case 2... where words[0] == "deviced": note.daemonArguments = Array(words.dropFirst())
            case 2 where words == ["policy", "kiosk-password.json"]: note.policy = words[1]
            case 8
            where words[0] == "given" && words[2...3] == ["secrets", "of"] && words[5...6] == ["bytes", "labelled"]:
                guard let count = Int(words[1]), let bytes = Int(words[4]) else {
                    throw PageError(line: line, message: "the note's clause \"\(clause)\" needs numbers")
                }
                note.given = (count, bytes, words[7])
            default: throw PageError(line: line, message: "the note's clause \"\(clause)\" is none the replay knows")
            }
        }
        return note
    }
}

/// A JSON value as the wire has it, numbers kept apart from booleans and integers from floats.
public enum WireJSON: Decodable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([WireJSON])
    case object([String: WireJSON])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([WireJSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: WireJSON].self))
        }
    }

    public static func parse(_ text: String) throws -> WireJSON {
        try JSONDecoder().decode(WireJSON.self, from: Data(text.utf8))
    }

    public var kind: String {
        switch self {
        case .null: "null"
        case .bool: "bool"
        case .int, .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    public var description: String {
        switch self {
        case .null: "null"
        case .bool(let value): "\(value)"
        case .int(let value): "\(value)"
        case .double(let value): "\(value)"
        case .string(let value): "\"\(value)\""
        case .array(let values): "[\(values.map(\.description).joined(separator: ","))]"
        case .object(let fields):
            "{\(fields.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ","))}"
        }
    }
}

/// The page's rule for comparing a recorded reply with the wire's (the page says it under "How this page is
/// kept true"): `…` in a string is any text, `{…,` or `,…}` in an object other keys; the fields that change
/// from run to run are compared by type.
public enum WireComparison {
    public static let variableFields: Set<String> = [
        "accessToken", "idToken", "correlationId", "userCode", "verificationUriComplete", "signInId", "expiresOn",
        "expiresIn",
        "creationDate", "modificationDate", "startedAt", "signedInAt", "lastCall", "idleSeconds", "signOutIn",
        "sequence",
        "lastAuditSequence", "pid", "policySha256", "homeAccountId", "localAccountId", "realm", "deviceId",
        "deviceIdentifier", "stateDirectory",
        "version", "brokerVersion", "itemsRemoved",
    ]
    public static let otherKeys = "…"

    /// The page's reply made JSON: `{…,` and `,…}` as a key `…`, the page's identity provider as `host`.
    public static func expected(_ text: String, host: String) throws -> WireJSON {
        let json = text.replacingOccurrences(of: "127.0.0.1:4593", with: host)
            .replacingOccurrences(of: "{…,", with: "{\"…\":null,").replacingOccurrences(of: ",…}", with: ",\"…\":null}")
            .replacingOccurrences(of: "{…}", with: "{\"…\":null}")
        return try WireJSON.parse(json)
    }

    /// The first difference of `actual` from `expected`, by path; nil when they agree.
    public static func difference(
        _ expected: WireJSON,
        _ actual: WireJSON,
        path: String = "",
        key: String? = nil
    ) -> String? {
        let at = path.isEmpty ? "the reply" : path
        if let key, variableFields.contains(key) {
            return expected.kind == actual.kind
                ? nil : "\(at) is \(actual) (\(actual.kind)); the page has a \(expected.kind)"
        }
        switch (expected, actual) {
        case (.string(let pattern), .string(let value)) where pattern.contains("…"):
            return matches(value, pattern) ? nil : "\(at) is \(actual); the page has \(expected)"
        case (.double(let left), .int(let right)) where left == Double(right):
            return nil
        case (.object(let fields), .object(let actualFields)):
            let open = fields[otherKeys] != nil
            let missing = Set(fields.keys).subtracting(actualFields.keys).subtracting([otherKeys])
            if !missing.isEmpty { return "\(at) lacks \(missing.sorted()), which the page shows" }
            let extra = Set(actualFields.keys).subtracting(fields.keys)
            if !open && !extra.isEmpty { return "\(at) has \(extra.sorted()), which the page does not show" }
            for (name, value) in fields.sorted(by: { $0.key < $1.key }) where name != otherKeys {
                if let difference = difference(
                    value,
                    actualFields[name] ?? .null,
                    path: path.isEmpty ? name : "\(path).\(name)",
                    key: name
                ) {
                    return difference
                }
            }
            return nil
        case (.array(let values), .array(let actualValues)):
            guard values.count == actualValues.count else {
                return "\(at) has \(actualValues.count) elements: \(actual); the page shows \(values.count)"
            }
            for (offset, pair) in zip(values, actualValues).enumerated() {
                if let difference = difference(pair.0, pair.1, path: "\(path)[\(offset)]") { return difference }
            }
            return nil
        default:
            return expected == actual ? nil : "\(at) is \(actual); the page has \(expected)"
        }
    }

    /// Whether `value` is `pattern` with each `…` standing for any text.
    public static func matches(_ value: String, _ pattern: String) -> Bool {
        let pieces = pattern.components(separatedBy: "…")
        guard value.hasPrefix(pieces[0]), let last = pieces.last,
            value.count >= pieces[0].count + (pieces.count > 1 ? last.count : 0)
        else { return false }
        var rest = value.dropFirst(pieces[0].count)
        for piece in pieces.dropFirst().dropLast() {
            guard let range = rest.range(of: piece) else { return false }
            rest = rest[range.upperBound...]
        }
        return pieces.count == 1 ? rest.isEmpty : rest.hasSuffix(last)
    }
}
