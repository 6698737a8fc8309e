import Foundation

/// An OAuth 2.0 error response (RFC 6749 §5.2): `error`, `error_description`, and Microsoft's
/// `suberror` / `error_codes`.
struct OAuthErrorResponse: Decodable, Sendable {
    var error: String
    var errorDescription: String?
    var suberror: String?

    enum CodingKeys: String, CodingKey {
        case error
        case errorDescription = "error_description"
        case suberror
    }

    /// Parses an error body; `nil` when it is not an OAuth error object.
    static func parse(_ body: Data) -> OAuthErrorResponse? {
        try? JSONDecoder().decode(OAuthErrorResponse.self, from: body)
    }

    /// The OAuth errors after which only an interactive sign-in helps (MSAL maps them to -50002).
    static let interactionErrors: Set<String> = [
        "invalid_grant", "interaction_required", "login_required", "consent_required", "account_selection_required",
    ]

    /// The error a failed token-endpoint response means to the app.
    static func identityError(for response: HTTPResponse, endpoint: String) -> IdentityError {
        guard let oauth = parse(response.body) else {
            return IdentityError(
                .serverError,
                "the authority's \(endpoint) answered HTTP \(response.status) without an OAuth error; try again later or check the authority",
                httpStatus: response.status
            )
        }
        // The server's description may echo a request field; it never holds our secrets (we send
        // them only in the body), but keep it to one line.
        let description = oauth.errorDescription.map { text in
            text.split(omittingEmptySubsequences: true, whereSeparator: \.isNewline).joined(separator: " ")
        }
        if interactionErrors.contains(oauth.error) {
            return IdentityError(
                .interactionRequired,
                "the user must sign in again interactively (the authority refused the grant at its \(endpoint))",
                oauthError: oauth.error,
                serverDescription: description,
                httpStatus: response.status
            )
        }
        if oauth.error == "access_denied" {
            return IdentityError(
                .accessDenied,
                "the user declined the sign-in",
                oauthError: oauth.error,
                serverDescription: description,
                httpStatus: response.status
            )
        }
        return IdentityError(
            .serverError,
            "the authority's \(endpoint) refused the request",
            oauthError: oauth.error,
            serverDescription: description,
            httpStatus: response.status
        )
    }
}
