import Foundation

/// One entry of MSAL's unified cache: its JSON object (known fields plus any unknown ones, which are
/// kept so entries written by other MSAL libraries survive a load/save round trip), its key in the
/// unified-cache JSON, and where it lives in the keychain.
protocol CacheEntry: Sendable {
    /// The top-level section of the unified-cache JSON (`AccessToken`, `Account`, …).
    static var section: String { get }
    /// The keychain item type (`kSecAttrType`) MSAL gives this kind of entry.
    static var itemType: UInt32 { get }
    /// Decodes an entry, keeping the fields it does not know.
    init(json: [String: JSONValue]) throws(EntryError)
    /// The entry's JSON object, unknown fields included.
    var json: [String: JSONValue] { get }
    /// The entry's key in the unified-cache JSON (lowercased, parts joined by `-`).
    var cacheKey: String { get }
    /// The entry's keychain attributes.
    var keychainKey: KeychainKey { get }
}

/// What is wrong with one field of a cache entry.
struct EntryError: Error {
    var field: String?
    var problem: String
}

/// The keychain attributes of one cache entry, as MSAL for iOS writes them (all lowercased).
struct KeychainKey: Equatable {
    /// `kSecAttrAccount`: `<home_account_id>-<environment>`, or the environment for app metadata.
    var account: String
    /// `kSecAttrService`, e.g. `accesstoken-<client_id>-<realm>-<target>`.
    var service: String
    /// `kSecAttrType`: 2001, 2002, 2003, 1003 or 3001.
    var type: UInt32
    /// `kSecAttrGeneric`, e.g. `accesstoken-<client_id>-<realm>`, the username, the family id.
    var generic: String?

    /// `<home_account_id>-<environment>`, lowercased: the account attribute of every credential and account.
    static func accountAttribute(homeAccountID: String, environment: String) -> String {
        "\(homeAccountID)-\(environment)".lowercased()
    }
}

/// MSAL's `credential_type` values.
enum CredentialType {
    static let accessToken = "AccessToken"
    static let refreshToken = "RefreshToken"
    static let idToken = "IdToken"
}

/// Reads the known fields of an entry's JSON object; whatever it does not take is the entry's unknown fields.
struct EntryReader {
    private(set) var remaining: [String: JSONValue]

    init(_ object: [String: JSONValue]) { remaining = object }

    /// Checks `credential_type` (and takes it: it is written back from the entry's kind).
    mutating func credentialType(_ expected: String) throws(EntryError) {
        let found = try string("credential_type")
        guard found == expected else {
            throw EntryError(field: "credential_type", problem: "is not \(expected)")
        }
    }

    mutating func string(_ key: String) throws(EntryError) -> String {
        guard let value = try optionalString(key) else { throw EntryError(field: key, problem: "is missing") }
        return value
    }

    /// A string field; `null` counts as absent.
    mutating func optionalString(_ key: String) throws(EntryError) -> String? {
        switch remaining.removeValue(forKey: key) {
        case nil, .null?: return nil
        case .string(let value)?: return value
        case let other?: throw EntryError(field: key, problem: "must be a string, not \(other.kind)")
        }
    }

    mutating func time(_ key: String) throws(EntryError) -> Date {
        guard let value = try optionalTime(key) else { throw EntryError(field: key, problem: "is missing") }
        return value
    }

    /// A time in Unix seconds, written as a string by MSAL (a number is accepted too).
    mutating func optionalTime(_ key: String) throws(EntryError) -> Date? {
        let seconds: Double?
        switch remaining.removeValue(forKey: key) {
        case nil, .null?: return nil
        case .string(let text)?: seconds = Double(text)
        case .number(let number)?: seconds = number
        case let other?: throw EntryError(field: key, problem: "must be Unix seconds as a string, not \(other.kind)")
        }
        guard let seconds, seconds.isFinite else {
            throw EntryError(field: key, problem: "must be Unix seconds as a string")
        }
        return Date(timeIntervalSince1970: seconds)
    }
}

/// Builds an entry's JSON object on top of its unknown fields.
struct EntryWriter {
    private(set) var object: [String: JSONValue]

    init(unknown: [String: JSONValue]) { object = unknown }

    mutating func set(_ key: String, _ value: String?) {
        if let value { object[key] = .string(value) }
    }

    mutating func set(_ key: String, _ value: Date?) {
        if let value { object[key] = .string(UnixTime.string(value)) }
    }
}

/// MSAL's times: whole Unix seconds, as strings.
enum UnixTime {
    static func seconds(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970.rounded(.down)) }
    static func string(_ date: Date) -> String { String(seconds(date)) }
}
