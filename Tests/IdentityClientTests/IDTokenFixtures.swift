import CryptoExtras
import Foundation
import IdentityTestSupport
import JWTKit

@testable import IdentityClient

/// A test identity provider: one RSA and one EC key (generated once per process), a published key set,
/// and token signing.
enum TestProvider {
    static let issuer = "http://127.0.0.1:4593/api/oidc"
    static let clientID = "5f1c7ab0-kiosk"
    static let nonce = "n-0S6_WzA2Mj"
    static let now = Date(timeIntervalSince1970: 1_750_000_000)
    static let authority = try! Authority(issuer)

    static let rsaKey = try! JWTKit.Insecure.RSA.PrivateKey(backing: _RSA.Signing.PrivateKey(keySize: .bits2048))
    static let otherRSAKey = try! JWTKit.Insecure.RSA.PrivateKey(backing: _RSA.Signing.PrivateKey(keySize: .bits2048))
    static let ecKey = ES256PrivateKey()

    /// The expectations of a sign-in that sent `nonce` at `now`.
    static func expectations(
        nonce: String? = TestProvider.nonce,
        now: Date = TestProvider.now,
        authority: Authority = TestProvider.authority,
        metadataIssuer: String = TestProvider.issuer
    ) -> IDTokenExpectations {
        IDTokenExpectations(
            authority: authority,
            metadataIssuer: metadataIssuer,
            clientID: clientID,
            nonce: nonce,
            now: now
        )
    }

    /// The claims of a good token issued at `now`.
    static func claims(_ changes: [String: ClaimValue?] = [:]) -> TestClaims {
        var values: [String: ClaimValue] = [
            "iss": .string(issuer),
            "sub": .string("worker-7"),
            "aud": .string(clientID),
            "exp": .int(Int(now.timeIntervalSince1970) + 3600),
            "iat": .int(Int(now.timeIntervalSince1970)),
            "nonce": .string(nonce),
            "tid": .string("9188040d-6c67-4c5b-b112-36a304b66dad"),
            "oid": .string("00000000-0000-0000-66f3-3332eca7ea81"),
            "preferred_username": .string("ana@contoso.com"),
            "name": .string("Ana Shift"),
            "email": .string("ana@contoso.com"),
        ]
        for (name, value) in changes { values[name] = value }
        return TestClaims(values)
    }

    /// The public JWK of an RSA key, as a provider publishes it.
    static func rsaJWK(
        _ key: JWTKit.Insecure.RSA.PrivateKey,
        kid: String,
        alg: String? = "RS256"
    ) throws -> [String: String] {
        let primitives = try key.publicKey.getKeyPrimitives()
        var jwk = [
            "kty": "RSA", "use": "sig", "kid": kid, "n": Base64URL.encode(primitives.modulus),
            "e": Base64URL.encode(primitives.publicExponent),
        ]
        jwk["alg"] = alg
        return jwk
    }

    /// The public JWK of a P-256 key.
    static func ecJWK(_ key: ES256PrivateKey, kid: String) -> [String: String] {
        let parameters = key.publicKey.parameters!
        return [
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid, "x": parameters.x, "y": parameters.y,
        ]
    }

    /// A JWKS document holding `keys`.
    static func jwks(_ keys: [[String: String]]) throws -> Data {
        try JSONSerialization.data(withJSONObject: ["keys": keys])
    }

    /// The provider's published key set: `rsa-1` and `ec-1`.
    static func publishedKeys() throws -> Data {
        try jwks([rsaJWK(rsaKey, kid: "rsa-1"), ecJWK(ecKey, kid: "ec-1")])
    }

    /// A token signed RS256 by `key` under `kid` (no `kid` header when `nil`).
    static func rs256(
        _ claims: TestClaims = claims(),
        key: JWTKit.Insecure.RSA.PrivateKey = rsaKey,
        kid: String? = "rsa-1"
    ) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(rsa: key, digestAlgorithm: .sha256)
        return try await keys.sign(claims, kid: kid.map { JWKIdentifier(string: $0) })
    }

    /// A token signed ES256 by `key` under `kid`.
    static func es256(
        _ claims: TestClaims = claims(),
        key: ES256PrivateKey = ecKey,
        kid: String? = "ec-1"
    ) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: key)
        return try await keys.sign(claims, kid: kid.map { JWKIdentifier(string: $0) })
    }

    /// A token with the given header and claims and `signature` as its third part.
    static func unsignedToken(
        header: [String: String],
        claims: TestClaims = claims(),
        signature: String = ""
    ) throws -> String {
        let headerPart = Base64URL.encode(try JSONSerialization.data(withJSONObject: header))
        let claimsPart = Base64URL.encode(try JSONEncoder().encode(claims))
        return "\(headerPart).\(claimsPart).\(signature)"
    }
}
