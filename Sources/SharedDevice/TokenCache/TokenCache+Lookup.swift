public import KeychainStore

extension TokenCache {
    /// The access token for an account, client and tenant whose scopes include every requested scope
    /// (MSAL's silent lookup; the reserved `openid`, `profile`, `offline_access` need not be cached),
    /// or `nil`. A token that has expired, or expires within `expirationBuffer`, is never returned.
    /// When several match, the one that lives longest.
    /// - Parameter accessGroup: the group to search; `nil` searches every group of the caller.
    public func accessToken(
        homeAccountID: String,
        environment: String,
        clientID: String,
        realm: String,
        scopes: [String],
        as caller: AppIdentity,
        accessGroup: String? = nil,
        in transaction: StoreTransaction
    ) throws(TokenCacheError) -> AccessTokenCacheItem? {
        try tokenCacheErrors {
            let now = transaction.now
            let account = KeychainKey.accountAttribute(homeAccountID: homeAccountID, environment: environment)
            return try CacheItems(transaction: transaction, caller: caller)
                .entries(AccessTokenCacheItem.self, account: account, group: accessGroup).map(\.entry)
                .filter { token in
                    token.clientID.lowercased() == clientID.lowercased()
                        && token.realm.lowercased() == realm.lowercased()
                        && Scopes.target(token.target, covers: scopes)
                        && !token.isExpired(at: now, buffer: expirationBuffer)
                }
                .max { $0.expiresOn < $1.expiresOn }
        }
    }

    /// `accessToken(homeAccountID:environment:clientID:realm:scopes:as:accessGroup:in:)` in one read transaction.
    public func accessToken(
        homeAccountID: String,
        environment: String,
        clientID: String,
        realm: String,
        scopes: [String],
        as caller: AppIdentity,
        accessGroup: String? = nil,
        in store: KeychainStore
    ) throws(TokenCacheError) -> AccessTokenCacheItem? {
        try reading(store) { transaction in
            try self.accessToken(
                homeAccountID: homeAccountID,
                environment: environment,
                clientID: clientID,
                realm: realm,
                scopes: scopes,
                as: caller,
                accessGroup: accessGroup,
                in: transaction
            )
        }
    }

    /// The app's own refresh token for an account (key `…-refreshtoken-<client_id>--`), or `nil`.
    public func refreshToken(
        homeAccountID: String,
        environment: String,
        clientID: String,
        as caller: AppIdentity,
        accessGroup: String? = nil,
        in transaction: StoreTransaction
    ) throws(TokenCacheError) -> RefreshTokenCacheItem? {
        try refreshToken(
            homeAccountID: homeAccountID,
            environment: environment,
            keyedBy: clientID,
            as: caller,
            accessGroup: accessGroup,
            in: transaction
        )
    }

    /// `refreshToken(homeAccountID:environment:clientID:as:accessGroup:in:)` in one read transaction.
    public func refreshToken(
        homeAccountID: String,
        environment: String,
        clientID: String,
        as caller: AppIdentity,
        accessGroup: String? = nil,
        in store: KeychainStore
    ) throws(TokenCacheError) -> RefreshTokenCacheItem? {
        try reading(store) { transaction in
            try self.refreshToken(
                homeAccountID: homeAccountID,
                environment: environment,
                clientID: clientID,
                as: caller,
                accessGroup: accessGroup,
                in: transaction
            )
        }
    }

    /// The family refresh token (FOCI) of an account, shared by every client of the family
    /// (key `…-refreshtoken-<family_id>--`), or `nil`.
    public func familyRefreshToken(
        homeAccountID: String,
        environment: String,
        familyID: String,
        as caller: AppIdentity,
        accessGroup: String? = nil,
        in transaction: StoreTransaction
    ) throws(TokenCacheError) -> RefreshTokenCacheItem? {
        try refreshToken(
            homeAccountID: homeAccountID,
            environment: environment,
            keyedBy: familyID,
            as: caller,
            accessGroup: accessGroup,
            in: transaction
        )
    }

    /// `familyRefreshToken(homeAccountID:environment:familyID:as:accessGroup:in:)` in one read transaction.
    public func familyRefreshToken(
        homeAccountID: String,
        environment: String,
        familyID: String,
        as caller: AppIdentity,
        accessGroup: String? = nil,
        in store: KeychainStore
    ) throws(TokenCacheError) -> RefreshTokenCacheItem? {
        try reading(store) { transaction in
            try self.familyRefreshToken(
                homeAccountID: homeAccountID,
                environment: environment,
                familyID: familyID,
                as: caller,
                accessGroup: accessGroup,
                in: transaction
            )
        }
    }

    /// The ID token of an account for a client and tenant (key `…-idtoken-<client_id>-<realm>-`), or `nil`.
    public func idToken(
        homeAccountID: String,
        environment: String,
        clientID: String,
        realm: String,
        as caller: AppIdentity,
        accessGroup: String? = nil,
        in transaction: StoreTransaction
    ) throws(TokenCacheError) -> IdTokenCacheItem? {
        try tokenCacheErrors {
            try CacheItems(transaction: transaction, caller: caller)
                .entries(
                    IdTokenCacheItem.self,
                    account: KeychainKey.accountAttribute(homeAccountID: homeAccountID, environment: environment),
                    service: "idtoken-\(clientID)-\(realm)-".lowercased(),
                    group: accessGroup
                )
                .first?.entry
        }
    }

    /// The app metadata of a client (its FOCI family), or `nil`.
    public func appMetadata(
        clientID: String,
        environment: String,
        as caller: AppIdentity,
        accessGroup: String? = nil,
        in transaction: StoreTransaction
    ) throws(TokenCacheError) -> AppMetadataCacheItem? {
        try tokenCacheErrors {
            try CacheItems(transaction: transaction, caller: caller)
                .entries(
                    AppMetadataCacheItem.self,
                    account: environment.lowercased(),
                    service: "appmetadata-\(clientID)".lowercased(),
                    group: accessGroup
                )
                .first?.entry
        }
    }

    private func refreshToken(
        homeAccountID: String,
        environment: String,
        keyedBy client: String,
        as caller: AppIdentity,
        accessGroup: String?,
        in transaction: StoreTransaction
    ) throws(TokenCacheError) -> RefreshTokenCacheItem? {
        try tokenCacheErrors {
            try CacheItems(transaction: transaction, caller: caller)
                .entries(
                    RefreshTokenCacheItem.self,
                    account: KeychainKey.accountAttribute(homeAccountID: homeAccountID, environment: environment),
                    service: "refreshtoken-\(client)--".lowercased(),
                    group: accessGroup
                )
                .first?.entry
        }
    }
}
