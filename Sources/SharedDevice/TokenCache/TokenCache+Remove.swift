public import KeychainStore

extension TokenCache {
    /// Removes an account's access, refresh (app and family) and ID tokens, and unless told otherwise its
    /// account entries, from every access group of the caller (MSAL's `clearCacheForAccount`, what a
    /// shared-device sign-out does in each app's groups). App metadata is kept.
    /// - Returns: how many items were deleted.
    @discardableResult
    public func removeCredentials(
        homeAccountID: String,
        environment: String,
        includingAccount: Bool = true,
        as caller: AppIdentity,
        in transaction: StoreTransaction
    ) throws(TokenCacheError) -> Int {
        try tokenCacheErrors {
            let items = CacheItems(transaction: transaction, caller: caller)
            let account = KeychainKey.accountAttribute(homeAccountID: homeAccountID, environment: environment)
            // Every item with the account attribute `<home>-<env>` is one of the account's credentials or
            // its account entry (app metadata is keyed by environment alone), so a full removal is one
            // indexed DELETE per group.
            if includingAccount { return try items.delete(ItemQuery(account: account)) }
            let types = [AccessTokenCacheItem.itemType, RefreshTokenCacheItem.itemType, IdTokenCacheItem.itemType]
            return try types.reduce(0) { count, type in
                try count + items.delete(ItemQuery(account: account, type: type))
            }
        }
    }

    /// `removeCredentials(homeAccountID:environment:includingAccount:as:in:)` in one transaction of its own.
    @discardableResult
    public func removeCredentials(
        homeAccountID: String,
        environment: String,
        includingAccount: Bool = true,
        as caller: AppIdentity,
        in store: KeychainStore
    ) throws(TokenCacheError) -> Int {
        try writing(store) { transaction in
            try self.removeCredentials(
                homeAccountID: homeAccountID,
                environment: environment,
                includingAccount: includingAccount,
                as: caller,
                in: transaction
            )
        }
    }
}
