/// An account as an app sees it (`MSALAccount`): the cached account entry with the claims of its
/// ID token (`accountClaims`).
public struct CachedAccount: Sendable, Equatable {
    /// The unified-cache account entry.
    public var account: AccountCacheItem
    /// The claims of the account's ID token in its tenant, when one is cached.
    public var idTokenClaims: IdTokenClaims?

    /// `home_account_id` (MSAL's `homeAccountId.identifier`).
    public var homeAccountID: String { account.homeAccountID }
    /// The authority host.
    public var environment: String { account.environment }
    /// The displayable username (`preferred_username`, `upn` or `email`).
    public var username: String? { idTokenClaims?.username ?? account.username.flatMap { $0.isEmpty ? nil : $0 } }
    /// The user's display name (`name`).
    public var name: String? { idTokenClaims?.name ?? account.name }
    /// The object id in the account's tenant (`oid`, MSAL's `local_account_id`).
    public var objectID: String? { idTokenClaims?.localAccountID ?? account.localAccountID }
    /// The tenant id (`tid`), else the account's realm.
    public var tenantID: String { idTokenClaims?.tenantID ?? account.realm }
}
