import Foundation
public import IdentityClient
import Logging

/// Where a login-screen sign-in happens, for the audit log: the PAM service (`login`, `greetd`,
/// `gdm-password`), the terminal or seat, and the remote host of a remote login. Never a secret.
public struct LoginScreenPlace: Sendable, Equatable, Codable {
    /// The PAM service.
    public var service: String
    /// The terminal (`tty1`, `pts/0`), if the login screen has one.
    public var tty: String?
    /// The seat (`seat0`), if the login screen has one.
    public var seat: String?
    /// The remote host of a remote login.
    public var remoteHost: String?

    /// A place as the PAM module reports it.
    public init(service: String, tty: String? = nil, seat: String? = nil, remoteHost: String? = nil) {
        self.service = service
        self.tty = tty
        self.seat = seat
        self.remoteHost = remoteHost
    }

    /// The audit event's details for a sign-in here.
    var auditDetails: [String: String] {
        var details = ["via": "login-screen", "service": service]
        details["tty"] = tty
        details["seat"] = seat
        details["remoteHost"] = remoteHost
        return details
    }
}

/// How a login-screen sign-in takes the worker's proof, once it is in hand.
public enum LoginScreenProof: Sendable {
    /// The password grant: the username and password typed at the prompt.
    case password(username: String, password: String)
    /// Native authentication: the step `startLoginScreenNativeSignIn` returned and the password or code.
    case nativeAuth(NativeSignInStep, ApplicationEngine.NativeSignInCredential)
    /// The device code: `showCode` shows the verification (the PAM module's info message); `loginHint`
    /// is the name typed at the prompt.
    case deviceCode(loginHint: String?, showCode: @Sendable (DeviceCodeSession) -> Void)
}

/// A worker signed in at the login screen.
public struct LoginScreenSignInOutcome: Sendable {
    /// The worker now signed in.
    public var account: DeviceAccount
    /// The correlation id of the sign-in's audit events (the switch's, when it was one).
    public var correlationID: String
    /// The worker a shift switch signed out (`session.workerSignedIn` `switch`); nil when none.
    public var signedOut: AccountManager.SignOutOutcome?
}

// The login screen (pam_sharedmode, through the broker): a worker signs in at the kiosk's login prompt.
// The interactive grant comes first; only when it is in does anyone get signed out (a wrong password
// signs nobody out).
extension ApplicationEngine {
    /// Starts a native sign-in at the login screen for `username`: what the worker types next. Unlike
    /// `startNativeSignIn(username:)` another worker may be signed in (the completion switches or refuses).
    /// - Throws: `flowNotAllowed`; `.identity` with `userNotFound`, `browserRequired`, `unsupported`, …
    public func startLoginScreenNativeSignIn(username: String) async throws(SharedDeviceError) -> NativeSignInStep {
        try checkAllowed(.nativeAuth)
        return try await nativeSignInStep(username: username)
    }

    /// Signs a worker in at the login screen with `proof`. When another worker is signed in,
    /// `workerSignedIn` decides: `switch` signs them out and the next worker in as one shift switch
    /// (`account.signed_out`, `account.signed_in` and `account.switched` under one correlation id, as
    /// `AccountManager.switchAccount`), `refuse` throws `accountAlreadySignedIn` and changes nothing. The
    /// same worker signing in again is no switch. `account.signed_in` carries `via: login-screen`, the
    /// flow and `place`.
    /// - Throws: `flowNotAllowed`, `accountAlreadySignedIn`; `.identity` with `invalidCredentials`,
    ///   `invalidCode`, `deviceCodeExpired`, `authorityUnreachable`, … (nobody is signed out then).
    public func signInAtLoginScreen(
        _ proof: LoginScreenProof,
        scopes: [String],
        place: LoginScreenPlace,
        workerSignedIn: DevicePolicy.WorkerSignedIn
    ) async throws(SharedDeviceError) -> LoginScreenSignInOutcome {
        var logger = self.logger
        let correlationID = AccountManager.newCorrelationID()
        logger[metadataKey: "correlation_id"] = "\(correlationID)"
        let flow: DevicePolicy.SignInFlow
        let response: TokenResponse
        let grantedScopes: [String]
        switch proof {
        case .password(let username, let password):
            flow = .password
            let (grant, decoded) = try await interactiveGrant(
                InteractiveTokenParameters(scopes: scopes, flow: .password(username: username, password: password)),
                nextWorker: true,
                logger: logger
            )
            (response, grantedScopes) = (decoded, grant.scopes)
        case .deviceCode(let loginHint, let showCode):
            flow = .deviceCode
            var parameters = InteractiveTokenParameters(scopes: scopes, flow: .deviceCode(showCode: showCode))
            parameters.loginHint = loginHint
            let (grant, decoded) = try await interactiveGrant(parameters, nextWorker: true, logger: logger)
            (response, grantedScopes) = (decoded, grant.scopes)
        case .nativeAuth(let step, let credential):
            flow = .nativeAuth
            let grant = try await nativeGrant(step, credential: credential, scopes: scopes, msalClientID: nil)
            (response, grantedScopes) = (try decode(grant), grant.scopes)
        }
        var details = place.auditDetails
        details["flow"] = flow.rawValue
        let context = context(scopes: grantedScopes)
        do {
            let account = try accountManager.signIn(
                response,
                context: context,
                app: app,
                accessGroup: tokenGroup,
                correlationID: correlationID,
                auditDetails: details
            )
            logger.debug("login-screen sign-in succeeded", metadata: ["account": "\(account.auditName)"])
            return LoginScreenSignInOutcome(account: account, correlationID: correlationID, signedOut: nil)
        } catch  where error.code == .accountAlreadySignedIn && workerSignedIn == .switch {
            // Another worker's shift ends here: out, then the next worker in, under one correlation id.
            let shift = try accountManager.beginSwitch(app: app, reason: .shiftEnd)
            do throws(SharedDeviceError) {
                let account = try accountManager.completeSwitch(
                    shift,
                    response: response,
                    context: context,
                    app: app,
                    accessGroup: tokenGroup,
                    auditDetails: details
                )
                logger.debug("login-screen sign-in switched workers", metadata: ["account": "\(account.auditName)"])
                return LoginScreenSignInOutcome(
                    account: account,
                    correlationID: shift.correlationID,
                    signedOut: shift.signedOut
                )
            } catch {
                throw error.afterSwitchSignOut(shift.signedOut?.account)
            }
        }
    }
}
