import BrokerContract
import Foundation
import IdentityClient
import Logging
import SharedDevice

// `SignInWithPassword`: the kiosk's own screen took the worker's username and password.
extension Broker {
    func signInWithPassword(_ parameters: Broker1.SignInWithPassword.Parameters, caller: BrokerCaller) async throws(BrokerFailure) -> Broker1.SignInWithPassword.Reply {
        let application = try application(for: caller, msalClientID: parameters.msalClientId, method: "SignInWithPassword",
                                          authority: parameters.authority)
        let credentials = try ParameterCheck.credentials(username: parameters.username, password: parameters.password)
        let result = try await withPasswordThrottle(caller) { () async throws(SharedDeviceError) in
            try await application.acquireToken(InteractiveTokenParameters(
                scopes: parameters.scopes, flow: .password(username: credentials.username, password: credentials.password),
                msalClientID: parameters.msalClientId))
        }
        return Broker1.SignInWithPassword.Reply(result: try Self.result(result, msalClientID: parameters.msalClientId))
    }

    /// Runs a sign-in that takes a password or code the worker typed (`body`) under the device's throttle:
    /// refused without asking the provider while the back-off runs or another such sign-in does; a refused
    /// password or code counts toward it. (The engine refuses a flow the policy does not list.)
    func withPasswordThrottle<T>(_ caller: BrokerCaller, _ body: () async throws(SharedDeviceError) -> T) async throws(BrokerFailure) -> T {
        let limits = self.limits
        do {
            try passwordThrottle.begin()
        } catch {
            switch error {
            case .backoff(let secondsLeft, let failures):
                refusals.refused(RefusalAudit.Kind(uid: caller.uid, method: "SignInWithPassword", reason: "password back-off"),
                                 AuditEntry(type: .keychainAccessDenied, actor: caller.actor, reason: "password back-off",
                                            details: ["method": "SignInWithPassword", "failures": "\(failures)", "pid": "\(caller.pid)"]))
                throw .limitExceeded("passwordBackoff", maximum: secondsLeft,
                    "\(failures) password sign-ins failed in a row on this device; try again in \(secondsLeft) s (the policy's limits.passwordBackoffSeconds), or sign in by device code")
            case .inProgress:
                throw .limitExceeded("passwordSignInInProgress", maximum: 1,
                    "another password sign-in is running on this device; try again when it ends")
            }
        }
        do {
            let value = try await body()
            passwordThrottle.end(.succeeded, limits: limits)
            return value
        } catch {
            let refused = [.invalidCredentials, .invalidCode].contains(error.identityError?.code)
            if let backoff = passwordThrottle.end(refused ? .refused : .failed, limits: limits) {
                logger.notice("password sign-ins are held back after repeated failures", metadata: ["password.backoff_seconds": "\(backoff)"])
            }
            throw BrokerFailure(error)
        }
    }
}

extension ParameterCheck {
    /// A username (1 to 256 characters, no control characters) and a password (1 to 1024 bytes).
    static func credentials(username: String, password: String) throws(BrokerFailure) -> (username: String, password: String) {
        guard !username.isEmpty, username.count <= 256, !username.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .invalidParameter("username")
        }
        guard !password.isEmpty, password.utf8.count <= 1024 else { throw .invalidParameter("password") }
        return (username, password)
    }
}
