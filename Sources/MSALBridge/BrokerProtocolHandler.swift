public import Foundation
public import Logging
public import ProcessSandbox
@_spi(MSALBridge) public import SharedDeviceClient

/// Answers the methods of Microsoft's Linux broker protocol (`com.microsoft.identity.Broker1`) from the
/// device's broker (`deviced`), as the user the bridge runs as: the broker knows the app by that uid. A
/// caller in a Flatpak sandbox is served on connections of its own that deviced acts on for that caller's
/// process (`ActForCaller` with the caller's pidfd), so deviced serves it as its own policy entry.
///
/// - `getAccounts`: the device's current worker, or none.
/// - `acquireTokenSilently`: the broker's silent token for the app and the request's client id; status 2
///   (interaction required) when nobody is signed in, the worker the app holds has left, or only a sign-in
///   can help.
/// - `acquireTokenInteractively`: the current worker's token when one is signed in (single sign-on), else
///   the device's interactive sign-in (device code or browser), ended with status 7 after
///   `interactiveDeadline` (MSALRuntime gives up on a call after 300 s).
///
/// Every token it answers expires at most 290 s ahead (`BrokerProtocolMessages.maximumTokenLifetime`), so
/// every MSAL asks again before it uses a token longer, and a shift change reaches it within 290 s. Every
/// error is a JSON reply with a status and a context that says what to do; none carries a secret.
public final class BrokerProtocolHandler: Sendable {
    /// How the device's interactive sign-in reaches the worker.
    public enum SignInFlow: Sendable {
        /// Device code: `show` puts the code where the worker sees it.
        case deviceCode(show: @Sendable (DeviceCodeVerification) async -> Void)
        /// Browser: `open` opens the authorization URL (the broker listens on a loopback redirect).
        case browser(open: @Sendable (URL) async -> Void)
    }

    /// The version `getLinuxBrokerVersion` reports.
    public static let version = "1.0.0"
    /// The environment of the accounts `getAccounts` lists (MSAL apps use Microsoft's authority).
    public static let defaultEnvironment = "login.microsoftonline.com"

    private let application: PublicClientApplication
    private let flow: SignInFlow
    private let interactiveDeadline: Duration
    private let now: @Sendable () -> Date
    private let logger: Logger
    private let signIns = InteractiveSignIns()

    /// - Parameters:
    ///   - application: the client of the device's broker.
    ///   - flow: the device's interactive sign-in.
    ///   - interactiveDeadline: how long an interactive sign-in may take before it is canceled (status 7).
    ///   - now: the clock of the 290 s cap.
    public init(
        application: PublicClientApplication,
        flow: SignInFlow,
        interactiveDeadline: Duration = .seconds(240),
        now: @escaping @Sendable () -> Date = Date.init,
        logger: Logger
    ) {
        self.application = application
        self.flow = flow
        self.interactiveDeadline = interactiveDeadline
        self.now = now
        self.logger = logger
    }

    /// The refusal of a caller the bridge may not serve: one whose sandbox could not be read (fail closed),
    /// or one in a Flatpak sandbox that the bridge holds no pidfd of (it could not hand deviced the
    /// process); nil for a host process, and for a Flatpak app the bridge can hand over.
    public static func sandboxRefusal(_ sandbox: PeerSandbox, process: ProcessHandle?) -> String? {
        switch sandbox {
        case .host, .unpinned:
            return nil
        case .flatpak(let app):
            guard process == nil else { return nil }
            return BrokerProtocolMessages.errorReply(
                .accountUnusable,
                "\(app.appID) runs in a Flatpak sandbox and the MSAL bridge could not pin its process to hand it to the device's broker; call again from the app's own process"
            )
        case .unidentified(let reason):
            return BrokerProtocolMessages.errorReply(
                .accountUnusable,
                "the MSAL bridge could not tell which app is calling (\(reason)), so it does not serve it; call again from the app's own process"
            )
        }
    }

    /// The JSON reply to a call on the session bus: a host process's through the bridge's own connections
    /// (deviced serves its user's host app), a Flatpak app's through connections that act for its process
    /// (deviced serves that app's policy entry), a caller that could not be identified refused.
    public func handle(_ call: BusMethodCall) async -> String {
        if let refusal = Self.sandboxRefusal(call.callerSandbox, process: call.callerProcess) { return refusal }
        guard call.callerSandbox.isSandboxed, let process = call.callerProcess else {
            return await handle(method: call.member, correlationID: call.correlationID, request: call.request)
        }
        var logger = self.logger
        logger[metadataKey: "msal.flatpak_app_id"] = "\(call.callerSandbox.flatpakAppID ?? "")"
        // Connections of this call only, each asking deviced first to act for the caller's process; the
        // pidfd stays open until the answer is made.
        let acting = PublicClientApplication(
            endpoint: application.endpoint,
            actingForCallerPidfd: process.pidfd,
            logger: logger
        )
        let answer = await handle(
            method: call.member,
            correlationID: call.correlationID,
            request: call.request,
            application: acting,
            logger: logger
        )
        withExtendedLifetime(process) {}
        return answer
    }

    /// The JSON reply to `method` with the JSON `request` (the third argument of every call), from the
    /// bridge's user's host app.
    public func handle(method: String, correlationID: String, request: String) async -> String {
        await handle(
            method: method,
            correlationID: correlationID,
            request: request,
            application: application,
            logger: logger
        )
    }

    private func handle(
        method: String,
        correlationID: String,
        request: String,
        application: PublicClientApplication,
        logger: Logger
    ) async -> String {
        var logger = logger
        logger[metadataKey: "msal.method"] = "\(method)"
        logger[metadataKey: "correlation_id"] = "\(correlationID.prefix(64))"
        switch method {
        case "getAccounts":
            return await accounts(request, application: application, logger: logger)
        case "acquireTokenSilently":
            return await token(request, interactive: false, application: application, logger: logger)
        case "acquireTokenInteractively":
            return await token(request, interactive: true, application: application, logger: logger)
        case "getLinuxBrokerVersion":
            return #"{"linuxBrokerVersion":"\#(Self.version)"}"#
        case "removeAccount":
            // The app forgets the account itself; on a shared device only a sign-out ends the worker's session.
            return "{}"
        case "cancelInteractiveFlow":
            await signIns.cancel()
            return "{}"
        case "generateSignedHttpRequest":
            return BrokerProtocolMessages.errorReply(
                .accountUnusable,
                "this device's broker issues bearer tokens only (no proof-of-possession): request a bearer token"
            )
        case "acquirePrtSsoCookie":
            return BrokerProtocolMessages.errorReply(
                .accountUnusable,
                "this device's broker has no primary refresh token; apps get tokens with acquireTokenSilently"
            )
        default:
            logger.debug("unknown method of the broker protocol")
            return BrokerProtocolMessages.errorReply(
                .accountUnusable,
                "this device's broker does not implement \(method.prefix(64))"
            )
        }
    }

    // MARK: - Methods

    private func accounts(_ json: String, application: PublicClientApplication, logger: Logger) async -> String {
        do {
            let clientID = try BrokerProtocolMessages.accountsRequestClientID(json)
            guard let current = try await application.currentAccount(msalClientID: clientID).current else {
                logger.debug("getAccounts: nobody is signed in")
                return BrokerProtocolMessages.accountsReply([])
            }
            let identifiers = MSALAccountIdentifiers(homeAccountID: current.homeAccountID)
            return BrokerProtocolMessages.accountsReply([
                BrokerProtocolMessages.account(
                    identifiers,
                    environment: Self.defaultEnvironment,
                    username: current.username,
                    name: current.name
                )
            ])
        } catch {
            logger.debug("getAccounts answered with no account", metadata: ["error": "\(error)"])
            return BrokerProtocolMessages.accountsReply([])
        }
    }

    private func token(
        _ json: String,
        interactive: Bool,
        application: PublicClientApplication,
        logger: Logger
    ) async -> String {
        do throws(BridgeFailure) {
            let request: BrokerTokenRequest
            do {
                request = try BrokerProtocolMessages.tokenRequest(json)
            } catch {
                throw BridgeFailure(.accountUnusable, "the broker cannot read the request: \(error.message)")
            }
            let result =
                try await interactive
                ? interactiveToken(request, application: application, logger: logger)
                : silentToken(request, application: application)
            let reply = try tokenReply(result, request: request, checkAccount: !interactive)
            logger.debug(
                "token answered",
                metadata: ["token.source": "\(result.source.rawValue)", "msal.client_id": "\(request.clientID)"]
            )
            return reply
        } catch {
            logger.debug("token refused", metadata: ["msal.status": "\(error.status.rawValue)"])
            return BrokerProtocolMessages.errorReply(error.status, error.context)
        }
    }

    private func silentToken(
        _ request: BrokerTokenRequest,
        application: PublicClientApplication
    ) async throws(BridgeFailure) -> AuthenticationResult {
        do {
            return try await application.acquireTokenSilent(scopes: request.scopes, msalClientID: request.clientID)
        } catch {
            throw BridgeFailure(error)
        }
    }

    /// Single sign-on first: the current worker's token; a sign-in only when nobody is signed in or the
    /// worker must sign in again.
    private func interactiveToken(
        _ request: BrokerTokenRequest,
        application: PublicClientApplication,
        logger: Logger
    ) async throws(BridgeFailure) -> AuthenticationResult {
        do {
            return try await application.acquireTokenSilent(scopes: request.scopes, msalClientID: request.clientID)
        } catch {
            let failure = BridgeFailure(error)
            guard failure.status == .interactionRequired, !failure.isPolicyRefusal else { throw failure }
        }
        logger.info(
            "an MSAL app asks for a sign-in; starting the device's interactive sign-in",
            metadata: ["msal.client_id": "\(request.clientID)"]
        )
        try await signIns.run { () async -> BridgeFailure? in
            await self.signIn(request, application: application)
        }
        return try await silentToken(request, application: application)
    }

    /// The device's interactive sign-in, within the deadline; nil when it succeeded.
    private func signIn(_ request: BrokerTokenRequest, application: PublicClientApplication) async -> BridgeFailure? {
        let parameters: InteractiveTokenParameters
        switch flow {
        case .deviceCode(let show):
            parameters = InteractiveTokenParameters(
                scopes: request.scopes,
                flow: .deviceCode(showCode: show),
                msalClientID: request.clientID
            )
        case .browser(let open):
            let seconds = Int(interactiveDeadline.components.seconds)
            parameters = InteractiveTokenParameters(
                scopes: request.scopes,
                flow: .browser(timeout: max(1, seconds), openBrowser: open),
                msalClientID: request.clientID
            )
        }
        let deadline = interactiveDeadline
        return await withTaskGroup(of: BridgeFailure?.self) { group in
            group.addTask {
                do throws(SharedDeviceClientError) {
                    _ = try await application.acquireToken(parameters)
                    return nil
                } catch {
                    return BridgeFailure(error)
                }
            }
            group.addTask {
                try? await Task.sleep(for: deadline)
                return Task.isCancelled
                    ? nil
                    : BridgeFailure(
                        .userCanceled,
                        "the sign-in was not finished within \(deadline.components.seconds) s; nothing was cached — try again"
                    )
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    private func tokenReply(
        _ result: AuthenticationResult,
        request: BrokerTokenRequest,
        checkAccount: Bool
    ) throws(BridgeFailure) -> String {
        let identifiers = MSALAccountIdentifiers(homeAccountID: result.account.homeAccountID)
        let who = result.account.username ?? identifiers.homeAccountID
        if checkAccount, let held = request.homeAccountID, held.lowercased() != identifiers.homeAccountID {
            throw BridgeFailure(
                .interactionRequired,
                "the account the app holds is no longer signed in on this shared device (the shift changed); sign in again: the device's worker \(who) gets a token without a prompt"
            )
        }
        guard let idToken = result.idToken else {
            throw BridgeFailure(.accountUnusable, "the device's broker returned no ID token for \(who); MSAL needs one")
        }
        guard BrokerProtocolMessages.preferredUsername(ofIDToken: idToken) != nil else {
            throw BridgeFailure(
                .accountUnusable,
                "the identity provider's ID token for \(who) has no preferred_username claim, which MSAL needs to make the account; configure the provider to issue it"
            )
        }
        return BrokerProtocolMessages.tokenReply(
            accessToken: result.accessToken,
            expiresOn: result.expiresOn,
            scopes: result.scopes,
            idToken: idToken,
            account: identifiers,
            now: now()
        )
    }
}

/// One interactive sign-in at a time: a second request while one runs waits for it (the worker signs in
/// once for every MSAL app) and gets its outcome.
private actor InteractiveSignIns {
    private var running: Task<BridgeFailure?, Never>?

    func run(_ body: @escaping @Sendable () async -> BridgeFailure?) async throws(BridgeFailure) {
        let task: Task<BridgeFailure?, Never>
        if let running {
            task = running
        } else {
            task = Task { await body() }
            running = task
        }
        let failure = await task.value
        if running == task { running = nil }
        if let failure { throw failure }
    }

    func cancel() {
        running?.cancel()
    }
}
