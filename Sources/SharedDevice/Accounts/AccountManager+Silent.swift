import IdentityClient
public import KeychainStore
import Logging
import Synchronization

extension AccountManager {
    /// The cached, unexpired access token of the current account for `scopes` (a silent token call's
    /// cache step). Shared mode checks the account first.
    /// - Throws: `noCurrentAccount` when nobody is signed in (shared) or the app has no account (private);
    ///   `currentAccountMismatch` when `account` is not the current one.
    /// - Returns: `nil` when no unexpired token covers the scopes (refresh next).
    public func accessToken(
        for app: AppIdentity,
        clientID: String,
        scopes: [String],
        account requested: DeviceAccount? = nil
    ) throws(SharedDeviceError) -> AccessTokenCacheItem? {
        try read { tx in
            let previous = try AccountRecords.principal(of: app.appID, in: tx)
            guard let current = try self.current(for: app, previous: previous, in: tx) else {
                throw SharedDeviceError(.noCurrentAccount, "no account is signed in; sign a worker in first")
            }
            if let requested, !requested.isSameAccount(as: current) {
                throw SharedDeviceError(
                    .currentAccountMismatch,
                    "the token call names \(requested.auditName), but the signed-in account is \(current.auditName); call currentAccount again"
                )
            }
            return try self.tokenCache.accessToken(
                homeAccountID: current.homeAccountID,
                environment: current.environment,
                clientID: clientID,
                realm: current.realm,
                scopes: scopes,
                as: app,
                in: tx
            )
        }
    }

    /// What a silent token call finds, in one read transaction: the account it acts for, an unexpired
    /// access token covering `scopes` (unless `skipAccessToken`), and otherwise the refresh token for
    /// `clientID` (the app's own, then the FOCI family's when `familyID` is given).
    ///
    /// With `b2cPolicy` (a call to an Azure AD B2C user flow's authority), the account is the signed-in
    /// worker's account of that user flow (MSAL's `getAccountByPolicy`): tokens of each flow are found
    /// under their own account.
    /// - Throws: `noCurrentAccount` / `currentAccountMismatch` as `accessToken(for:…)` does;
    ///   `interactionRequired` when the worker never signed in through the `b2cPolicy` user flow.
    public func silentCredentials(
        for app: AppIdentity,
        clientID: String,
        scopes: [String],
        familyID: String? = nil,
        account requested: DeviceAccount? = nil,
        skipAccessToken: Bool = false,
        b2cPolicy: String? = nil
    )
        throws(SharedDeviceError) -> (
            account: DeviceAccount, accessToken: AccessTokenCacheItem?, refreshToken: RefreshTokenCacheItem?
        )
    {
        // Without a stamp to hold to, the lookup always answers.
        try silentCredentials(
            for: app,
            clientID: clientID,
            scopes: scopes,
            familyID: familyID,
            account: requested,
            skipAccessToken: skipAccessToken,
            b2cPolicy: b2cPolicy,
            ifUnchangedSince: nil
        )!
    }

    /// `silentCredentials` in a read transaction that first checks that nothing was committed to the store since
    /// `known` (when given): `nil` when something was, and nothing else was read. A caller that decided
    /// something from the store as of `known` (the broker: the policy's app for the caller) learns in the same
    /// transaction whether its decision still stands, and reads no stamp of its own.
    package func silentCredentials(
        for app: AppIdentity,
        clientID: String,
        scopes: [String],
        familyID: String? = nil,
        account requested: DeviceAccount? = nil,
        skipAccessToken: Bool = false,
        b2cPolicy: String? = nil,
        ifUnchangedSince known: StoreChangeStamp?
    )
        throws(SharedDeviceError) -> (
            account: DeviceAccount, accessToken: AccessTokenCacheItem?, refreshToken: RefreshTokenCacheItem?
        )?
    {
        let lookup = SilentLookup(
            app: app,
            clientID: clientID.lowercased(),
            scopes: scopes.map { $0.lowercased() }.sorted(),
            b2cPolicy: b2cPolicy?.lowercased()
        )
        // Nothing committed since a read transaction last took the stamp, seen without one: the last answer to this
        // lookup stands while its token is valid, and the store's connection is not waited for.
        if !skipAccessToken, let stamp = store.changeStampIfUnchanged(), known.map({ $0 == stamp }) ?? true,
            let cached = silentCache.withLock({ $0[lookup] }), cached.stamp == stamp,
            requested.map({ $0.isSameAccount(as: cached.account) }) ?? true,
            !cached.token.isExpired(at: store.now, buffer: tokenCache.expirationBuffer)
        {
            return (cached.account, cached.token, nil)
        }
        let found = try read {
            tx -> (account: DeviceAccount, accessToken: AccessTokenCacheItem?, refreshToken: RefreshTokenCacheItem?)? in
            let stamp = try tx.changeStamp()
            if let known, stamp != known { return nil }
            // Nothing committed since the last answer to this lookup, and its token still valid: it stands.
            if !skipAccessToken, let known = self.silentCache.withLock({ $0[lookup] }), known.stamp == stamp,
                requested.map({ $0.isSameAccount(as: known.account) }) ?? true,
                !known.token.isExpired(at: tx.now, buffer: self.tokenCache.expirationBuffer)
            {
                return (known.account, known.token, nil)
            }
            let worker = try self.signedInAccount(for: app, requested: requested, stamp: stamp, in: tx)
            let account =
                try b2cPolicy.map { policy in try self.userFlowAccount(of: worker, policy: policy, app: app, in: tx) }
                ?? worker
            if !skipAccessToken,
                let cached = try self.tokenCache.accessToken(
                    homeAccountID: account.homeAccountID,
                    environment: account.environment,
                    clientID: clientID,
                    realm: account.realm,
                    scopes: scopes,
                    as: app,
                    in: tx
                )
            {
                self.silentCache.withLock { answers in
                    if answers.count >= 256 { answers.removeAll() }
                    answers[lookup] = (stamp, account, cached)
                }
                return (account, cached, nil)
            }
            var refreshToken = try self.tokenCache.refreshToken(
                homeAccountID: account.homeAccountID,
                environment: account.environment,
                clientID: clientID,
                as: app,
                in: tx
            )
            if refreshToken == nil, let familyID {
                refreshToken = try self.tokenCache.familyRefreshToken(
                    homeAccountID: account.homeAccountID,
                    environment: account.environment,
                    familyID: familyID,
                    as: app,
                    in: tx
                )
            }
            return (account, nil, refreshToken)
        }
        guard let found else { return nil }
        logger.trace(
            "silent token lookup",
            metadata: [
                "app": "\(app.appID)", "account": "\(found.account.auditName)",
                "scopes": "\(scopes.joined(separator: " "))",
                "result":
                    "\(found.accessToken != nil ? "cached access token" : found.refreshToken != nil ? "refresh token" : "nothing usable")",
            ]
        )
        return found
    }

    /// The worker's account of the B2C user flow `policy`: the worker's own when they signed in through
    /// it, else the one a later sign-in through that flow cached in the app's groups.
    /// - Throws: `interactionRequired` when there is none.
    private func userFlowAccount(
        of worker: DeviceAccount,
        policy: String,
        app: AppIdentity,
        in tx: StoreTransaction
    ) throws -> DeviceAccount {
        guard let workerPolicy = worker.b2cPolicy, workerPolicy != policy.lowercased() else { return worker }
        if let home = worker.b2cHomeAccountID(policy: policy),
            let cached = try tokenCache.account(homeAccountID: home, environment: worker.environment, as: app, in: tx)
        {
            return DeviceAccount(cached)
        }
        throw SharedDeviceError(
            IdentityError(
                .interactionRequired,
                "\(worker.auditName) has not signed in through the user flow \(policy) on this device; sign in interactively with that authority"
            )
        )
    }

    /// The cached ID token of `account` for `clientID` in the account's tenant, or `nil` when the identity
    /// provider issued none (MSAL returns it beside a cached access token).
    public func idToken(
        of account: DeviceAccount,
        clientID: String,
        app: AppIdentity
    ) throws(SharedDeviceError) -> String? {
        try read { tx in
            try self.tokenCache.idToken(
                homeAccountID: account.homeAccountID,
                environment: account.environment,
                clientID: clientID,
                realm: account.realm,
                as: app,
                in: tx
            )?.secret
        }
    }

    /// Caches the tokens a silent refresh returned for `account`, only if it is still the app's signed-in
    /// account: a global sign-out that lands while the refresh is on the network wins, and the new
    /// tokens are dropped (`noCurrentAccount`). No audit event: the account did not change.
    public func saveRefreshedTokens(
        _ response: TokenResponse,
        context: TokenRequestContext,
        for account: DeviceAccount,
        app: AppIdentity,
        accessGroup: String? = nil
    ) throws(SharedDeviceError) {
        try write { tx in
            _ = try self.signedInAccount(for: app, requested: account, in: tx)
            var context = context
            context.homeAccountID = account.homeAccountID
            try self.tokenCache.save(
                response,
                context: context,
                as: app,
                accessGroup: accessGroup ?? Self.tokenGroup(of: app),
                in: tx
            )
        }
    }

    /// - Parameter stamp: the transaction's change stamp, when the caller already took it.
    private func signedInAccount(
        for app: AppIdentity,
        requested: DeviceAccount?,
        stamp known: StoreChangeStamp? = nil,
        in tx: StoreTransaction
    ) throws -> DeviceAccount {
        // Nothing committed since `currentAccount` last answered this app: that answer stands (no decryption
        // of the device record and account records).
        let stamp = try known ?? tx.changeStamp()
        let known = cache.withLock { $0[app] }.flatMap { $0.stamp == stamp ? $0.answer : nil }
        let current: DeviceAccount?
        if let known {
            current = known.current
        } else {
            let previous = try AccountRecords.principal(of: app.appID, in: tx)
            current = try self.current(for: app, previous: previous, in: tx)
            // The answer `currentAccount` would give, remembered for the next call unless it would have to
            // record a new principal first (only `currentAccount` writes).
            if current.map({ current in previous.map { $0.isSameAccount(as: current) && $0 == current } ?? false })
                ?? true
            {
                cache.withLock { $0[app] = (stamp, CurrentAccount(current: current, previous: previous)) }
            }
        }
        guard let current else {
            throw SharedDeviceError(.noCurrentAccount, "no account is signed in; sign a worker in first")
        }
        if let requested, !requested.isSameWorker(as: current) {
            throw SharedDeviceError(
                .currentAccountMismatch,
                "the token call names \(requested.auditName), but the signed-in account is \(current.auditName); call currentAccount again"
            )
        }
        return current
    }
}
