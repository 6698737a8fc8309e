public import KeychainStore

extension TokenCache {
    /// Writes a token response to the cache (MSAL's `saveTokensWithConfiguration:response:`): the
    /// account, ID token, access token, refresh token (and for a FOCI client the family refresh token)
    /// and app metadata, each replacing the item with the same key in `accessGroup`.
    ///
    /// As MSAL does, access tokens of the same account, client and realm whose scopes intersect the new
    /// token's are removed first, so one scope is never served by two tokens. Parts the response lacks
    /// (no `refresh_token` on a rolling refresh, no `id_token`) leave the cached ones untouched.
    /// `cached_at` is the transaction's clock. See `ResponseAccount` for how `home_account_id` is derived.
    /// - Returns: the entries written.
    /// - Throws: `invalidTokenResponse`; `store` (for example `missingEntitlement` when the caller is not
    ///   entitled to `accessGroup`).
    @discardableResult
    public func save(
        _ response: TokenResponse,
        context: TokenRequestContext,
        as caller: AppIdentity,
        accessGroup: String = TokenCache.defaultAccessGroup,
        in transaction: StoreTransaction
    ) throws(TokenCacheError) -> CacheRecord {
        let account = try ResponseAccount(response: response, context: context)
        let record = CacheRecord(response: response, context: context, account: account, cachedAt: transaction.now)
        try tokenCacheErrors {
            let items = CacheItems(transaction: transaction, caller: caller)
            if let entry = record.account { try items.write(entry, group: accessGroup) }
            if let entry = record.idToken { try items.write(entry, group: accessGroup) }
            try removeIntersectingAccessTokens(record.accessToken, items, group: accessGroup)
            try items.write(record.accessToken, group: accessGroup)
            if let entry = record.refreshToken { try items.write(entry, group: accessGroup) }
            if let entry = record.familyRefreshToken { try items.write(entry, group: accessGroup) }
            try items.write(record.appMetadata, group: accessGroup)
        }
        return record
    }

    /// `save(_:context:as:accessGroup:in:)` in one transaction of its own.
    @discardableResult
    public func save(
        _ response: TokenResponse,
        context: TokenRequestContext,
        as caller: AppIdentity,
        accessGroup: String = TokenCache.defaultAccessGroup,
        in store: KeychainStore
    ) throws(TokenCacheError) -> CacheRecord {
        try writing(store) { transaction in
            try self.save(response, context: context, as: caller, accessGroup: accessGroup, in: transaction)
        }
    }

    private func removeIntersectingAccessTokens(_ new: AccessTokenCacheItem, _ items: CacheItems, group: String) throws
    {
        let key = new.keychainKey
        for (old, _) in try items.entries(AccessTokenCacheItem.self, account: key.account, group: group)
        where old.clientID.lowercased() == new.clientID.lowercased() && old.realm.lowercased() == new.realm.lowercased()
            && Scopes.target(old.target, intersects: new.target)
        {
            let oldKey = old.keychainKey
            try items.delete(
                ItemQuery(accessGroup: group, service: oldKey.service, account: oldKey.account, type: oldKey.type)
            )
        }
    }
}
