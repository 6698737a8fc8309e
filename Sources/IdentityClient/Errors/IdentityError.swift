import Foundation

/// A failed identity call: what went wrong, in MSAL's vocabulary, with a message that says what to do.
///
/// Messages never contain a token, a code or a secret. A failed call changes nothing in any cache.
public struct IdentityError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is.
    public enum Code: String, Sendable, Equatable, CaseIterable {
        /// The user must sign in again interactively (`invalid_grant`, `interaction_required`,
        /// `login_required`, `consent_required`, a revoked or expired refresh token): MSAL -50002.
        case interactionRequired = "interaction_required"
        /// The user or the app canceled the interactive flow: MSAL -50005.
        case userCanceled = "user_canceled"
        /// The user declined the sign-in (device code `access_denied`, authorization `access_denied`).
        case accessDenied = "access_denied"
        /// The device code expired before the user finished signing in (`expired_token`).
        case deviceCodeExpired = "device_code_expired"
        /// The authority answered with an OAuth error other than the above: MSAL -50006.
        case serverError = "server_error"
        /// The authority granted fewer scopes than the app asked for (MSAL -50003): nothing was cached.
        case declinedScopes = "declined_scopes"
        /// The authority could not be reached (connection refused, DNS, timeout, TLS).
        case authorityUnreachable = "authority_unreachable"
        /// The authority URL is malformed, or a B2C authority is not among the known authorities.
        case invalidAuthority = "invalid_authority"
        /// The ID token failed validation (signature, issuer, audience, expiry, nonce): nothing was cached.
        case invalidIDToken = "invalid_id_token"
        /// The authority answered with something that is not a valid response of its kind.
        case invalidResponse = "invalid_response"
        /// The authorization response's `state` did not match the request (possible forgery).
        case stateMismatch = "state_mismatch"
        /// The authority does not offer what the flow needs (no device authorization endpoint, say).
        case unsupported = "unsupported"
    }

    /// What kind of failure this is.
    public var code: Code
    /// What happened and what to do, for people. Never contains a secret.
    public var message: String
    /// The OAuth `error` value from the server, when there was one (`invalid_grant`).
    public var oauthError: String?
    /// The server's `error_description`, when it sent one.
    public var serverDescription: String?
    /// The HTTP status of the response, when there was one.
    public var httpStatus: Int?

    public init(_ code: Code, _ message: String, oauthError: String? = nil, serverDescription: String? = nil, httpStatus: Int? = nil) {
        self.code = code
        self.message = message
        self.oauthError = oauthError
        self.serverDescription = serverDescription
        self.httpStatus = httpStatus
    }

    /// MSAL's numeric error code (`MSALErrorCode`): -50002 interaction required, -50005 user canceled,
    /// -50006 server error, -50000 internal for everything else.
    public var msalErrorCode: Int {
        switch code {
        case .interactionRequired: -50002
        case .userCanceled: -50005
        case .declinedScopes: -50003
        case .serverError, .accessDenied, .deviceCodeExpired: -50006
        default: -50000
        }
    }

    public var description: String {
        var text = message
        if let oauthError { text += " [\(oauthError)]" }
        if let serverDescription, !serverDescription.isEmpty { text += " — the server said: \(serverDescription)" }
        return text
    }
}
