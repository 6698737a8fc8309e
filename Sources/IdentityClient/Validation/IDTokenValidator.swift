import Foundation
import JWTKit

/// Validates OpenID Connect ID tokens against an authority's signing keys (OpenID Connect Core 1.0
/// §3.1.3.7), as MSAL does before it caches an account: signature, `iss`, `aud`/`azp`, `exp`, `iat`,
/// `nonce`, `sub`.
///
/// Accepts RS256 and ES256; refuses `alg: none` and shared-secret (`HS*`) tokens. A token naming a key
/// (`kid`) the set does not hold is refused: check ``hasKey(id:)`` and refetch `jwks_uri` once on a key
/// rollover. Every failure is `invalidIDToken` with a message naming the failed check; no message
/// contains the token.
struct IDTokenValidator: Sendable {
    private let keySet: JSONWebKeySet

    /// A validator for the keys of an authority's `jwks_uri` document.
    /// - Throws: `invalidResponse` when `jwksJSON` is not a JSON Web Key Set; `unsupported` when it
    ///   holds no RS256 or ES256 signing key.
    init(jwksJSON: Data) throws(IdentityError) {
        keySet = try JSONWebKeySet(json: jwksJSON)
    }

    /// Whether the key set holds a usable signing key with this `kid`.
    func hasKey(id: String) -> Bool {
        keySet.keys.contains { $0.id == id }
    }

    /// The `kid`s of the usable keys (public key ids, for logs).
    var keyIDs: [String] {
        keySet.keys.compactMap(\.id)
    }

    /// The `kid` in a token's header, or `nil` when it names none or is malformed; with ``hasKey(id:)``,
    /// tells the caller to refetch the key set before validating.
    static func keyID(of jwt: String) -> String? {
        CompactJWT.keyID(of: jwt)
    }

    /// Verifies `jwt`'s signature and claims.
    /// - Returns: The token's claims.
    /// - Throws: `invalidIDToken` naming the check that failed and what to do.
    func validate(_ jwt: String, _ expectations: IDTokenExpectations) async throws(IdentityError) -> ValidatedIDToken {
        let claims = try await verifiedClaims(of: jwt)
        return try IDTokenClaimChecks(claims: claims, expectations: expectations).validated(raw: jwt)
    }

    /// Picks the key, then lets jwt-kit verify the signature and decode the claims.
    private func verifiedClaims(of jwt: String) async throws(IdentityError) -> IDTokenClaimSet {
        let token = try CompactJWT(jwt)
        if let refusal = SigningAlgorithm.refusal(of: token.algorithm) {
            throw IdentityError(.invalidIDToken, refusal)
        }
        let key = try signingKey(for: token)

        // The collection holds only the chosen key, as its default: jwt-kit falls back to the default
        // key for a `kid` it does not know, so a shared collection could verify with the wrong key.
        let keys = JWTKeyCollection()
        switch key.material {
        case .rsa(let publicKey): await keys.add(rsa: publicKey, digestAlgorithm: .sha256)
        case .es256(let publicKey): await keys.add(ecdsa: publicKey)
        }
        do {
            return try await keys.verify(jwt, as: IDTokenClaimSet.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            throw IdentityError(
                .invalidIDToken,
                "the ID token's signature does not verify against the authority's keys; it was altered or not issued by this authority"
            )
        } catch let error as JWTError where error.errorType == .malformedToken {
            throw IdentityError(
                .invalidIDToken,
                "the ID token's claims are not a valid JSON claim set (a claim has the wrong type); the authority's response is malformed"
            )
        } catch {
            throw IdentityError(
                .invalidIDToken,
                "the ID token could not be verified with the authority's keys (its signature is malformed)"
            )
        }
    }

    private func signingKey(for token: CompactJWT) throws(IdentityError) -> SigningKey {
        guard let algorithm = SigningAlgorithm(rawValue: token.algorithm) else {
            throw IdentityError(
                .invalidIDToken,
                "the ID token's algorithm (`alg`) `\(token.algorithm)` is not supported"
            )
        }
        let candidates = keySet.keys(for: algorithm, keyID: token.keyID)
        if let kid = token.keyID {
            guard let key = candidates.first else {
                if hasKey(id: kid) {
                    throw IdentityError(
                        .invalidIDToken,
                        "the ID token's key `\(kid)` (kid) is not a key for `\(algorithm.rawValue)` in the authority's key set; the token's `alg` and key do not match"
                    )
                }
                throw IdentityError(
                    .invalidIDToken,
                    "the ID token is signed with the key `\(kid)` (kid), which is not in the authority's key set: the identity provider's key set (jwks_uri), fetched again, holds no \(algorithm.rawValue) key with that kid, so the token cannot be verified and nothing was cached; public clients verify ID tokens with the provider's published RS256 or ES256 public keys — the provider must publish the key it signs with"
                )
            }
            return key
        }
        guard !candidates.isEmpty else {
            throw IdentityError(
                .invalidIDToken,
                "the identity provider's key set (jwks_uri) holds no \(algorithm.rawValue) key for the ID token (which names no key id), so it cannot be verified and nothing was cached; public clients verify ID tokens with the provider's published RS256 or ES256 public keys — the provider must publish a key for the algorithm it signs with"
            )
        }
        guard candidates.count == 1, let key = candidates.first else {
            throw IdentityError(
                .invalidIDToken,
                "the ID token names no key (kid) and the authority's key set has \(candidates.count) \(algorithm.rawValue) keys; the key cannot be chosen"
            )
        }
        return key
    }
}
