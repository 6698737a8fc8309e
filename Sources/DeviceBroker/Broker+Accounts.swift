import Foundation
import IdentityClient
import SharedDevice
import Varlink

// The MSAL-shaped methods: current account, interactive and silent tokens, sign-out.
extension Broker {
    func currentAccount(_ caller: BrokerCaller) throws(BrokerFailure) -> VarlinkReply {
        let application = try application(for: caller)
        do {
            let pair = try application.currentAccount()
            return VarlinkReply(parameters: ["current": .account(pair.current), "previous": .account(pair.previous)])
        } catch {
            throw BrokerFailure(error)
        }
    }

    func acquireTokenSilent(_ parameters: BrokerParameters, caller: BrokerCaller) async throws(BrokerFailure) -> VarlinkReply {
        let scopes = try parameters.strings("scopes")
        let forceRefresh = try parameters.optionalBool("forceRefresh") ?? false
        let application = try application(for: caller)
        do {
            let result = try await application.acquireTokenSilent(scopes: scopes, forceRefresh: forceRefresh)
            return VarlinkReply(parameters: ["result": .result(result)])
        } catch {
            throw BrokerFailure(error)
        }
    }

    func signOut(_ parameters: BrokerParameters, caller: BrokerCaller) async throws(BrokerFailure) -> VarlinkReply {
        let reasonName = try parameters.optionalString("reason") ?? SignOutReason.user.rawValue
        guard let reason = SignOutReason(rawValue: reasonName), reason != .idle else { throw .invalidParameter("reason") }
        // An administrator (root, or a member of the policy's administratorsGroup) ends the shift for every
        // app: with reason `admin`, or with any reason when it is no app itself (root's `devicectl signout`).
        let isApp = (try? currentPolicy())?.policy?.app(uid: caller.uid) != nil
        if reason == .admin || (!isApp && isAdministrator(caller)) {
            return try administratorSignOut(caller, reason: reason)
        }
        // An app may say the worker left or the shift ended; `admin` is for administrators, `idle` the broker's own.
        let application = try application(for: caller)
        do {
            let outcome = try await application.signOut(parameters: SignOutParameters(reason: reason))
            return VarlinkReply(parameters: ["account": .account(outcome.account), "global": .bool(outcome.global),
                                             "itemsRemoved": .int(Int64(outcome.itemsRemoved))])
        } catch {
            throw BrokerFailure(error)
        }
    }

    private func administratorSignOut(_ caller: BrokerCaller, reason: SignOutReason) throws(BrokerFailure) -> VarlinkReply {
        guard isAdministrator(caller) else {
            refusals.refused(RefusalAudit.Kind(uid: caller.uid, method: "SignOut", reason: "not an administrator"),
                             AuditEntry(type: .keychainAccessDenied, actor: caller.actor, reason: "not an administrator",
                                        details: ["method": "SignOut", "pid": "\(caller.pid)"]))
            throw BrokerFailure(reply: .permissionDenied)
        }
        do {
            let outcome = try AccountManager(device: device, logger: logger).signOut(app: nil, reason: reason, actor: caller.actor)
            return VarlinkReply(parameters: ["account": .account(outcome.account), "global": .bool(outcome.global),
                                             "itemsRemoved": .int(Int64(outcome.itemsRemoved))])
        } catch {
            throw BrokerFailure(error)
        }
    }

    /// Device code: the first reply carries the code to show, the last the result. If the caller goes
    /// away the task is cancelled, the polling stops, and nothing is cached.
    func signInWithDeviceCode(_ parameters: BrokerParameters, caller: BrokerCaller,
                              reply: @escaping @Sendable (VarlinkReply) async -> Bool) async throws(BrokerFailure) {
        let scopes = try parameters.strings("scopes")
        let loginHint = try parameters.optionalString("loginHint")
        let application = try application(for: caller)
        let (sessions, shown) = AsyncStream.makeStream(of: DeviceCodeSession.self)
        async let outcome = Self.deviceCodeSignIn(application, scopes: scopes, loginHint: loginHint, shown: shown)
        for await session in sessions {
            _ = await reply(Self.verificationReply(session))
        }
        switch await outcome {
        case .success(let result): _ = await reply(VarlinkReply(parameters: ["result": .result(result)]))
        case .failure(let error): throw BrokerFailure(error)
        }
    }

    /// The reply that shows a device code (`verification`), to be continued.
    static func verificationReply(_ session: DeviceCodeSession) -> VarlinkReply {
        VarlinkReply(parameters: ["verification": .object([
            "verificationUri": .string(session.verificationURI.absoluteString),
            "verificationUriComplete": .optional(session.verificationURIComplete?.absoluteString),
            "userCode": .string(session.userCode),
            "expiresIn": .int(Int64(max(0, session.expiresAt.timeIntervalSinceNow.rounded()))),
            "message": .optional(session.serverMessage),
        ])], continues: true)
    }

    private static func deviceCodeSignIn(_ application: PublicClientApplication, scopes: [String], loginHint: String?,
                                         shown: AsyncStream<DeviceCodeSession>.Continuation) async -> Result<AuthenticationResult, SharedDeviceError> {
        defer { shown.finish() }
        do throws(SharedDeviceError) {
            return .success(try await application.acquireToken(InteractiveTokenParameters(
                scopes: scopes, flow: .deviceCode(showCode: { shown.yield($0) }), loginHint: loginHint)))
        } catch {
            return .failure(error)
        }
    }

    /// Browser: the broker listens on the caller's loopback redirect URI; the first reply carries the
    /// authorization URL to open, the last the result.
    func signInWithBrowser(_ parameters: BrokerParameters, caller: BrokerCaller,
                           reply: @escaping @Sendable (VarlinkReply) async -> Bool) async throws(BrokerFailure) {
        let scopes = try parameters.strings("scopes")
        guard let redirectURI = URL(string: try parameters.string("redirectUri")) else { throw .invalidParameter("redirectUri") }
        let loginHint = try parameters.optionalString("loginHint")
        let prompt = try parameters.optionalString("prompt").map { name throws(BrokerFailure) -> Prompt in
            guard let prompt = Prompt(rawValue: name) else { throw .invalidParameter("prompt") }
            return prompt
        }
        let timeout = try parameters.optionalInt("timeout", in: 1...3600) ?? 300
        let application = try browserApplication(for: caller, redirectURI: redirectURI)
        do {
            let result = try await application.acquireToken(InteractiveTokenParameters(
                scopes: scopes,
                flow: Self.browserFlow(reply: reply),
                prompt: prompt, loginHint: loginHint, browserTimeout: TimeInterval(timeout)))
            _ = await reply(VarlinkReply(parameters: ["result": .result(result)]))
        } catch {
            throw BrokerFailure(error)
        }
    }

    /// The caller's app with the caller's loopback redirect URI, on which the broker listens for the browser.
    func browserApplication(for caller: BrokerCaller, redirectURI: URL) throws(BrokerFailure) -> PublicClientApplication {
        let shared = try application(for: caller)
        do {
            var configuration = shared.configuration
            configuration.redirectURI = redirectURI
            return try PublicClientApplication(configuration: configuration, device: device, transport: transport, logger: logger)
        } catch {
            throw BrokerFailure(error)
        }
    }

    /// The browser flow of a brokered sign-in: the authorization URL goes to the caller (continued reply).
    static func browserFlow(reply: @escaping @Sendable (VarlinkReply) async -> Bool) -> InteractiveFlow {
        .browser(openBrowser: { url throws(IdentityError) in
            guard await reply(VarlinkReply(parameters: ["authorizationUrl": .string(url.absoluteString)], continues: true)) else {
                throw IdentityError(.userCanceled, "the app went away before the browser opened")
            }
        })
    }
}
