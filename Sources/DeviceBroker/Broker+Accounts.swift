public import BrokerContract
import Foundation
import IdentityClient
import SharedDevice
public import Varlink

// The MSAL-shaped methods: current account, interactive and silent tokens, sign-out.
extension Broker {
    /// The caller's app's current and previous account.
    public func getCurrentAccount(
        _ parameters: Broker1.GetCurrentAccount.Parameters,
        context caller: BrokerCaller
    ) throws(BrokerFailure)
        -> Broker1.GetCurrentAccount.Reply
    {
        // As a silent token's (below): the app as of the policy last read, held to it in the one read.
        if parameters.msalClientId == nil, let (application, known) = applicationAsLastKnown(for: caller) {
            let answer: CurrentAccount?
            do {
                answer = try application.currentAccount(ifStoreUnchangedSince: known)
            } catch {
                throw BrokerFailure(error)
            }
            if let answer { return Self.currentAccountReply(answer) }
        }
        let application = try application(
            for: caller,
            msalClientID: parameters.msalClientId,
            method: "GetCurrentAccount"
        )
        do {
            return Self.currentAccountReply(try application.currentAccount())
        } catch {
            throw BrokerFailure(error)
        }
    }

    /// The contract's reply of `answer`.
    static func currentAccountReply(_ answer: CurrentAccount) -> Broker1.GetCurrentAccount.Reply {
        Broker1.GetCurrentAccount.Reply(
            current: answer.current.map(Broker1.Account.init),
            previous: answer.previous.map(Broker1.Account.init)
        )
    }

    /// A cached access token for the caller's app, else a refreshed one.
    public func acquireTokenSilent(
        _ parameters: Broker1.AcquireTokenSilent.Parameters,
        context caller: BrokerCaller
    ) async throws(BrokerFailure)
        -> Broker1.AcquireTokenSilent.Reply
    {
        // The hot path: the app as of the policy last read, held to it in the engine's one read transaction (a
        // read of its own for the policy's stamp cost a fifth of the call). When the store changed since, the call
        // goes the way below. (Calls through the MSAL bridge, which name an MSAL client id, always do: a refused
        // id is audited from the policy as it is.)
        if parameters.msalClientId == nil,
            let (application, known) = applicationAsLastKnown(for: caller, authority: parameters.authority)
        {
            let answer: SharedDevice.AuthenticationResult?
            do {
                answer = try await application.acquireTokenSilent(
                    scopes: parameters.scopes,
                    forceRefresh: parameters.forceRefresh ?? false,
                    ifStoreUnchangedSince: known
                )
            } catch {
                throw BrokerFailure(error)
            }
            if let answer {
                return Broker1.AcquireTokenSilent.Reply(result: try Self.result(answer, msalClientID: nil))
            }
        }
        let application = try application(
            for: caller,
            msalClientID: parameters.msalClientId,
            method: "AcquireTokenSilent",
            authority: parameters.authority
        )
        let result: SharedDevice.AuthenticationResult
        do {
            result = try await application.acquireTokenSilent(
                scopes: parameters.scopes,
                forceRefresh: parameters.forceRefresh ?? false,
                includeIDToken: parameters.msalClientId != nil
            )
        } catch {
            throw BrokerFailure(error)
        }
        return Broker1.AcquireTokenSilent.Reply(result: try Self.result(result, msalClientID: parameters.msalClientId))
    }

    /// The accounts the caller's app holds.
    public func getAccounts(
        _ parameters: Broker1.GetAccounts.Parameters,
        context caller: BrokerCaller
    ) throws(BrokerFailure)
        -> Broker1.GetAccounts.Reply
    {
        let application = try application(for: caller)
        do {
            return Broker1.GetAccounts.Reply(accounts: try application.accounts().map(Broker1.Account.init))
        } catch {
            throw BrokerFailure(error)
        }
    }

    /// Signs the current worker out (an administrator's sign-out: of every app, whatever the caller's app).
    public func signOut(
        _ parameters: Broker1.SignOut.Parameters,
        context caller: BrokerCaller
    ) async throws(BrokerFailure)
        -> Broker1.SignOut.Reply
    {
        let reason = try ParameterCheck.reason(parameters.reason, default: .user, allowed: [.user, .shiftEnd, .admin])
        // An administrator (root, or a member of the policy's administratorsGroup) ends the shift for every
        // app: with reason `admin`, or with any reason when it is no app itself (root's `devicectl signout`).
        let isApp = (try? currentPolicy())?.policy?.app(uid: caller.uid, sandbox: caller.sandbox) != nil
        if reason == .admin || (!isApp && isAdministrator(caller)) {
            return try administratorSignOut(caller, reason: reason)
        }
        // An app may say the worker left or the shift ended; `admin` is for administrators, `idle` the broker's own.
        let application = try application(for: caller)
        do {
            return Self.signOutReply(try await application.signOut(parameters: SignOutParameters(reason: reason)))
        } catch {
            throw BrokerFailure(error)
        }
    }

    private func administratorSignOut(
        _ caller: BrokerCaller,
        reason: SignOutReason
    ) throws(BrokerFailure) -> Broker1.SignOut.Reply {
        guard isAdministrator(caller) else {
            refusals.refused(
                RefusalAudit.Kind(
                    uid: caller.uid,
                    method: "SignOut",
                    reason: "not an administrator",
                    app: caller.appKey
                ),
                AuditEntry(
                    type: .keychainAccessDenied,
                    actor: caller.actor,
                    reason: "not an administrator",
                    details: ["method": "SignOut", "pid": "\(caller.pid)"]
                )
            )
            throw .permissionDenied
        }
        do {
            return Self.signOutReply(try accounts.signOut(app: nil, reason: reason, actor: caller.actor))
        } catch {
            throw BrokerFailure(error)
        }
    }

    private static func signOutReply(_ outcome: AccountManager.SignOutOutcome) -> Broker1.SignOut.Reply {
        Broker1.SignOut.Reply(
            account: outcome.account.map(Broker1.Account.init),
            global: outcome.global,
            itemsRemoved: outcome.itemsRemoved
        )
    }

    /// Device code: the first reply carries the code to show, the last the result. If the caller goes
    /// away the task is cancelled, the polling stops, and nothing is cached.
    /// It holds one of the app's sign-in slots (`limits.pendingSignInsPerApp`) while it runs.
    public func signInWithDeviceCode(
        _ parameters: Broker1.SignInWithDeviceCode.Parameters,
        context caller: BrokerCaller,
        replies: VarlinkReplyStream<Broker1.SignInWithDeviceCode.Reply>
    ) async throws(BrokerFailure) {
        try await inSignInSlot(caller) { () async throws(BrokerFailure) in
            try await signInWithDeviceCodeInSlot(parameters, caller: caller, replies: replies)
        }
    }

    private func signInWithDeviceCodeInSlot(
        _ parameters: Broker1.SignInWithDeviceCode.Parameters,
        caller: BrokerCaller,
        replies: VarlinkReplyStream<Broker1.SignInWithDeviceCode.Reply>
    ) async throws(BrokerFailure) {
        let application = try application(
            for: caller,
            msalClientID: parameters.msalClientId,
            method: "SignInWithDeviceCode",
            authority: parameters.authority
        )
        let (sessions, shown) = AsyncStream.makeStream(of: DeviceCodeSession.self)
        async let outcome = Self.deviceCodeSignIn(
            application,
            scopes: parameters.scopes,
            loginHint: parameters.loginHint,
            msalClientID: parameters.msalClientId,
            shown: shown
        )
        for await session in sessions {
            await replies.next(
                Broker1.SignInWithDeviceCode.Reply(verification: Broker1.DeviceCodeVerification(session))
            )
        }
        switch await outcome {
        case .success(let result):
            await replies.last(
                Broker1.SignInWithDeviceCode.Reply(
                    result: try Self.result(result, msalClientID: parameters.msalClientId)
                )
            )
        case .failure(let error): throw BrokerFailure(error)
        }
    }

    private static func deviceCodeSignIn(
        _ application: ApplicationEngine,
        scopes: [String],
        loginHint: String?,
        msalClientID: String?,
        shown: AsyncStream<DeviceCodeSession>.Continuation
    ) async -> Result<SharedDevice.AuthenticationResult, SharedDeviceError> {
        defer { shown.finish() }
        do throws(SharedDeviceError) {
            return .success(
                try await application.acquireToken(
                    InteractiveTokenParameters(
                        scopes: scopes,
                        flow: .deviceCode(showCode: { shown.yield($0) }),
                        loginHint: loginHint,
                        msalClientID: msalClientID
                    )
                )
            )
        } catch {
            return .failure(error)
        }
    }

    /// Browser: the broker listens on the caller's loopback redirect URI; the first reply carries the
    /// authorization URL to open, the last the result.
    /// It holds one of the app's sign-in slots and one of the device's browser sign-in slots while it runs.
    public func signInWithBrowser(
        _ parameters: Broker1.SignInWithBrowser.Parameters,
        context caller: BrokerCaller,
        replies: VarlinkReplyStream<Broker1.SignInWithBrowser.Reply>
    ) async throws(BrokerFailure) {
        try await inSignInSlot(caller) { () async throws(BrokerFailure) in
            try await inBrowserSignInSlot(caller) { () async throws(BrokerFailure) in
                try await signInWithBrowserInSlots(parameters, caller: caller, replies: replies)
            }
        }
    }

    private func signInWithBrowserInSlots(
        _ parameters: Broker1.SignInWithBrowser.Parameters,
        caller: BrokerCaller,
        replies: VarlinkReplyStream<Broker1.SignInWithBrowser.Reply>
    ) async throws(BrokerFailure) {
        let redirectURI = try ParameterCheck.redirectURI(parameters.redirectUri)
        let prompt = try ParameterCheck.prompt(parameters.prompt)
        let timeout = try ParameterCheck.browserTimeout(parameters.timeout)
        let application = try browserApplication(
            for: caller,
            redirectURI: redirectURI,
            msalClientID: parameters.msalClientId,
            authority: parameters.authority
        )
        let result: SharedDevice.AuthenticationResult
        do {
            result = try await application.acquireToken(
                InteractiveTokenParameters(
                    scopes: parameters.scopes,
                    flow: Self.browserFlow { url in
                        await replies.next(Broker1.SignInWithBrowser.Reply(authorizationUrl: url.absoluteString))
                    },
                    prompt: prompt,
                    loginHint: parameters.loginHint,
                    browserTimeout: timeout,
                    msalClientID: parameters.msalClientId
                )
            )
        } catch {
            throw BrokerFailure(error)
        }
        await replies.last(
            Broker1.SignInWithBrowser.Reply(result: try Self.result(result, msalClientID: parameters.msalClientId))
        )
    }

    /// The caller's app with the caller's loopback redirect URI, on which the broker listens for the browser.
    func browserApplication(
        for caller: BrokerCaller,
        redirectURI: URL,
        msalClientID: String? = nil,
        authority: String? = nil
    ) throws(BrokerFailure) -> ApplicationEngine {
        let shared = try application(
            for: caller,
            msalClientID: msalClientID,
            method: "SignInWithBrowser",
            authority: authority
        )
        do {
            var configuration = shared.configuration
            configuration.redirectURI = redirectURI
            return try ApplicationEngine(
                configuration: configuration,
                device: device,
                transport: transport,
                accounts: accounts,
                logger: logger
            )
        } catch {
            throw BrokerFailure(error)
        }
    }

    /// The browser flow of a brokered sign-in: the authorization URL goes to the caller (`show`, a
    /// continued reply that returns false once the caller is gone).
    static func browserFlow(show: @escaping @Sendable (URL) async -> Bool) -> InteractiveFlow {
        .browser(openBrowser: { url throws(IdentityError) in
            guard await show(url) else {
                throw IdentityError(.userCanceled, "the app went away before the browser opened")
            }
        })
    }
}
