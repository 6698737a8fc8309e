public import Foundation

/// A refresh token in MSAL's unified cache (`credential_type` `RefreshToken`).
///
/// Refresh tokens are cross-tenant, so the key has an empty realm and an empty target:
/// `<home_account_id>-<environment>-refreshtoken-<client_id>--`. A family refresh token (FOCI, AAD's
/// `foci` response field) is keyed by its `family_id` instead of the client id:
/// `…-refreshtoken-1--`; like MSAL for iOS, a FOCI response stores both the app's own refresh token
/// and the family one. Keychain item type 2002, service `refreshtoken-<client_id or family_id>--`.
public struct RefreshTokenCacheItem: Sendable, Equatable, CustomStringConvertible {
    /// `home_account_id`.
    public let homeAccountID: String
    /// `environment`.
    public let environment: String
    /// `client_id`: the app that received the token (also set on family tokens).
    public let clientID: String
    /// `family_id`: set on family refresh tokens (`"1"` for Microsoft's first-party family).
    public let familyID: String?
    /// `secret`: the refresh token itself. Never log it.
    public let secret: String
    /// `last_modification_time` (as MSAL Python writes it).
    public let lastModificationTime: Date?
    var unknownFields: [String: JSONValue] = [:]

    /// Whether this is a family refresh token (FRT).
    public var isFamilyRefreshToken: Bool { !(familyID ?? "").isEmpty }

    /// The entry's key in the unified-cache JSON.
    public var cacheKey: String {
        [homeAccountID, environment, "refreshtoken", keyClient, "", ""].joined(separator: "-").lowercased()
    }

    /// The family id for a family token, else the client id.
    var keyClient: String { isFamilyRefreshToken ? familyID! : clientID }

    public var description: String { "RefreshTokenCacheItem(\(cacheKey))" }
}

extension RefreshTokenCacheItem: CacheEntry {
    static let section = "RefreshToken"
    static let itemType: UInt32 = 2002

    init(json: [String: JSONValue]) throws(EntryError) {
        var reader = EntryReader(json)
        try reader.credentialType(CredentialType.refreshToken)
        secret = try reader.string("secret")
        homeAccountID = try reader.string("home_account_id")
        environment = try reader.string("environment")
        clientID = try reader.string("client_id")
        familyID = try reader.optionalString("family_id")
        lastModificationTime = try reader.optionalTime("last_modification_time")
        unknownFields = reader.remaining
    }

    var json: [String: JSONValue] {
        var writer = EntryWriter(unknown: unknownFields)
        writer.set("credential_type", CredentialType.refreshToken)
        writer.set("secret", secret)
        writer.set("home_account_id", homeAccountID)
        writer.set("environment", environment)
        writer.set("client_id", clientID)
        writer.set("family_id", familyID)
        writer.set("last_modification_time", lastModificationTime)
        return writer.object
    }

    var keychainKey: KeychainKey {
        KeychainKey(
            account: KeychainKey.accountAttribute(homeAccountID: homeAccountID, environment: environment),
            service: "refreshtoken-\(keyClient)--".lowercased(),
            type: Self.itemType,
            generic: "refreshtoken-\(keyClient)-".lowercased()
        )
    }
}
