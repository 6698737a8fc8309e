import Foundation

/// An ID token in MSAL's unified cache (`credential_type` `IdToken`): one per account, client and tenant.
///
/// Key `<home_account_id>-<environment>-idtoken-<client_id>-<realm>-` (the empty last part is the
/// target, which ID tokens do not have); keychain item type 2003, service `idtoken-<client_id>-<realm>-`.
public struct IdTokenCacheItem: Sendable, Equatable, CustomStringConvertible {
    /// `home_account_id`.
    public let homeAccountID: String
    /// `environment`.
    public let environment: String
    /// `client_id`.
    public let clientID: String
    /// `realm`: the tenant that issued the ID token.
    public let realm: String
    /// `secret`: the raw JWT. Never log it.
    public let secret: String
    var unknownFields: [String: JSONValue] = [:]

    /// The claims of the JWT's payload, decoded without verifying the signature; `nil` if it is not a JWT.
    public var claims: IdTokenClaims? { try? IdTokenClaims(jwt: secret) }

    /// The entry's key in the unified-cache JSON.
    public var cacheKey: String {
        [homeAccountID, environment, "idtoken", clientID, realm, ""].joined(separator: "-").lowercased()
    }

    public var description: String { "IdTokenCacheItem(\(cacheKey))" }
}

extension IdTokenCacheItem: CacheEntry {
    static let section = "IdToken"
    static let itemType: UInt32 = 2003

    init(json: [String: JSONValue]) throws(EntryError) {
        var reader = EntryReader(json)
        try reader.credentialType(CredentialType.idToken)
        secret = try reader.string("secret")
        homeAccountID = try reader.string("home_account_id")
        environment = try reader.string("environment")
        clientID = try reader.string("client_id")
        realm = try reader.string("realm")
        unknownFields = reader.remaining
    }

    var json: [String: JSONValue] {
        var writer = EntryWriter(unknown: unknownFields)
        writer.set("credential_type", CredentialType.idToken)
        writer.set("secret", secret)
        writer.set("home_account_id", homeAccountID)
        writer.set("environment", environment)
        writer.set("client_id", clientID)
        writer.set("realm", realm)
        return writer.object
    }

    var keychainKey: KeychainKey {
        KeychainKey(
            account: KeychainKey.accountAttribute(homeAccountID: homeAccountID, environment: environment),
            service: "idtoken-\(clientID)-\(realm)-".lowercased(),
            type: Self.itemType,
            generic: "idtoken-\(clientID)-\(realm)".lowercased()
        )
    }
}
