/// An account in MSAL's unified cache (`MSIDAccountCacheItem`): one per home account, environment and tenant.
///
/// Key `<home_account_id>-<environment>-<realm>`; keychain item type 1003, service `<realm>`, generic
/// the username. Fields: `home_account_id`, `environment`, `realm`, `local_account_id` (the `oid`),
/// `username`, `authority_type` (`MSSTS`), and as MSAL for iOS writes them `name`, `given_name`,
/// `family_name` and the raw `client_info` when known.
public struct AccountCacheItem: Sendable, Equatable, CustomStringConvertible {
    /// MSAL's authority type for AAD v2 / Microsoft identity platform and OpenID Connect authorities.
    public static let msstsAuthorityType = "MSSTS"

    /// `home_account_id`: `<uid>.<utid>`.
    public let homeAccountID: String
    /// `environment`.
    public let environment: String
    /// `realm`: the tenant.
    public let realm: String
    /// `local_account_id`: the object id in this tenant (`oid`, else `sub`).
    public let localAccountID: String?
    /// `username`: `preferred_username`, `upn` or `email`; empty when the ID token has none.
    public let username: String?
    /// `authority_type`: `MSSTS`.
    public let authorityType: String
    /// `name`.
    public let name: String?
    /// `given_name`.
    public let givenName: String?
    /// `family_name`.
    public let familyName: String?
    /// `client_info`: the raw base64url value from the token response.
    public let clientInfo: String?
    var unknownFields: [String: JSONValue] = [:]

    /// The entry's key in the unified-cache JSON.
    public var cacheKey: String {
        [homeAccountID, environment, realm].joined(separator: "-").lowercased()
    }

    public var description: String { "AccountCacheItem(\(cacheKey))" }
}

extension AccountCacheItem: CacheEntry {
    static let section = "Account"
    static let itemType: UInt32 = 1003

    init(json: [String: JSONValue]) throws(EntryError) {
        var reader = EntryReader(json)
        homeAccountID = try reader.string("home_account_id")
        environment = try reader.string("environment")
        realm = try reader.string("realm")
        localAccountID = try reader.optionalString("local_account_id")
        username = try reader.optionalString("username")
        authorityType = try reader.string("authority_type")
        name = try reader.optionalString("name")
        givenName = try reader.optionalString("given_name")
        familyName = try reader.optionalString("family_name")
        clientInfo = try reader.optionalString("client_info")
        unknownFields = reader.remaining
    }

    var json: [String: JSONValue] {
        var writer = EntryWriter(unknown: unknownFields)
        writer.set("home_account_id", homeAccountID)
        writer.set("environment", environment)
        writer.set("realm", realm)
        writer.set("local_account_id", localAccountID)
        writer.set("username", username)
        writer.set("authority_type", authorityType)
        writer.set("name", name)
        writer.set("given_name", givenName)
        writer.set("family_name", familyName)
        writer.set("client_info", clientInfo)
        return writer.object
    }

    var keychainKey: KeychainKey {
        let generic = (username ?? "").isEmpty ? nil : username!.lowercased()
        return KeychainKey(
            account: KeychainKey.accountAttribute(homeAccountID: homeAccountID, environment: environment),
            service: realm.lowercased(),
            type: Self.itemType,
            generic: generic
        )
    }
}
