import Foundation
import Logging

// The device authorization grant (RFC 8628): MSAL's `acquireTokenWithDeviceCode`.
extension IdentityClient {
    /// Starts a device-code sign-in: the user opens `verificationURI` on any device and enters `userCode`.
    /// - Throws: `unsupported` when the authority has no device authorization endpoint; server errors.
    public func startDeviceCode(
        scopes: [String],
        loginHint: String? = nil
    ) async throws(IdentityError) -> DeviceCodeSession {
        let configuration = try await configuration()
        guard let endpoint = configuration.deviceAuthorizationEndpoint else {
            throw IdentityError(
                .unsupported,
                "the authority does not offer the device code flow (no device_authorization_endpoint); use the browser flow"
            )
        }
        let requested = authority.requestScopes(scopes)
        var fields = clientFields + [("scope", requested.joined(separator: " "))]
        if let loginHint { fields.append(("login_hint", loginHint)) }
        if authority.sendsClientInfo { fields.append(("client_info", "1")) }
        let started = now()
        let response = try await post(.form(endpoint, fields))
        guard response.isSuccess else {
            let error = OAuthErrorResponse.identityError(for: response, endpoint: "device authorization endpoint")
            logger.debug("device code sign-in refused", metadata: LogFields.failure(error))
            throw error
        }
        guard let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any],
            let deviceCode = object["device_code"] as? String, let userCode = object["user_code"] as? String,
            let verification = (object["verification_uri"] ?? object["verification_url"]) as? String,
            let verificationURI = URL(string: verification)
        else {
            throw IdentityError(
                .invalidResponse,
                "the device authorization response lacks device_code, user_code or verification_uri"
            )
        }
        let expiresIn = Self.number(object["expires_in"]) ?? 900
        let session = DeviceCodeSession(
            userCode: userCode,
            verificationURI: verificationURI,
            verificationURIComplete: (object["verification_uri_complete"] as? String).flatMap(URL.init(string:)),
            expiresAt: started.addingTimeInterval(expiresIn),
            interval: Self.number(object["interval"]) ?? 5,
            serverMessage: object["message"] as? String,
            scopes: requested,
            deviceCode: deviceCode
        )
        // Neither the device code (the secret the app polls with) nor the user code goes to the log.
        logger.debug(
            "device code sign-in started",
            metadata: [
                "oauth.verification_uri": LogFields.endpoint(verificationURI),
                "oauth.scopes": LogFields.scopes(requested),
                "oauth.expires_in": "\(Int(expiresIn))",
                "oauth.interval": "\(Int(session.interval))",
                "oauth.login_hint": "\(loginHint != nil)",
            ]
        )
        return session
    }

    /// Polls the token endpoint until the user finishes (RFC 8628 §3.4–3.5): waits `interval` between
    /// polls, adds 5 s on `slow_down`, keeps going on `authorization_pending`.
    /// - Throws: `deviceCodeExpired` (`expired_token` or the code's lifetime passed), `accessDenied`
    ///   (the user declined), `userCanceled` (the task was canceled), `invalidIDToken`, server errors.
    public func completeDeviceCode(
        _ session: DeviceCodeSession,
        progress: @Sendable (DeviceCodeProgress) -> Void = { _ in }
    ) async throws(IdentityError) -> TokenGrant {
        let configuration = try await configuration()
        var interval = max(session.interval, 1)
        var polls = 0
        while true {
            let left = session.expiresAt.timeIntervalSince(now())
            guard left > 0 else {
                logger.debug("device code expired before the sign-in finished", metadata: ["oauth.polls": "\(polls)"])
                throw IdentityError(
                    .deviceCodeExpired,
                    "the code \(session.userCode) expired before the sign-in finished; start the sign-in again"
                )
            }
            progress(DeviceCodeProgress(secondsLeft: Int(left.rounded(.up)), polls: polls, interval: interval))
            do { try await sleep(min(interval, left)) } catch {
                logger.debug("device code sign-in canceled", metadata: ["oauth.polls": "\(polls)"])
                throw IdentityError(.userCanceled, "the device-code sign-in was canceled")
            }
            if Task.isCancelled {
                logger.debug("device code sign-in canceled", metadata: ["oauth.polls": "\(polls)"])
                throw IdentityError(.userCanceled, "the device-code sign-in was canceled")
            }
            polls += 1
            var fields =
                [("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", session.deviceCode)]
                + clientFields
            if authority.sendsClientInfo { fields.append(("client_info", "1")) }
            let response = try await post(.form(configuration.tokenEndpoint, fields))
            if response.isSuccess {
                logger.debug("device code sign-in approved", metadata: ["oauth.polls": "\(polls)"])
                let grant = try await grant(
                    from: response,
                    grantType: "device_code",
                    requestedScopes: session.scopes,
                    nonce: nil
                )
                try Self.checkGranted(grant, covers: session.scopes)
                return grant
            }
            switch OAuthErrorResponse.parse(response.body)?.error {
            case "authorization_pending":
                logger.trace(
                    "device code poll: authorization pending",
                    metadata: ["oauth.polls": "\(polls)", "oauth.interval": "\(Int(interval))"]
                )
                continue
            case "slow_down":
                interval += 5
                logger.debug(
                    "device code poll: slow down",
                    metadata: ["oauth.polls": "\(polls)", "oauth.interval": "\(Int(interval))"]
                )
                continue
            case "expired_token":
                logger.debug("device code expired at the authority", metadata: ["oauth.polls": "\(polls)"])
                throw IdentityError(
                    .deviceCodeExpired,
                    "the code \(session.userCode) expired before the sign-in finished; start the sign-in again",
                    oauthError: "expired_token",
                    httpStatus: response.status
                )
            case "access_denied", "authorization_declined":
                logger.debug("device code sign-in declined by the user", metadata: ["oauth.polls": "\(polls)"])
                throw IdentityError(
                    .accessDenied,
                    "the user declined the sign-in for code \(session.userCode)",
                    oauthError: "access_denied",
                    httpStatus: response.status
                )
            default:
                let error = OAuthErrorResponse.identityError(for: response, endpoint: "token endpoint")
                logger.debug("device code poll failed", metadata: LogFields.failure(error))
                throw error
            }
        }
    }
}
