public import Foundation

/// An access token in MSAL's unified cache (`credential_type` `AccessToken`; `MSIDCredentialCacheItem`
/// in MSAL for iOS, `MsalAccessTokenCacheItem` in MSAL.NET).
///
/// Unified-cache key `<home_account_id>-<environment>-accesstoken-<client_id>-<realm>-<target>`;
/// keychain item type 2001, service `accesstoken-<client_id>-<realm>-<target>`. Fields written:
/// `credential_type`, `secret`, `home_account_id`, `environment`, `client_id`, `realm`, `target`,
/// `token_type`, `cached_at`, `expires_on`, `extended_expires_on`, optional `refresh_on`; times are Unix
/// seconds as strings. Unknown fields are kept.
public struct AccessTokenCacheItem: Sendable, Equatable, CustomStringConvertible {
    /// `home_account_id`: `<uid>.<utid>` from `client_info`.
    public let homeAccountID: String
    /// `environment`: the authority host (`login.microsoftonline.com`, `127.0.0.1:4593`).
    public let environment: String
    /// `client_id`: the app registration the token was issued to.
    public let clientID: String
    /// `realm`: the tenant.
    public let realm: String
    /// `target`: the granted scopes, space-joined and sorted.
    public let target: String
    /// `secret`: the access token itself. Never log it.
    public let secret: String
    /// `token_type`, e.g. `Bearer`.
    public let tokenType: String?
    /// `cached_at`.
    public let cachedAt: Date
    /// `expires_on`.
    public let expiresOn: Date
    /// `extended_expires_on` (AAD's `ext_expires_in`): how long the token may serve when the STS is down.
    public let extendedExpiresOn: Date?
    /// `refresh_on` (AAD's `refresh_in`): when MSAL refreshes proactively.
    public let refreshOn: Date?
    var unknownFields: [String: JSONValue] = [:]

    /// The scopes of `target`, split once when the entry is read (every silent token from the cache returns them).
    public let scopes: [String]

    init(
        homeAccountID: String,
        environment: String,
        clientID: String,
        realm: String,
        target: String,
        secret: String,
        tokenType: String?,
        cachedAt: Date,
        expiresOn: Date,
        extendedExpiresOn: Date?,
        refreshOn: Date?
    ) {
        self.homeAccountID = homeAccountID
        self.environment = environment
        self.clientID = clientID
        self.realm = realm
        self.target = target
        scopes = Scopes.split(target)
        self.secret = secret
        self.tokenType = tokenType
        self.cachedAt = cachedAt
        self.expiresOn = expiresOn
        self.extendedExpiresOn = extendedExpiresOn
        self.refreshOn = refreshOn
    }

    /// Whether the token has expired at `now`, or will within `buffer` seconds (MSAL uses 300).
    public func isExpired(at now: Date, buffer: TimeInterval = 0) -> Bool {
        expiresOn.timeIntervalSince(now) <= buffer
    }

    /// The entry's key in the unified-cache JSON.
    public var cacheKey: String {
        [homeAccountID, environment, "accesstoken", clientID, realm, target].joined(separator: "-").lowercased()
    }

    public var description: String { "AccessTokenCacheItem(\(cacheKey), expires_on \(UnixTime.string(expiresOn)))" }
}

extension AccessTokenCacheItem: CacheEntry {
    static let section = "AccessToken"
    static let itemType: UInt32 = 2001

    init(json: [String: JSONValue]) throws(EntryError) {
        var reader = EntryReader(json)
        try reader.credentialType(CredentialType.accessToken)
        secret = try reader.string("secret")
        homeAccountID = try reader.string("home_account_id")
        environment = try reader.string("environment")
        clientID = try reader.string("client_id")
        realm = try reader.string("realm")
        target = try reader.string("target")
        scopes = Scopes.split(target)
        tokenType = try reader.optionalString("token_type")
        cachedAt = try reader.time("cached_at")
        expiresOn = try reader.time("expires_on")
        extendedExpiresOn = try reader.optionalTime("extended_expires_on")
        refreshOn = try reader.optionalTime("refresh_on")
        unknownFields = reader.remaining
    }

    var json: [String: JSONValue] {
        var writer = EntryWriter(unknown: unknownFields)
        writer.set("credential_type", CredentialType.accessToken)
        writer.set("secret", secret)
        writer.set("home_account_id", homeAccountID)
        writer.set("environment", environment)
        writer.set("client_id", clientID)
        writer.set("realm", realm)
        writer.set("target", target)
        writer.set("token_type", tokenType)
        writer.set("cached_at", cachedAt)
        writer.set("expires_on", expiresOn)
        writer.set("extended_expires_on", extendedExpiresOn)
        writer.set("refresh_on", refreshOn)
        return writer.object
    }

    var keychainKey: KeychainKey {
        KeychainKey(
            account: KeychainKey.accountAttribute(homeAccountID: homeAccountID, environment: environment),
            service: "accesstoken-\(clientID)-\(realm)-\(target)".lowercased(),
            type: Self.itemType,
            generic: "accesstoken-\(clientID)-\(realm)".lowercased()
        )
    }
}
