/// The ID token signing algorithms this client verifies (JWA, RFC 7518 §3): what an authority's
/// `id_token_signing_alg_values_supported` offers in practice.
enum SigningAlgorithm: String, Sendable, CaseIterable {
    /// RSASSA-PKCS1-v1_5 with SHA-256: Microsoft Entra ID, B2C and most providers.
    case rs256 = "RS256"
    /// ECDSA with P-256 and SHA-256.
    case es256 = "ES256"

    /// Why a header's `alg` is refused, or `nil` when it is one of ours.
    static func refusal(of alg: String) -> String? {
        if SigningAlgorithm(rawValue: alg) != nil { return nil }
        if alg.lowercased() == "none" {
            return
                "the ID token is unsigned (`alg: none`); only ID tokens signed with the authority's RS256 or ES256 keys are accepted"
        }
        if alg.uppercased().hasPrefix("HS") {
            return
                "the ID token's algorithm (`alg`) is `\(alg)`, a shared-secret MAC; ID tokens must be signed with the authority's RS256 or ES256 keys"
        }
        return
            "the ID token's algorithm (`alg`) is `\(alg)`, which is not supported; ID tokens must be signed with RS256 or ES256"
    }
}
