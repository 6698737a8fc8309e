import Foundation
import JWTKit

/// One public signing key from an authority's JSON Web Key Set (RFC 7517), ready for jwt-kit.
struct SigningKey: Sendable {
    /// The public key material.
    enum Material: Sendable {
        case rsa(Insecure.RSA.PublicKey)
        case es256(ES256PublicKey)
    }

    /// The key's `kid`, when it has one.
    let id: String?
    /// The algorithm the key verifies.
    let algorithm: SigningAlgorithm
    let material: Material
}

/// The signing keys of an authority's `jwks_uri` document that this client can use.
///
/// Parsed leniently, key by key: a key for encryption (`use: enc`), of an unsupported type, curve or
/// algorithm, or with malformed material is skipped rather than failing the whole set (jwt-kit's
/// `JWKS` decoding fails on the first unknown `kty`, `crv` or `alg`). A key without `alg` is taken as
/// RS256 (`kty: RSA`) or ES256 (`kty: EC`, `crv: P-256`), as Microsoft publishes its keys without `alg`.
struct JSONWebKeySet: Sendable {
    let keys: [SigningKey]

    /// Parses a JWKS document.
    /// - Throws: `invalidResponse` when it is not a JWKS; `unsupported` when it has no RS256 or ES256 signing key.
    init(json: Data) throws(IdentityError) {
        guard let object = (try? JSONSerialization.jsonObject(with: json)) as? [String: Any],
            let entries = object["keys"] as? [Any]
        else {
            throw IdentityError(
                .invalidResponse,
                "the authority's key set (jwks_uri) is not a JSON Web Key Set (an object with a `keys` array); check the authority URL"
            )
        }
        keys = entries.compactMap { ($0 as? [String: Any]).flatMap(Self.signingKey) }
        guard !keys.isEmpty else {
            throw IdentityError(
                .unsupported,
                "the identity provider's key set (jwks_uri) holds no usable signing key (of its \(entries.count) keys, none is an RSA key for RS256 or an EC P-256 key for ES256), so no ID token can be verified and nothing was cached; public clients need the provider to publish RS256 or ES256 public keys — configure one at the provider"
            )
        }
    }

    /// The candidates for a token signed with `algorithm` under `keyID`.
    func keys(for algorithm: SigningAlgorithm, keyID: String?) -> [SigningKey] {
        keys.filter { $0.algorithm == algorithm && (keyID == nil || $0.id == keyID) }
    }

    private static func signingKey(_ jwk: [String: Any]) -> SigningKey? {
        if let use = jwk["use"] as? String, use != "sig" { return nil }
        let kid = jwk["kid"] as? String
        let alg = jwk["alg"] as? String
        switch jwk["kty"] as? String {
        case "RSA":
            guard alg == nil || alg == SigningAlgorithm.rs256.rawValue,
                let n = jwk["n"] as? String, let e = jwk["e"] as? String,
                let key = try? Insecure.RSA.PublicKey(modulus: n, exponent: e)
            else { return nil }
            return SigningKey(id: kid, algorithm: .rs256, material: .rsa(key))
        case "EC":
            guard alg == nil || alg == SigningAlgorithm.es256.rawValue, jwk["crv"] as? String == "P-256",
                let x = jwk["x"] as? String, let y = jwk["y"] as? String,
                let key = try? ES256PublicKey(parameters: (x: x, y: y))
            else { return nil }
            return SigningKey(id: kid, algorithm: .es256, material: .es256(key))
        default:
            return nil
        }
    }
}
