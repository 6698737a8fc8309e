public import BrokerContract
import Foundation
import IdentityClient
import Logging
import SharedDevice

// `SignInWithPassword`: the kiosk's own screen took the worker's username and password.
extension Broker {
    /// Signs a worker in with the username and password the app's screen took, in one of the app's
    /// sign-in slots (`limits.pendingSignInsPerApp`).
    public func signInWithPassword(
        _ parameters: Broker1.SignInWithPassword.Parameters,
        context caller: BrokerCaller
    ) async throws(BrokerFailure)
        -> Broker1.SignInWithPassword.Reply
    {
        try await inSignInSlot(caller) { () async throws(BrokerFailure) in
            try await signInWithPasswordInSlot(parameters, caller: caller)
        }
    }

    private func signInWithPasswordInSlot(
        _ parameters: Broker1.SignInWithPassword.Parameters,
        caller: BrokerCaller
    ) async throws(BrokerFailure)
        -> Broker1.SignInWithPassword.Reply
    {
        let application = try application(
            for: caller,
            msalClientID: parameters.msalClientId,
            method: "SignInWithPassword",
            authority: parameters.authority
        )
        let credentials = try ParameterCheck.credentials(username: parameters.username, password: parameters.password)
        let result = try await withPasswordThrottle(caller, username: credentials.username) {
            () async throws(SharedDeviceError) in
            try await application.acquireToken(
                InteractiveTokenParameters(
                    scopes: parameters.scopes,
                    flow: .password(username: credentials.username, password: credentials.password),
                    msalClientID: parameters.msalClientId
                )
            )
        }
        return Broker1.SignInWithPassword.Reply(result: try Self.result(result, msalClientID: parameters.msalClientId))
    }

    /// Runs a sign-in of `username` that takes a password or code the worker typed (`body`) under the
    /// throttle: refused without asking the provider while the back-off of the calling app or of the username
    /// runs, or while another such sign-in of the app or for the username does; a refused password or code
    /// counts toward both. (The engine refuses a flow the policy does not list.) `countingCaller` false: the
    /// caller is the login screen (an administrator, not an app), counted by the username only.
    func withPasswordThrottle<T>(
        _ caller: BrokerCaller,
        username: String,
        method: String = "SignInWithPassword",
        countingCaller: Bool = true,
        _ body: () async throws(SharedDeviceError) -> T
    ) async throws(BrokerFailure) -> T {
        let limits = self.limits
        let attempt: PasswordThrottle.Attempt
        do {
            attempt = try passwordThrottle.begin(
                username: username,
                app: countingCaller && caller.uid != 0
                    ? PasswordThrottle.App(
                        key: caller.appKey,
                        uid: caller.uid,
                        appsOfUID: (try? currentPolicy())?.policy?.appCount(uid: caller.uid) ?? 1
                    ) : nil
            )
        } catch {
            throw refusal(error, caller: caller, method: method)
        }
        do {
            let value = try await body()
            passwordThrottle.end(attempt, .succeeded, limits: limits)
            return value
        } catch {
            let refused = [.invalidCredentials, .invalidCode].contains(error.identityError?.code)
            if let backoff = passwordThrottle.end(attempt, refused ? .refused : .failed, limits: limits) {
                logger.notice(
                    "password sign-ins are held back after repeated failures",
                    metadata: ["password.backoff_seconds": "\(backoff)", "peer.uid": "\(caller.uid)"]
                )
            }
            throw BrokerFailure(error)
        }
    }

    /// The reply to an attempt the throttle holds back (audited, coalesced): it names whose count and the wait.
    private func refusal(_ refusal: PasswordThrottle.Refusal, caller: BrokerCaller, method: String) -> BrokerFailure {
        switch refusal {
        case .backoff(let scope, let secondsLeft, let failures):
            refusals.refused(
                RefusalAudit.Kind(uid: caller.uid, method: method, reason: "password back-off", app: caller.appKey),
                AuditEntry(
                    type: .keychainAccessDenied,
                    actor: caller.actor,
                    reason: "password back-off",
                    details: [
                        "method": method, "failures": "\(failures)", "scope": scope.rawValue, "pid": "\(caller.pid)",
                    ]
                )
            )
            let whose =
                switch scope {
                case .app: "\(failures) password sign-ins by this app failed recently"
                case .username: "\(failures) password sign-ins for this username failed recently"
                case .user: "\(failures) password sign-ins by the apps of uid \(caller.uid) failed recently"
                }
            return .limitExceeded(
                .passwordBackoff,
                maximum: secondsLeft,
                "\(whose); try again in \(secondsLeft) s (the back-off starts at the policy's limits.passwordBackoffSeconds and doubles with each failure; one failure is forgotten every \(Int(PasswordThrottle.forgetInterval / 60)) minutes), or sign in by device code"
            )
        case .inProgress(let scope):
            let whose = scope == .app ? "of this app" : "for this username"
            return .limitExceeded(
                .passwordSignInInProgress,
                maximum: 1,
                "another password sign-in \(whose) is running; try again when it ends"
            )
        }
    }
}

extension ParameterCheck {
    /// A username (1 to 256 characters, no control characters) and a password (1 to 1024 bytes).
    static func credentials(
        username: String,
        password: String
    ) throws(BrokerFailure) -> (username: String, password: String) {
        let username = try self.username(username)
        guard !password.isEmpty, password.utf8.count <= 1024 else { throw .invalidParameter("password") }
        return (username, password)
    }

    /// A worker's username as typed at the kiosk: 1 to 256 characters, no control characters (it reaches
    /// the audit log and the journal).
    static func username(_ username: String) throws(BrokerFailure) -> String {
        guard !username.isEmpty, username.count <= 256,
            !username.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw .invalidParameter("username")
        }
        return username
    }
}
