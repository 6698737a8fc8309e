import Foundation
import Logging

/// A native sign-in in progress (Microsoft Entra External ID native authentication, API V1): what the
/// authority asks for next. Its continuation token is never printed or logged.
public struct NativeSignInStep: Sendable, CustomStringConvertible {
    /// What the worker must give.
    public enum Challenge: Sendable, Equatable {
        /// Their password.
        case password
        /// The one-time code the authority sent: `length` characters, to `sentTo` (a masked email address)
        /// over `channel` (`email`).
        case code(length: Int, sentTo: String, channel: String)
    }

    /// What the worker must give.
    public let challenge: Challenge
    /// The username the sign-in is for.
    public let username: String
    /// The authority's continuation token for the next request.
    let continuationToken: String

    public var description: String {
        switch challenge {
        case .password: "NativeSignInStep(\(username): password)"
        case .code(let length, let sentTo, let channel):
            "NativeSignInStep(\(username): \(length)-character code sent to \(sentTo) by \(channel))"
        }
    }
}

// Native authentication (Microsoft Entra External ID, `*.ciamlogin.com`): the app's own screen takes the
// username, then the password or the one-time code the authority emails, through
// `/oauth2/v2.0/initiate` → `/oauth2/v2.0/challenge` → `/oauth2/v2.0/token` with continuation tokens
// (Microsoft's native authentication API reference, V1). The challenge types always include `redirect`,
// as the API requires: an answer `redirect` means only the browser can sign this user in.
extension IdentityClient {
    /// Starts a native sign-in for `username`; the step says whether the password or an emailed code is
    /// next (the code is sent by then).
    /// - Throws: `unsupported` (not a ciamlogin.com authority, or the app is not enabled for native
    ///   authentication), `userNotFound`, `browserRequired`, server errors, `authorityUnreachable`.
    public func startNativeSignIn(username: String) async throws(IdentityError) -> NativeSignInStep {
        guard case .ciam = authority.kind else {
            throw IdentityError(
                .unsupported,
                "native authentication needs a Microsoft Entra External ID authority (https://{tenant}.ciamlogin.com/…); \(authority.url.absoluteString) is not one"
            )
        }
        logger.debug("native sign-in started")
        let initiated = try await nativeRequest(
            "initiate",
            [("username", username), ("challenge_type", Self.nativeChallengeTypes)]
        )
        guard let token = initiated["continuation_token"] as? String, !token.isEmpty else {
            throw IdentityError(
                .invalidResponse,
                "the authority's native sign-in (initiate) answered without a continuation token"
            )
        }
        return try await challenge(username: username, continuationToken: token)
    }

    /// Sends a new one-time code for a sign-in waiting for one (the previous code stops working).
    public func resendNativeSignInCode(_ step: NativeSignInStep) async throws(IdentityError) -> NativeSignInStep {
        guard case .code = step.challenge else {
            throw IdentityError(
                .unsupported,
                "this sign-in waits for a password, not a code; there is no code to send again"
            )
        }
        logger.debug("native sign-in: sending the code again")
        return try await challenge(username: step.username, continuationToken: step.continuationToken)
    }

    /// Finishes a sign-in that asked for the password.
    /// - Throws: `invalidCredentials` (wrong password), `signInExpired`, `browserRequired`, `invalidIDToken`, …
    public func submitNativeSignInPassword(
        _ step: NativeSignInStep,
        password: String,
        scopes: [String]
    ) async throws(IdentityError) -> TokenGrant {
        try await nativeToken(step, grantType: "password", credential: ("password", password), scopes: scopes)
    }

    /// Finishes a sign-in that asked for the one-time code.
    /// - Throws: `invalidCode` (the step stands: type it again or resend), `signInExpired`, …
    public func submitNativeSignInCode(
        _ step: NativeSignInStep,
        code: String,
        scopes: [String]
    ) async throws(IdentityError) -> TokenGrant {
        try await nativeToken(step, grantType: "oob", credential: ("oob", code), scopes: scopes)
    }

    /// `challenge_type`: what the app can do, `redirect` always among them.
    static let nativeChallengeTypes = "oob password redirect"

    private func challenge(username: String, continuationToken: String) async throws(IdentityError) -> NativeSignInStep
    {
        let answer = try await nativeRequest(
            "challenge",
            [("challenge_type", Self.nativeChallengeTypes), ("continuation_token", continuationToken)]
        )
        guard let token = answer["continuation_token"] as? String, !token.isEmpty else {
            throw IdentityError(
                .invalidResponse,
                "the authority's native sign-in (challenge) answered without a continuation token"
            )
        }
        switch answer["challenge_type"] as? String {
        case "password":
            logger.debug("native sign-in: the password is next")
            return NativeSignInStep(challenge: .password, username: username, continuationToken: token)
        case "oob":
            guard let length = Self.number(answer["code_length"]).map(Int.init), length > 0,
                let label = answer["challenge_target_label"] as? String,
                let channel = answer["challenge_channel"] as? String
            else {
                throw IdentityError(
                    .invalidResponse,
                    "the authority sent a one-time code but did not say its length, where it went or how"
                )
            }
            logger.debug(
                "native sign-in: a one-time code was sent",
                metadata: ["native.code_length": "\(length)", "native.channel": "\(channel)"]
            )
            return NativeSignInStep(
                challenge: .code(length: length, sentTo: label, channel: channel),
                username: username,
                continuationToken: token
            )
        default:
            throw IdentityError(.invalidResponse, "the authority's native sign-in asked for an unknown challenge type")
        }
    }

    private func nativeToken(
        _ step: NativeSignInStep,
        grantType: String,
        credential: (String, String),
        scopes: [String]
    ) async throws(IdentityError) -> TokenGrant {
        let requested = authority.requestScopes(scopes)
        let fields = [
            ("continuation_token", step.continuationToken), ("grant_type", grantType), credential,
            ("scope", requested.joined(separator: " ")), ("client_info", "1"),
        ]
        let response = try await nativePost("token", fields, secret: credential.1)
        if response.isSuccess, let redirect = Self.redirect(response.body) { throw redirect }
        guard response.isSuccess else { throw Self.nativeError(response, endpoint: "token", secret: credential.1) }
        let grant = try await grant(
            from: response,
            grantType: "native_\(grantType)",
            requestedScopes: requested,
            nonce: nil,
            requireIDToken: true
        )
        try Self.checkGranted(grant, covers: scopes)
        logger.debug("native sign-in succeeded", metadata: ["oauth.scopes": LogFields.scopes(grant.scopes)])
        return grant
    }

    /// A native-auth request answered 200 with JSON (a `redirect` answer thrown as `browserRequired`).
    private func nativeRequest(
        _ endpoint: String,
        _ fields: [(String, String)]
    ) async throws(IdentityError) -> [String: Any] {
        let response = try await nativePost(endpoint, fields, secret: nil)
        if response.isSuccess, let redirect = Self.redirect(response.body) { throw redirect }
        guard response.isSuccess else { throw Self.nativeError(response, endpoint: endpoint, secret: nil) }
        guard let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any] else {
            throw IdentityError(
                .invalidResponse,
                "the authority's native sign-in (\(endpoint)) answered with something that is not JSON"
            )
        }
        return object
    }

    /// POSTs to `{authority}/oauth2/v2.0/{endpoint}`; a body holding `secret` is overwritten once sent.
    private func nativePost(
        _ endpoint: String,
        _ fields: [(String, String)],
        secret: String?
    ) async throws(IdentityError) -> HTTPResponse {
        var request = HTTPRequest.form(authority.url.appending(path: "oauth2/v2.0/\(endpoint)"), clientFields + fields)
        do {
            let response = try await post(request)
            if secret != nil { Self.wipe(&request.body) }
            return response
        } catch {
            if secret != nil { Self.wipe(&request.body) }
            logger.debug("native sign-in failed", metadata: LogFields.failure(error))
            throw error
        }
    }

    /// `{"challenge_type": "redirect", "redirect_reason": …}`: a success that means "use the browser".
    private static func redirect(_ body: Data) -> IdentityError? {
        guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any],
            object["challenge_type"] as? String == "redirect"
        else {
            return nil
        }
        let reason = (object["redirect_reason"] as? String).map { " (\($0.prefix(200)))" } ?? ""
        return IdentityError(
            .browserRequired,
            "the authority needs the browser to sign this user in\(reason); use the browser or the device code"
        )
    }

    /// The documented errors of the native-auth endpoints, in the identity client's terms; nothing that
    /// echoes the password or code.
    static func nativeError(_ response: HTTPResponse, endpoint: String, secret: String?) -> IdentityError {
        let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any]
        guard let error = object?["error"] as? String else {
            return OAuthErrorResponse.identityError(for: response, endpoint: "native sign-in (\(endpoint))")
        }
        let suberror = object?["suberror"] as? String
        let codes = (object?["error_codes"] as? [Any])?.compactMap { number($0).map(Int.init) } ?? []
        var description = (object?["error_description"] as? String)?.split(whereSeparator: \.isNewline).first.map(
            String.init
        )
        if let secret, !secret.isEmpty, description?.contains(secret) == true { description = nil }
        func make(_ code: IdentityError.Code, _ message: String) -> IdentityError {
            IdentityError(code, message, oauthError: error, serverDescription: description, httpStatus: response.status)
        }
        switch (error, suberror) {
        case ("user_not_found", _):
            return make(.userNotFound, "no account has that username at this authority; check it, or sign up first")
        case ("invalid_grant", "invalid_oob_value"):
            return make(.invalidCode, "the one-time code is wrong; type it again or ask for a new one")
        case ("invalid_grant", "mfa_required"), ("invalid_grant", "registration_required"):
            return make(
                .browserRequired,
                "this sign-in needs a further step the kiosk's screen does not offer; use the browser or the device code"
            )
        case ("invalid_grant", _) where codes.contains(50126):
            return make(
                .invalidCredentials,
                "the username or password is incorrect; nothing was cached — check them and sign in again"
            )
        case ("invalid_grant", _), ("expired_token", _):
            return make(.signInExpired, "the sign-in took too long or is no longer valid; start it again")
        case ("unsupported_challenge_type", _):
            return make(
                .browserRequired,
                "the authority cannot sign this user in on the kiosk's own screen; use the browser or the device code"
            )
        case ("unauthorized_client", _), ("invalid_client", _):
            return make(
                .unsupported,
                "the app is not registered for native authentication at this authority (a public client with native authentication enabled); use the browser or the device code, or ask its administrator"
            )
        default:
            return make(.serverError, "the authority's native sign-in (\(endpoint)) refused the request")
        }
    }
}
