public import Foundation
public import IdentityClient
public import KeychainStore
public import Logging

/// The engine behind an app's calls, shaped like MSAL's `MSALPublicClientApplication` in shared device
/// mode: device information, the current account, interactive and silent token calls, and sign-out, on
/// the device's store. The broker runs one per app (and root's devicectl one for itself); apps never link
/// it: they reach it through the broker with `SharedDeviceClient`'s `PublicClientApplication`.
///
/// The seed tutorial's flow, in Swift:
///
/// ```swift
/// let store = try KeychainStore(directory: stateDirectory)
/// let device = ManagedDevice(store: store)
/// let policy = try device.policy()!                      // provisioned with `devicectl provision`
/// let application = try ApplicationEngine(
///     configuration: ApplicationEngineConfiguration(appID: "com.contoso.kiosk.scanner", policy: policy),
///     device: device)
///
/// // 1. Is this a shared device? Who is signed in?
/// let (information, _) = application.deviceInformation()
/// let (current, previous) = try application.currentAccount().pair
/// if let previous, current == nil || !current!.isSameAccount(as: previous) { /* shift changed: clear app state */ }
///
/// // 2. Sign in once (device code on a kiosk without a browser).
/// if current == nil {
///     _ = try await application.acquireToken(InteractiveTokenParameters(
///         scopes: ["User.Read"], flow: .deviceCode(showCode: { print($0.message) })))
/// }
///
/// // 3. Tokens for two APIs, the second one silently (no second sign-in).
/// let me = try await application.acquireTokenSilent(scopes: ["User.Read"])
/// let files = try await application.acquireTokenSilent(scopes: ["Files.Read"])
/// // GET https://graph/me with "Authorization: Bearer \(me.accessToken)"
///
/// // 4. End of shift: a global sign-out removes the worker from every app on the device.
/// try await application.signOut()
/// ```
///
/// Every failure is a `SharedDeviceError`; `error.isInteractionRequired` (MSAL -50002) means only
/// `acquireToken` can help. A failed call changes nothing in the cache.
///
/// The app discovers its authority once a day: the application keeps one `DiscoveryCache` for its
/// lifetime and gives it to its identity client. Its debug and trace events (and the identity client's)
/// go to the `logger` it was made with; none carries a token, a code or a secret.
public final class ApplicationEngine: Sendable {
    /// The app's registration.
    public let configuration: ApplicationEngineConfiguration
    /// The device the app runs on.
    public let device: ManagedDevice
    /// The device's account manager (shared with every other app on the device through the store).
    public let accountManager: AccountManager
    /// The OAuth / OpenID Connect client for the configured authority.
    public let identity: IdentityClient
    /// The app's identity on the device: its entitled access groups.
    public let app: AppIdentity
    private let authority: Authority
    /// The authority's discovery document and keys, for the application's lifetime.
    private let discoveryCache = DiscoveryCache()
    let logger: Logger

    /// Creates the app's client.
    ///
    /// On a provisioned device the app must be listed in the policy, which gives its access groups; on an
    /// unprovisioned device (private mode) the app gets `keychainAccessGroup` (default `com.microsoft.adalcache`).
    /// - Parameters:
    ///   - transport: the way to the network (tests pass a scripted one).
    ///   - now: the clock; `sleep`: the wait between device-code polls (tests pass fake ones).
    ///   - accounts: the account manager to use, when the process keeps one for all its apps (the broker
    ///     does, so that every app shares its caches and change signal); nil: one of the engine's own.
    ///   - logger: where the application's and its identity client's debug and trace events go; the
    ///     task-local logger by default.
    /// - Throws: `appNotInPolicy`; `.identity` (`invalidAuthority`) for a malformed or unknown authority.
    public init(
        configuration: ApplicationEngineConfiguration,
        device: ManagedDevice,
        transport: any HTTPTransport = CurlTransport(),
        now: @escaping @Sendable () -> Date = Date.init,
        sleep: @escaping @Sendable (TimeInterval) async throws -> Void = { try await Task.sleep(for: .seconds($0)) },
        accounts: AccountManager? = nil,
        logger: Logger = Logger.current
    ) throws(SharedDeviceError) {
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "app.id"] = "\(configuration.appID)"
        self.logger = logger
        self.device = device
        accountManager = accounts ?? AccountManager(device: device, logger: logger)
        do {
            authority = try Authority(configuration.authority, knownAuthorities: configuration.knownAuthorities)
        } catch {
            throw SharedDeviceError(error)
        }
        identity = IdentityClient(
            clientID: configuration.clientID,
            clientSecret: configuration.clientSecret,
            authority: authority,
            transport: transport,
            now: now,
            sleep: sleep,
            discoveryCache: discoveryCache,
            logger: logger
        )
        if let entitled = try device.appIdentity(configuration.appID, actor: configuration.appID) {
            app = entitled
        } else {
            app = try sharedDeviceErrors {
                try AppIdentity(
                    appID: configuration.appID,
                    accessGroups: [configuration.keychainAccessGroup ?? TokenCache.defaultAccessGroup]
                )
            }
        }
        if let group = configuration.keychainAccessGroup, !app.isEntitled(to: group) {
            throw SharedDeviceError(
                .appNotInPolicy,
                "app \(configuration.appID) is not entitled to keychain access group \(group) by the device policy; add it to the app's accessGroups"
            )
        }
    }

    /// The device's mode and registration (MSAL's `getDeviceInformation`); on a failure, the default
    /// (private) information together with the error.
    public func deviceInformation() -> (information: DeviceInformation, error: SharedDeviceError?) {
        device.information()
    }

    /// The current and previous account (MSAL's `getCurrentAccount`).
    public func currentAccount() throws(SharedDeviceError) -> CurrentAccount {
        try accountManager.currentAccount(for: app)
    }

    /// `currentAccount()`, when nothing was committed to the store since `known`: see
    /// `acquireTokenSilent(…, ifStoreUnchangedSince:)`. With `readOnly`, also `nil` when the answer needs a write.
    package func currentAccount(
        ifStoreUnchangedSince known: StoreChangeStamp,
        readOnly: Bool = false
    ) throws(SharedDeviceError)
        -> CurrentAccount?
    {
        try accountManager.currentAccount(for: app, ifUnchangedSince: known, readOnly: readOnly)
    }

    /// The accounts this app can see in its token group (MSAL's `allAccounts`). In shared mode only the
    /// device's current worker's: their account, and with Azure AD B2C one per user flow they signed in
    /// through (told apart by `DeviceAccount.b2cPolicy`, as MSAL's `getAccountByPolicy` does).
    public func accounts() throws(SharedDeviceError) -> [DeviceAccount] {
        let cached = try sharedDeviceErrors {
            try accountManager.tokenCache.accounts(
                clientID: configuration.clientID,
                as: app,
                accessGroup: tokenGroup,
                in: device.store
            )
        }.map(DeviceAccount.init)
        guard deviceInformation().information.mode == .shared else { return cached }
        guard let current = try currentAccount().current else { return [] }
        return cached.filter { $0.isSameWorker(as: current) }
    }

    // MARK: - Tokens

    /// Signs the user in interactively (device code or browser) and caches the tokens; in shared mode
    /// the account becomes the device's current worker for every app.
    /// - Throws: `accountAlreadySignedIn` (shared mode, another worker is signed in: nothing is cached);
    ///   `.identity` with `userCanceled`, `accessDenied`, `deviceCodeExpired`, `invalidIDToken`,
    ///   `serverError` or `authorityUnreachable`.
    public func acquireToken(
        _ parameters: InteractiveTokenParameters
    ) async throws(SharedDeviceError) -> AuthenticationResult {
        let correlationID = AccountManager.newCorrelationID()
        var logger = self.logger
        logger[metadataKey: "correlation_id"] = "\(correlationID)"
        let (grant, response) = try await interactiveGrant(parameters, logger: logger)
        return try signIn(
            grant,
            response,
            flow: parameters.flow.policyFlow,
            msalClientID: parameters.msalClientID,
            correlationID: correlationID,
            logger: logger
        )
    }

    /// Caches the tokens of an interactive grant (`account.signed_in` names the flow and the MSAL client id)
    /// and returns the call's result.
    private func signIn(
        _ grant: TokenGrant,
        _ response: TokenResponse,
        flow: DevicePolicy.SignInFlow,
        msalClientID: String?,
        correlationID: String,
        logger: Logger
    ) throws(SharedDeviceError) -> AuthenticationResult {
        let account: DeviceAccount
        do {
            var details = ["flow": flow.rawValue].merging(sandboxAuditDetails) { $1 }
            details["msalClientId"] = msalClientID
            account = try accountManager.signIn(
                response,
                context: context(scopes: grant.scopes),
                app: app,
                accessGroup: tokenGroup,
                correlationID: correlationID,
                auditDetails: details
            )
        } catch {
            logger.debug("interactive sign-in refused by the device", metadata: ["error.code": "\(error.code)"])
            throw error
        }
        logger.debug(
            "interactive sign-in succeeded",
            metadata: [
                "account": "\(account.auditName)", "oauth.scopes": "\(grant.scopes.joined(separator: " "))",
                "oauth.expires_on": "\(grant.expiresOn.map { "\($0)" } ?? "unknown")",
            ]
        )
        return AuthenticationResult(
            accessToken: grant.accessToken,
            scopes: grant.scopes,
            expiresOn: grant.expiresOn,
            account: account,
            idToken: grant.idToken?.raw,
            source: .interactive,
            correlationID: correlationID
        )
    }

    /// A shift change on a shared device (Intune's "switch user"): signs the current worker out of every
    /// app and commits that first, then signs the next worker in interactively (device code or browser).
    /// The sign-out, the sign-in and `account.switched` share one correlation id in the audit log.
    /// - Parameters:
    ///   - reason: why the previous worker leaves (`shift-end` by default).
    ///   - signedOut: called once the previous worker is signed out (`nil`: nobody was), before the sign-in.
    /// - Throws: the sign-in's errors (`userCanceled`, `deviceCodeExpired`, `accessDenied`, …); the
    ///   sign-out stands then, nobody is signed in, and the message says so.
    public func switchWorker(
        _ parameters: InteractiveTokenParameters,
        reason: SignOutReason = .shiftEnd,
        signedOut: @escaping @Sendable (AccountManager.SignOutOutcome?) async -> Void = { _ in }
    ) async throws(SharedDeviceError) -> AuthenticationResult {
        // A flow the policy does not list is refused before anyone is signed out.
        try checkAllowed(parameters.flow.policyFlow)
        let shift = try accountManager.beginSwitch(app: app, reason: reason)
        await signedOut(shift.signedOut)
        var logger = self.logger
        logger[metadataKey: "correlation_id"] = "\(shift.correlationID)"
        do throws(SharedDeviceError) {
            let (grant, response) = try await interactiveGrant(parameters, logger: logger)
            let account = try accountManager.completeSwitch(
                shift,
                response: response,
                context: context(scopes: grant.scopes),
                app: app,
                accessGroup: tokenGroup,
                auditDetails: ["flow": parameters.flow.policyFlow.rawValue].merging(sandboxAuditDetails) { $1 }
            )
            return AuthenticationResult(
                accessToken: grant.accessToken,
                scopes: grant.scopes,
                expiresOn: grant.expiresOn,
                account: account,
                idToken: grant.idToken?.raw,
                source: .interactive,
                correlationID: shift.correlationID
            )
        } catch {
            throw error.afterSwitchSignOut(shift.signedOut?.account)
        }
    }

    /// The interactive part of a sign-in: the grant from the identity provider and its decoded response.
    /// Nothing is cached here. `nextWorker`: the sign-in may be another worker's than the one signed in
    /// (the login screen's, which switches or refuses when the grant is in), so no login hint is forced.
    func interactiveGrant(
        _ parameters: InteractiveTokenParameters,
        nextWorker: Bool = false,
        logger: Logger
    ) async throws(SharedDeviceError) -> (TokenGrant, TokenResponse) {
        // Like MSAL's `extraScopesToConsent`: one sign-in consents to every API the device's apps call.
        let scopes = requestScopes(parameters.scopes + configuration.defaultScopes)
        try checkAllowed(parameters.flow.policyFlow)
        var parameters = parameters
        if nextWorker {
            // The grant decides who signs in; the completion switches or refuses.
        } else if case .password(let username, _) = parameters.flow {
            // The worker the password is for: in shared mode with a worker signed in, no one else.
            parameters.loginHint = try loginHint(for: username)
        } else {
            parameters.loginHint = try loginHint(for: parameters.loginHint)
        }
        let flowName: String
        switch parameters.flow {
        case .deviceCode: flowName = "device_code"
        case .browser: flowName = "browser"
        case .password: flowName = "password"
        }
        logger.debug(
            "interactive sign-in started",
            metadata: [
                "signin.flow": "\(flowName)", "oauth.scopes": "\(scopes.joined(separator: " "))",
                "oauth.login_hint": "\(parameters.loginHint != nil)",
            ]
        )
        let grant: TokenGrant
        do {
            switch parameters.flow {
            case .deviceCode(let showCode, let progress):
                let session = try await identity.startDeviceCode(scopes: scopes, loginHint: parameters.loginHint)
                showCode(session)
                grant = try await identity.completeDeviceCode(session, progress: progress)
            case .browser(let openBrowser):
                grant = try await identity.acquireTokenInBrowser(
                    scopes: scopes,
                    prompt: parameters.prompt,
                    loginHint: parameters.loginHint,
                    redirectURI: configuration.redirectURI,
                    timeout: parameters.browserTimeout,
                    openBrowser: openBrowser
                )
            case .password(let username, let password):
                grant = try await identity.acquireTokenByPassword(
                    username: username,
                    password: password,
                    scopes: scopes
                )
            }
        } catch {
            logger.debug("interactive sign-in failed", metadata: Self.failure(error))
            if case .password(let username, _) = parameters.flow, error.code == .invalidCredentials {
                auditFailedSignIn(username: username, flow: .password, msalClientID: parameters.msalClientID)
            }
            throw SharedDeviceError(error)
        }
        // The caller went away (a broker client disconnected) while the user signed in: cache nothing.
        if Task.isCancelled {
            logger.debug("interactive sign-in canceled before its tokens were cached")
            throw SharedDeviceError(
                IdentityError(
                    .userCanceled,
                    "the sign-in was canceled before it finished; nothing was cached — sign in again"
                )
            )
        }
        return (grant, try decode(grant))
    }

    /// A token for `scopes` without UI (MSAL's `acquireTokenSilent`): an unexpired cached access token,
    /// else a refresh-token grant whose tokens are cached.
    /// - Parameters:
    ///   - account: the account the app believes is signed in; `nil` means the current one.
    ///   - forceRefresh: skip the cached access token.
    ///   - includeIDToken: return the account's ID token with a cached access token too (from the cache;
    ///     MSAL's result carries it); `idToken` is nil when the provider issued none.
    /// - Throws: `noCurrentAccount` (nobody signed in — on a shared device, the shift ended),
    ///   `currentAccountMismatch`; `.identity` with `interactionRequired` (no refresh token, or the
    ///   authority refused it: expired, revoked, scopes not granted) — call `acquireToken`;
    ///   `authorityUnreachable`, `serverError`. A failure changes nothing in the cache.
    ///
    /// Runs on the caller's executor (`nonisolated(nonsending)`): an answer from the cache costs no hop to
    /// another thread, even from the main actor.
    nonisolated(nonsending)
        public func acquireTokenSilent(
            scopes: [String],
            account: DeviceAccount? = nil,
            forceRefresh: Bool = false,
            includeIDToken: Bool = false
        ) async throws(SharedDeviceError) -> AuthenticationResult
    {
        // Without a stamp to hold to, the call always answers.
        try await acquireTokenSilent(
            scopes: scopes,
            account: account,
            forceRefresh: forceRefresh,
            includeIDToken: includeIDToken,
            ifStoreUnchangedSince: nil
        )!
    }

    /// A silent token from the cache alone, when nothing was committed to the store since `known`: at most one read
    /// (none while nothing was committed since the last answer: `KeychainStore.changeStampIfUnchanged`), no write,
    /// no network, no wait, so the broker answers it on the thread that read the call. `nil` when something
    /// was committed since, or no cached access token answers (the caller then goes the way that may refresh).
    /// - Throws: what `acquireTokenSilent` throws before it would refresh (no account signed in, another worker's).
    package func cachedTokenSilent(
        scopes: [String],
        ifStoreUnchangedSince known: StoreChangeStamp
    ) throws(SharedDeviceError) -> AuthenticationResult? {
        guard case .cached(let result) = try silentLookup(scopes: scopes, ifStoreUnchangedSince: known) else {
            return nil
        }
        return result
    }

    /// What the cache holds for a silent token (one read transaction).
    private enum SilentLookup {
        /// Something was committed since the stamp held to: nothing was looked up.
        case storeChanged
        /// A cached access token answers.
        case cached(AuthenticationResult)
        /// None does: the account's refresh token (if any) is the way on.
        case needsRefresh(DeviceAccount, RefreshTokenCacheItem?, correlationID: String)
    }

    /// Looks up the account and its cached tokens for `scopes` (see `acquireTokenSilent`).
    private func silentLookup(
        scopes: [String],
        account: DeviceAccount? = nil,
        forceRefresh: Bool = false,
        includeIDToken: Bool = false,
        ifStoreUnchangedSince known: StoreChangeStamp?
    ) throws(SharedDeviceError) -> SilentLookup {
        let correlationID = AccountManager.newCorrelationID()
        var logger = self.logger
        // Tagging the logger copies its handler's metadata: only when its events would be written.
        if logger.logLevel <= .debug { logger[metadataKey: "correlation_id"] = "\(correlationID)" }
        let (current, cachedAccessToken, refreshToken): (DeviceAccount, AccessTokenCacheItem?, RefreshTokenCacheItem?)
        do {
            guard
                let found = try accountManager.silentCredentials(
                    for: app,
                    clientID: configuration.clientID,
                    scopes: scopes,
                    account: account,
                    skipAccessToken: forceRefresh,
                    b2cPolicy: authority.b2cPolicy,
                    ifUnchangedSince: known
                )
            else { return .storeChanged }
            (current, cachedAccessToken, refreshToken) = found
        } catch {
            logger.debug(
                "silent token refused",
                metadata: ["error.code": "\(error.code)", "oauth.scopes": "\(scopes.joined(separator: " "))"]
            )
            throw error
        }
        guard let cached = cachedAccessToken else {
            return .needsRefresh(current, refreshToken, correlationID: correlationID)
        }
        logger.debug(
            "silent token from the cache",
            metadata: [
                "oauth.scopes": "\(cached.scopes.joined(separator: " "))",
                "oauth.expires_on": "\(cached.expiresOn)",
            ]
        )
        let idToken =
            includeIDToken
            ? try accountManager.idToken(of: current, clientID: configuration.clientID, app: app) : nil
        return .cached(
            AuthenticationResult(
                accessToken: cached.secret,
                scopes: cached.scopes,
                expiresOn: cached.expiresOn,
                account: current,
                idToken: idToken,
                source: .cache,
                correlationID: correlationID
            )
        )
    }

    /// `acquireTokenSilent`, when nothing was committed to the store since `known` (when given): checked in the
    /// read transaction that looks the tokens up, before anything else. `nil` when something was: nothing was
    /// done (no refresh, nothing written), and the caller decides again from the store as it is now. For the
    /// broker, which chose this engine for its caller from the policy as of `known` (`cachedTokenSilent` when the
    /// call must not refresh).
    nonisolated(nonsending)
        package func acquireTokenSilent(
            scopes: [String],
            account: DeviceAccount? = nil,
            forceRefresh: Bool = false,
            includeIDToken: Bool = false,
            ifStoreUnchangedSince known: StoreChangeStamp?
        ) async throws(SharedDeviceError) -> AuthenticationResult?
    {
        let current: DeviceAccount
        let refreshToken: RefreshTokenCacheItem?
        let correlationID: String
        switch try silentLookup(
            scopes: scopes,
            account: account,
            forceRefresh: forceRefresh,
            includeIDToken: includeIDToken,
            ifStoreUnchangedSince: known
        ) {
        case .storeChanged: return nil
        case .cached(let result): return result
        case .needsRefresh(let account, let token, let id):
            (current, refreshToken, correlationID) = (account, token, id)
        }
        var logger = self.logger
        if logger.logLevel <= .debug { logger[metadataKey: "correlation_id"] = "\(correlationID)" }
        guard let refreshToken else {
            logger.debug(
                "silent token needs interaction: no refresh token is cached",
                metadata: ["oauth.scopes": "\(scopes.joined(separator: " "))"]
            )
            throw SharedDeviceError(
                IdentityError(
                    .interactionRequired,
                    "no refresh token is cached for \(current.auditName) in app \(app.appID); sign in interactively"
                )
            )
        }
        logger.debug(
            "silent token: redeeming the refresh token",
            metadata: [
                "oauth.scopes": "\(scopes.joined(separator: " "))",
                "silent.force_refresh": "\(forceRefresh)",
            ]
        )
        let grant: TokenGrant
        do {
            grant = try await identity.refresh(refreshToken: refreshToken.secret, scopes: requestScopes(scopes))
        } catch {
            logger.debug(
                error.code == .interactionRequired || error.code == .declinedScopes
                    ? "silent token needs interaction: the refresh was refused" : "silent token failed",
                metadata: Self.failure(error)
            )
            throw SharedDeviceError(error)
        }
        // MSAL's local account id is `oid`, else `sub` (Microsoft's `sub` is per app and never the `oid`).
        if let idToken = grant.idToken, let local = current.localAccountID,
            (idToken.objectID ?? idToken.subject) != local
        {
            logger.debug("silent token refused: the refreshed ID token is for another user")
            throw SharedDeviceError(
                IdentityError(
                    .invalidIDToken,
                    "the refreshed ID token is for another user than \(current.auditName); nothing was cached — sign in again"
                )
            )
        }
        let response = try decode(grant)
        try accountManager.saveRefreshedTokens(
            response,
            context: context(scopes: grant.scopes),
            for: current,
            app: app,
            accessGroup: tokenGroup
        )
        logger.debug(
            "silent token refreshed and cached",
            metadata: [
                "oauth.scopes": "\(grant.scopes.joined(separator: " "))",
                "oauth.expires_on": "\(grant.expiresOn.map { "\($0)" } ?? "unknown")",
            ]
        )
        // A refresh response may carry no ID token; the one the sign-in cached stands for the account then.
        let idToken =
            if let raw = grant.idToken?.raw { raw } else if includeIDToken {
                try accountManager.idToken(of: current, clientID: configuration.clientID, app: app)
            } else { String?.none }
        return AuthenticationResult(
            accessToken: grant.accessToken,
            scopes: grant.scopes,
            expiresOn: grant.expiresOn,
            account: current,
            idToken: idToken,
            source: .refresh,
            correlationID: correlationID
        )
    }

    // MARK: - Sign-out

    /// Account changes on the device committed after this returns (sign-ins, global sign-outs, switches,
    /// mode changes), from the store's change signal. Call `currentAccount()` again on each, as MSAL advises.
    public func accountChanges() -> AsyncStream<AccountChange> {
        accountManager.changes()
    }

    /// Signs the account out (MSAL's `signout`). Shared mode: global — the worker leaves every app on
    /// the device, and every app is notified. Private mode: this app only, unless `wipeAccount`.
    /// With `signOutFromBrowser` the authority's session is ended in the browser too (after the local
    /// sign-out, which stands even if the browser step fails).
    /// - Throws: `noCurrentAccount`; `currentAccountMismatch` when `account` is not the signed-in one.
    @discardableResult
    public func signOut(
        account: DeviceAccount? = nil,
        parameters: SignOutParameters = SignOutParameters()
    ) async throws(SharedDeviceError) -> AccountManager.SignOutOutcome {
        if let account {
            guard let current = try currentAccount().current else {
                throw SharedDeviceError(.noCurrentAccount, "no account is signed in; there is nobody to sign out")
            }
            guard current.isSameWorker(as: account) else {
                throw SharedDeviceError(
                    .currentAccountMismatch,
                    "the sign-out names \(account.auditName), but the signed-in account is \(current.auditName); call currentAccount again"
                )
            }
        }
        logger.debug(
            "sign-out started",
            metadata: [
                "signout.reason": "\(parameters.reason.rawValue)", "signout.wipe_account": "\(parameters.wipeAccount)",
                "signout.from_browser": "\(parameters.signOutFromBrowser)",
            ]
        )
        let outcome: AccountManager.SignOutOutcome
        do {
            outcome = try accountManager.signOut(
                app: app,
                reason: parameters.reason,
                wipeEverywhere: parameters.wipeAccount
            )
        } catch {
            logger.debug("sign-out failed", metadata: ["error.code": "\(error.code)"])
            throw error
        }
        logger.debug(
            "signed out",
            metadata: [
                "account": "\(outcome.account?.auditName ?? "nobody")", "signout.global": "\(outcome.global)",
                "signout.items_removed": "\(outcome.itemsRemoved)",
            ]
        )
        if parameters.signOutFromBrowser, let openBrowser = parameters.openBrowser {
            do {
                if let url = try await identity.endSessionURL(idTokenHint: nil) {
                    try await openBrowser(url)
                    logger.debug("end-session page opened in the browser")
                }
            } catch {
                // The local sign-out stands; the browser step is best effort.
                logger.debug("the browser sign-out failed; the local sign-out stands", metadata: Self.failure(error))
            }
        }
        return outcome
    }

    // MARK: - Helpers

    /// Audits a password sign-in the provider refused (`account.sign_in_failed`): the username as typed
    /// (at most 256 characters), never the password.
    func auditFailedSignIn(username: String, flow: DevicePolicy.SignInFlow, msalClientID: String?) {
        var details = ["flow": flow.rawValue].merging(sandboxAuditDetails) { $1 }
        details["msalClientId"] = msalClientID
        let entry = AuditEntry(
            type: .accountSignInFailed,
            actor: app.appID,
            account: String(username.prefix(256)),
            reason: "wrong username or password",
            details: details
        )
        do {
            _ = try device.record(entry)
        } catch {
            logger.debug("the failed sign-in could not be audited", metadata: ["error.code": "\(error.code)"])
        }
    }

    /// Log metadata of a failed identity call: its code, OAuth error and HTTP status, never its message
    /// (which may hold the user code shown on screen or the server's description).
    private static func failure(_ error: IdentityError) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["error.code": "\(error.code)"]
        if let oauthError = error.oauthError { metadata["oauth.error"] = "\(oauthError)" }
        if let status = error.httpStatus { metadata["http.status"] = "\(status)" }
        return metadata
    }

    /// The login hint of an interactive sign-in. Shared mode with a worker signed in: the sign-in is for
    /// that worker (after `interactionRequired`), so their username is the hint when the app gives none;
    /// a hint naming another worker is refused before anyone spends time at the authority. (The check
    /// that counts comes when the tokens arrive: whoever signs in, only the current worker is accepted.)
    func loginHint(for requested: String?) throws(SharedDeviceError) -> String? {
        guard deviceInformation().information.mode == .shared, let current = try currentAccount().current,
            let username = current.username
        else { return requested }
        guard let requested else { return username }
        guard username.lowercased() == requested.lowercased() else {
            throw SharedDeviceError(
                .accountAlreadySignedIn,
                "\(username) is signed in on this shared device; end the shift (sign out) before \(requested) signs in"
            )
        }
        return requested
    }

    /// - Throws: `flowNotAllowed` unless the policy's `authority.flows` lists `flow`.
    func checkAllowed(_ flow: DevicePolicy.SignInFlow) throws(SharedDeviceError) {
        guard configuration.allowedFlows.contains(flow) else {
            throw SharedDeviceError(
                .flowNotAllowed,
                "the device policy does not allow \(flow.rawValue) sign-in (authority.flows lists \(configuration.allowedFlows.map(\.rawValue).joined(separator: ", "))); use one of those, or ask the administrator to add \"\(flow.rawValue)\""
            )
        }
    }

    /// The group the app's tokens live in.
    var tokenGroup: String {
        configuration.keychainAccessGroup ?? AccountManager.tokenGroup(of: app)
    }

    /// The call's scopes plus the configuration's defaults, deduplicated, without the reserved OpenID
    /// scopes (the identity client adds those).
    func requestScopes(_ scopes: [String]) -> [String] {
        var seen = Set<String>()
        var result: [String] = []
        for scope in scopes + (scopes.isEmpty ? configuration.defaultScopes : [])
        where !Authority.reservedScopes.contains(scope) && seen.insert(scope.lowercased()).inserted {
            result.append(scope)
        }
        return result
    }

    func context(scopes: [String]) -> TokenRequestContext {
        TokenRequestContext(
            clientID: configuration.clientID,
            environment: authority.environment,
            realm: authority.realm,
            requestedScopes: scopes,
            b2cPolicy: authority.b2cPolicy
        )
    }

    func decode(_ grant: TokenGrant) throws(SharedDeviceError) -> TokenResponse {
        do {
            return try TokenResponse.decode(grant.body)
        } catch {
            throw SharedDeviceError(.tokenCache, "the authority's token response cannot be cached: \(error)")
        }
    }
}

// MARK: - Native authentication

extension ApplicationEngine {
    /// What the worker types to finish a native sign-in.
    public enum NativeSignInCredential: Sendable {
        case password(String)
        case code(String)
    }

    /// Starts a native sign-in (Microsoft Entra External ID, the app's own screen): the step says whether
    /// the password or the emailed one-time code is next. Only where the policy's `authority.flows` lists
    /// `nativeAuth`; in shared mode with a worker signed in, only for that worker.
    /// - Throws: `flowNotAllowed`, `accountAlreadySignedIn`; `.identity` with `userNotFound`,
    ///   `browserRequired`, `unsupported` (not a ciamlogin.com authority), …
    public func startNativeSignIn(username: String) async throws(SharedDeviceError) -> NativeSignInStep {
        try checkAllowed(.nativeAuth)
        _ = try loginHint(for: username)
        return try await nativeSignInStep(username: username)
    }

    /// Starts a native sign-in as the next worker of a shift change: once the authority has taken the
    /// username (and sent the code), the current worker is signed out of every app and that commits, so
    /// nobody stays signed in while the next worker types the code or password. Finish it with
    /// `completeNativeSignIn(_:credential:scopes:msalClientID:shift:)`; if it never finishes, the device
    /// stays signed out.
    /// - Throws: as `startNativeSignIn(username:)`, except that anyone may be the next worker; nobody is
    ///   signed out when it throws.
    public func startNativeSwitch(
        username: String,
        reason: SignOutReason = .shiftEnd
    ) async throws(SharedDeviceError)
        -> (step: NativeSignInStep, shift: AccountManager.ShiftSwitch)
    {
        try checkAllowed(.nativeAuth)
        let step = try await nativeSignInStep(username: username)
        return (step, try accountManager.beginSwitch(app: app, reason: reason))
    }

    /// The grant of a native sign-in's password or code; nothing is cached. A wrong password is audited.
    func nativeGrant(
        _ step: NativeSignInStep,
        credential: NativeSignInCredential,
        scopes: [String],
        msalClientID: String?
    ) async throws(SharedDeviceError) -> TokenGrant {
        let requested = requestScopes(scopes + configuration.defaultScopes)
        let grant: TokenGrant
        do {
            switch credential {
            case .password(let password):
                grant = try await identity.submitNativeSignInPassword(step, password: password, scopes: requested)
            case .code(let code): grant = try await identity.submitNativeSignInCode(step, code: code, scopes: requested)
            }
        } catch {
            if error.code == .invalidCredentials {
                auditFailedSignIn(username: step.username, flow: .nativeAuth, msalClientID: msalClientID)
            }
            throw SharedDeviceError(error)
        }
        if Task.isCancelled {
            throw SharedDeviceError(
                IdentityError(
                    .userCanceled,
                    "the sign-in was canceled before it finished; nothing was cached — sign in again"
                )
            )
        }
        return grant
    }

    func nativeSignInStep(username: String) async throws(SharedDeviceError) -> NativeSignInStep {
        do {
            return try await identity.startNativeSignIn(username: username)
        } catch {
            throw SharedDeviceError(error)
        }
    }

    /// Sends a new one-time code for a native sign-in waiting for one.
    public func resendNativeSignInCode(_ step: NativeSignInStep) async throws(SharedDeviceError) -> NativeSignInStep {
        do {
            return try await identity.resendNativeSignInCode(step)
        } catch {
            throw SharedDeviceError(error)
        }
    }

    /// Finishes a native sign-in with the password or the code and caches the tokens (in shared mode the
    /// worker becomes the device's current worker); `account.signed_in` names the flow `nativeAuth`. A
    /// wrong password is audited as `account.sign_in_failed`; a wrong code leaves the step usable.
    /// With `shift` (from `startNativeSwitch`), the sign-in completes that shift change: `account.signed_in`
    /// and `account.switched` share the sign-out's correlation id.
    public func completeNativeSignIn(
        _ step: NativeSignInStep,
        credential: NativeSignInCredential,
        scopes: [String],
        msalClientID: String? = nil,
        shift: AccountManager.ShiftSwitch? = nil
    ) async throws(SharedDeviceError) -> AuthenticationResult {
        let grant = try await nativeGrant(step, credential: credential, scopes: scopes, msalClientID: msalClientID)
        if let shift {
            do throws(SharedDeviceError) {
                let account = try accountManager.completeSwitch(
                    shift,
                    response: try decode(grant),
                    context: context(scopes: grant.scopes),
                    app: app,
                    accessGroup: tokenGroup,
                    auditDetails: ["flow": DevicePolicy.SignInFlow.nativeAuth.rawValue].merging(
                        sandboxAuditDetails
                    ) { $1 }
                )
                return AuthenticationResult(
                    accessToken: grant.accessToken,
                    scopes: grant.scopes,
                    expiresOn: grant.expiresOn,
                    account: account,
                    idToken: grant.idToken?.raw,
                    source: .interactive,
                    correlationID: shift.correlationID
                )
            } catch {
                throw error.afterSwitchSignOut(shift.signedOut?.account)
            }
        }
        let correlationID = AccountManager.newCorrelationID()
        var logger = self.logger
        logger[metadataKey: "correlation_id"] = "\(correlationID)"
        return try signIn(
            grant,
            try decode(grant),
            flow: .nativeAuth,
            msalClientID: msalClientID,
            correlationID: correlationID,
            logger: logger
        )
    }
}

extension ApplicationEngine {
    /// What the app's audit events say of its sandbox: for a Flatpak app of the policy (which the broker
    /// serves only to a caller in that sandbox), `sandboxed` and its `flatpakAppId`; nothing for a host app.
    var sandboxAuditDetails: [String: String] {
        guard let flatpak = configuration.flatpakAppID else { return [:] }
        return ["sandboxed": "true", "flatpakAppId": flatpak]
    }
}
