import Foundation
import IdentityTestSupport
import JWTKit
import Testing

@testable import IdentityClient

struct IDTokenValidatorTests {
    typealias P = TestProvider

    private func validator() throws -> IDTokenValidator {
        try IDTokenValidator(jwksJSON: P.publishedKeys())
    }

    /// The error validating `token` throws; fails the test when it validates.
    private func rejection(
        _ token: String,
        _ expectations: IDTokenExpectations = P.expectations(),
        validator: IDTokenValidator? = nil
    ) async throws -> IdentityError {
        let validator = try validator ?? self.validator()
        do {
            let validated = try await validator.validate(token, expectations)
            Issue.record("the token was accepted: \(validated)")
            return IdentityError(.invalidIDToken, "")
        } catch {
            #expect(error.code == .invalidIDToken)
            for part in token.split(separator: ".") where part.count > 8 {
                #expect(!error.message.contains(part))
            }
            return error
        }
    }

    // MARK: Accepted

    @Test func aValidRS256TokenIsAcceptedWithItsClaims() async throws {
        let token = try await P.rs256()
        let validated = try await validator().validate(token, P.expectations())
        #expect(validated.subject == "worker-7")
        #expect(validated.issuer == P.issuer)
        #expect(validated.audience == [P.clientID])
        #expect(validated.authorizedParty == nil)
        #expect(validated.expiresAt == P.now.addingTimeInterval(3600))
        #expect(validated.issuedAt == P.now)
        #expect(validated.nonce == P.nonce)
        #expect(validated.tenantID == "9188040d-6c67-4c5b-b112-36a304b66dad")
        #expect(validated.objectID == "00000000-0000-0000-66f3-3332eca7ea81")
        #expect(validated.preferredUsername == "ana@contoso.com")
        #expect(validated.name == "Ana Shift")
        #expect(validated.email == "ana@contoso.com")
        #expect(validated.raw == token)
        #expect(!"\(validated)".contains(token))
        #expect(!String(reflecting: validated).contains(token))
    }

    @Test func aValidES256TokenIsAccepted() async throws {
        let token = try await P.es256()
        let validated = try await validator().validate(token, P.expectations())
        #expect(validated.subject == "worker-7")
        #expect(validated.audience == [P.clientID])
    }

    @Test func severalAudiencesAreAcceptedWhenAZPIsTheClient() async throws {
        let token = try await P.rs256(
            P.claims(["aud": .strings([P.clientID, "api://other"]), "azp": .string(P.clientID)])
        )
        let validated = try await validator().validate(token, P.expectations())
        #expect(validated.audience == [P.clientID, "api://other"])
        #expect(validated.authorizedParty == P.clientID)
    }

    @Test func aTokenWithoutKIDUsesTheOnlyKeyOfItsType() async throws {
        let token = try await P.rs256(kid: nil)
        #expect(IDTokenValidator.keyID(of: token) == nil)
        let validated = try await validator().validate(token, P.expectations())
        #expect(validated.subject == "worker-7")
    }

    @Test func noNonceIsRequiredWhenTheRequestSentNone() async throws {
        let withNonce = try await P.rs256()
        let withoutNonce = try await P.rs256(P.claims(["nonce": nil]))
        #expect(try await validator().validate(withNonce, P.expectations(nonce: nil)).nonce == P.nonce)
        #expect(try await validator().validate(withoutNonce, P.expectations(nonce: nil)).nonce == nil)
    }

    @Test func expiryAndIssueTimeAreJudgedWithinTheClockSkew() async throws {
        let token = try await P.rs256()
        let exp = P.now.addingTimeInterval(3600)
        // Expired 299 s ago, or issued 299 s in the future: within the 300 s skew.
        #expect(
            try await validator().validate(token, P.expectations(now: exp.addingTimeInterval(299))).subject
                == "worker-7"
        )
        #expect(
            try await validator().validate(token, P.expectations(now: P.now.addingTimeInterval(-299))).subject
                == "worker-7"
        )
    }

    // MARK: Rejected claims

    @Test func aWrongIssuerIsRejected() async throws {
        let token = try await P.rs256(P.claims(["iss": .string("http://127.0.0.1:4594/api/oidc")]))
        let error = try await rejection(token)
        #expect(
            error.message
                == "the ID token's issuer `http://127.0.0.1:4594/api/oidc` is not the authority's issuer `http://127.0.0.1:4593/api/oidc`; check the authority URL"
        )
    }

    @Test func aMissingIssuerIsRejected() async throws {
        let error = try await rejection(try await P.rs256(P.claims(["iss": nil])))
        #expect(error.message.contains("no issuer (`iss`)"))
    }

    @Test func aWrongAudienceIsRejected() async throws {
        let error = try await rejection(try await P.rs256(P.claims(["aud": .string("another-app")])))
        #expect(error.message.contains("audience (`aud`)"))
        #expect(error.message.contains("client id"))
    }

    @Test func severalAudiencesWithoutAZPAreRejected() async throws {
        let error = try await rejection(try await P.rs256(P.claims(["aud": .strings([P.clientID, "api://other"])])))
        #expect(error.message.contains("several audiences"))
        #expect(error.message.contains("`azp`"))
    }

    @Test func anAZPNamingAnotherAppIsRejected() async throws {
        let error = try await rejection(try await P.rs256(P.claims(["azp": .string("another-app")])))
        #expect(error.message.contains("authorized party (`azp`) `another-app`"))
    }

    @Test func aTokenExpiredBeyondTheSkewIsRejected() async throws {
        let token = try await P.rs256()
        let error = try await rejection(token, P.expectations(now: P.now.addingTimeInterval(3600 + 301)))
        #expect(error.message.contains("expired (`exp`)"))
        #expect(error.message.contains("sign in again"))
    }

    @Test func aTokenWithoutExpiryIsRejected() async throws {
        let error = try await rejection(try await P.rs256(P.claims(["exp": nil])))
        #expect(error.message.contains("no expiry (`exp`)"))
    }

    @Test func anIssueTimeInTheFutureIsRejected() async throws {
        let token = try await P.rs256(P.claims(["iat": .int(Int(P.now.timeIntervalSince1970) + 301)]))
        let error = try await rejection(token)
        #expect(error.message.contains("issue time (`iat`)"))
        #expect(error.message.contains("clock"))
    }

    @Test func aNotBeforeInTheFutureIsRejected() async throws {
        let token = try await P.rs256(P.claims(["nbf": .int(Int(P.now.timeIntervalSince1970) + 600)]))
        #expect(try await rejection(token).message.contains("(`nbf`)"))
    }

    @Test func aWrongNonceIsRejected() async throws {
        let error = try await rejection(try await P.rs256(P.claims(["nonce": .string("replayed")])))
        #expect(error.message.contains("`nonce` does not match"))
        #expect(!error.message.contains("replayed`"))
    }

    @Test func aMissingNonceIsRejectedWhenOneWasSent() async throws {
        let error = try await rejection(try await P.rs256(P.claims(["nonce": nil])))
        #expect(error.message.contains("no `nonce`"))
    }

    @Test func aMissingSubjectIsRejected() async throws {
        let error = try await rejection(try await P.rs256(P.claims(["sub": nil])))
        #expect(error.message.contains("no subject (`sub`)"))
    }

    @Test func aClaimOfTheWrongTypeIsRejected() async throws {
        let error = try await rejection(try await P.rs256(P.claims(["exp": .string("tomorrow")])))
        #expect(error.message.contains("claims are not a valid JSON claim set"))
    }

    // MARK: Rejected signatures and headers

    @Test func aTokenSignedByAnotherKeyWithTheSameKIDIsRejected() async throws {
        let rsa = try await rejection(try await P.rs256(key: P.otherRSAKey, kid: "rsa-1"))
        #expect(
            rsa.message
                == "the ID token's signature does not verify against the authority's keys; it was altered or not issued by this authority"
        )
        let ec = try await rejection(try await P.es256(key: ES256PrivateKey(), kid: "ec-1"))
        #expect(ec.message.contains("signature does not verify"))
    }

    @Test func aTamperedPayloadIsRejected() async throws {
        let token = try await P.rs256()
        let parts = token.split(separator: ".")
        let forged = Base64URL.encode(try JSONEncoder().encode(P.claims(["sub": .string("admin")])))
        let error = try await rejection("\(parts[0]).\(forged).\(parts[2])")
        #expect(error.message.contains("signature does not verify"))
    }

    @Test func anUnsignedTokenIsRejected() async throws {
        for alg in ["none", "None"] {
            let token = try P.unsignedToken(header: ["alg": alg, "typ": "JWT", "kid": "rsa-1"])
            let error = try await rejection(token)
            #expect(error.message.contains("unsigned (`alg: none`)"))
        }
    }

    @Test func sharedSecretAndUnsupportedAlgorithmsAreRejected() async throws {
        // An HS256 "signature" made with the RSA key's public modulus as the secret: the classic confusion attack.
        let hs256 = try P.unsignedToken(header: ["alg": "HS256", "kid": "rsa-1"], signature: "c2lnbmF0dXJl")
        #expect(try await rejection(hs256).message.contains("`HS256`, a shared-secret MAC"))
        let ps256 = try P.unsignedToken(header: ["alg": "PS256", "kid": "rsa-1"], signature: "c2lnbmF0dXJl")
        #expect(try await rejection(ps256).message.contains("`PS256`, which is not supported"))
    }

    @Test func anUnknownKIDIsRejectedAndReportedByHasKey() async throws {
        let token = try await P.rs256(kid: "rotated-2")
        let validator = try validator()
        #expect(IDTokenValidator.keyID(of: token) == "rotated-2")
        #expect(!validator.hasKey(id: "rotated-2"))
        #expect(validator.hasKey(id: "rsa-1"))
        #expect(validator.hasKey(id: "ec-1"))
        let error = try await rejection(token, validator: validator)
        #expect(error.message.contains("key `rotated-2` (kid), which is not in the authority's key set"))
        #expect(error.message.contains("jwks_uri"))

        // After refetching the key set, the same token validates.
        let refreshed = try IDTokenValidator(jwksJSON: P.jwks([P.rsaJWK(P.rsaKey, kid: "rotated-2")]))
        #expect(try await refreshed.validate(token, P.expectations()).subject == "worker-7")
    }

    @Test func aKIDWhoseKeyIsOfAnotherTypeIsRejected() async throws {
        // Signed ES256 but naming the RSA key.
        let token = try await P.es256(kid: "rsa-1")
        #expect(try await rejection(token).message.contains("key `rsa-1` (kid) is not a key for `ES256`"))
    }

    @Test func aTokenWithoutKIDIsRejectedWhenSeveralKeysFit() async throws {
        let validator = try IDTokenValidator(
            jwksJSON: P.jwks([P.rsaJWK(P.rsaKey, kid: "a"), P.rsaJWK(P.otherRSAKey, kid: "b")])
        )
        let error = try await rejection(try await P.rs256(kid: nil), validator: validator)
        #expect(error.message.contains("names no key (kid)"))
    }

    @Test(arguments: ["", "abc", "a.b", "a.b.c.d", "!!!.e30.x", "e30.e30.x"])
    func malformedTokensAreRejected(token: String) async throws {
        let error = try await rejection(token)
        #expect(
            error.message.contains("not a well-formed JWT") || error.message.contains("no signing algorithm (`alg`)")
        )
    }

    // MARK: Key sets

    @Test func keysWithoutALGAndWithMicrosoftsExtraFieldsAreUsed() async throws {
        var jwk: [String: Any] = try P.rsaJWK(P.rsaKey, kid: "rsa-1", alg: nil)
        jwk["x5t"] = "rsa-1"
        jwk["x5c"] = ["MIIC/TCCAeWgAwIBAgIIUd7j"]
        jwk["issuer"] = "https://login.microsoftonline.com/{tenantid}/v2.0"
        let json = try JSONSerialization.data(withJSONObject: ["keys": [jwk]])
        let validator = try IDTokenValidator(jwksJSON: json)
        #expect(try await validator.validate(try await P.rs256(), P.expectations()).subject == "worker-7")
    }

    @Test func unusableKeysAreSkippedNotFatal() async throws {
        let keys: [[String: String]] = [
            ["kty": "oct", "kid": "secret", "k": "c2VjcmV0"],
            ["kty": "RSA", "use": "enc", "alg": "RSA-OAEP-256", "kid": "enc", "n": "AQAB", "e": "AQAB"],
            ["kty": "EC", "crv": "P-384", "kid": "p384", "x": "AA", "y": "AA"],
            ["kty": "RSA", "kid": "short", "n": "AQAB", "e": "AQAB"],
            try P.rsaJWK(P.rsaKey, kid: "rsa-1"),
        ]
        let validator = try IDTokenValidator(jwksJSON: P.jwks(keys))
        #expect(validator.hasKey(id: "rsa-1"))
        for skipped in ["secret", "enc", "p384", "short"] { #expect(!validator.hasKey(id: skipped)) }
        #expect(try await validator.validate(try await P.rs256(), P.expectations()).subject == "worker-7")
    }

    @Test func aKeySetThatIsNotAJWKSIsAnInvalidResponse() throws {
        for json in ["", "[]", "{\"keys\": 1}", "<html>"] {
            #expect(throws: IdentityError.self) { try IDTokenValidator(jwksJSON: Data(json.utf8)) }
            do { _ = try IDTokenValidator(jwksJSON: Data(json.utf8)) } catch { #expect(error.code == .invalidResponse) }
        }
        do {
            _ = try IDTokenValidator(jwksJSON: Data("{\"keys\": []}".utf8))
            Issue.record("an empty key set was accepted")
        } catch {
            #expect(error.code == .unsupported)
        }
    }

    @Test func expectationsCanBeBuiltFromTheDiscoveryDocument() async throws {
        let configuration = OpenIDConfiguration(
            issuer: P.issuer,
            authorizationEndpoint: URL(string: "\(P.issuer)/authorize")!,
            tokenEndpoint: URL(string: "\(P.issuer)/token")!,
            jwksURI: URL(string: "\(P.issuer)/jwks")!
        )
        let expectations = IDTokenExpectations(
            authority: P.authority,
            configuration: configuration,
            clientID: P.clientID,
            nonce: P.nonce,
            now: P.now
        )
        #expect(expectations.allowedClockSkew == 300)
        #expect(try await validator().validate(try await P.rs256(), expectations).subject == "worker-7")
    }
}
