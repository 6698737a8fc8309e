public import KeychainStore

extension TokenCache {
    /// Every cached account the caller can see (MSAL's `allAccounts`), each with the claims of its ID
    /// token, sorted by home account id, environment and realm. An account in several of the caller's
    /// groups is listed once, from the first group in the caller's order.
    /// - Parameter clientID: whose ID token supplies the claims when several clients have one; by
    ///   default the first by client id.
    public func accounts(
        clientID: String? = nil,
        as caller: AppIdentity,
        accessGroup: String? = nil,
        in transaction: StoreTransaction
    ) throws(TokenCacheError) -> [CachedAccount] {
        try cachedAccounts(
            homeAccountID: nil,
            environment: nil,
            clientID: clientID,
            as: caller,
            accessGroup: accessGroup,
            in: transaction
        )
    }

    /// `accounts(clientID:as:accessGroup:in:)` in one read transaction.
    public func accounts(
        clientID: String? = nil,
        as caller: AppIdentity,
        accessGroup: String? = nil,
        in store: KeychainStore
    ) throws(TokenCacheError) -> [CachedAccount] {
        try reading(store) { transaction in
            try self.accounts(clientID: clientID, as: caller, accessGroup: accessGroup, in: transaction)
        }
    }

    /// The cached account with this home account id and environment (MSAL's `accountForIdentifier`),
    /// in `realm` when given (else the first realm by name), with its ID token's claims; `nil` if none.
    public func account(
        homeAccountID: String,
        environment: String,
        realm: String? = nil,
        clientID: String? = nil,
        as caller: AppIdentity,
        accessGroup: String? = nil,
        in transaction: StoreTransaction
    ) throws(TokenCacheError) -> CachedAccount? {
        try cachedAccounts(
            homeAccountID: homeAccountID,
            environment: environment,
            clientID: clientID,
            as: caller,
            accessGroup: accessGroup,
            in: transaction
        )
        .first { candidate in realm.map { candidate.account.realm.lowercased() == $0.lowercased() } ?? true }
    }

    /// `account(homeAccountID:environment:realm:clientID:as:accessGroup:in:)` in one read transaction.
    public func account(
        homeAccountID: String,
        environment: String,
        realm: String? = nil,
        clientID: String? = nil,
        as caller: AppIdentity,
        accessGroup: String? = nil,
        in store: KeychainStore
    ) throws(TokenCacheError) -> CachedAccount? {
        try reading(store) { transaction in
            try self.account(
                homeAccountID: homeAccountID,
                environment: environment,
                realm: realm,
                clientID: clientID,
                as: caller,
                accessGroup: accessGroup,
                in: transaction
            )
        }
    }

    private func cachedAccounts(
        homeAccountID: String?,
        environment: String?,
        clientID: String?,
        as caller: AppIdentity,
        accessGroup: String?,
        in transaction: StoreTransaction
    ) throws(TokenCacheError) -> [CachedAccount] {
        try tokenCacheErrors {
            let items = CacheItems(transaction: transaction, caller: caller)
            let attribute = homeAccountID.map {
                KeychainKey.accountAttribute(homeAccountID: $0, environment: environment ?? "")
            }
            var seen = Set<String>()
            let accounts = try items.entries(AccountCacheItem.self, account: attribute, group: accessGroup).map(\.entry)
                .filter { seen.insert($0.cacheKey).inserted }
            let idTokens = try items.entries(IdTokenCacheItem.self, account: attribute, group: accessGroup).map(\.entry)
                .sorted { Self.claimsOrder($0, clientID) < Self.claimsOrder($1, clientID) }
            return
                accounts
                .sorted { ($0.homeAccountID, $0.environment, $0.realm) < ($1.homeAccountID, $1.environment, $1.realm) }
                .map { account in
                    CachedAccount(account: account, idTokenClaims: idTokens.first { $0.belongs(to: account) }?.claims)
                }
        }
    }

    /// Which ID token's claims describe an account: `clientID`'s first, then by client id.
    private static func claimsOrder(_ idToken: IdTokenCacheItem, _ clientID: String?) -> (Int, String) {
        (idToken.clientID.lowercased() == clientID?.lowercased() ? 0 : 1, idToken.clientID)
    }
}

extension IdTokenCacheItem {
    /// Whether the ID token was issued to `account` in its tenant.
    func belongs(to account: AccountCacheItem) -> Bool {
        homeAccountID.lowercased() == account.homeAccountID.lowercased()
            && environment.lowercased() == account.environment.lowercased()
            && realm.lowercased() == account.realm.lowercased()
    }
}
