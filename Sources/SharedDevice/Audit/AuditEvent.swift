public import Foundation

/// The kind of an audit event, a dotted name such as `device.provisioned`. Extensible: the account
/// manager adds its own (`account.signed_in`, `account.signed_out`, …).
public struct AuditEventType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// A device was provisioned from a policy for the first time (or after `deprovision`).
    public static let deviceProvisioned = AuditEventType("device.provisioned")
    /// A provisioned device received a changed policy with the same mode.
    public static let policyUpdated = AuditEventType("policy.updated")
    /// A forced re-provisioning changed the device's mode and wiped every app's credentials.
    public static let deviceModeChanged = AuditEventType("device.mode_changed")
    /// The device was deprovisioned: app data and keys crypto-shredded.
    public static let deviceDeprovisioned = AuditEventType("device.deprovisioned")
    /// An app asked for something its policy entitlements do not allow, or the policy does not list it.
    public static let keychainAccessDenied = AuditEventType("keychain.access_denied")

    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// An event to record: everything but the sequence number and time, which the log assigns.
/// Never put a secret (token, key, password) in any field.
public struct AuditEntry: Sendable, Equatable {
    public var type: AuditEventType
    /// Who acted: an app id, or `devicectl (uid 0 root)` for the administrator's CLI.
    public var actor: String
    /// The account concerned, when there is one (a username or home account id; never a token).
    public var account: String?
    /// Why: `user`, `shift-end`, `idle`, `admin`, or a short explanation.
    public var reason: String?
    /// Ties together the events of one operation (a shift switch logs several); a fresh UUID by default.
    public var correlationID: String
    /// Further non-secret facts (policy hash, counts, app id asked for).
    public var details: [String: String]

    public init(
        type: AuditEventType,
        actor: String,
        account: String? = nil,
        reason: String? = nil,
        correlationID: String = CorrelationID.make(),
        details: [String: String] = [:]
    ) {
        self.type = type
        self.actor = actor
        self.account = account
        self.reason = reason
        self.correlationID = correlationID
        self.details = details
    }
}

/// A recorded audit event.
public struct AuditEvent: Sendable, Equatable, Encodable {
    /// Position in the log, from 1, without gaps.
    public let sequence: Int64
    /// When it was recorded (UTC, millisecond precision).
    public let time: Date
    /// The time exactly as recorded and hashed into the chain (`2026-11-22T08:00:00.123Z`); shown and
    /// exported as is, so a printed time selects its own event with `--since`/`--until`.
    public let recordedTime: String
    public let type: AuditEventType
    public let actor: String
    public let account: String?
    public let reason: String?
    public let correlationID: String
    public let details: [String: String]

    enum CodingKeys: String, CodingKey {
        case sequence, time, type, actor, account, reason
        case correlationID = "correlationId"
        case details
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(sequence, forKey: .sequence)
        try container.encode(recordedTime, forKey: .time)
        try container.encode(type, forKey: .type)
        try container.encode(actor, forKey: .actor)
        try container.encode(account, forKey: .account)
        try container.encode(reason, forKey: .reason)
        try container.encode(correlationID, forKey: .correlationID)
        try container.encode(details, forKey: .details)
    }
}

/// Which events to read.
public struct AuditFilter: Sendable, Equatable {
    public var types: Set<AuditEventType>
    public var since: Date?
    public var until: Date?
    public var account: String?
    /// Only events after this sequence number (for following a growing log).
    public var afterSequence: Int64

    public init(
        types: Set<AuditEventType> = [],
        since: Date? = nil,
        until: Date? = nil,
        account: String? = nil,
        afterSequence: Int64 = 0
    ) {
        self.types = types
        self.since = since
        self.until = until
        self.account = account
        self.afterSequence = afterSequence
    }

    func matches(_ event: AuditEvent) -> Bool {
        (types.isEmpty || types.contains(event.type))
            && (since.map { event.time >= $0 } ?? true)
            && (until.map { event.time <= $0 } ?? true)
            && (account.map { event.account == $0 } ?? true)
    }
}

/// The log's time format: ISO 8601 UTC with milliseconds, `2026-11-22T08:00:00.000Z`.
enum AuditTime {
    static func format(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt))
    }

    static func parse(_ text: String) -> Date? {
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt).parse(text) {
            return date
        }
        return try? Date.ISO8601FormatStyle(timeZone: .gmt).parse(text)
    }
}
