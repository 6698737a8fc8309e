import Crypto
import Foundation
import IdentityClient
import IdentityTestSupport
import JWTKit
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Microsoft Entra ID and Azure AD B2C cannot be reached from here, so these tests script the responses
// in the shapes the Microsoft identity platform documents (v2.0 discovery, /devicecode, /token, AADSTS
// error bodies, client_info) and check what the client sends and how it reads the answers.
//
// Every client keeps discovery documents and key sets in its own `DiscoveryCache` (unless it is handed
// one), so tests do not see each other's entries; each still uses its own tenant (a fresh GUID) so that
// the recorded requests name it.

/// Microsoft identity platform response shapes, as documented.
private enum Entra {
    static let host = "https://login.microsoftonline.com"
    static let clientID = "6731de76-14a6-49ae-97bc-6eba6914391e"
    /// The user's home tenant (`tid`, `utid`).
    static let homeTenantID = "72f988bf-86f1-41af-91ab-2d7cd011db47"
    /// The user's object id (`oid`, `uid`).
    static let objectID = "00000000-0000-0000-66f3-3332eca7ea81"
    /// The pairwise `sub` Microsoft issues per app: not the object id.
    static let pairwiseSubject = "AAAAAAAAAAAAAAAAAAAAAIkzqFVrSaSaFHy782bbtaQ"
    static let now = Date(timeIntervalSince1970: 3_000_000_000)
    static let verificationURI = "https://microsoft.com/devicelogin"
    static let userCode = "FXLQ6T9CK"
    static let deviceCode =
        "DAQABAAEAAAD--DLA3VO7QrddgJg7WevrXYfPk6VIV2zeQ6s8BqDzOy0RdqVrHIsA2Kkgf1fISyF0cy4DjChU2LJrR8wiAA"

    static func discoveryPath(_ tenant: String) -> String { "/\(tenant)/v2.0/.well-known/openid-configuration" }
    static func tokenPath(_ tenant: String) -> String { "/\(tenant)/oauth2/v2.0/token" }
    static func deviceCodePath(_ tenant: String) -> String { "/\(tenant)/oauth2/v2.0/devicecode" }
    static func keysPath(_ tenant: String) -> String { "/\(tenant)/discovery/v2.0/keys" }

    /// The v2.0 discovery document of a tenant (see `MicrosoftIdentityPlatform.discovery`).
    static func discovery(tenant: String, issuer: String) -> [String: Any] {
        MicrosoftIdentityPlatform.discovery(tenant: tenant, issuer: issuer)
    }

    /// A `jwks_uri` key set as Microsoft publishes it: RSA keys with `kid`, `x5t`, `n`, `e`, `issuer` and no `alg`.
    static func keys(_ keys: [(JWTKit.Insecure.RSA.PrivateKey, String)], issuer: String) throws -> HTTPResponse {
        let entries: [[String: Any]] = try keys.map { key, kid in
            var jwk: [String: Any] = try TestProvider.rsaJWK(key, kid: kid, alg: nil)
            jwk["x5t"] = kid
            jwk["issuer"] = issuer
            return jwk
        }
        return .json(["keys": entries])
    }

    /// The `/devicecode` response.
    static var deviceCodeResponse: [String: Any] {
        [
            "user_code": userCode,
            "device_code": deviceCode,
            "verification_uri": verificationURI,
            "expires_in": 900,
            "interval": 5,
            "message":
                "To sign in, use a web browser to open the page \(verificationURI) and enter the code \(userCode) to authenticate.",
        ]
    }

    /// The claims of a v2.0 ID token for the user in their home tenant.
    static func idTokenClaims(now: Date = Entra.now, tenantID: String = homeTenantID) -> TestClaims {
        let seconds = Int(now.timeIntervalSince1970)
        return TestClaims([
            "aud": .string(clientID),
            "iss": .string("\(host)/\(tenantID)/v2.0"),
            "iat": .int(seconds),
            "nbf": .int(seconds),
            "exp": .int(seconds + 3600),
            "aio": .string(
                "Df2UVXL1ix!lMCWMSOJBcFatzcGfvFGhjKv8q5g0x732dR5MB5BisvGQO7YWByjd8iQDLq!eGbIDakyp5mnOrcdqHeYSnltepQmRp6AIZ8jY"
            ),
            "name": .string("Ana Shift"),
            "oid": .string(objectID),
            "preferred_username": .string("ana@contoso.onmicrosoft.com"),
            "rh": .string("0.ARoAv4j5cvGGr0GRqy180BHbR5IiMKZbgD1NnLKXeVkzYWUaAPI."),
            "sub": .string(pairwiseSubject),
            "tid": .string(tenantID),
            "uti": .string("fqiBqXLPj0eQa82S-IYFAA"),
            "ver": .string("2.0"),
        ])
    }

    /// `client_info`: base64url of `{"uid":"…","utid":"…"}`.
    static func clientInfo(uid: String = objectID, utid: String = homeTenantID) -> String {
        Base64URL.encode(Data("{\"uid\":\"\(uid)\",\"utid\":\"\(utid)\"}".utf8))
    }

    /// A token response as the v2.0 token endpoint sends it (to a request with `client_info=1`).
    static func tokenResponse(
        scope: String,
        idToken: String?,
        accessToken: String = "eyJ0eXAiOiJKV1QiLCJub25jZSI6Ii1.at",
        refreshToken: String = "1.AVEAv4j5cvGGr0GRqy180BHbR-rt"
    ) -> Data {
        var object: [String: Any] = [
            "token_type": "Bearer",
            "scope": scope,
            "expires_in": 4783,
            "ext_expires_in": 4783,
            "access_token": accessToken,
            "refresh_token": refreshToken,
            "client_info": clientInfo(),
        ]
        object["id_token"] = idToken
        return try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    /// An error body of the v2.0 token endpoint: `error`, an AADSTS `error_description` with Microsoft's
    /// trace lines, `error_codes`, `timestamp`, `trace_id`, `correlation_id`, `error_uri`.
    static func error(
        _ error: String,
        code: Int,
        _ text: String,
        suberror: String? = nil,
        status: Int = 400
    ) -> HTTPResponse {
        var object: [String: Any] = [
            "error": error,
            "error_description":
                "AADSTS\(code): \(text)\r\nTrace ID: 0000aaaa-11bb-cccc-dd22-eeeeee333333\r\nCorrelation ID: aaaa0000-bb11-2222-33cc-444444dddddd\r\nTimestamp: 2065-01-24 05:20:00Z",
            "error_codes": [code],
            "timestamp": "2065-01-24 05:20:00Z",
            "trace_id": "0000aaaa-11bb-cccc-dd22-eeeeee333333",
            "correlation_id": "aaaa0000-bb11-2222-33cc-444444dddddd",
            "error_uri": "\(host)/error?code=\(code)",
        ]
        object["suberror"] = suberror
        return .json(object, status: status)
    }

    static let authorizationPending = error(
        "authorization_pending",
        code: 70016,
        "OAuth 2.0 device flow error. Authorization is pending. Continue polling."
    )
    static let slowDown = error("slow_down", code: 70016, "OAuth 2.0 device flow error. Polling too often; slow down.")
}

/// Records the waits the client asks for and returns at once.
private final class SleepRecorder: Sendable {
    private let intervals = Mutex<[TimeInterval]>([])
    var recorded: [TimeInterval] { intervals.withLock { $0 } }
    var function: @Sendable (TimeInterval) async throws -> Void {
        { [self] interval in intervals.withLock { $0.append(interval) } }
    }
}

/// One scripted Entra tenant: a fresh tenant path (or `organizations`) whose discovery document and key
/// set are served, a transport and a fake sleep.
private struct EntraTenant {
    let tenant: String
    let transport = ScriptedTransport()
    let sleeps = SleepRecorder()

    /// - Parameters:
    ///   - tenant: the authority's tenant path segment; a fresh tenant id by default.
    ///   - keys: the signing keys `jwks_uri` serves (always, unless the test queues other sets).
    init(
        tenant: String = UUID().uuidString.lowercased(),
        keys: [(JWTKit.Insecure.RSA.PrivateKey, String)] = [(TestProvider.rsaKey, "entra-key-1")]
    ) throws {
        self.tenant = tenant
        let isMultiTenant = ["common", "organizations", "consumers"].contains(tenant)
        let issuer = isMultiTenant ? "\(Entra.host)/{tenantid}/v2.0" : "\(Entra.host)/\(tenant)/v2.0"
        transport.always(Entra.discoveryPath(tenant), .json(Entra.discovery(tenant: tenant, issuer: issuer)))
        transport.always(Entra.keysPath(tenant), try Entra.keys(keys, issuer: issuer))
    }

    var authorityURL: String { "\(Entra.host)/\(tenant)" }
    var discoveryPath: String { Entra.discoveryPath(tenant) }
    var tokenPath: String { Entra.tokenPath(tenant) }
    var deviceCodePath: String { Entra.deviceCodePath(tenant) }
    var keysPath: String { Entra.keysPath(tenant) }
    /// The `tid` tokens of this tenant carry: the tenant itself, or the home tenant for multi-tenant paths.
    var tokenTenantID: String { tenant.contains("-") ? tenant : Entra.homeTenantID }

    func client() throws(IdentityError) -> IdentityClient {
        IdentityClient(
            clientID: Entra.clientID,
            authority: try Authority(authorityURL),
            transport: transport,
            now: { Entra.now },
            sleep: sleeps.function
        )
    }

    /// A signed ID token of this tenant.
    func idToken(
        key: JWTKit.Insecure.RSA.PrivateKey = TestProvider.rsaKey,
        kid: String = "entra-key-1"
    ) async throws -> String {
        try await TestProvider.rs256(Entra.idTokenClaims(tenantID: tokenTenantID), key: key, kid: kid)
    }
}

/// The error an identity call threw, or `nil` when it succeeded.
private func entraError<T>(_ body: () async throws(IdentityError) -> T) async -> IdentityError? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}

/// The Microsoft-specific behaviour of `IdentityClient` against scripted Entra ID and B2C responses.
struct MicrosoftFlowTests {
    static let appScopes = ["User.Read", "Files.Read"]

    // MARK: - 1. Device code against `organizations`

    @Test func deviceCodeAgainstOrganizationsPollsThroughPendingAndSlowDownThenValidatesTheTenantsToken() async throws {
        let entra = try EntraTenant(tenant: "organizations")
        let idToken = try await entra.idToken()
        let body = Entra.tokenResponse(scope: "User.Read Files.Read profile openid email", idToken: idToken)
        entra.transport.enqueue(entra.deviceCodePath, .json(Entra.deviceCodeResponse))
        entra.transport.enqueue(entra.tokenPath, Entra.authorizationPending, Entra.slowDown, .json(body: body))
        let client = try entra.client()

        let session = try await client.startDeviceCode(scopes: Self.appScopes)
        #expect(session.userCode == Entra.userCode)
        #expect(session.verificationURI.absoluteString == Entra.verificationURI)
        #expect(session.serverMessage == Entra.deviceCodeResponse["message"] as? String)
        #expect(session.interval == 5)
        #expect(session.expiresAt == Entra.now.addingTimeInterval(900))
        #expect(session.scopes == ["User.Read", "Files.Read", "openid", "profile", "offline_access"])
        #expect(!session.description.contains(Entra.deviceCode))

        let grant = try await client.completeDeviceCode(session)

        // Discovery first, at the v2.0 metadata URL of `organizations`.
        let requests = entra.transport.requests
        #expect(requests.first?.method == "GET")
        #expect(
            requests.first?.url.absoluteString
                == "https://login.microsoftonline.com/organizations/v2.0/.well-known/openid-configuration"
        )
        #expect(entra.transport.requests(to: entra.discoveryPath).count == 1)

        // The device authorization request: client id, the app's scopes + OpenID scopes, client_info=1.
        let start = try #require(entra.transport.requests(to: entra.deviceCodePath).first)
        #expect(start.method == "POST")
        #expect(start.url.absoluteString == "https://login.microsoftonline.com/organizations/oauth2/v2.0/devicecode")
        #expect(start.headers["Content-Type"] == "application/x-www-form-urlencoded")
        #expect(start.form["client_id"] == Entra.clientID)
        #expect(start.scopes == ["User.Read", "Files.Read", "openid", "profile", "offline_access"])
        #expect(start.form["client_info"] == "1")

        // Three polls (pending, slow_down, success), waiting 5, 5, then 10 s (+5 after slow_down).
        #expect(entra.sleeps.recorded == [5, 5, 10])
        let polls = entra.transport.requests(to: entra.tokenPath)
        #expect(polls.count == 3)
        for poll in polls {
            #expect(poll.method == "POST")
            #expect(poll.form["grant_type"] == "urn:ietf:params:oauth:grant-type:device_code")
            #expect(poll.form["device_code"] == Entra.deviceCode)
            #expect(poll.form["client_id"] == Entra.clientID)
            #expect(poll.form["client_info"] == "1")
        }
        #expect(entra.transport.pending(entra.tokenPath) == 0)

        // The ID token validated against the `{tenantid}` template with its `tid`; the body kept as sent.
        #expect(grant.body == body)
        #expect(grant.accessToken == "eyJ0eXAiOiJKV1QiLCJub25jZSI6Ii1.at")
        #expect(grant.refreshToken == "1.AVEAv4j5cvGGr0GRqy180BHbR-rt")
        #expect(grant.scopes == ["User.Read", "Files.Read", "profile", "openid", "email"])
        #expect(grant.expiresIn == 4783)
        #expect(grant.expiresOn == Entra.now.addingTimeInterval(4783))
        let validated = try #require(grant.idToken)
        #expect(validated.issuer == "https://login.microsoftonline.com/\(Entra.homeTenantID)/v2.0")
        #expect(validated.tenantID == Entra.homeTenantID)
        #expect(validated.objectID == Entra.objectID)
        #expect(validated.subject == Entra.pairwiseSubject)
        #expect(validated.preferredUsername == "ana@contoso.onmicrosoft.com")
        #expect(entra.transport.requests(to: entra.keysPath).count == 1)
        #expect(!grant.description.contains(grant.accessToken))
    }

    @Test func aTokenFromAnotherIssuerThanTheTenantTemplateIsRefused() async throws {
        // `iss` names one tenant and `tid` another: the `{tenantid}` template does not match. (The only
        // test that uses `common`.)
        let entra = try EntraTenant(tenant: "common")
        var claims = Entra.idTokenClaims()
        claims.values["tid"] = .string("f8cdef31-a31e-4b4a-93e4-5f571e91255a")
        let forged = try await TestProvider.rs256(claims, kid: "entra-key-1")
        entra.transport.enqueue(entra.tokenPath, .json(body: Entra.tokenResponse(scope: "User.Read", idToken: forged)))
        let error = await entraError { () async throws(IdentityError) in
            try await entra.client().refresh(refreshToken: "rt", scopes: ["User.Read"])
        }
        #expect(error?.code == .invalidIDToken, "\(String(describing: error))")
    }

    // MARK: - 2. Microsoft's errors

    @Test(arguments: [
        ("authorization_declined", 70000, "The user has declined the authorization request."),
        ("access_denied", 70000, "The user or administrator has not consented to use the application."),
    ])
    func aDeclinedDeviceCodeIsAccessDenied(_ oauthError: String, _ code: Int, _ text: String) async throws {
        let entra = try EntraTenant()
        entra.transport.enqueue(entra.deviceCodePath, .json(Entra.deviceCodeResponse))
        entra.transport.enqueue(entra.tokenPath, Entra.authorizationPending, Entra.error(oauthError, code: code, text))
        let client = try entra.client()
        let session = try await client.startDeviceCode(scopes: ["User.Read"])
        let error = await entraError { () async throws(IdentityError) in try await client.completeDeviceCode(session) }
        #expect(error?.code == .accessDenied, "\(String(describing: error))")
        #expect(error?.httpStatus == 400)
        #expect(entra.transport.requests(to: entra.tokenPath).count == 2)
        #expect(entra.sleeps.recorded == [5, 5])
    }

    @Test func anExpiredDeviceCodeIsDeviceCodeExpired() async throws {
        let entra = try EntraTenant()
        entra.transport.enqueue(entra.deviceCodePath, .json(Entra.deviceCodeResponse))
        entra.transport.enqueue(
            entra.tokenPath,
            Entra.authorizationPending,
            Entra.error(
                "expired_token",
                code: 70020,
                "The provided value for the input parameter 'device_code' is not valid. This device code has expired."
            )
        )
        let client = try entra.client()
        let session = try await client.startDeviceCode(scopes: ["User.Read"])
        let error = await entraError { () async throws(IdentityError) in try await client.completeDeviceCode(session) }
        #expect(error?.code == .deviceCodeExpired, "\(String(describing: error))")
        #expect(error?.oauthError == "expired_token")
        #expect(error?.message.contains(Entra.userCode) == true)
        #expect(error?.message.contains(Entra.deviceCode) == false)
    }

    /// A refresh Microsoft refuses: the token expired or was revoked (AADSTS70008), a fresh token is needed
    /// (AADSTS50173), or MFA is required (AADSTS50076, as `interaction_required` or as `invalid_grant` with
    /// the `basic_action` suberror).
    @Test(arguments: [
        (
            "invalid_grant", 70008, nil as String?,
            "The provided authorization code or refresh token has expired due to inactivity. Send a new interactive authorization request for this user and resource."
        ),
        (
            "invalid_grant", 50173, nil,
            "The provided grant has expired due to it being revoked, a fresh auth token is needed. The user might have changed or reset their password."
        ),
        (
            "interaction_required", 50076, nil,
            "Due to a configuration change made by your administrator, or because you moved to a new location, you must use multi-factor authentication to access '00000003-0000-0000-c000-000000000000'."
        ),
        (
            "invalid_grant", 50076, "basic_action",
            "Due to a configuration change made by your administrator, or because you moved to a new location, you must use multi-factor authentication to access '00000003-0000-0000-c000-000000000000'."
        ),
    ])
    func aRefusedRefreshNeedsInteraction(
        _ oauthError: String,
        _ code: Int,
        _ suberror: String?,
        _ text: String
    ) async throws {
        let entra = try EntraTenant()
        entra.transport.enqueue(entra.tokenPath, Entra.error(oauthError, code: code, text, suberror: suberror))
        let error = await entraError { () async throws(IdentityError) in
            try await entra.client().refresh(refreshToken: "1.AVEA-revoked", scopes: ["User.Read"])
        }
        #expect(error?.code == .interactionRequired, "\(String(describing: error))")
        #expect(error?.msalErrorCode == -50002)
        #expect(error?.oauthError == oauthError)
        #expect(error?.httpStatus == 400)
        #expect(
            error?.serverDescription?.hasPrefix("AADSTS\(code): \(text)") == true,
            "\(String(describing: error?.serverDescription))"
        )
        #expect(error?.description.contains("1.AVEA-revoked") == false)
        let request = try #require(entra.transport.requests(to: entra.tokenPath).first)
        #expect(request.form["grant_type"] == "refresh_token")
        #expect(request.form["client_info"] == "1")
    }

    /// The client keeps the server's description "to one line"; Microsoft ends its lines with CR LF.
    @Test func aMicrosoftErrorDescriptionIsKeptOnOneLine() async throws {
        let entra = try EntraTenant()
        entra.transport.enqueue(
            entra.tokenPath,
            Entra.error(
                "invalid_grant",
                code: 70008,
                "The provided authorization code or refresh token has expired due to inactivity."
            )
        )
        let error = await entraError { () async throws(IdentityError) in
            try await entra.client().refresh(refreshToken: "rt", scopes: ["User.Read"])
        }
        let description = try #require(error?.serverDescription)
        #expect(description.contains("Trace ID: 0000aaaa-11bb-cccc-dd22-eeeeee333333"))
        #expect(!description.unicodeScalars.contains { $0 == "\r" || $0 == "\n" }, "\(description.debugDescription)")
    }

    @Test func aServerErrorIsRetriedOnceAndTheRetrySucceeds() async throws {
        let entra = try EntraTenant()
        let body = Entra.tokenResponse(scope: "User.Read profile openid email", idToken: try await entra.idToken())
        entra.transport.enqueue(
            entra.tokenPath,
            Entra.error(
                "temporarily_unavailable",
                code: 90033,
                "A transient error has occurred. Please try again.",
                status: 500
            ),
            .json(body: body)
        )
        let grant = try await entra.client().refresh(refreshToken: "1.AVEA-rt", scopes: ["User.Read"])
        #expect(grant.body == body)
        let requests = entra.transport.requests(to: entra.tokenPath)
        #expect(requests.count == 2)
        #expect(requests.first?.form == requests.last?.form)
        #expect(entra.sleeps.recorded.isEmpty, "the retry does not go through the device-code poll wait")
    }

    @Test func twoServerErrorsAreAServerError() async throws {
        let entra = try EntraTenant()
        entra.transport.enqueue(
            entra.tokenPath,
            HTTPResponse(
                status: 500,
                headers: ["content-type": "text/html"],
                body: Data("<html>Service unavailable</html>".utf8)
            ),
            HTTPResponse(
                status: 503,
                headers: ["content-type": "text/html"],
                body: Data("<html>Service unavailable</html>".utf8)
            ),
            .json(body: Entra.tokenResponse(scope: "User.Read", idToken: nil))
        )
        let error = await entraError { () async throws(IdentityError) in
            try await entra.client().refresh(refreshToken: "1.AVEA-rt", scopes: ["User.Read"])
        }
        #expect(error?.code == .serverError, "\(String(describing: error))")
        #expect(error?.msalErrorCode == -50006)
        #expect(error?.httpStatus == 503)
        #expect(entra.transport.requests(to: entra.tokenPath).count == 2, "one retry only")
        #expect(entra.transport.pending(entra.tokenPath) == 1)
    }

    @Test func aRefreshThatGrantsFewerScopesIsDeclinedScopes() async throws {
        let entra = try EntraTenant()
        entra.transport.enqueue(
            entra.tokenPath,
            .json(
                body: Entra.tokenResponse(scope: "User.Read profile openid email", idToken: try await entra.idToken())
            )
        )
        let error = await entraError { () async throws(IdentityError) in
            try await entra.client().refresh(refreshToken: "1.AVEA-rt", scopes: ["User.Read", "Mail.Read"])
        }
        #expect(error?.code == .declinedScopes, "\(String(describing: error))")
        #expect(error?.msalErrorCode == -50003)
        #expect(error?.message.contains("Mail.Read") == true)
        let request = try #require(entra.transport.requests(to: entra.tokenPath).first)
        #expect(request.scopes == ["User.Read", "Mail.Read", "openid", "profile", "offline_access"])
    }

    // MARK: - 3. Azure AD B2C

    static let b2cHost = "fabrikamb2c.b2clogin.com"
    static let b2cTenantID = "775527ff-9a37-4307-8b3d-cc311f58d925"
    static let b2cIssuer = "https://fabrikamb2c.b2clogin.com/775527ff-9a37-4307-8b3d-cc311f58d925/v2.0/"
    static let b2cClientID = "90c0fe63-bcf2-44d5-8fb7-b8bbc0b29dc6"
    static let tasksRead = "https://fabrikamb2c.onmicrosoft.com/tasks-api/tasks.read"

    /// A B2C user flow's discovery document (the `tfp` form); its endpoints use the lowercased policy.
    static func b2cDiscovery(policy: String) -> [String: Any] {
        let base = "https://fabrikamb2c.b2clogin.com/fabrikamb2c.onmicrosoft.com/\(policy.lowercased())"
        return [
            "issuer": b2cIssuer,
            "authorization_endpoint": "\(base)/oauth2/v2.0/authorize",
            "token_endpoint": "\(base)/oauth2/v2.0/token",
            "end_session_endpoint": "\(base)/oauth2/v2.0/logout",
            "jwks_uri": "\(base)/discovery/v2.0/keys",
            "response_modes_supported": ["query", "fragment", "form_post"],
            "response_types_supported": [
                "code", "code id_token", "code token", "code id_token token", "id_token", "id_token token", "token",
                "token id_token",
            ],
            "scopes_supported": ["openid"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
            "claims_supported": [
                "name", "emails", "oid", "sub", "tfp", "iss", "iat", "exp", "aud", "acr", "nonce", "auth_time",
            ],
        ]
    }

    @Test func aB2CUserFlowAuthorityUsesItsTfpDiscoveryAndSendsClientInfo() async throws {
        let known = [Self.b2cHost]
        let susi = try Authority(
            "https://fabrikamb2c.b2clogin.com/tfp/fabrikamb2c.onmicrosoft.com/B2C_1_SUSI",
            knownAuthorities: known
        )
        let editProfile = try Authority(
            "https://fabrikamb2c.b2clogin.com/tfp/fabrikamb2c.onmicrosoft.com/B2C_1_edit_profile",
            knownAuthorities: known
        )
        #expect(susi.kind == .b2c(tenant: "fabrikamb2c.onmicrosoft.com", policy: "B2C_1_SUSI"))
        #expect(susi != editProfile)
        #expect(susi.openIDConfigurationURL != editProfile.openIDConfigurationURL)

        let transport = ScriptedTransport()
        let susiDiscovery = "/tfp/fabrikamb2c.onmicrosoft.com/B2C_1_SUSI/v2.0/.well-known/openid-configuration"
        let editDiscovery = "/tfp/fabrikamb2c.onmicrosoft.com/B2C_1_edit_profile/v2.0/.well-known/openid-configuration"
        transport.always(susiDiscovery, .json(Self.b2cDiscovery(policy: "B2C_1_SUSI")))
        transport.always(editDiscovery, .json(Self.b2cDiscovery(policy: "B2C_1_edit_profile")))
        transport.always(
            "/fabrikamb2c.onmicrosoft.com/b2c_1_susi/discovery/v2.0/keys",
            try Entra.keys([(TestProvider.rsaKey, "b2c-key-1")], issuer: Self.b2cIssuer)
        )
        let seconds = Int(Entra.now.timeIntervalSince1970)
        let objectID = "d0d2b1a3-6f5c-4a4e-9f1b-5e6a2c7b8d90"
        let idToken = try await TestProvider.rs256(
            TestClaims([
                "exp": .int(seconds + 3600), "nbf": .int(seconds), "iat": .int(seconds),
                "auth_time": .int(seconds - 60),
                "ver": .string("1.0"), "iss": .string(Self.b2cIssuer), "sub": .string(objectID),
                "aud": .string(Self.b2cClientID),
                "oid": .string(objectID), "name": .string("Ana Shift"), "emails": .strings(["ana@fabrikam.com"]),
                "tfp": .string("B2C_1_SUSI"),
            ]),
            kid: "b2c-key-1"
        )
        let body = try JSONSerialization.data(
            withJSONObject: [
                "access_token": "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiIsImtpZCI6IlgifQ.b2c-at", "id_token": idToken,
                "token_type": "Bearer",
                "not_before": seconds, "expires_in": 3600, "expires_on": seconds + 3600, "resource": Self.b2cClientID,
                "client_info": Base64URL.encode(
                    Data("{\"uid\":\"\(objectID)-b2c_1_susi\",\"utid\":\"\(Self.b2cTenantID)\"}".utf8)
                ),
                "scope": "\(Self.tasksRead) offline_access openid",
                "refresh_token": "eyJraWQiOiJjcGltY29yZV8wOTI1MjAxNSIsInZlciI6IjEuMCJ9.b2c-rt",
                "refresh_token_expires_in": 1_209_600, "id_token_expires_in": 3600,
            ] as [String: Any],
            options: [.sortedKeys]
        )
        transport.enqueue("/fabrikamb2c.onmicrosoft.com/b2c_1_susi/oauth2/v2.0/token", .json(body: body))

        let client = IdentityClient(
            clientID: Self.b2cClientID,
            authority: susi,
            transport: transport,
            now: { Entra.now }
        )
        let grant = try await client.refresh(refreshToken: "b2c-rt", scopes: [Self.tasksRead])
        #expect(
            transport.requests.first?.url.absoluteString
                == "https://fabrikamb2c.b2clogin.com/tfp/fabrikamb2c.onmicrosoft.com/B2C_1_SUSI/v2.0/.well-known/openid-configuration"
        )
        let refresh = try #require(
            transport.requests(to: "/fabrikamb2c.onmicrosoft.com/b2c_1_susi/oauth2/v2.0/token").first
        )
        #expect(refresh.form["grant_type"] == "refresh_token")
        #expect(refresh.form["refresh_token"] == "b2c-rt")
        #expect(refresh.form["client_id"] == Self.b2cClientID)
        #expect(refresh.form["client_info"] == "1")
        #expect(refresh.scopes == [Self.tasksRead, "openid", "profile", "offline_access"])
        #expect(grant.body == body)
        #expect(grant.idToken?.issuer == Self.b2cIssuer)
        #expect(grant.idToken?.subject == objectID)

        // The edit-profile user flow is another authority, with its own discovery document.
        let editClient = IdentityClient(
            clientID: Self.b2cClientID,
            authority: editProfile,
            transport: transport,
            now: { Entra.now }
        )
        let editConfiguration = try await editClient.configuration()
        #expect(transport.requests(to: editDiscovery).count == 1)
        #expect(transport.requests(to: susiDiscovery).count == 1)
        #expect(
            editConfiguration.tokenEndpoint.absoluteString
                == "https://fabrikamb2c.b2clogin.com/fabrikamb2c.onmicrosoft.com/b2c_1_edit_profile/oauth2/v2.0/token"
        )
        let susiConfiguration = try await client.configuration()
        #expect(editConfiguration.tokenEndpoint != susiConfiguration.tokenEndpoint)
        #expect(editConfiguration.deviceAuthorizationEndpoint == nil)
        let noDeviceCode = await entraError { () async throws(IdentityError) in
            try await editClient.startDeviceCode(scopes: [Self.tasksRead])
        }
        #expect(noDeviceCode?.code == .unsupported)
    }

    @Test(arguments: [[String](), ["contoso.b2clogin.com"]])
    func aB2CAuthorityNeedsItsHostAmongTheKnownAuthorities(_ known: [String]) async throws {
        for authority in [
            "https://fabrikamb2c.b2clogin.com/tfp/fabrikamb2c.onmicrosoft.com/B2C_1_SUSI",
            "https://fabrikamb2c.b2clogin.com/tfp/fabrikamb2c.onmicrosoft.com/B2C_1_edit_profile",
        ] {
            let error = await entraError { () async throws(IdentityError) in
                try Authority(authority, knownAuthorities: known)
            }
            #expect(error?.code == .invalidAuthority, "\(authority): \(String(describing: error))")
            #expect(error?.message.contains("fabrikamb2c.b2clogin.com") == true)
        }
    }

    // MARK: - 4. Signing-key rotation

    @Test func aTokenSignedWithANewKeyMakesTheClientRefetchTheKeysOnceThenAnUnknownKeyIsRefused() async throws {
        let entra = try EntraTenant()
        let issuer = "\(Entra.host)/\(entra.tenant)/v2.0"
        // The key set before the rotation, then after it (old and new key), then the same again.
        entra.transport.enqueue(
            entra.keysPath,
            try Entra.keys([(TestProvider.rsaKey, "key-2064")], issuer: issuer),
            try Entra.keys(
                [(TestProvider.rsaKey, "key-2064"), (TestProvider.otherRSAKey, "key-2065")],
                issuer: issuer
            ),
            try Entra.keys([(TestProvider.rsaKey, "key-2064"), (TestProvider.otherRSAKey, "key-2065")], issuer: issuer)
        )
        let client = try entra.client()
        func respond(_ idToken: String) {
            entra.transport.enqueue(
                entra.tokenPath,
                .json(body: Entra.tokenResponse(scope: "User.Read profile openid email", idToken: idToken))
            )
        }

        respond(try await entra.idToken(key: TestProvider.rsaKey, kid: "key-2064"))
        _ = try await client.refresh(refreshToken: "rt", scopes: ["User.Read"])
        #expect(entra.transport.requests(to: entra.keysPath).count == 1)

        // The cached set is used while it knows the token's key.
        respond(try await entra.idToken(key: TestProvider.rsaKey, kid: "key-2064"))
        _ = try await client.refresh(refreshToken: "rt", scopes: ["User.Read"])
        #expect(entra.transport.requests(to: entra.keysPath).count == 1)

        // Rotated: a `kid` the cached set lacks makes the client fetch the keys again, once, and validate.
        respond(try await entra.idToken(key: TestProvider.otherRSAKey, kid: "key-2065"))
        let rotated = try await client.refresh(refreshToken: "rt", scopes: ["User.Read"])
        #expect(rotated.idToken?.tenantID == entra.tenant)
        #expect(entra.transport.requests(to: entra.keysPath).count == 2)

        // A key that is nowhere: one more fetch, then the token is refused.
        respond(try await entra.idToken(key: TestProvider.otherRSAKey, kid: "key-unpublished"))
        let error = await entraError { () async throws(IdentityError) in
            try await client.refresh(refreshToken: "rt", scopes: ["User.Read"])
        }
        #expect(error?.code == .invalidIDToken, "\(String(describing: error))")
        #expect(error?.message.contains("key-unpublished") == true)
        #expect(entra.transport.requests(to: entra.keysPath).count == 3)
        #expect(entra.transport.pending(entra.keysPath) == 0)
    }
}

// MARK: - Authorization code with PKCE on the loopback redirect

/// The query fields of a URL.
private func queryFields(_ url: URL) -> [String: String] {
    Dictionary(
        (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).map { ($0.name, $0.value ?? "") },
        uniquingKeysWith: { first, _ in first }
    )
}

/// The browser's last step: the authority redirects it to the app's loopback listener.
private func deliver(_ redirect: String, _ fields: [String: String]) {
    var components = URLComponents(string: redirect)!
    components.queryItems = fields.map { URLQueryItem(name: $0.key, value: $0.value) }
    let url = components.url!
    Task.detached { _ = try? await URLSession(configuration: .ephemeral).data(from: url) }
}

@Suite struct MicrosoftBrowserFlowTests {
    @Test func aBrowserSignInSendsPKCEPromptHintAndClientInfoAndExchangesTheCodeWithTheVerifier() async throws {
        let entra = try EntraTenant()
        let opened = Mutex<URL?>(nil)
        let transport = entra.transport
        let tokenPath = entra.tokenPath
        let tenantID = entra.tokenTenantID
        let grant = try await entra.client().acquireTokenInBrowser(
            scopes: ["User.Read"],
            prompt: .selectAccount,
            loginHint: "ana@contoso.com"
        ) { url in
            opened.withLock { $0 = url }
            let query = queryFields(url)
            // The authority signs the user in and answers the code exchange with an ID token for the request's nonce.
            var claims = Entra.idTokenClaims(tenantID: tenantID)
            claims.values["nonce"] = .string(query["nonce"] ?? "")
            guard let idToken = try? await TestProvider.rs256(claims, kid: "entra-key-1") else { return }
            transport.enqueue(
                tokenPath,
                .json(body: Entra.tokenResponse(scope: "User.Read openid profile offline_access", idToken: idToken))
            )
            deliver(query["redirect_uri"] ?? "", ["code": "M.C507_BAY.2.U.code", "state": query["state"] ?? ""])
        }
        let url = try #require(opened.withLock { $0 })
        let query = queryFields(url)
        #expect(url.path == "/\(entra.tenant)/oauth2/v2.0/authorize")
        #expect(query["response_type"] == "code")
        #expect(query["client_id"] == Entra.clientID)
        #expect(query["redirect_uri"]?.hasPrefix("http://127.0.0.1:") == true)
        #expect(
            query["scope"]?.split(separator: " ").map(String.init) == [
                "User.Read", "openid", "profile", "offline_access",
            ]
        )
        #expect(query["code_challenge_method"] == "S256")
        #expect(query["code_challenge"]?.count == 43)
        #expect(query["prompt"] == "select_account")
        #expect(query["login_hint"] == "ana@contoso.com")
        #expect(query["client_info"] == "1")
        #expect((query["state"]?.count ?? 0) >= 16 && (query["nonce"]?.count ?? 0) >= 16)

        let exchange = try #require(entra.transport.requests(to: entra.tokenPath).last)
        #expect(exchange.form["grant_type"] == "authorization_code")
        #expect(exchange.form["code"] == "M.C507_BAY.2.U.code")
        #expect(exchange.form["redirect_uri"] == query["redirect_uri"])
        #expect(exchange.form["client_info"] == "1")
        let verifier = try #require(exchange.form["code_verifier"])
        #expect(Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8)))) == query["code_challenge"])
        #expect(grant.idToken?.nonce == query["nonce"])
    }

    @Test func aRedirectWithAnotherSignInsStateIsRefusedBeforeAnyCodeExchange() async throws {
        let entra = try EntraTenant()
        let error = await entraError { () async throws(IdentityError) in
            try await entra.client().acquireTokenInBrowser(scopes: ["User.Read"]) { url in
                deliver(
                    queryFields(url)["redirect_uri"] ?? "",
                    ["code": "stolen-code", "state": "someone-elses-state"]
                )
            }
        }
        #expect(error?.code == .stateMismatch)
        #expect(error?.message.contains("stolen-code") == false)
        #expect(entra.transport.requests(to: entra.tokenPath).isEmpty)
    }

    @Test func anErrorRedirectIsMappedAndNothingIsExchanged() async throws {
        let entra = try EntraTenant()
        let error = await entraError { () async throws(IdentityError) in
            try await entra.client().acquireTokenInBrowser(scopes: ["User.Read"]) { url in
                let query = queryFields(url)
                deliver(
                    query["redirect_uri"] ?? "",
                    [
                        "error": "access_denied", "error_description": "AADSTS65004: User declined to consent.",
                        "state": query["state"] ?? "",
                    ]
                )
            }
        }
        #expect(error?.code == .accessDenied)
        #expect(error?.serverDescription?.hasPrefix("AADSTS65004") == true)
        #expect(entra.transport.requests(to: entra.tokenPath).isEmpty)
    }
}

/// The resource-owner password grant (RFC 6749 §4.3) against Microsoft's token endpoint (scripted from its
/// documented ROPC exchanges; Microsoft is unreachable here) and a provider that refuses with a bare 403
/// (glewlwyd). The password goes in the request body only, and into no error.
@Suite struct PasswordGrantTests {
    static let password = "Correct-Horse-7"

    static func tenant() throws -> (ScriptedTransport, String, String) {
        let tenant = UUID().uuidString.lowercased()
        let transport = ScriptedTransport()
        let issuer = "\(Entra.host)/\(tenant)/v2.0"
        transport.always(Entra.discoveryPath(tenant), .json(Entra.discovery(tenant: tenant, issuer: issuer)))
        transport.always(Entra.keysPath(tenant), try Entra.keys([(TestProvider.rsaKey, "entra-key-1")], issuer: issuer))
        return (transport, tenant, Entra.tokenPath(tenant))
    }

    static func client(_ transport: ScriptedTransport, _ tenant: String, secret: String? = nil) throws -> IdentityClient
    {
        IdentityClient(
            clientID: Entra.clientID,
            clientSecret: secret,
            authority: try Authority("\(Entra.host)/\(tenant)"),
            transport: transport,
            now: { Entra.now }
        )
    }

    static func failure(_ body: () async throws(IdentityError) -> TokenGrant) async -> IdentityError? {
        do {
            _ = try await body()
            return nil
        } catch { return error }
    }

    @Test func aPasswordGrantSendsTheCredentialsInTheBodyAndReturnsTheValidatedGrant() async throws {
        let (transport, tenant, tokenPath) = try Self.tenant()
        let idToken = try await TestProvider.rs256(Entra.idTokenClaims(tenantID: tenant), kid: "entra-key-1")
        transport.enqueue(tokenPath, .json(body: Entra.tokenResponse(scope: "User.Read", idToken: idToken)))
        let grant = try await Self.client(transport, tenant, secret: "client-secret-1")
            .acquireTokenByPassword(
                username: "ana@contoso.onmicrosoft.com",
                password: Self.password,
                scopes: ["User.Read"]
            )
        #expect(grant.idToken?.preferredUsername == "ana@contoso.onmicrosoft.com")
        let form = try #require(transport.requests(to: tokenPath).first).form
        #expect(
            form["grant_type"] == "password" && form["username"] == "ana@contoso.onmicrosoft.com"
                && form["password"] == Self.password
        )
        #expect(form["client_id"] == Entra.clientID && form["client_secret"] == "client-secret-1")
        #expect(form["scope"]?.split(separator: " ").contains("User.Read") == true)
    }

    @Test func aWrongPasswordIsInvalidCredentialsAndNoErrorRepeatsIt() async throws {
        // Microsoft's answer to a wrong password (AADSTS50126), and a server that echoes the request.
        for response in [
            Entra.error(
                "invalid_grant",
                code: 50126,
                "Error validating credentials due to invalid username or password."
            ),
            Entra.error("invalid_grant", code: 50126, "bad password \(Self.password) for ana"),
            HTTPResponse(status: 403, headers: [:], body: Data()),
        ] {
            let (transport, tenant, tokenPath) = try Self.tenant()
            transport.enqueue(tokenPath, response)
            let client = try Self.client(transport, tenant)
            let error = await Self.failure { () async throws(IdentityError) in
                try await client.acquireTokenByPassword(username: "ana", password: Self.password, scopes: ["User.Read"])
            }
            #expect(error?.code == .invalidCredentials, "\(String(describing: error))")
            #expect(error?.description.contains(Self.password) == false, "\(String(describing: error))")
            #expect(error?.message.contains("username or password") == true)
        }
    }

    @Test func aProviderThatDoesNotAllowTheGrantSaysSo() async throws {
        let (transport, tenant, tokenPath) = try Self.tenant()
        transport.enqueue(
            tokenPath,
            Entra.error("unauthorized_client", code: 700016, "The client is not allowed to use the password grant.")
        )
        let client = try Self.client(transport, tenant)
        let error = await Self.failure { () async throws(IdentityError) in
            try await client.acquireTokenByPassword(username: "ana", password: Self.password, scopes: ["User.Read"])
        }
        #expect(
            error?.code == .unsupported && error?.message.contains("device code") == true,
            "\(String(describing: error))"
        )
    }
}

/// Microsoft Entra External ID native authentication (API V1): the client against a stand-in that replays
/// the exchanges of Microsoft's native authentication API reference (`/oauth2/v2.0/initiate`, `/challenge`,
/// `/token` with continuation tokens; its documented errors). Microsoft is unreachable here.
@Suite struct NativeAuthTests {
    static let tenant = "aaaabbbb-0000-cccc-1111-dddd2222eeee"
    static let authority = "https://contoso.ciamlogin.com/\(tenant)"
    static var initiatePath: String { "/\(tenant)/oauth2/v2.0/initiate" }
    static var challengePath: String { "/\(tenant)/oauth2/v2.0/challenge" }
    static var tokenPath: String { "/\(tenant)/oauth2/v2.0/token" }

    /// The stand-in: discovery and keys always; the test queues the native-auth answers.
    static func standIn() throws -> (ScriptedTransport, IdentityClient) {
        let transport = ScriptedTransport()
        let issuer = "\(Entra.host)/\(tenant)/v2.0"
        transport.always(Entra.discoveryPath(tenant), .json(Entra.discovery(tenant: tenant, issuer: issuer)))
        transport.always(Entra.keysPath(tenant), try Entra.keys([(TestProvider.rsaKey, "entra-key-1")], issuer: issuer))
        let client = IdentityClient(
            clientID: Entra.clientID,
            authority: try Authority(authority),
            transport: transport,
            now: { Entra.now }
        )
        return (transport, client)
    }

    static func tokenResponse() async throws -> HTTPResponse {
        let idToken = try await TestProvider.rs256(Entra.idTokenClaims(tenantID: tenant), kid: "entra-key-1")
        return .json(body: Entra.tokenResponse(scope: "openid profile offline_access User.Read", idToken: idToken))
    }

    /// A documented error body: 400 with error, description, codes, trace and correlation ids.
    static func error(_ error: String, codes: [Int], suberror: String? = nil, _ text: String) -> HTTPResponse {
        var body: [String: Any] = [
            "error": error,
            "error_description": "AADSTS\(codes.first ?? 0): \(text)\r\nTrace ID: 0000aaaa-11bb-cccc-dd22-eeeeee333333",
            "error_codes": codes, "timestamp": "2026-11-26 10:15:00Z",
            "trace_id": "0000aaaa-11bb-cccc-dd22-eeeeee333333",
            "correlation_id": "aaaa0000-bb11-2222-33cc-444444dddddd",
        ]
        body["suberror"] = suberror
        return .json(body, status: 400)
    }

    static func failure<T>(_ body: () async throws(IdentityError) -> T) async -> IdentityError? {
        do {
            _ = try await body()
            return nil
        } catch { return error }
    }

    @Test func aCIAMAuthorityIsItsTenantAtCiamlogin() throws {
        #expect(try Authority("https://contoso.ciamlogin.com/").kind == .ciam(tenant: "contoso.onmicrosoft.com"))
        #expect(
            try Authority("https://contoso.ciamlogin.com/contoso.onmicrosoft.com").url.absoluteString
                == "https://contoso.ciamlogin.com/contoso.onmicrosoft.com"
        )
        #expect(try Authority(Self.authority).realm == Self.tenant)
    }

    @Test func aPasswordSignInGoesInitiateChallengeToken() async throws {
        let (transport, client) = try Self.standIn()
        transport.enqueue(Self.initiatePath, .json(["continuation_token": "uY29tL2F1dGhlbnRpY-1"]))
        transport.enqueue(
            Self.challengePath,
            .json(["continuation_token": "uY29tL2F1dGhlbnRpY-2", "challenge_type": "password"])
        )
        transport.enqueue(Self.tokenPath, try await Self.tokenResponse())
        let step = try await client.startNativeSignIn(username: "contoso-consumer@contoso.com")
        #expect(step.challenge == .password && !step.description.contains("uY29t"))
        let grant = try await client.submitNativeSignInPassword(step, password: "Secure-Pass-1", scopes: ["User.Read"])
        #expect(grant.idToken?.preferredUsername == "ana@contoso.onmicrosoft.com")

        let initiate = try #require(transport.requests(to: Self.initiatePath).first).form
        #expect(initiate["client_id"] == Entra.clientID && initiate["username"] == "contoso-consumer@contoso.com")
        #expect(
            initiate["challenge_type"] == "oob password redirect",
            "the API requires redirect among the challenge types"
        )
        let challenge = try #require(transport.requests(to: Self.challengePath).first).form
        #expect(
            challenge["continuation_token"] == "uY29tL2F1dGhlbnRpY-1"
                && challenge["challenge_type"]?.contains("redirect") == true
        )
        let token = try #require(transport.requests(to: Self.tokenPath).first).form
        #expect(
            token["grant_type"] == "password" && token["password"] == "Secure-Pass-1"
                && token["continuation_token"] == "uY29tL2F1dGhlbnRpY-2"
        )
        #expect(token["scope"]?.split(separator: " ").contains("openid") == true && token["client_info"] == "1")
    }

    @Test func aOneTimeCodeSaysWhereItWentAWrongCodeCanBeRetypedAndANewOneSent() async throws {
        let (transport, client) = try Self.standIn()
        let sent: [String: Any] = [
            "continuation_token": "ct-2", "challenge_type": "oob", "binding_method": "prompt",
            "challenge_channel": "email",
            "challenge_target_label": "c***r@co**o**o.com", "code_length": 8,
        ]
        transport.enqueue(Self.initiatePath, .json(["continuation_token": "ct-1"]))
        transport.enqueue(Self.challengePath, .json(sent), .json(sent.merging(["continuation_token": "ct-3"]) { $1 }))
        transport.enqueue(
            Self.tokenPath,
            Self.error(
                "invalid_grant",
                codes: [50181],
                suberror: "invalid_oob_value",
                "Unable to validate the one-time code."
            ),
            try await Self.tokenResponse()
        )
        let step = try await client.startNativeSignIn(username: "contoso-consumer@contoso.com")
        #expect(step.challenge == .code(length: 8, sentTo: "c***r@co**o**o.com", channel: "email"))
        let wrong = await Self.failure { () async throws(IdentityError) in
            try await client.submitNativeSignInCode(step, code: "11111111", scopes: ["User.Read"])
        }
        #expect(
            wrong?.code == .invalidCode && wrong?.description.contains("11111111") == false,
            "\(String(describing: wrong))"
        )
        let resent = try await client.resendNativeSignInCode(step)
        _ = try await client.submitNativeSignInCode(resent, code: "22222222", scopes: ["User.Read"])
        let tokens = transport.requests(to: Self.tokenPath).map(\.form)
        #expect(
            tokens.map { $0["grant_type"] } == ["oob", "oob"] && tokens.map { $0["oob"] } == ["11111111", "22222222"]
        )
        // The resend goes to /challenge with the waiting step's continuation token; the code then uses the new one.
        #expect(
            transport.requests(to: Self.challengePath).last?.form["continuation_token"] == "ct-2"
                && tokens.last?["continuation_token"] == "ct-3"
        )
    }

    @Test func theDocumentedErrorsSayWhatToDo() async throws {
        let cases: [(String, HTTPResponse, IdentityError.Code)] = [
            (
                Self.initiatePath, Self.error("user_not_found", codes: [50034], "The user account does not exist."),
                .userNotFound
            ),
            (Self.initiatePath, .json(["challenge_type": "redirect"]), .browserRequired),
            (
                Self.initiatePath,
                Self.error("unsupported_challenge_type", codes: [550022], "The challenge type is not supported."),
                .browserRequired
            ),
            (
                Self.initiatePath, Self.error("unauthorized_client", codes: [700016], "Application not found."),
                .unsupported
            ),
            (
                Self.tokenPath,
                Self.error(
                    "invalid_grant",
                    codes: [50126],
                    "Error validating credentials due to invalid username or password."
                ), .invalidCredentials
            ),
            (
                Self.tokenPath, Self.error("expired_token", codes: [552003], "The continuation_token is expired."),
                .signInExpired
            ),
            (
                Self.tokenPath,
                .json([
                    "challenge_type": "redirect",
                    "redirect_reason": "Client is missing registration_required capability",
                ]), .browserRequired
            ),
        ]
        for (path, response, code) in cases {
            let (transport, client) = try Self.standIn()
            transport.always(Self.initiatePath, .json(["continuation_token": "ct-1"]))
            transport.always(Self.challengePath, .json(["continuation_token": "ct-2", "challenge_type": "password"]))
            transport.enqueue(path, response)
            let error = await Self.failure { () async throws(IdentityError) in
                let step = try await client.startNativeSignIn(username: "contoso-consumer@contoso.com")
                return try await client.submitNativeSignInPassword(
                    step,
                    password: "Secure-Pass-1",
                    scopes: ["User.Read"]
                )
            }
            #expect(error?.code == code, "\(path): \(String(describing: error))")
            #expect(error?.description.contains("Secure-Pass-1") == false)
        }
    }

    @Test func anAuthorityOtherThanCiamloginHasNoNativeSignIn() async throws {
        let client = IdentityClient(
            clientID: "kiosk-apps",
            authority: try Authority("http://127.0.0.1:4593/api/oidc"),
            transport: ScriptedTransport()
        )
        let error = await Self.failure { () async throws(IdentityError) in
            try await client.startNativeSignIn(username: "worker1")
        }
        #expect(error?.code == .unsupported && error?.message.contains("ciamlogin.com") == true)
    }
}
