public import Foundation
import KeychainStore

/// MSAL's token cache (`MSIDDefaultTokenCacheAccessor`) over the keychain-like store: the unified-cache
/// schema that every MSAL library shares, laid out in keychain items as MSAL for iOS does.
///
/// Each entry is a generic-password item in an access group (by default MSAL's
/// `com.microsoft.adalcache`, so every app entitled to it shares sign-ins): account attribute
/// `<home_account_id>-<environment>`, services (each after the prefix `serviceNamespace`, which keeps them
/// apart from apps' items) `accesstoken-<client_id>-<realm>-<target>`,
/// `refreshtoken-<client_id or family_id>--`, `idtoken-<client_id>-<realm>-`, `<realm>` for accounts and
/// `appmetadata-<client_id>` (account attribute `<environment>`), types 2001, 2002, 2003, 1003 and
/// 3001; the item's secret is the entry's JSON. Apps only ever see the groups they are entitled to.
///
/// Every operation exists twice: taking a `StoreTransaction` (so the account manager can combine it
/// with other changes in one commit) and taking a `KeychainStore` (one transaction of its own). The
/// time is the store's clock (`StoreOptions.clock`).
///
/// ```swift
/// let cache = TokenCache()
/// try cache.save(response, context: context, as: app, in: store)
/// let token = try cache.accessToken(homeAccountID: id, environment: "login.microsoftonline.com",
///                                   clientID: clientID, realm: tenant, scopes: ["User.Read"], as: app, in: store)
/// ```
public struct TokenCache: Sendable {
    /// MSAL for iOS's default keychain sharing group.
    public static let defaultAccessGroup = AccessGroup.adalCache
    /// The keychain item types of the token cache (MSAL's: 2001 access token, 2002 refresh token, 2003 ID
    /// token, 1003 account, 3001 app metadata, 5001 account metadata). The broker keeps them: an app's
    /// keychain calls never see or write them (`AppIdentity.hidingItemTypes`), only its token calls.
    public static let itemTypes: Set<UInt32> = [
        AccessTokenCacheItem.itemType, RefreshTokenCacheItem.itemType, IdTokenCacheItem.itemType,
        AccountCacheItem.itemType, AppMetadataCacheItem.itemType, 5001,
    ]
    /// The prefix of every token-cache item's service (`org.sharedmode.token-cache/refreshtoken-…`): the
    /// token cache's keys live in a namespace of their own, which a broker refuses to apps' keychain calls,
    /// so no item an app adds (in `com.microsoft.adalcache` or any other group) can take a token's key,
    /// make a worker's sign-in fail as a duplicate, or tell whether a token exists.
    public static let serviceNamespace = "org.sharedmode.token-cache/"

    /// MSAL's service name `service` in the token cache's namespace.
    static func namespaced(_ service: String) -> String { serviceNamespace + service }

    /// Whether an app-given service name falls in the token cache's namespace (refused to apps).
    public static func isInNamespace(_ service: String) -> Bool { service.hasPrefix(serviceNamespace) }

    /// MSAL's default expiration buffer: an access token that expires within five minutes is not returned.
    public static let defaultExpirationBuffer: TimeInterval = 300

    /// Seconds before `expires_on` from which an access token counts as expired.
    public var expirationBuffer: TimeInterval

    /// A cache with MSAL's expiration buffer unless told otherwise.
    public init(expirationBuffer: TimeInterval = TokenCache.defaultExpirationBuffer) {
        self.expirationBuffer = expirationBuffer
    }

    /// Runs `body` in one write transaction of `store`, with errors as `TokenCacheError`s.
    func writing<T>(
        _ store: KeychainStore,
        _ body: @escaping (StoreTransaction) throws -> T
    ) throws(TokenCacheError) -> T {
        try tokenCacheErrors { try store.writeTransaction(body) }
    }

    /// Runs `body` in one read transaction of `store`, with errors as `TokenCacheError`s.
    func reading<T>(
        _ store: KeychainStore,
        _ body: @escaping (StoreTransaction) throws -> T
    ) throws(TokenCacheError) -> T {
        try tokenCacheErrors { try store.readTransaction(body) }
    }
}
