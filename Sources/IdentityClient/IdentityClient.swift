public import Foundation
import Logging
import Synchronization

/// OAuth 2.0 / OpenID Connect for one app registration (client id) at one authority: discovery, the
/// device authorization grant, the authorization code grant with PKCE on a loopback redirect, the
/// refresh token grant and ID-token validation.
///
/// It keeps no tokens: every call returns a `TokenGrant` (or throws) and the caller decides what to
/// cache. A failed call returns nothing to cache. Discovery documents and signing keys are cached
/// per process.
///
/// ```swift
/// let client = IdentityClient(clientID: "kiosk-apps", authority: try Authority("http://127.0.0.1:4593/api/oidc"))
/// let session = try await client.startDeviceCode(scopes: ["User.Read"])
/// print(session.message)                       // To sign in, open … and enter the code …
/// let grant = try await client.completeDeviceCode(session)
/// ```
public final class IdentityClient: Sendable {
    /// The app registration's client id.
    public let clientID: String
    /// Where the app signs in.
    public let authority: Authority
    /// The way to the network.
    public let transport: any HTTPTransport
    /// Seconds of clock difference tolerated when checking ID-token times.
    public let allowedClockSkew: TimeInterval
    private let now: @Sendable () -> Date
    private let sleep: @Sendable (TimeInterval) async throws -> Void
    private let logger = Logger(label: "identity-client")

    /// - Parameters:
    ///   - now: the clock (tests pass a fake one).
    ///   - sleep: waits between device-code polls (tests pass a fake one); must throw when canceled.
    public init(clientID: String, authority: Authority, transport: any HTTPTransport = URLSessionTransport(),
                allowedClockSkew: TimeInterval = 300,
                now: @escaping @Sendable () -> Date = Date.init,
                sleep: @escaping @Sendable (TimeInterval) async throws -> Void = { try await Task.sleep(for: .seconds($0)) }) {
        self.clientID = clientID
        self.authority = authority
        self.transport = transport
        self.allowedClockSkew = allowedClockSkew
        self.now = now
        self.sleep = sleep
    }

    // MARK: - Discovery and keys

    /// The authority's discovery document, fetched once per process (and again after `discoveryLifetime`).
    public func configuration() async throws(IdentityError) -> OpenIDConfiguration {
        let url = authority.openIDConfigurationURL
        if let cached = DiscoveryCache.shared.configuration(for: url, now: now()) { return cached }
        let response = try await transport.send(HTTPRequest(url: url, headers: ["Accept": "application/json"]))
        guard response.isSuccess else {
            throw IdentityError(.invalidAuthority,
                "the authority has no OpenID configuration at \(url.absoluteString) (HTTP \(response.status)); check the authority URL",
                httpStatus: response.status)
        }
        let configuration = try OpenIDConfiguration.decode(response.body, from: url)
        DiscoveryCache.shared.store(configuration, for: url, now: now())
        return configuration
    }

    /// The validator for the authority's current signing keys; `refetch` forces a new JWKS download
    /// (done once when a token names a key the cached set lacks: the provider rotated its keys).
    func validator(refetch: Bool = false) async throws(IdentityError) -> IDTokenValidator {
        let configuration = try await configuration()
        if !refetch, let cached = DiscoveryCache.shared.validator(for: configuration.jwksURI, now: now()) { return cached }
        let response = try await transport.send(HTTPRequest(url: configuration.jwksURI, headers: ["Accept": "application/json"]))
        guard response.isSuccess else {
            throw IdentityError(.serverError, "the authority's signing keys (jwks_uri) answered HTTP \(response.status); try again later",
                                httpStatus: response.status)
        }
        let validator = try IDTokenValidator(jwksJSON: response.body)
        DiscoveryCache.shared.store(validator, for: configuration.jwksURI, now: now())
        return validator
    }

    /// Validates an ID token against the authority's keys, issuer, this client id, the clock and `nonce`.
    /// - Throws: `invalidIDToken` naming the failed check.
    public func validateIDToken(_ jwt: String, nonce: String?) async throws(IdentityError) -> ValidatedIDToken {
        let configuration = try await configuration()
        var validator = try await validator()
        if let keyID = IDTokenValidator.keyID(of: jwt), !validator.hasKey(id: keyID) {
            validator = try await self.validator(refetch: true)
        }
        let expectations = IDTokenExpectations(authority: authority, metadataIssuer: configuration.issuer, clientID: clientID,
                                               nonce: nonce, now: now(), allowedClockSkew: allowedClockSkew)
        return try await validator.validate(jwt, expectations)
    }

    // MARK: - Device authorization grant (RFC 8628)

    /// Starts a device-code sign-in: the user opens `verificationURI` on any device and enters `userCode`.
    /// - Throws: `unsupported` when the authority has no device authorization endpoint; server errors.
    public func startDeviceCode(scopes: [String], loginHint: String? = nil) async throws(IdentityError) -> DeviceCodeSession {
        let configuration = try await configuration()
        guard let endpoint = configuration.deviceAuthorizationEndpoint else {
            throw IdentityError(.unsupported, "the authority does not offer the device code flow (no device_authorization_endpoint); use the browser flow")
        }
        let requested = authority.requestScopes(scopes)
        var fields = [("client_id", clientID), ("scope", requested.joined(separator: " "))]
        if let loginHint { fields.append(("login_hint", loginHint)) }
        if authority.sendsClientInfo { fields.append(("client_info", "1")) }
        let started = now()
        let response = try await post(.form(endpoint, fields))
        guard response.isSuccess else { throw OAuthErrorResponse.identityError(for: response, endpoint: "device authorization endpoint") }
        guard let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any],
              let deviceCode = object["device_code"] as? String, let userCode = object["user_code"] as? String,
              let verification = (object["verification_uri"] ?? object["verification_url"]) as? String,
              let verificationURI = URL(string: verification) else {
            throw IdentityError(.invalidResponse, "the device authorization response lacks device_code, user_code or verification_uri")
        }
        let expiresIn = Self.number(object["expires_in"]) ?? 900
        return DeviceCodeSession(userCode: userCode, verificationURI: verificationURI,
                                 verificationURIComplete: (object["verification_uri_complete"] as? String).flatMap(URL.init(string:)),
                                 expiresAt: started.addingTimeInterval(expiresIn), interval: Self.number(object["interval"]) ?? 5,
                                 serverMessage: object["message"] as? String, scopes: requested, deviceCode: deviceCode)
    }

    /// Polls the token endpoint until the user finishes (RFC 8628 §3.4–3.5): waits `interval` between
    /// polls, adds 5 s on `slow_down`, keeps going on `authorization_pending`.
    /// - Throws: `deviceCodeExpired` (`expired_token` or the code's lifetime passed), `accessDenied`
    ///   (the user declined), `userCanceled` (the task was canceled), `invalidIDToken`, server errors.
    public func completeDeviceCode(_ session: DeviceCodeSession,
                                   progress: @Sendable (DeviceCodeProgress) -> Void = { _ in }) async throws(IdentityError) -> TokenGrant {
        let configuration = try await configuration()
        var interval = max(session.interval, 1)
        var polls = 0
        while true {
            let left = session.expiresAt.timeIntervalSince(now())
            guard left > 0 else {
                throw IdentityError(.deviceCodeExpired, "the code \(session.userCode) expired before the sign-in finished; start the sign-in again")
            }
            progress(DeviceCodeProgress(secondsLeft: Int(left.rounded(.up)), polls: polls, interval: interval))
            do { try await sleep(min(interval, left)) } catch {
                throw IdentityError(.userCanceled, "the device-code sign-in was canceled")
            }
            if Task.isCancelled { throw IdentityError(.userCanceled, "the device-code sign-in was canceled") }
            polls += 1
            var fields = [("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", session.deviceCode),
                          ("client_id", clientID)]
            if authority.sendsClientInfo { fields.append(("client_info", "1")) }
            let response = try await post(.form(configuration.tokenEndpoint, fields))
            if response.isSuccess {
                let grant = try await grant(from: response, requestedScopes: session.scopes, nonce: nil)
                try Self.checkGranted(grant, covers: session.scopes)
                return grant
            }
            switch OAuthErrorResponse.parse(response.body)?.error {
            case "authorization_pending":
                continue
            case "slow_down":
                interval += 5
                continue
            case "expired_token":
                throw IdentityError(.deviceCodeExpired, "the code \(session.userCode) expired before the sign-in finished; start the sign-in again",
                                    oauthError: "expired_token", httpStatus: response.status)
            case "access_denied", "authorization_declined":
                throw IdentityError(.accessDenied, "the user declined the sign-in for code \(session.userCode)",
                                    oauthError: "access_denied", httpStatus: response.status)
            default:
                throw OAuthErrorResponse.identityError(for: response, endpoint: "token endpoint")
            }
        }
    }

    // MARK: - Authorization code grant with PKCE on a loopback redirect (RFC 6749 §4.1, 7636, 8252)

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
    public func acquireTokenInBrowser(scopes: [String], prompt: Prompt? = nil, loginHint: String? = nil,
                                      redirectURI registered: URL = URL(string: "http://127.0.0.1/")!, timeout: TimeInterval = 300,
                                      openBrowser: @Sendable (URL) async throws(IdentityError) -> Void) async throws(IdentityError) -> TokenGrant {
        let configuration = try await configuration()
        guard registered.scheme == "http", let host = registered.host, ["127.0.0.1", "localhost"].contains(host) else {
            throw IdentityError(.invalidAuthority, "the redirect URI must be a loopback http URI (http://127.0.0.1[:port]/path), RFC 8252 §7.3")
        }
        let listener = try LoopbackRedirectListener(port: registered.port.map(UInt16.init) ?? 0)
        defer { listener.shutDown() }
        let redirectPath = registered.path.isEmpty ? "/" : registered.path
        let redirectURI = "http://\(host):\(listener.port)\(redirectPath)"
        let pkce = PKCE(), state = PKCE.randomToken(bytes: 16), nonce = PKCE.randomToken(bytes: 16)
        let requested = authority.requestScopes(scopes)
        var query = [("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI),
                     ("scope", requested.joined(separator: " ")), ("state", state), ("nonce", nonce),
                     ("code_challenge", pkce.challenge), ("code_challenge_method", "S256")]
        if let prompt { query.append(("prompt", prompt.rawValue)) }
        if let loginHint { query.append(("login_hint", loginHint)) }
        if authority.sendsClientInfo { query.append(("client_info", "1")) }
        let separator = configuration.authorizationEndpoint.query == nil ? "?" : "&"
        guard let authorizationURL = URL(string: configuration.authorizationEndpoint.absoluteString + separator + FormEncoding.encodeQuery(query)) else {
            throw IdentityError(.invalidAuthority, "cannot build the authorization URL from the authority's authorization_endpoint")
        }
        try await openBrowser(authorizationURL)
        let fields = try await listener.waitForRedirect(path: redirectPath, deadline: now().addingTimeInterval(timeout))
        guard fields["state"] == state else {
            throw IdentityError(.stateMismatch, "the browser returned a response for another sign-in (state mismatch); nothing was signed in — start again")
        }
        if let error = fields["error"] {
            let description = fields["error_description"]
            if error == "access_denied" {
                throw IdentityError(.accessDenied, "the user declined the sign-in", oauthError: error, serverDescription: description)
            }
            if OAuthErrorResponse.interactionErrors.contains(error) {
                throw IdentityError(.interactionRequired, "the authority needs the user to interact (prompt)", oauthError: error, serverDescription: description)
            }
            throw IdentityError(.serverError, "the authority refused the sign-in", oauthError: error, serverDescription: description)
        }
        guard let code = fields["code"], !code.isEmpty else {
            throw IdentityError(.invalidResponse, "the browser returned neither a code nor an error")
        }
        var exchange = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
                        ("client_id", clientID), ("code_verifier", pkce.verifier)]
        if authority.sendsClientInfo { exchange.append(("client_info", "1")) }
        let response = try await post(.form(configuration.tokenEndpoint, exchange))
        guard response.isSuccess else { throw OAuthErrorResponse.identityError(for: response, endpoint: "token endpoint") }
        let grant = try await grant(from: response, requestedScopes: requested, nonce: nonce, requireIDToken: true)
        try Self.checkGranted(grant, covers: scopes)
        return grant
    }

    // MARK: - Refresh token grant (RFC 6749 §6)

    /// Redeems a refresh token for an access token for `scopes` (the silent step after the cache).
    /// - Throws: `interactionRequired` when the refresh token is expired, revoked or not good for the
    ///   scopes (`invalid_grant`); server errors; `authorityUnreachable`.
    public func refresh(refreshToken: String, scopes: [String]) async throws(IdentityError) -> TokenGrant {
        let configuration = try await configuration()
        let requested = authority.requestScopes(scopes)
        var fields = [("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", clientID),
                      ("scope", requested.joined(separator: " "))]
        if authority.sendsClientInfo { fields.append(("client_info", "1")) }
        let response = try await post(.form(configuration.tokenEndpoint, fields))
        guard response.isSuccess else {
            // RFC 6749 §5.2 answers a bad refresh token with 400 `invalid_grant`; some providers send
            // 400/401 with no body at all for a revoked or expired one. Either way only a new sign-in helps.
            if (response.status == 400 || response.status == 401), OAuthErrorResponse.parse(response.body) == nil {
                throw IdentityError(.interactionRequired,
                    "the authority refused the refresh token (HTTP \(response.status)); it was revoked or expired — sign in again",
                    httpStatus: response.status)
            }
            throw OAuthErrorResponse.identityError(for: response, endpoint: "token endpoint")
        }
        let grant = try await grant(from: response, requestedScopes: requested, nonce: nil)
        try Self.checkGranted(grant, covers: scopes)
        return grant
    }

    /// MSAL's declined-scopes check: the response must grant every scope the app asked for (the
    /// OpenID scopes aside). Nothing is cached from a response that does not.
    static func checkGranted(_ grant: TokenGrant, covers scopes: [String]) throws(IdentityError) {
        let granted = Set(grant.scopes.map { $0.lowercased() })
        let declined = scopes.filter { !Authority.reservedScopes.contains($0.lowercased()) && !granted.contains($0.lowercased()) }
        guard declined.isEmpty else {
            throw IdentityError(.declinedScopes,
                "the authority did not grant \(declined.joined(separator: " ")) (granted: \(grant.scopes.joined(separator: " "))); sign in interactively asking for them, or add them to the scopes the device signs in with")
        }
    }

    // MARK: - Protected resources

    /// `GET url` with `Authorization: Bearer <accessToken>` (a protected API or the userinfo endpoint).
    /// Returns the response whatever its status; the caller decides what a non-2xx status means.
    public func get(_ url: URL, accessToken: String) async throws(IdentityError) -> HTTPResponse {
        try await transport.send(HTTPRequest(url: url, headers: ["Authorization": "Bearer \(accessToken)", "Accept": "application/json"]))
    }

    /// The authority's `userinfo_endpoint` (OpenID Connect Core §5.3), our stand-in for Graph `/me`.
    public func userInfoEndpoint() async throws(IdentityError) -> URL {
        guard let url = try await configuration().userinfoEndpoint else {
            throw IdentityError(.unsupported, "the authority publishes no userinfo_endpoint")
        }
        return url
    }

    /// The browser URL that ends the user's session at the authority (RP-initiated logout), if it offers one.
    public func endSessionURL(idTokenHint: String?) async throws(IdentityError) -> URL? {
        guard let endpoint = try await configuration().endSessionEndpoint else { return nil }
        guard let idTokenHint else { return endpoint }
        let separator = endpoint.query == nil ? "?" : "&"
        return URL(string: endpoint.absoluteString + separator + FormEncoding.encodeQuery([("id_token_hint", idTokenHint), ("client_id", clientID)]))
    }

    // MARK: - Helpers

    /// Sends a token or device-authorization request; like MSAL, retries once after half a second when
    /// the authority answers 5xx (a busy or restarting server), then returns whatever came back.
    private func post(_ request: HTTPRequest) async throws(IdentityError) -> HTTPResponse {
        let response = try await transport.send(request)
        guard (500..<600).contains(response.status) else { return response }
        logger.debug("retrying after HTTP \(response.status)", metadata: ["endpoint": "\(request.url.path)"])
        do { try await Task.sleep(for: .milliseconds(500)) } catch { throw IdentityError(.userCanceled, "the sign-in was canceled") }
        return try await transport.send(request)
    }

    private func grant(from response: HTTPResponse, requestedScopes: [String], nonce: String?,
                       requireIDToken: Bool = false) async throws(IdentityError) -> TokenGrant {
        let receivedAt = now()
        let (fields, accessToken) = try TokenGrant.parse(response.body)
        var idToken: ValidatedIDToken?
        if let jwt = fields["id_token"] as? String, !jwt.isEmpty {
            idToken = try await validateIDToken(jwt, nonce: nonce)
        } else if requireIDToken, requestedScopes.contains("openid") {
            throw IdentityError(.invalidIDToken, "the token endpoint returned no ID token for an `openid` request; nothing was cached")
        }
        logger.debug("token grant", metadata: ["scopes": "\(requestedScopes.joined(separator: " "))"])
        return TokenGrant(body: response.body, fields: fields, accessToken: accessToken, idToken: idToken,
                          requestedScopes: requestedScopes, receivedAt: receivedAt)
    }

    private static func number(_ value: Any?) -> TimeInterval? {
        if let value = value as? Int { return TimeInterval(value) }
        if let value = value as? Double { return value }
        if let value = value as? String { return TimeInterval(value) }
        return nil
    }
}

/// MSAL's prompt types (`MSALPromptType`), sent as the OpenID Connect `prompt` parameter.
public enum Prompt: String, Sendable, CaseIterable {
    /// Let the user pick an account.
    case selectAccount = "select_account"
    /// Ask for credentials even when a session exists.
    case login
    /// Ask for consent again.
    case consent
    /// Never show UI; fail with `interaction_required` when it would be needed.
    case none
}
