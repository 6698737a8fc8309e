import Foundation

/// A failed identity call: what went wrong, in MSAL's vocabulary (`MSALError`), with a message that
/// says what to do.
///
/// Messages never contain a token, a code or a secret. A failed call changes nothing in any cache.
public struct IdentityError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is, matchable in `catch` (`catch IdentityError.Code.interactionRequired`).
    ///
    /// An extensible set (like swift-system's `Errno`): new codes may be added in any release, so a
    /// `switch` over codes needs a `default:` branch. Mirrors MSAL's `MSALInternalError` / `MSALErrorCode`
    /// classes.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: String, Hashable, Sendable {
            case interactionRequired = "interaction_required"
            case userCanceled = "user_canceled"
            case accessDenied = "access_denied"
            case deviceCodeExpired = "device_code_expired"
            case serverError = "server_error"
            case declinedScopes = "declined_scopes"
            case authorityUnreachable = "authority_unreachable"
            case invalidAuthority = "invalid_authority"
            case invalidIDToken = "invalid_id_token"
            case invalidResponse = "invalid_response"
            case stateMismatch = "state_mismatch"
            case unsupported
            case invalidCredentials = "invalid_credentials"
            case userNotFound = "user_not_found"
            case invalidCode = "invalid_code"
            case signInExpired = "sign_in_expired"
            case browserRequired = "browser_required"
        }

        private let kind: Kind
        private init(_ kind: Kind) { self.kind = kind }

        /// The user must sign in again interactively (`invalid_grant`, `interaction_required`,
        /// `login_required`, `consent_required`, a revoked or expired refresh token): MSAL -50002.
        public static let interactionRequired = Code(.interactionRequired)
        /// The user or the app canceled the interactive flow: MSAL -50005.
        public static let userCanceled = Code(.userCanceled)
        /// The user declined the sign-in (device code `access_denied`, authorization `access_denied`).
        public static let accessDenied = Code(.accessDenied)
        /// The device code expired before the user finished signing in (`expired_token`).
        public static let deviceCodeExpired = Code(.deviceCodeExpired)
        /// The authority answered with an OAuth error other than the above: MSAL -50006.
        public static let serverError = Code(.serverError)
        /// The authority granted fewer scopes than the app asked for (MSAL -50003): nothing was cached.
        public static let declinedScopes = Code(.declinedScopes)
        /// The authority could not be reached (connection refused, DNS, timeout, TLS).
        public static let authorityUnreachable = Code(.authorityUnreachable)
        /// The authority URL is malformed, or a B2C authority is not among the known authorities.
        public static let invalidAuthority = Code(.invalidAuthority)
        /// The ID token failed validation (signature, issuer, audience, expiry, nonce): nothing was cached.
        public static let invalidIDToken = Code(.invalidIDToken)
        /// The authority answered with something that is not a valid response of its kind.
        public static let invalidResponse = Code(.invalidResponse)
        /// The authorization response's `state` did not match the request (possible forgery).
        public static let stateMismatch = Code(.stateMismatch)
        /// The authority does not offer what the flow needs (no device authorization endpoint, say).
        public static let unsupported = Code(.unsupported)
        /// The username or the password is wrong (a password grant's `invalid_grant`, MSAL's
        /// `invalid_grant` with its user-facing message): nothing was cached.
        public static let invalidCredentials = Code(.invalidCredentials)
        /// Native authentication: the authority knows no user with that username (`user_not_found`).
        public static let userNotFound = Code(.userNotFound)
        /// Native authentication: the one-time code is wrong (`invalid_grant` / `invalid_oob_value`); the
        /// sign-in stands, and the worker may type it again or ask for a new one.
        // swift-format-ignore: DontRepeatTypeInStaticProperties
        // (the code is the one-time code the worker typed, not this type)
        public static let invalidCode = Code(.invalidCode)
        /// Native authentication: the sign-in took too long (`expired_token`, or its continuation token is no
        /// longer valid); start again.
        public static let signInExpired = Code(.signInExpired)
        /// Native authentication: the authority needs the browser for this user or app (`challenge_type`
        /// `redirect`, `unsupported_challenge_type`); sign in with the browser or the device code instead.
        public static let browserRequired = Code(.browserRequired)

        /// The code's stable snake_case name (`interaction_required`), for logs and JSON; the raw value
        /// it had when `Code` was an enum.
        public var rawValue: String { kind.rawValue }

        /// The code whose `rawValue` is `rawValue`, `nil` for an unknown one.
        public init?(rawValue: String) {
            guard let kind = Kind(rawValue: rawValue) else { return nil }
            self.init(kind)
        }

        /// MSAL's numeric error code (`MSALErrorCode`) for this class of failure.
        var msalErrorCode: Int {
            switch kind {
            case .interactionRequired: -50002
            case .userCanceled: -50005
            case .declinedScopes: -50003
            case .serverError, .accessDenied, .deviceCodeExpired: -50006
            default: -50000
            }
        }

        /// Lets `catch IdentityError.Code.interactionRequired { … }` match (as swift-system's `Errno` does).
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? IdentityError)?.code == code
        }

        /// The code's snake_case name (`interaction_required`).
        public var description: String { kind.rawValue }
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

    /// An error of class `code` whose `message` says what happened and what to do (never a secret),
    /// with the server's OAuth `error`, `error_description` and HTTP status when there was a response.
    public init(
        _ code: Code,
        _ message: String,
        oauthError: String? = nil,
        serverDescription: String? = nil,
        httpStatus: Int? = nil
    ) {
        self.code = code
        self.message = message
        self.oauthError = oauthError
        self.serverDescription = serverDescription
        self.httpStatus = httpStatus
    }

    /// MSAL's numeric error code (`MSALErrorCode`): -50002 interaction required, -50003 declined scopes,
    /// -50005 user canceled, -50006 server error, -50000 internal for everything else.
    public var msalErrorCode: Int { code.msalErrorCode }

    /// The message, the OAuth error and the server's description, on one line.
    public var description: String {
        var text = message
        if let oauthError { text += " [\(oauthError)]" }
        if let serverDescription, !serverDescription.isEmpty { text += " — the server said: \(serverDescription)" }
        return text
    }
}
