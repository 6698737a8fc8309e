import Foundation
import IdentityTestSupport
import JWTKit
import Testing

@testable import IdentityClient

/// What a client says when the provider publishes no usable signing keys: the key set is unavailable
/// (an HTTP status), or it holds no key for the token's algorithm or key id. Either way the message says
/// public clients need the provider's RS256 or ES256 keys, and nothing is granted.
struct SigningKeyAvailabilityTests {
    typealias P = TestProvider
    static let discoveryPath = "/api/oidc/.well-known/openid-configuration"
    static let tokenPath = "/api/oidc/token"
    static let keysPath = "/api/oidc/jwks"

    /// A provider at `P.issuer` whose key set answers `keys`, and one refresh whose response carries `idToken`.
    private func refresh(keys: HTTPResponse..., idToken: String) async -> (IdentityError?, ScriptedTransport) {
        let transport = ScriptedTransport()
        transport.always(
            Self.discoveryPath,
            .json([
                "issuer": P.issuer, "authorization_endpoint": "\(P.issuer)/auth", "token_endpoint": "\(P.issuer)/token",
                "jwks_uri": "\(P.issuer)/jwks",
            ])
        )
        for response in keys { transport.enqueue(Self.keysPath, response) }
        transport.enqueue(
            Self.tokenPath,
            .json([
                "access_token": "at-never-cached", "token_type": "Bearer", "expires_in": 3600,
                "scope": "User.Read openid", "id_token": idToken,
            ])
        )
        let client = IdentityClient(clientID: P.clientID, authority: P.authority, transport: transport, now: { P.now })
        do {
            _ = try await client.refresh(refreshToken: "rt-never-logged", scopes: ["User.Read"])
            return (nil, transport)
        } catch {
            return (error, transport)
        }
    }

    @Test(arguments: [403, 404, 503])
    func anUnavailableKeySetNamesTheStatusAndTheKeysPublicClientsNeed(status: Int) async throws {
        let token = try await P.rs256(P.claims(["nonce": nil]))
        let failure = HTTPResponse(
            status: status,
            headers: ["content-type": "text/html"],
            body: Data("<html>Forbidden</html>".utf8)
        )
        let (error, transport) = await refresh(keys: failure, idToken: token)
        let caught = try #require(error)
        #expect(caught.code == .serverError)
        #expect(caught.httpStatus == status)
        #expect(caught.message.contains("signing key set is unavailable"), "\(caught.message)")
        #expect(caught.message.contains("HTTP \(status)"))
        #expect(caught.message.contains("RS256 or ES256"))
        #expect(caught.message.contains("http://127.0.0.1:4593/api/oidc/jwks"))
        #expect(!caught.message.contains("try again later;"), "the message says what is wrong before when to retry")
        #expect(!caught.description.contains(token) && !caught.description.contains("rt-never-logged"))
        #expect(transport.requests(to: Self.keysPath).count == 1)
    }

    @Test func aKeySetWithoutTheTokensKeyIdNamesTheKeyAfterOneRefetch() async throws {
        let published = try HTTPResponse.json(body: P.jwks([P.rsaJWK(P.otherRSAKey, kid: "published-1")]))
        let token = try await P.rs256(P.claims(["nonce": nil]), kid: "never-published")
        let (error, transport) = await refresh(keys: published, published, idToken: token)
        let caught = try #require(error)
        #expect(caught.code == .invalidIDToken)
        #expect(
            caught.message.contains("`never-published` (kid), which is not in the authority's key set"),
            "\(caught.message)"
        )
        #expect(caught.message.contains("holds no RS256 key with that kid"))
        #expect(caught.message.contains("RS256 or ES256"))
        #expect(transport.requests(to: Self.keysPath).count == 2, "fetched once, then once more for the unknown kid")
    }

    @Test func aKeySetWithoutAKeyForTheTokensAlgorithmSaysWhichAlgorithm() async throws {
        // The provider signs ES256 without a kid but publishes only an RSA key.
        let published = try HTTPResponse.json(body: P.jwks([P.rsaJWK(P.rsaKey, kid: "rsa-only")]))
        let token = try await P.es256(P.claims(["nonce": nil]), kid: nil)
        let (error, _) = await refresh(keys: published, idToken: token)
        let caught = try #require(error)
        #expect(caught.code == .invalidIDToken)
        #expect(caught.message.contains("holds no ES256 key for the ID token"), "\(caught.message)")
        #expect(caught.message.contains("RS256 or ES256"))
    }

    @Test func aKeySetWithOnlySharedSecretOrUnsupportedKeysIsUnsupported() async throws {
        let keys: [[String: String]] = [
            ["kty": "oct", "kid": "hmac", "alg": "HS256", "k": "c2VjcmV0"],
            ["kty": "EC", "crv": "P-384", "kid": "p384", "x": "AA", "y": "AA"],
        ]
        let token = try await P.rs256(P.claims(["nonce": nil]))
        let (error, _) = await refresh(keys: try .json(body: P.jwks(keys)), idToken: token)
        let caught = try #require(error)
        #expect(caught.code == .unsupported)
        #expect(caught.message.contains("holds no usable signing key (of its 2 keys"), "\(caught.message)")
        #expect(caught.message.contains("RS256 or ES256"))
        #expect(!caught.message.contains("c2VjcmV0"), "a published secret is not echoed")
    }
}
