import Foundation
import IdentityClient
import IdentityTestSupport
import JWTKit
import KeychainStore
import SharedDevice
import StoreTestSupport
import Synchronization
import Testing

// `ApplicationEngine` on a kiosk whose policy names a Microsoft Entra tenant. Microsoft cannot be
// reached from here, so a scripted transport answers in the documented shapes of the v2.0 endpoints
// (discovery, /devicecode, /token with `client_info`, AADSTS errors) and records what the app sends.

/// A kiosk provisioned with the kiosk policy pointed at `https://login.microsoftonline.com/contoso.onmicrosoft.com`,
/// its scanner app, and the scripted tenant.
private final class MicrosoftKiosk {
    static let host = "https://login.microsoftonline.com"
    static let issuer = "https://login.microsoftonline.com/contoso.onmicrosoft.com"
    /// Contoso's tenant id: the discovery document of the domain names its endpoints and issuer by it.
    static let tenantID = "aaaabbbb-0000-cccc-1111-dddd2222eeee"
    static let objectID = "00000000-0000-0000-66f3-3332eca7ea81"
    /// Microsoft's `sub` is pairwise (per app), not the object id.
    static let pairwiseSubject = "AAAAAAAAAAAAAAAAAAAAAIkzqFVrSaSaFHy782bbtaQ"
    static let username = "ana@contoso.onmicrosoft.com"
    static let kid = "contoso-key-1"
    static let discoveryPath = "/contoso.onmicrosoft.com/v2.0/.well-known/openid-configuration"
    static let tokenPath = "/\(tenantID)/oauth2/v2.0/token"
    static let deviceCodePath = "/\(tenantID)/oauth2/v2.0/devicecode"
    static let keysPath = "/\(tenantID)/discovery/v2.0/keys"

    let fixture: DeviceFixture
    let transport = ScriptedTransport()
    let app: ApplicationEngine

    init() throws {
        fixture = try DeviceFixture()
        try fixture.provision(
            try Policies.edited { document in
                var authority = document["authority"] as! [String: Any]
                authority["issuer"] = Self.issuer
                document["authority"] = authority
            }
        )
        let host = Self.host
        let tenant = Self.tenantID
        transport.always(
            Self.discoveryPath,
            HTTPResponse.json(MicrosoftIdentityPlatform.discovery(tenant: tenant, issuer: "\(host)/\(tenant)/v2.0"))
        )
        let primitives = try IDTokenForger.strangerKey.publicKey.getKeyPrimitives()
        transport.always(
            Self.keysPath,
            HTTPResponse.json([
                "keys": [
                    [
                        "kty": "RSA", "use": "sig", "kid": Self.kid, "x5t": Self.kid,
                        "n": Base64URL.encode(primitives.modulus), "e": Base64URL.encode(primitives.publicExponent),
                        "issuer": "\(host)/\(tenant)/v2.0",
                    ]
                ]
            ])
        )
        let policy = try #require(try fixture.device.policy())
        let clock = fixture.clock
        app = try ApplicationEngine(
            configuration: ApplicationEngineConfiguration(appID: ProviderKiosk.scanner, policy: policy),
            device: fixture.device,
            transport: transport,
            now: clock.function,
            sleep: { _ in }
        )
    }

    /// `client_info` for Ana: base64url of `{"uid":"<oid>","utid":"<tid>"}`.
    static let clientInfo = Base64URL.encode(Data("{\"uid\":\"\(objectID)\",\"utid\":\"\(tenantID)\"}".utf8))

    /// A v2.0 ID token for Ana issued now (the device clock), signed with the tenant's published key.
    func idToken() async throws -> String {
        let seconds = Int(fixture.clock.date.timeIntervalSince1970)
        let claims = TestClaims([
            "aud": .string("kiosk-apps"),
            "iss": .string("\(Self.host)/\(Self.tenantID)/v2.0"),
            "iat": .int(seconds), "nbf": .int(seconds), "exp": .int(seconds + 3600),
            "name": .string("Ana Shift"),
            "oid": .string(Self.objectID),
            "preferred_username": .string(Self.username),
            "rh": .string("0.ARoAv4j5cvGGr0GRqy180BHbR5IiMKZbgD1NnLKXeVkzYWUaAPI."),
            "sub": .string(Self.pairwiseSubject),
            "tid": .string(Self.tenantID),
            "uti": .string("fqiBqXLPj0eQa82S-IYFAA"),
            "ver": .string("2.0"),
        ])
        let keys = JWTKeyCollection()
        await keys.add(rsa: IDTokenForger.strangerKey, digestAlgorithm: .sha256)
        return try await keys.sign(claims, kid: JWKIdentifier(string: Self.kid))
    }

    /// A v2.0 token response (to a request with `client_info=1`).
    func tokenResponse(
        accessToken: String,
        refreshToken: String,
        scope: String = "User.Read Files.Read profile openid email"
    ) async throws -> HTTPResponse {
        HTTPResponse.json([
            "token_type": "Bearer", "scope": scope, "expires_in": 4783, "ext_expires_in": 4783,
            "access_token": accessToken, "refresh_token": refreshToken, "id_token": try await idToken(),
            "client_info": Self.clientInfo,
        ])
    }

    static func error(_ error: String, code: Int, _ text: String) -> HTTPResponse {
        HTTPResponse.json(
            [
                "error": error,
                "error_description":
                    "AADSTS\(code): \(text)\r\nTrace ID: 0000aaaa-11bb-cccc-dd22-eeeeee333333\r\nCorrelation ID: aaaa0000-bb11-2222-33cc-444444dddddd\r\nTimestamp: 2027-01-15 08:00:00Z",
                "error_codes": [code], "timestamp": "2027-01-15 08:00:00Z",
                "trace_id": "0000aaaa-11bb-cccc-dd22-eeeeee333333",
                "correlation_id": "aaaa0000-bb11-2222-33cc-444444dddddd",
                "error_uri": "\(host)/error?code=\(code)",
            ],
            status: 400
        )
    }

    /// Ana signs in with the device code: one `authorization_pending`, then the tokens.
    func signIn() async throws -> AuthenticationResult {
        transport.enqueue(
            Self.deviceCodePath,
            HTTPResponse.json([
                "user_code": "FXLQ6T9CK", "device_code": "DAQABAAEAAAD--DLA3VO7QrddgJg7Wevr-device-code",
                "verification_uri": "https://microsoft.com/devicelogin", "expires_in": 900, "interval": 5,
                "message":
                    "To sign in, use a web browser to open the page https://microsoft.com/devicelogin and enter the code FXLQ6T9CK to authenticate.",
            ])
        )
        transport.enqueue(
            Self.tokenPath,
            Self.error(
                "authorization_pending",
                code: 70016,
                "OAuth 2.0 device flow error. Authorization is pending. Continue polling."
            ),
            try await tokenResponse(accessToken: "at-sign-in", refreshToken: "1.AVEA-rt-sign-in")
        )
        return try await app.acquireToken(
            InteractiveTokenParameters(scopes: ["User.Read"], flow: .deviceCode(showCode: { _ in }))
        )
    }

    func changeStamp() throws -> StoreChangeStamp {
        try fixture.device.store.readTransaction { try $0.changeStamp() }
    }
}

/// The result of a token call that may fail, without stopping the test.
private func outcome(
    _ body: () async throws(SharedDeviceError) -> AuthenticationResult
) async -> Result<AuthenticationResult, SharedDeviceError> {
    do {
        return .success(try await body())
    } catch {
        return .failure(error)
    }
}

struct MicrosoftAuthorityApplicationTests {
    @Test func aDeviceCodeSignInWithClientInfoMakesAUidUtidAccountServedFromTheCacheAndRefreshedWithClientInfo()
        async throws
    {
        let kiosk = try MicrosoftKiosk()
        let app = kiosk.app
        let signedIn = try await kiosk.signIn()

        // The account MSAL would make: home account `<uid>.<utid>` from client_info, the authority host.
        #expect(signedIn.source == .interactive)
        #expect(signedIn.account.homeAccountID == "\(MicrosoftKiosk.objectID).\(MicrosoftKiosk.tenantID)")
        #expect(signedIn.account.environment == "login.microsoftonline.com")
        #expect(signedIn.account.username == MicrosoftKiosk.username)
        #expect(signedIn.account.localAccountID == MicrosoftKiosk.objectID)
        #expect(signedIn.account.realm == MicrosoftKiosk.tenantID)
        #expect(try app.currentAccount().current?.isSameAccount(as: signedIn.account) == true)

        // What went to Microsoft: the domain's v2.0 discovery (once: the app keeps it in its discovery
        // cache), then /devicecode and /token with client_info=1.
        let discoveryURL =
            "https://login.microsoftonline.com/contoso.onmicrosoft.com/v2.0/.well-known/openid-configuration"
        #expect(app.identity.authority.openIDConfigurationURL.absoluteString == discoveryURL)
        let discovery = kiosk.transport.requests.filter { $0.url.path.hasSuffix("/.well-known/openid-configuration") }
        #expect(discovery.allSatisfy { $0.url.absoluteString == discoveryURL && $0.method == "GET" })
        #expect(discovery.count == 1)
        let start = try #require(kiosk.transport.requests(to: MicrosoftKiosk.deviceCodePath).first)
        #expect(start.form["client_id"] == "kiosk-apps")
        #expect(start.form["client_info"] == "1")
        #expect(start.scopes == ["User.Read", "Files.Read", "openid", "profile", "offline_access"])
        let polls = kiosk.transport.requests(to: MicrosoftKiosk.tokenPath)
        #expect(polls.count == 2)
        #expect(
            polls.allSatisfy {
                $0.form["client_info"] == "1" && $0.form["grant_type"] == "urn:ietf:params:oauth:grant-type:device_code"
            }
        )

        // A silent call is answered from the cache: nothing is sent.
        let sent = kiosk.transport.requests.count
        let cached = try await app.acquireTokenSilent(scopes: ["User.Read"])
        #expect(cached.source == .cache)
        #expect(cached.accessToken == "at-sign-in")
        #expect(cached.account.isSameAccount(as: signedIn.account))
        #expect(kiosk.transport.requests.count == sent)

        // A forced refresh: the refresh token grant with client_info=1 and the scopes + OpenID scopes.
        kiosk.transport.enqueue(
            MicrosoftKiosk.tokenPath,
            try await kiosk.tokenResponse(accessToken: "at-refreshed", refreshToken: "1.AVEA-rt-2")
        )
        let forced = await outcome { () async throws(SharedDeviceError) in
            try await app.acquireTokenSilent(scopes: ["User.Read"], forceRefresh: true)
        }
        let refresh = try #require(kiosk.transport.requests(to: MicrosoftKiosk.tokenPath).last)
        #expect(refresh.form["grant_type"] == "refresh_token")
        #expect(refresh.form["refresh_token"] == "1.AVEA-rt-sign-in")
        #expect(refresh.form["client_id"] == "kiosk-apps")
        #expect(refresh.form["client_info"] == "1")
        #expect(refresh.scopes == ["User.Read", "openid", "profile", "offline_access"])
        // Microsoft's `sub` is pairwise and never the `oid`: the account check compares `oid`.
        let refreshed = try forced.get()
        #expect(refreshed.source == .refresh)
        #expect(refreshed.accessToken == "at-refreshed")
        #expect(refreshed.account.isSameAccount(as: signedIn.account))
    }

    @Test func aRefreshMicrosoftRefusesNeedsInteractionAndChangesNothing() async throws {
        let kiosk = try MicrosoftKiosk()
        let app = kiosk.app
        let signedIn = try await kiosk.signIn()
        let before = try kiosk.changeStamp()

        kiosk.transport.enqueue(
            MicrosoftKiosk.tokenPath,
            MicrosoftKiosk.error(
                "invalid_grant",
                code: 70008,
                "The provided authorization code or refresh token has expired due to inactivity. Send a new interactive authorization request for this user and resource."
            )
        )
        let refused = await outcome { () async throws(SharedDeviceError) in
            try await app.acquireTokenSilent(scopes: ["User.Read"], forceRefresh: true)
        }
        guard case .failure(let error) = refused else {
            Issue.record("the refused refresh succeeded")
            return
        }
        #expect(error.isInteractionRequired, "\(error)")
        #expect(error.identityError?.msalErrorCode == -50002)
        #expect(error.identityError?.oauthError == "invalid_grant")
        #expect(error.identityError?.serverDescription?.hasPrefix("AADSTS70008: ") == true)
        let request = try #require(kiosk.transport.requests(to: MicrosoftKiosk.tokenPath).last)
        #expect(request.form["grant_type"] == "refresh_token")
        #expect(request.form["refresh_token"] == "1.AVEA-rt-sign-in")
        #expect(request.form["client_info"] == "1")

        // Nothing changed: the store, the account, and the cached access token still answers.
        #expect(try kiosk.changeStamp() == before)
        #expect(try app.currentAccount().current?.isSameAccount(as: signedIn.account) == true)
        let sent = kiosk.transport.requests.count
        let cached = try await app.acquireTokenSilent(scopes: ["User.Read"])
        #expect(cached.source == .cache)
        #expect(cached.accessToken == "at-sign-in")
        #expect(kiosk.transport.requests.count == sent)
    }

    @Test func aSignOutFromTheBrowserSignsOutGloballyThenOpensTheTenantsLogoutPage() async throws {
        let kiosk = try MicrosoftKiosk()
        _ = try await kiosk.signIn()
        let opened = Mutex<URL?>(nil)
        let outcome = try await kiosk.app.signOut(
            parameters: SignOutParameters(
                signOutFromBrowser: true,
                reason: .shiftEnd,
                openBrowser: { url in opened.withLock { $0 = url } }
            )
        )
        #expect(outcome.global)
        #expect(try kiosk.app.currentAccount().current == nil)
        let url = try #require(opened.withLock { $0 })
        #expect(url.absoluteString.hasPrefix("\(MicrosoftKiosk.host)/\(MicrosoftKiosk.tenantID)/oauth2/v2.0/logout"))
    }
}
