/// Per-app metadata in MSAL's unified cache (`MSIDAppMetadataCacheItem`): whether the client belongs
/// to a family of client ids (FOCI) that share family refresh tokens.
///
/// Key `appmetadata-<environment>-<client_id>`; keychain item type 3001 with account attribute
/// `<environment>`, service `appmetadata-<client_id>` and generic the family id (as MSAL for iOS).
public struct AppMetadataCacheItem: Sendable, Equatable, CustomStringConvertible {
    /// `client_id`.
    public let clientID: String
    /// `environment`.
    public let environment: String
    /// `family_id`: the client's family (`"1"`), absent when it is in none.
    public let familyID: String?
    var unknownFields: [String: JSONValue] = [:]

    /// The entry's key in the unified-cache JSON.
    public var cacheKey: String { "appmetadata-\(environment)-\(clientID)".lowercased() }

    public var description: String { "AppMetadataCacheItem(\(cacheKey), family_id \(familyID ?? "none"))" }
}

extension AppMetadataCacheItem: CacheEntry {
    static let section = "AppMetadata"
    static let itemType: UInt32 = 3001

    init(json: [String: JSONValue]) throws(EntryError) {
        var reader = EntryReader(json)
        clientID = try reader.string("client_id")
        environment = try reader.string("environment")
        familyID = try reader.optionalString("family_id")
        unknownFields = reader.remaining
    }

    var json: [String: JSONValue] {
        var writer = EntryWriter(unknown: unknownFields)
        writer.set("client_id", clientID)
        writer.set("environment", environment)
        writer.set("family_id", familyID)
        return writer.object
    }

    var keychainKey: KeychainKey {
        KeychainKey(
            account: environment.lowercased(),
            service: "appmetadata-\(clientID)".lowercased(),
            type: Self.itemType,
            generic: (familyID ?? "").isEmpty ? nil : familyID
        )
    }
}
