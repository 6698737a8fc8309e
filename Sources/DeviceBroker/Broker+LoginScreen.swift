public import BrokerContract
import Foundation
import IdentityClient
import SharedDevice
public import Varlink

// The login screen (pam_sharedmode, through its helper, as root): StartLoginScreenSignIn,
// SubmitLoginScreenSignIn, AwaitLoginScreenDeviceCode. The shift's session (OpenLoginSession,
// CloseLoginSession) is in Broker+ShiftSession.swift.
extension Broker {
    /// Starts a worker's sign-in at the login screen: what the worker types next.
    public func startLoginScreenSignIn(
        _ parameters: Broker1.StartLoginScreenSignIn.Parameters,
        context caller: BrokerCaller
    ) async throws(BrokerFailure) -> Broker1.StartLoginScreenSignIn.Reply {
        try requireAdministrator(caller, method: "StartLoginScreenSignIn")
        let (record, policy) = try loginScreenPolicy()
        let username = try ParameterCheck.username(parameters.username)
        try Self.refuseLocalAccount(username)
        let place = try ParameterCheck.loginScreen(parameters.loginScreen)
        let scopes = try ParameterCheck.scopes(parameters.scopes ?? [])
        let app = try Self.loginScreenApp(parameters.app, policy: policy)
        let flow = try Self.loginFlow(parameters.flow, policy: policy)
        let proof: LoginScreenSignIns.Proof
        switch flow {
        case .password: proof = .password
        case .deviceCode: proof = .deviceCode
        case .nativeAuth:
            guard loginScreenSignIns.openCount < LoginScreenSignIns.maximum else { throw Self.tooManyLoginSignIns }
            let application = try application(of: app, record: record, policy: policy)
            do {
                proof = .nativeAuth(try await application.startLoginScreenNativeSignIn(username: username))
            } catch {
                throw BrokerFailure(error)
            }
        default: throw Self.flowNotAllowed(flow, policy: policy)
        }
        let entry = LoginScreenSignIns.Entry(
            username: username,
            appID: app.id,
            scopes: scopes,
            place: place,
            proof: proof,
            expires: loginScreenSignIns.expiry
        )
        guard let id = loginScreenSignIns.open(entry) else { throw Self.tooManyLoginSignIns }
        return Broker1.StartLoginScreenSignIn.Reply(next: Self.loginChallenge(proof, id: id))
    }

    /// Finishes a login-screen sign-in with the password or the one-time code.
    public func submitLoginScreenSignIn(
        _ parameters: Broker1.SubmitLoginScreenSignIn.Parameters,
        context caller: BrokerCaller
    ) async throws(BrokerFailure) -> Broker1.SubmitLoginScreenSignIn.Reply {
        try requireAdministrator(caller, method: "SubmitLoginScreenSignIn")
        let (record, policy) = try loginScreenPolicy()
        let entry = try openLoginSignIn(parameters.signInId)
        let proof: LoginScreenProof
        switch (entry.proof, parameters.password, parameters.code) {
        case (.password, let password?, nil) where Self.isTypedSecret(password, bytes: 1024):
            proof = .password(username: entry.username, password: password)
        case (.nativeAuth(let step), let password?, nil) where Self.asksPassword(step):
            guard Self.isTypedSecret(password, bytes: 1024) else { throw .invalidParameter("password") }
            proof = .nativeAuth(step, .password(password))
        case (.nativeAuth(let step), nil, let code?) where !Self.asksPassword(step):
            guard Self.isTypedSecret(code, bytes: 64) else { throw .invalidParameter("code") }
            proof = .nativeAuth(step, .code(code))
        case (.deviceCode, _, _):
            throw BrokerFailure(
                Broker1.AccountError(
                    code: "flowNotAllowed",
                    message:
                        "this login-screen sign-in is by device code: wait for it with AwaitLoginScreenDeviceCode, which takes no password or code",
                    msalStatus: nil,
                    identityCode: nil
                )
            )
        case (.nativeAuth(let step), _, _): throw .invalidParameter(Self.asksPassword(step) ? "password" : "code")
        case (.password, _, _): throw .invalidParameter("password")
        }
        guard let app = policy.app(entry.appID) else { throw Self.loginScreenAppGone(entry.appID) }
        let application = try application(of: app, record: record, policy: policy)
        do throws(BrokerFailure) {
            // Root's login screen is counted by the username typed, never as one app.
            let outcome = try await withPasswordThrottle(
                caller,
                username: entry.username,
                method: "SubmitLoginScreenSignIn",
                countingCaller: false
            ) { () async throws(SharedDeviceError) in
                try await application.signInAtLoginScreen(
                    proof,
                    scopes: entry.scopes,
                    place: entry.place,
                    workerSignedIn: policy.session.workerSignedIn
                )
            }
            loginScreenSignIns.close(parameters.signInId)
            return Broker1.SubmitLoginScreenSignIn.Reply(signIn: loginScreenSignedIn(outcome, policy: policy))
        } catch {
            // A wrong password or code leaves the sign-in open (type it again); a held-back attempt too.
            let identityCode = error.reply.parameters["identityCode"]?.string
            let retryable =
                identityCode == IdentityError.Code.invalidCode.rawValue
                || identityCode == IdentityError.Code.invalidCredentials.rawValue
                || error.reply.error == Broker1.LimitExceeded.qualifiedName
            if !retryable { loginScreenSignIns.close(parameters.signInId) }
            throw error
        }
    }

    /// Runs a device-code login-screen sign-in: the verification first, the sign-in last.
    public func awaitLoginScreenDeviceCode(
        _ parameters: Broker1.AwaitLoginScreenDeviceCode.Parameters,
        context caller: BrokerCaller,
        replies: VarlinkReplyStream<Broker1.AwaitLoginScreenDeviceCode.Reply>
    ) async throws(BrokerFailure) {
        try requireAdministrator(caller, method: "AwaitLoginScreenDeviceCode")
        let (record, policy) = try loginScreenPolicy()
        guard let entry = loginScreenSignIns.beginAwaiting(parameters.signInId), case .deviceCode = entry.proof else {
            throw Self.loginSignInNotFound
        }
        defer { loginScreenSignIns.close(parameters.signInId) }
        guard let app = policy.app(entry.appID) else { throw Self.loginScreenAppGone(entry.appID) }
        let application = try application(of: app, record: record, policy: policy)
        let (sessions, shown) = AsyncStream.makeStream(of: DeviceCodeSession.self)
        async let outcome = Self.loginScreenDeviceCode(
            application,
            entry: entry,
            workerSignedIn: policy.session.workerSignedIn,
            shown: shown
        )
        for await session in sessions {
            await replies.next(
                Broker1.AwaitLoginScreenDeviceCode.Reply(verification: Broker1.DeviceCodeVerification(session))
            )
        }
        switch await outcome {
        case .success(let signedIn):
            await replies.last(
                Broker1.AwaitLoginScreenDeviceCode.Reply(signIn: loginScreenSignedIn(signedIn, policy: policy))
            )
        case .failure(let error): throw BrokerFailure(error)
        }
    }

    private static func loginScreenDeviceCode(
        _ application: ApplicationEngine,
        entry: LoginScreenSignIns.Entry,
        workerSignedIn: DevicePolicy.WorkerSignedIn,
        shown: AsyncStream<DeviceCodeSession>.Continuation
    ) async -> Result<LoginScreenSignInOutcome, SharedDeviceError> {
        defer { shown.finish() }
        do throws(SharedDeviceError) {
            return .success(
                try await application.signInAtLoginScreen(
                    .deviceCode(loginHint: entry.username, showCode: { shown.yield($0) }),
                    scopes: entry.scopes,
                    place: entry.place,
                    workerSignedIn: workerSignedIn
                )
            )
        } catch {
            return .failure(error)
        }
    }

    /// The reply's sign-in (no token), after the shift's session is expected (`openGraceSeconds`).
    private func loginScreenSignedIn(
        _ outcome: LoginScreenSignInOutcome,
        policy: DevicePolicy
    ) -> Broker1.LoginScreenSignIn {
        expectLoginSession(outcome, policy: policy)
        return Broker1.LoginScreenSignIn(
            account: Broker1.Account(outcome.account),
            sessionUser: policy.session.user ?? "",
            correlationId: outcome.correlationID,
            signedOut: outcome.signedOut.map { signedOut in
                Broker1.SignedOutWorker(
                    account: signedOut.account.map(Broker1.Account.init),
                    itemsRemoved: signedOut.itemsRemoved
                )
            }
        )
    }

    // MARK: - Checks

    /// Refuses (PermissionDenied, audited coalesced) a caller that is neither root nor in the policy's
    /// administratorsGroup.
    func requireAdministrator(_ caller: BrokerCaller, method: String) throws(BrokerFailure) {
        guard !isAdministrator(caller) else { return }
        refusals.refused(
            RefusalAudit.Kind(uid: caller.uid, method: method, reason: "not an administrator", app: caller.appKey),
            AuditEntry(
                type: .keychainAccessDenied,
                actor: caller.actor,
                reason: "not an administrator",
                details: ["method": method, "pid": "\(caller.pid)"]
            )
        )
        throw .permissionDenied
    }

    /// The device's record and policy when the login screen is configured (a shared device whose policy
    /// names `session.user`).
    func loginScreenPolicy() throws(BrokerFailure) -> (record: DeviceRecord, policy: DevicePolicy) {
        let (record, policy) = try currentPolicy()
        guard let record, let policy, policy.device.mode == .shared, policy.session.user != nil else {
            throw Self.loginScreenNotConfigured
        }
        return (record, policy)
    }

    static let loginScreenNotConfigured = BrokerFailure(
        Broker1.AccountError(
            code: "loginScreenNotConfigured",
            message:
                "the login screen is not configured on this device: provision a shared-mode policy whose session.user names the kiosk's local account (see policies/kiosk-login.json)",
            msalStatus: nil,
            identityCode: nil
        )
    )

    /// A local account's name (an administrator's, root) is never a worker's.
    static func refuseLocalAccount(_ username: String) throws(BrokerFailure) {
        let trimmed = username.trimmingCharacters(in: .whitespaces)
        let isLocal = [username, trimmed, trimmed.lowercased()].contains { name in
            name == "root" || UserDatabase.uid(ofUser: name) != nil
        }
        guard isLocal else { return }
        throw BrokerFailure(
            Broker1.AccountError(
                code: "localAccount",
                message:
                    "\(trimmed) is the name of a local account on this device, never a worker's: the login screen passes such names to the next PAM module (pam_unix)",
                msalStatus: nil,
                identityCode: nil
            )
        )
    }

    /// The app the sign-in is for: `requested`, else the policy's `session.app`, else its first app.
    static func loginScreenApp(_ requested: String?, policy: DevicePolicy) throws(BrokerFailure) -> DevicePolicy.App {
        if let requested {
            guard requested.count <= 256, let app = policy.app(requested) else {
                throw BrokerFailure(
                    Broker1.AccountError(
                        code: "appNotInPolicy",
                        message:
                            "no app \(requested.prefix(256)) in the device policy; name one of \(policy.apps.map(\.id).joined(separator: ", ")) or none (the policy's session.app)",
                        msalStatus: nil,
                        identityCode: nil
                    )
                )
            }
            return app
        }
        guard let app = policy.loginScreenApp else { throw loginScreenAppGone(policy.session.app ?? "") }
        return app
    }

    /// The flow: `requested` when the policy lists it, else the first of nativeAuth, password and
    /// deviceCode the policy lists.
    static func loginFlow(
        _ requested: Broker1.LoginFlow?,
        policy: DevicePolicy
    ) throws(BrokerFailure) -> DevicePolicy.SignInFlow {
        let allowed = policy.authority.flows
        if let requested {
            let flow: DevicePolicy.SignInFlow =
                switch requested {
                case .password: .password
                case .nativeAuth: .nativeAuth
                case .deviceCode: .deviceCode
                case .unknown: throw .invalidParameter("flow")
                }
            guard allowed.contains(flow) else { throw flowNotAllowed(flow, policy: policy) }
            return flow
        }
        guard let flow = [.nativeAuth, .password, .deviceCode].first(where: allowed.contains) else {
            throw flowNotAllowed(nil, policy: policy)
        }
        return flow
    }

    private static func flowNotAllowed(_ flow: DevicePolicy.SignInFlow?, policy: DevicePolicy) -> BrokerFailure {
        let listed = policy.authority.flows.map(\.rawValue).joined(separator: ", ")
        let what =
            flow.map { "\($0.rawValue) sign-in" } ?? "a login-screen sign-in (nativeAuth, password or deviceCode)"
        return BrokerFailure(
            Broker1.AccountError(
                code: "flowNotAllowed",
                message:
                    "the device policy does not allow \(what) (authority.flows lists \(listed)); ask the administrator to add one",
                msalStatus: nil,
                identityCode: nil
            )
        )
    }

    private static func loginScreenAppGone(_ id: String) -> BrokerFailure {
        BrokerFailure(
            Broker1.AccountError(
                code: "appNotInPolicy",
                message:
                    "the login screen's app \(id) is no longer in the device policy; start the sign-in again",
                msalStatus: nil,
                identityCode: nil
            )
        )
    }

    private static let tooManyLoginSignIns = BrokerFailure.limitExceeded(
        .pendingSignInsPerApp,
        maximum: LoginScreenSignIns.maximum,
        "\(LoginScreenSignIns.maximum) login-screen sign-ins are open; finish one or wait 10 minutes"
    )

    private static let loginSignInNotFound = BrokerFailure(
        Broker1.AccountError(
            code: "signInNotFound",
            message:
                "no login-screen sign-in with that id is open (it finished, failed, or waited more than 10 minutes); start again",
            msalStatus: nil,
            identityCode: nil
        )
    )

    private func openLoginSignIn(_ id: String) throws(BrokerFailure) -> LoginScreenSignIns.Entry {
        guard id.count <= 64, let entry = loginScreenSignIns.entry(id), !entry.awaiting else {
            throw Self.loginSignInNotFound
        }
        return entry
    }

    private static func asksPassword(_ step: NativeSignInStep) -> Bool {
        if case .password = step.challenge { true } else { false }
    }

    /// A password (or code) as typed: not empty, at most `bytes` bytes.
    private static func isTypedSecret(_ text: String, bytes: Int) -> Bool {
        !text.isEmpty && text.utf8.count <= bytes
    }

    private static func loginChallenge(_ proof: LoginScreenSignIns.Proof, id: String) -> Broker1.LoginChallenge {
        switch proof {
        case .password: return Broker1.LoginChallenge(signInId: id, challenge: .password)
        case .deviceCode: return Broker1.LoginChallenge(signInId: id, challenge: .deviceCode)
        case .nativeAuth(let step):
            switch step.challenge {
            case .password: return Broker1.LoginChallenge(signInId: id, challenge: .password)
            case .code(let length, let sentTo, let channel):
                return Broker1.LoginChallenge(
                    signInId: id,
                    challenge: .code,
                    codeLength: length,
                    sentTo: sentTo,
                    channel: channel
                )
            }
        }
    }
}

extension ParameterCheck {
    /// The login screen's place: a PAM service of 1 to 64 characters, a tty, seat and remote host of at
    /// most 256; none with control characters (they reach the audit log and the journal).
    static func loginScreen(_ screen: Broker1.LoginScreen) throws(BrokerFailure) -> LoginScreenPlace {
        func checked(_ text: String?, _ name: String, maximum: Int) throws(BrokerFailure) -> String? {
            guard let text else { return nil }
            guard !text.isEmpty, text.count <= maximum,
                !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else { throw .invalidParameter("loginScreen.\(name)") }
            return text
        }
        return LoginScreenPlace(
            service: try checked(screen.service, "service", maximum: 64) ?? "",
            tty: try checked(screen.tty, "tty", maximum: 256),
            seat: try checked(screen.seat, "seat", maximum: 256),
            remoteHost: try checked(screen.remoteHost, "remoteHost", maximum: 256)
        )
    }

    /// At most 64 scopes of 1 to 256 characters without white space.
    static func scopes(_ scopes: [String]) throws(BrokerFailure) -> [String] {
        guard scopes.count <= 64,
            scopes.allSatisfy({ !$0.isEmpty && $0.count <= 256 && !$0.contains(where: \.isWhitespace) })
        else { throw .invalidParameter("scopes") }
        return scopes
    }
}
