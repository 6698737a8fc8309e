public import Foundation
import Logging

// The authorization code grant with PKCE on a loopback redirect (RFC 6749 §4.1, RFC 7636, RFC 8252):
// MSAL's interactive `acquireToken` in the system browser.
extension IdentityClient {
    /// Signs the user in through the system browser: listens on `127.0.0.1` on a free port, opens the
    /// authorization URL with `openBrowser`, checks `state`, and exchanges the code (with the PKCE
    /// verifier) for tokens whose ID token must carry the request's `nonce`.
    ///
    /// - Parameters:
    ///   - prompt: MSAL's prompt type; `nil` sends none (MSAL's `promptIfNecessary`).
    ///   - loginHint: prefills the username.
    ///   - redirectURI: the registered loopback redirect URI. Without a port the listener takes a free one
    ///     (RFC 8252 §7.3); with one (for authorities that match redirect URIs exactly) it listens there.
    ///   - timeout: how long to wait for the browser.
    /// - Throws: `userCanceled` (canceled, timed out, or the browser could not be opened), `stateMismatch`,
    ///   `accessDenied`, `invalidIDToken`, server errors.
    public func acquireTokenInBrowser(
        scopes: [String],
        prompt: Prompt? = nil,
        loginHint: String? = nil,
        redirectURI registered: URL = URL(string: "http://127.0.0.1/")!,
        timeout: TimeInterval = 300,
        openBrowser: @Sendable (URL) async throws(IdentityError) -> Void
    ) async throws(IdentityError) -> TokenGrant {
        let configuration = try await configuration()
        guard registered.scheme == "http", let host = registered.host, ["127.0.0.1", "localhost"].contains(host) else {
            throw IdentityError(
                .invalidAuthority,
                "the redirect URI must be a loopback http URI (http://127.0.0.1[:port]/path), RFC 8252 §7.3"
            )
        }
        let listener = try LoopbackRedirectListener(port: registered.port.map(UInt16.init) ?? 0)
        defer { listener.shutDown() }
        let redirectPath = registered.path.isEmpty ? "/" : registered.path
        let redirectURI = "http://\(host):\(listener.port)\(redirectPath)"
        let pkce = PKCE()
        let state = PKCE.randomToken(bytes: 16)
        let nonce = PKCE.randomToken(bytes: 16)
        let requested = authority.requestScopes(scopes)
        var query = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI),
            ("scope", requested.joined(separator: " ")), ("state", state), ("nonce", nonce),
            ("code_challenge", pkce.challenge), ("code_challenge_method", "S256"),
        ]
        if let prompt { query.append(("prompt", prompt.rawValue)) }
        if let loginHint { query.append(("login_hint", loginHint)) }
        if authority.sendsClientInfo { query.append(("client_info", "1")) }
        let separator = configuration.authorizationEndpoint.query == nil ? "?" : "&"
        guard
            let authorizationURL = URL(
                string: configuration.authorizationEndpoint.absoluteString + separator + FormEncoding.encodeQuery(query)
            )
        else {
            throw IdentityError(
                .invalidAuthority,
                "cannot build the authorization URL from the authority's authorization_endpoint"
            )
        }
        // The authorization URL's query (state, nonce, challenge, hint) stays out of the log.
        logger.debug(
            "browser sign-in started",
            metadata: [
                "oauth.authorization_endpoint": LogFields.endpoint(configuration.authorizationEndpoint),
                "oauth.redirect_uri": "\(redirectURI)",
                "oauth.scopes": LogFields.scopes(requested),
                "oauth.prompt": "\(prompt?.rawValue ?? "none sent")",
                "oauth.login_hint": "\(loginHint != nil)",
            ]
        )
        try await openBrowser(authorizationURL)
        let fields: [String: String]
        do {
            fields = try await listener.waitForRedirect(path: redirectPath, deadline: now().addingTimeInterval(timeout))
        } catch {
            logger.debug("browser sign-in ended without a redirect", metadata: LogFields.failure(error))
            throw error
        }
        logger.debug(
            "browser redirect received",
            metadata: [
                "oauth.has_code": "\(fields["code"].map { !$0.isEmpty } ?? false)",
                "oauth.error": "\(fields["error"] ?? "none")",
                "oauth.state_matches": "\(fields["state"] == state)",
            ]
        )
        guard fields["state"] == state else {
            throw IdentityError(
                .stateMismatch,
                "the browser returned a response for another sign-in (state mismatch); nothing was signed in — start again"
            )
        }
        if let error = fields["error"] {
            let description = fields["error_description"]
            if error == "access_denied" {
                throw IdentityError(
                    .accessDenied,
                    "the user declined the sign-in",
                    oauthError: error,
                    serverDescription: description
                )
            }
            if OAuthErrorResponse.interactionErrors.contains(error) {
                throw IdentityError(
                    .interactionRequired,
                    "the authority needs the user to interact (prompt)",
                    oauthError: error,
                    serverDescription: description
                )
            }
            throw IdentityError(
                .serverError,
                "the authority refused the sign-in",
                oauthError: error,
                serverDescription: description
            )
        }
        guard let code = fields["code"], !code.isEmpty else {
            throw IdentityError(.invalidResponse, "the browser returned neither a code nor an error")
        }
        var exchange =
            [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI)] + clientFields
            + [("code_verifier", pkce.verifier)]
        if authority.sendsClientInfo { exchange.append(("client_info", "1")) }
        let response = try await post(.form(configuration.tokenEndpoint, exchange))
        guard response.isSuccess else {
            let error = OAuthErrorResponse.identityError(for: response, endpoint: "token endpoint")
            logger.debug("code exchange refused", metadata: LogFields.failure(error))
            throw error
        }
        let grant = try await grant(
            from: response,
            grantType: "authorization_code",
            requestedScopes: requested,
            nonce: nonce,
            requireIDToken: true
        )
        try Self.checkGranted(grant, covers: scopes)
        return grant
    }
}
