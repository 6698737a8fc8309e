import BrokerContract
public import Foundation
public import Logging
public import NIOCore
import NIOPosix

/// An app's way to the device's broker (`deviced`), shaped like MSAL's PublicClientApplication with the
/// Authenticator broker: device information, the current and previous account, sign-in, tokens without UI,
/// sign-out, account changes, and the app's keychain groups.
///
/// Everything goes through the broker; this type holds no token and opens no store. The broker knows the
/// app by its uid (the kernel tells it), so there is nothing to configure but where the broker listens.
/// A single-reply call runs on one of a few pooled connections, a call with more replies (a sign-in, the
/// account changes) on a connection of its own: cancelling the calling task closes the call's connection, and the broker stops
/// the call (a sign-in in progress caches nothing).
///
/// ## Errors every call can throw
///
/// Every method throws ``SharedDeviceClientError``; match its ``SharedDeviceClientError/code``, never its
/// message. Besides the codes each method lists, any call can end with:
/// - ``SharedDeviceClientError/Code/brokerUnavailable``: no broker answers at the socket. Show the
///   message (it names the socket and the fix) and try again later; the device's administrator starts
///   the broker.
/// - ``SharedDeviceClientError/Code/untrustedBroker``: what listens runs as a user the endpoint does not
///   trust; nothing was sent. Do not retry: the device is misconfigured or under attack.
/// - ``SharedDeviceClientError/Code/callerNotInPolicy``: the device policy lists no app with this
///   process's uid (`uid` is the one the broker saw). Run the app as its user, or have the administrator
///   add it to the policy.
/// - ``SharedDeviceClientError/Code/limitExceeded``: a limit of the broker or the policy (`limit`,
///   `maximum`); wait and try again, or ask for less.
/// - ``SharedDeviceClientError/Code/cancelled``: the calling task was cancelled.
/// - ``SharedDeviceClientError/Code/refused``: any other refusal (`varlinkError`), or a reply off the
///   interface; show the message.
public final class PublicClientApplication: Sendable {
    /// Where the broker listens and whom the client trusts to be it.
    public let endpoint: BrokerEndpoint
    private let broker: BrokerCall

    /// An application for the broker at `endpoint` (by default the system's, `/run/devicectl/broker.sock`).
    ///
    /// Creating the application connects to nothing; each call connects (or takes a pooled connection).
    ///
    /// - Parameters:
    ///   - endpoint: where the broker listens and whom to trust to be it; the app decides (the library reads
    ///     no environment variable), e.g. `BrokerEndpoint(socketPath: …)` for a developer's own broker.
    ///   - logger: gets the client's own diagnostics (never a token or a secret): `debug`, and a `warning`
    ///     when it refuses an untrusted broker. By default the task-local `Logger.current` (the logger of the
    ///     enclosing swift-log `withLogger`, else swift-log's process-wide default), as the other libraries
    ///     take theirs: the client never makes a logger of its own.
    ///   - eventLoopGroup: runs the connections (nil: SwiftNIO's shared singleton group).
    public convenience init(
        endpoint: BrokerEndpoint = BrokerEndpoint(),
        logger: Logger = Logger.current,
        eventLoopGroup: (any EventLoopGroup)? = nil
    ) {
        self.init(endpoint: endpoint, callerPidfd: nil, logger: logger, eventLoopGroup: eventLoopGroup)
    }

    /// An application whose every call the broker serves as another process of this user: the process
    /// whose pidfd `callerPidfd` is, open in this process (`pidfd_open`). For the MSAL bridge, which serves
    /// the apps of its user on their session bus: a caller in a Flatpak sandbox is then served as its own
    /// policy entry. Each connection asks the broker first (`ActForCaller`); the broker takes its own copy
    /// of the pidfd through the kernel and identifies the process itself (its uid must be this process's),
    /// so nothing this process says about it is believed. Keep `callerPidfd` open while the application is
    /// used; only a host process may act for another.
    ///
    /// Every call can then also throw `actForCallerRefused` (not a pidfd, another user's process, one that
    /// exited, …: the message says which) or `actForCallerUnsupported` (the broker cannot pin processes on
    /// this kernel).
    @_spi(MSALBridge)
    public convenience init(
        endpoint: BrokerEndpoint,
        actingForCallerPidfd callerPidfd: Int32,
        logger: Logger = Logger.current,
        eventLoopGroup: (any EventLoopGroup)? = nil
    ) {
        self.init(endpoint: endpoint, callerPidfd: callerPidfd, logger: logger, eventLoopGroup: eventLoopGroup)
    }

    /// The one initializer the public ones call: connections that act for `callerPidfd` when one is given.
    private init(
        endpoint: BrokerEndpoint,
        callerPidfd: Int32?,
        logger: Logger,
        eventLoopGroup: (any EventLoopGroup)?
    ) {
        self.endpoint = endpoint
        broker = BrokerCall(
            endpoint: endpoint,
            group: eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton,
            logger: logger,
            callerPidfd: callerPidfd
        )
    }

    // MARK: - Device and accounts

    /// Who the broker takes this process for (by its uid, from the kernel) and the access groups it has.
    ///
    /// Call it first to check the app reaches the broker as the app the policy names. It answers even for
    /// a uid the policy does not list (`appID` nil, no groups), so it does not throw `callerNotInPolicy`.
    ///
    /// - Returns: the uid, the policy's app for it, its access groups and whether it is an administrator.
    /// - Throws: ``SharedDeviceClientError``, only with the codes every call can throw.
    public func caller() async throws(SharedDeviceClientError) -> CallerIdentity {
        try await broker.run(Broker1.GetCaller.self, .init()) { reply throws(SharedDeviceClientError) in
            CallerIdentity(
                uid: reply.uid,
                appID: reply.appId,
                accessGroups: reply.accessGroups,
                administrator: reply.administrator,
                stateDirectory: reply.stateDirectory,
                flatpakAppID: reply.flatpakAppId
            )
        }
    }

    /// Whether the device is shared or private, and its registration (MSAL's getDeviceInformation).
    ///
    /// In `shared` mode a sign-out, by any app or the administrator, ends the worker's session in every
    /// app: listen with ``accountChanges()`` and drop the worker's data when it comes.
    ///
    /// - Throws: ``SharedDeviceClientError``, with the codes every call can throw.
    public func deviceInformation() async throws(SharedDeviceClientError) -> DeviceInformation {
        try await broker.run(Broker1.GetDeviceInformation.self, .init()) { reply throws(SharedDeviceClientError) in
            try DeviceInformation(reply.information)
        }
    }

    /// The device's current worker for this app and the one before (MSAL's getCurrentAccount).
    ///
    /// Nobody signed in is not an error: `current` is nil; sign a worker in with ``acquireToken(_:)``.
    ///
    /// - Parameter msalClientID: as in ``acquireTokenSilent(scopes:forceRefresh:msalClientID:authority:)``.
    /// - Throws: ``SharedDeviceClientError``: `msalClientNotAllowed` for an `msalClientID` the policy does
    ///   not give the app, and the codes every call can throw.
    public func currentAccount(msalClientID: String? = nil) async throws(SharedDeviceClientError) -> CurrentAccount {
        try await broker.run(Broker1.GetCurrentAccount.self, .init(msalClientId: msalClientID)) {
            reply throws(SharedDeviceClientError) in
            CurrentAccount(current: reply.current.map(Account.init), previous: reply.previous.map(Account.init))
        }
    }

    /// The accounts this app holds (MSAL's allAccounts): on a shared device the signed-in worker's, one per
    /// Azure AD B2C user flow they signed in through; empty when nobody is signed in.
    ///
    /// - Throws: ``SharedDeviceClientError``, with the codes every call can throw.
    public func accounts() async throws(SharedDeviceClientError) -> [Account] {
        try await broker.run(Broker1.GetAccounts.self, .init()) { reply throws(SharedDeviceClientError) in
            reply.accounts.map(Account.init)
        }
    }

    /// The account of the Azure AD B2C user flow `policy` (MSAL's sample `getAccountByPolicy`), nil when
    /// the worker has not signed in through it.
    ///
    /// - Parameter policy: the user flow's name (`B2C_1_susi`), compared case-insensitively.
    /// - Throws: ``SharedDeviceClientError``, with the codes every call can throw.
    public func account(forPolicy policy: String) async throws(SharedDeviceClientError) -> Account? {
        try await accounts().first { $0.isAccount(ofPolicy: policy) }
    }

    /// Tells the broker the worker is active (input on the kiosk): the idle sign-out's clock starts over
    /// and a warning out is canceled. Returns the clock, nil when the policy has no idle sign-out.
    ///
    /// Call it on the worker's input (at most every few seconds is plenty); a pending
    /// ``AccountEvent/idleWarning(secondsLeft:)`` is then followed by ``AccountEvent/idleWarningCanceled``.
    ///
    /// - Throws: ``SharedDeviceClientError``, with the codes every call can throw.
    @discardableResult
    public func reportActivity() async throws(SharedDeviceClientError) -> IdleState? {
        try await broker.run(Broker1.ReportActivity.self, .init()) { reply throws(SharedDeviceClientError) in
            .some(reply.idle.map(IdleState.init))
        }
    }

    // MARK: - Tokens

    /// A token for `scopes` without UI (MSAL's acquireTokenSilent): the broker's cached access token, else
    /// a refresh. Call it before every use of a token: the broker caches, so it is cheap.
    ///
    /// - Parameters:
    ///   - scopes: the scopes the token must grant.
    ///   - forceRefresh: skip the cached access token and redeem the refresh token.
    ///   - msalClientID: the MSAL client id of a request that came through Microsoft's broker protocol (see
    ///     ``InteractiveTokenParameters/msalClientID``); the result then carries the ID token.
    ///   - authority: one of the device policy's `knownAuthorities` (an Azure AD B2C user flow, MSAL's
    ///     `parameters.authority`): that flow's token, under the worker's account of that flow.
    /// - Returns: the token and the account it is for; send `accessToken` as `Authorization: Bearer`.
    /// - Throws: ``SharedDeviceClientError``:
    ///   - `noCurrentAccount`: nobody is signed in; sign a worker in with ``acquireToken(_:)``.
    ///   - `identity` with `identityCode` `interaction_required` (`msalStatus` -50002): the refresh token
    ///     no longer works; sign the worker in again with ``acquireToken(_:)``. Other `identityCode`s
    ///     (`authority_unreachable`, …): show the message and try again later.
    ///   - `authorityNotAllowed`, `msalClientNotAllowed`: the policy does not allow that `authority` or
    ///     `msalClientID` for this app (a fix of the app or the policy, not of the worker).
    ///   - the codes every call can throw.
    public func acquireTokenSilent(
        scopes: [String],
        forceRefresh: Bool = false,
        msalClientID: String? = nil,
        authority: String? = nil
    ) async throws(SharedDeviceClientError) -> AuthenticationResult {
        try await broker.run(
            Broker1.AcquireTokenSilent.self,
            .init(
                scopes: scopes,
                forceRefresh: forceRefresh ? true : nil,
                msalClientId: msalClientID,
                authority: authority
            )
        ) {
            reply throws(SharedDeviceClientError) in
            try AuthenticationResult(reply.result)
        }
    }

    /// Signs a worker in (MSAL's acquireToken): the broker runs the sign-in, the app shows the device code
    /// or opens the browser when `parameters.flow` is called. In shared mode the worker is then signed in
    /// to every app on the device.
    ///
    /// The call returns when the worker finished the sign-in (or it failed); cancel the calling task to
    /// stop it (nothing is cached then).
    ///
    /// - Parameter parameters: the scopes, how the sign-in shows itself (`flow`) and its options.
    /// - Returns: the new worker's token.
    /// - Throws: ``SharedDeviceClientError``:
    ///   - `accountAlreadySignedIn`: another worker is signed in on the shared device; use their token
    ///     (``acquireTokenSilent(scopes:forceRefresh:msalClientID:authority:)``), or end the shift with
    ///     ``switchWorker(_:reason:signedOut:)``.
    ///   - `flowNotAllowed`: the policy's `authority.flows` does not list the flow; offer another.
    ///   - `identity`: the identity provider refused or failed; `identityCode` says how
    ///     (`device_code_expired`: start again; `authority_unreachable`: try again later).
    ///   - `limitExceeded` `pendingSignInsPerApp`: the app has too many sign-ins running; finish one first.
    ///   - `authorityNotAllowed`, `msalClientNotAllowed`, and the codes every call can throw.
    public func acquireToken(
        _ parameters: InteractiveTokenParameters
    ) async throws(SharedDeviceClientError) -> AuthenticationResult {
        switch parameters.flow {
        case .password(let username, let password):
            return try await signIn(
                username: username,
                password: password,
                scopes: parameters.scopes,
                msalClientID: parameters.msalClientID,
                authority: parameters.authority
            )
        case .deviceCode(let showCode):
            return try await broker.run(
                Broker1.SignInWithDeviceCode.self,
                .init(
                    scopes: parameters.scopes,
                    loginHint: parameters.loginHint,
                    msalClientId: parameters.msalClientID,
                    authority: parameters.authority
                ),
                more: true
            ) { reply throws(SharedDeviceClientError) in
                if let result = reply.result { return try AuthenticationResult(result) }
                if let verification = reply.verification { await showCode(DeviceCodeVerification(verification)) }
                return nil
            }
        case .browser(let redirectURI, let prompt, let timeout, let openBrowser):
            let call = Broker1.SignInWithBrowser.Parameters(
                scopes: parameters.scopes,
                redirectUri: redirectURI,
                loginHint: parameters.loginHint,
                prompt: prompt.map(Broker1.SignInPrompt.init(rawValue:)),
                timeout: timeout,
                msalClientId: parameters.msalClientID,
                authority: parameters.authority
            )
            return try await broker.run(Broker1.SignInWithBrowser.self, call, more: true) {
                reply throws(SharedDeviceClientError) in
                if let result = reply.result { return try AuthenticationResult(result) }
                if let address = reply.authorizationUrl {
                    guard let url = URL(string: address) else {
                        throw .refused(
                            error: "org.varlink.service.InvalidParameter",
                            message: "the broker's authorizationUrl is not a URL"
                        )
                    }
                    await openBrowser(url)
                }
                return nil
            }
        }
    }

    /// Signs a worker in with the username and password the app's own screen took (MSAL native auth's
    /// `signIn(username:password:)`; the resource-owner password grant at an OpenID Connect provider).
    /// Only where the device policy's `authority.flows` lists `password`. A wrong username or password
    /// caches nothing and is audited.
    ///
    /// - Parameters:
    ///   - username: the worker's username, as they typed it.
    ///   - password: their password; the broker sends it to the identity provider only, and never logs it.
    ///   - scopes: the scopes the token must grant.
    ///   - msalClientID: as in ``acquireTokenSilent(scopes:forceRefresh:msalClientID:authority:)``.
    ///   - authority: as in ``acquireTokenSilent(scopes:forceRefresh:msalClientID:authority:)``.
    /// - Throws: ``SharedDeviceClientError``:
    ///   - `identity` with `identityCode` `invalid_credentials`: a wrong username or password; let the
    ///     worker type them again.
    ///   - `limitExceeded` with `limit` `passwordBackoff`: wait `maximum` seconds before the next try.
    ///   - `flowNotAllowed`: the policy does not allow password sign-in; use another flow.
    ///   - `accountAlreadySignedIn`, as ``acquireToken(_:)``, and the codes every call can throw.
    public func signIn(
        username: String,
        password: String,
        scopes: [String],
        msalClientID: String? = nil,
        authority: String? = nil
    ) async throws(SharedDeviceClientError) -> AuthenticationResult {
        try await broker.run(
            Broker1.SignInWithPassword.self,
            .init(
                scopes: scopes,
                username: username,
                password: password,
                msalClientId: msalClientID,
                authority: authority
            )
        ) { reply throws(SharedDeviceClientError) in
            try AuthenticationResult(reply.result)
        }
    }

    /// Starts a native sign-in (MSAL native auth's `signIn(username:)`; only where the device policy's
    /// `authority.flows` lists `nativeAuth`, at a Microsoft Entra External ID authority): says whether the
    /// password or the emailed code is next, and where the code went.
    ///
    /// With `switchReason` the sign-in is the next worker of a shift change: the current worker is signed
    /// out of every app once the authority took the username (`NativeSignIn.signedOut` says who), and
    /// `submitNativeSignIn` signs the next one in under the same correlation id.
    ///
    /// - Parameters:
    ///   - username: the worker's username, as they typed it.
    ///   - msalClientID: as in ``acquireTokenSilent(scopes:forceRefresh:msalClientID:authority:)``.
    ///   - switchReason: make it a shift change for this reason; nil for a plain sign-in.
    /// - Returns: the waiting sign-in: show what ``NativeSignIn/next`` asks for, then call
    ///   ``submitNativeSignIn(_:password:code:scopes:)``.
    /// - Throws: ``SharedDeviceClientError``: `flowNotAllowed` where the policy does not list `nativeAuth`;
    ///   `identity` when the authority refused the username (`identityCode` says why); `accountAlreadySignedIn`
    ///   without `switchReason` for another username than the signed-in worker's (pass a `switchReason`
    ///   to change shifts); `limitExceeded` `pendingSignInsPerApp` while too many of the app's native
    ///   sign-ins are open; and the codes every call can throw.
    public func startNativeSignIn(
        username: String,
        msalClientID: String? = nil,
        switchReason: SignOutReason? = nil
    ) async throws(SharedDeviceClientError) -> NativeSignIn {
        try await broker.run(
            Broker1.StartNativeSignIn.self,
            .init(username: username, msalClientId: msalClientID, switchReason: switchReason?.rawValue)
        ) {
            reply throws(SharedDeviceClientError) in
            var signIn = try NativeSignIn(reply.next)
            signIn.signedOut = reply.signedOut.map {
                SignOutResult(account: $0.account.map(Account.init), global: true, itemsRemoved: $0.itemsRemoved)
            }
            return signIn
        }
    }

    /// Sends a new one-time code for a native sign-in waiting for one (the previous code stops working).
    ///
    /// - Parameter signIn: the waiting sign-in, as ``startNativeSignIn(username:msalClientID:switchReason:)``
    ///   returned it.
    /// - Returns: the sign-in, with where the new code went.
    /// - Throws: ``SharedDeviceClientError``: `signInNotFound` (`Code(name: "signInNotFound")`, no constant)
    ///   when the sign-in is no longer open (it finished, failed or waited more than 10 minutes): start
    ///   again; `identity` when the authority refused; and the codes every call can throw.
    public func resendNativeSignInCode(_ signIn: NativeSignIn) async throws(SharedDeviceClientError) -> NativeSignIn {
        try await broker.run(Broker1.ResendNativeSignInCode.self, .init(signInId: signIn.id)) {
            reply throws(SharedDeviceClientError) in
            try NativeSignIn(reply.next)
        }
    }

    /// Finishes a native sign-in with what the worker typed (`password` or `code`, as `signIn.next` asks).
    /// After a wrong code the sign-in stays open: the worker may type again.
    ///
    /// - Parameters:
    ///   - signIn: the waiting sign-in.
    ///   - password: the worker's password, when `signIn.next` is `password`.
    ///   - code: the one-time code, when `signIn.next` is `code`.
    ///   - scopes: the scopes the token must grant.
    /// - Returns: the worker's token.
    /// - Throws: ``SharedDeviceClientError``: `identity` with `identityCode` `invalid_code` (or
    ///   `invalid_credentials`): let the worker type again, the sign-in stays open; `identity` otherwise, or
    ///   `signInNotFound` for a sign-in no longer open: start again; and the codes every call can throw.
    public func submitNativeSignIn(
        _ signIn: NativeSignIn,
        password: String? = nil,
        code: String? = nil,
        scopes: [String]
    ) async throws(SharedDeviceClientError) -> AuthenticationResult {
        try await broker.run(
            Broker1.SubmitNativeSignIn.self,
            .init(signInId: signIn.id, scopes: scopes, password: password, code: code)
        ) {
            reply throws(SharedDeviceClientError) in
            try AuthenticationResult(reply.result)
        }
    }

    /// A shift change in one call: the current worker is signed out of every app (committed first), then
    /// the next worker signs in as `parameters.flow` shows. If the sign-in fails or is cancelled, the
    /// device stays signed out. `signedOut`, if given, hears who left (and how many of their items went)
    /// as soon as the sign-out is committed, before the next worker's sign-in starts.
    ///
    /// - Parameters:
    ///   - parameters: the next worker's sign-in, as for ``acquireToken(_:)``.
    ///   - reason: why the current worker leaves (every app hears it in ``AccountEvent/signedOut(reason:sequence:)``).
    ///   - reportSignOut: hears the sign-out as soon as it is committed.
    /// - Returns: who left and the next worker's token.
    /// - Throws: ``SharedDeviceClientError``, with the codes of ``acquireToken(_:)``. A failure after the
    ///   sign-out leaves the device signed out (its message says so): sign the next worker in with
    ///   ``acquireToken(_:)``.
    public func switchWorker(
        _ parameters: InteractiveTokenParameters,
        reason: SignOutReason = .shiftEnd,
        signedOut reportSignOut: (@Sendable (SignOutResult) async -> Void)? = nil
    ) async throws(SharedDeviceClientError) -> WorkerSwitch {
        var call = Broker1.SwitchWorker.Parameters(
            scopes: parameters.scopes,
            reason: reason.rawValue,
            loginHint: parameters.loginHint
        )
        let showCode: (@Sendable (DeviceCodeVerification) async -> Void)?
        let openBrowser: (@Sendable (URL) async -> Void)?
        switch parameters.flow {
        case .deviceCode(let show):
            (call.flow, showCode, openBrowser) = (.deviceCode, show, nil)
        case .browser(let redirectURI, let prompt, let timeout, let open):
            (call.flow, call.redirectUri, call.prompt, call.timeout, showCode, openBrowser) = (
                .browser, redirectURI, prompt.map(Broker1.SignInPrompt.init(rawValue:)), timeout, nil, open
            )
        case .password(let username, let password):
            (call.flow, call.loginHint, call.password, showCode, openBrowser) = (
                .password, username, password, nil, nil
            )
        }
        let signedOut = SignedOutBox()
        return try await broker.run(Broker1.SwitchWorker.self, call, more: true) {
            reply throws(SharedDeviceClientError) in
            if let worker = reply.signedOut {
                let result = SignOutResult(
                    account: worker.account.map(Account.init),
                    global: true,
                    itemsRemoved: worker.itemsRemoved
                )
                signedOut.value = result
                await reportSignOut?(result)
            }
            if let verification = reply.verification { await showCode?(DeviceCodeVerification(verification)) }
            if let address = reply.authorizationUrl, let url = URL(string: address) { await openBrowser?(url) }
            guard let result = reply.result else { return nil }
            return WorkerSwitch(
                signedOut: signedOut.value ?? SignOutResult(account: nil, global: true, itemsRemoved: 0),
                result: try AuthenticationResult(result)
            )
        }
    }

    /// Signs the current worker out; in shared mode from every app on the device. The counts are the
    /// broker's.
    ///
    /// Every subscribed app hears ``AccountEvent/signedOut(reason:sequence:)``, this one included.
    ///
    /// - Parameter reason: why the worker leaves: ``SignOutReason/user`` or ``SignOutReason/shiftEnd``.
    /// - Returns: who was signed out, whether from every app, and how many keychain items went with them.
    /// - Throws: ``SharedDeviceClientError``: `noCurrentAccount` when nobody is signed in (nothing to do:
    ///   the device is already signed out), and the codes every call can throw.
    public func signOut(reason: SignOutReason = .user) async throws(SharedDeviceClientError) -> SignOutResult {
        try await broker.run(Broker1.SignOut.self, .init(reason: reason.rawValue)) {
            reply throws(SharedDeviceClientError) in
            SignOutResult(
                account: reply.account.map(Account.init),
                global: reply.global,
                itemsRemoved: reply.itemsRemoved
            )
        }
    }

    /// Every account change and idle warning the broker pushes, from the moment of the call: the sequence
    /// returns at once, its first event is `subscribed` (from then on nothing is missed). It ends when the
    /// consumer stops iterating (the subscription's connection is closed) and throws
    /// `SharedDeviceClientError` when the broker goes away.
    ///
    /// On ``AccountEvent/signedOut(reason:sequence:)`` drop everything of the worker's (lock the screen);
    /// on ``AccountEvent/signedIn(current:sequence:)`` or ``AccountEvent/switched(current:sequence:)`` take a
    /// token for the new worker. When the stream throws (`brokerUnavailable` after the broker went away),
    /// subscribe again once the broker is back and read ``currentAccount(msalClientID:)``: changes while
    /// nobody listened are not replayed.
    public func accountChanges() -> AsyncThrowingStream<AccountEvent, any Error> {
        let (events, continuation) = AsyncThrowingStream<AccountEvent, any Error>.makeStream()
        let broker = broker
        let subscription = Task {
            do {
                let _: Never = try await broker.run(Broker1.SubscribeAccountChanges.self, .init(), more: true) {
                    reply throws(SharedDeviceClientError) -> Never? in
                    if let event = try AccountEvent(reply.event) {
                        continuation.yield(event)
                    } else {
                        broker.logger.debug(
                            "skipping an account event of a kind this client does not know",
                            metadata: ["kind": "\(reply.event.kind)"]
                        )
                    }
                    return nil
                }
            } catch SharedDeviceClientError.Code.cancelled {
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in subscription.cancel() }
        return events
    }

    // MARK: - Keychain

    /// Adds a generic password to `accessGroup` (nil: the app's first group), as `SecItemAdd`.
    ///
    /// - Parameters:
    ///   - service: the item's service; with `account`, what makes it unique in its group.
    ///   - account: the item's account.
    ///   - secret: the secret; stored encrypted, returned only by a find.
    ///   - accessGroup: the group to add it to; nil: the app's first group in the policy, which may be one
    ///     other apps share. Name the app's own group to keep the item to the app.
    ///   - label: a name for people.
    ///   - type: the app's own type code.
    ///   - generic: the app's own attribute bytes (not secret).
    /// - Returns: the item as stored (without its secret).
    /// - Throws: ``SharedDeviceClientError``:
    ///   - `duplicateItem` (-25299): the group has an item with this service and account; update it with
    ///     ``updateGenericPassword(_:secret:changes:)`` instead.
    ///   - `missingEntitlement` (-34018): the policy does not give the app `accessGroup`.
    ///   - `quotaExceeded` (-34): the app's items would go over its quota; delete some first.
    ///   - `diskFull` (-34), `invalidParameter` (-50), and the codes every call can throw.
    @discardableResult
    public func addGenericPassword(
        service: String,
        account: String,
        secret: Data,
        accessGroup: String? = nil,
        label: String? = nil,
        type: UInt32? = nil,
        generic: Data? = nil
    ) async throws(SharedDeviceClientError) -> KeychainItem {
        let parameters = Broker1.AddGenericPassword.Parameters(
            service: service,
            account: account,
            secret: secret.base64EncodedString(),
            accessGroup: accessGroup,
            label: label,
            type: type.map(Int.init),
            generic: generic?.base64EncodedString()
        )
        return try await broker.run(Broker1.AddGenericPassword.self, parameters) {
            reply throws(SharedDeviceClientError) in
            try KeychainItem(reply.item)
        }
    }

    /// The first item `query` selects, with its secret.
    ///
    /// - Parameter query: which items; name `accessGroup` to search the app's own group only.
    /// - Returns: the item, with ``KeychainItem/secret`` set.
    /// - Throws: ``SharedDeviceClientError``: `itemNotFound` (-25300) when nothing matches (catch
    ///   `SharedDeviceClientError.Code.itemNotFound`, or test `error.isItemNotFound`); `missingEntitlement`
    ///   (-34018) for a group the app lacks; and the codes every call can throw.
    public func findGenericPassword(_ query: ItemQuery) async throws(SharedDeviceClientError) -> KeychainItem {
        try await broker.run(Broker1.FindGenericPassword.self, .init(query, all: nil)) {
            reply throws(SharedDeviceClientError) in
            try KeychainItem(reply.item)
        }
    }

    /// Every item `query` selects, with their secrets (a find with `kSecMatchLimitAll`).
    ///
    /// - Parameter query: which items.
    /// - Returns: every matching item, with its secret.
    /// - Throws: ``SharedDeviceClientError``: `itemNotFound` (-25300) when nothing matches; `limitExceeded`
    ///   with `limit` `replyBytes`: narrow the query or find the items one by one; `missingEntitlement`
    ///   (-34018); and the codes every call can throw.
    public func findAllGenericPasswords(_ query: ItemQuery) async throws(SharedDeviceClientError) -> [KeychainItem] {
        try await broker.run(Broker1.FindGenericPassword.self, .init(query, all: true)) {
            reply throws(SharedDeviceClientError) in
            var items: [KeychainItem] = []
            for item in reply.items { items.append(try KeychainItem(item)) }
            return items
        }
    }

    /// Gives every item `query` selects a new `secret` and/or the attributes in `changes`; returns how many.
    /// No match throws the keychain's item-not-found (`-25300`, as `SecItemUpdate`).
    ///
    /// - Parameters:
    ///   - query: which items to change.
    ///   - secret: the new secret; nil: unchanged.
    ///   - changes: the new attributes; nil fields are unchanged.
    /// - Returns: how many items changed.
    /// - Throws: ``SharedDeviceClientError``: `itemNotFound` (-25300) when nothing matches (add the item
    ///   instead); `duplicateItem` (-25299) when the change would make two items alike; `missingEntitlement`
    ///   (-34018); `quotaExceeded` or `diskFull` (-34); and the codes every call can throw.
    @discardableResult
    public func updateGenericPassword(
        _ query: ItemQuery,
        secret: Data? = nil,
        changes: ItemChanges = ItemChanges()
    ) async throws(SharedDeviceClientError) -> Int {
        let parameters = Broker1.UpdateGenericPassword.Parameters(
            service: query.service,
            account: query.account,
            label: query.label,
            type: query.type.map(Int.init),
            accessGroup: query.accessGroup,
            secret: secret?.base64EncodedString(),
            setService: changes.service,
            setAccount: changes.account,
            setLabel: changes.label,
            setType: changes.type.map(Int.init),
            setGeneric: changes.generic?.base64EncodedString()
        )
        return try await broker.run(Broker1.UpdateGenericPassword.self, parameters) {
            reply throws(SharedDeviceClientError) in reply.updated
        }
    }

    /// Deletes every item `query` selects; returns how many. No match throws the keychain's item-not-found
    /// (`-25300`, as `SecItemDelete`; `error.isItemNotFound`). An app for which "nothing to delete" is fine
    /// calls `deleteGenericPasswordIfPresent` instead.
    ///
    /// - Parameter query: which items to delete.
    /// - Returns: how many items were deleted.
    /// - Throws: ``SharedDeviceClientError``: `itemNotFound` (-25300) when nothing matches;
    ///   `missingEntitlement` (-34018); and the codes every call can throw.
    @discardableResult
    public func deleteGenericPassword(_ query: ItemQuery) async throws(SharedDeviceClientError) -> Int {
        let parameters = Broker1.DeleteGenericPassword.Parameters(
            service: query.service,
            account: query.account,
            label: query.label,
            type: query.type.map(Int.init),
            accessGroup: query.accessGroup
        )
        return try await broker.run(Broker1.DeleteGenericPassword.self, parameters) {
            reply throws(SharedDeviceClientError) in reply.deleted
        }
    }

    /// Deletes every item `query` selects, if there is any; returns how many, 0 when nothing matched. The
    /// broker still answers a delete without a match with item-not-found (-25300, as `SecItemDelete`): this
    /// call takes that answer for 0 and throws every other failure (-34018 for a group the app lacks, …).
    ///
    /// - Parameter query: which items to delete.
    /// - Returns: how many items were deleted, 0 when none matched.
    /// - Throws: ``SharedDeviceClientError``, as ``deleteGenericPassword(_:)`` but never `itemNotFound`.
    @discardableResult
    public func deleteGenericPasswordIfPresent(_ query: ItemQuery) async throws(SharedDeviceClientError) -> Int {
        do throws(SharedDeviceClientError) {
            return try await deleteGenericPassword(query)
        } catch {
            guard error.isItemNotFound else { throw error }
            return 0
        }
    }

    /// The attributes (never the secrets) of every item `query` selects.
    ///
    /// - Parameter query: which items; the default lists every item in every group of the app.
    /// - Returns: the items, without their secrets; empty when nothing matches.
    /// - Throws: ``SharedDeviceClientError``: `missingEntitlement` (-34018) for a group the app lacks;
    ///   `limitExceeded` `replyBytes` when the list would not fit in one reply (narrow the query); and the
    ///   codes every call can throw.
    public func listGenericPasswords(
        _ query: ItemQuery = ItemQuery()
    ) async throws(SharedDeviceClientError) -> [KeychainItem] {
        let parameters = Broker1.ListGenericPasswords.Parameters(
            service: query.service,
            account: query.account,
            label: query.label,
            type: query.type.map(Int.init),
            accessGroup: query.accessGroup
        )
        return try await broker.run(Broker1.ListGenericPasswords.self, parameters) {
            reply throws(SharedDeviceClientError) in
            var items: [KeychainItem] = []
            for item in reply.items { items.append(try KeychainItem(item)) }
            return items
        }
    }
}

extension Broker1.FindGenericPassword.Parameters {
    init(_ query: ItemQuery, all: Bool?) {
        self.init(
            service: query.service,
            account: query.account,
            label: query.label,
            type: query.type.map(Int.init),
            accessGroup: query.accessGroup,
            all: all
        )
    }
}

/// The switch's sign-out, kept from its first reply to its last (replies are handled one after another).
private final class SignedOutBox: @unchecked Sendable {
    var value: SignOutResult?
}
