import Foundation

/// A compact-serialized JWT split into its parts, with the header fields validation needs.
///
/// Nothing here is trusted: the header only says which key and algorithm to try.
struct CompactJWT {
    /// The header's `alg`.
    let algorithm: String
    /// The header's `kid`, when there is one.
    let keyID: String?

    /// Splits `token` and decodes its header.
    /// - Throws: `invalidIDToken` when the token is not three base64url parts with a JSON header naming `alg`.
    init(_ token: String) throws(IdentityError) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerData = Base64URL.decode(parts[0]),
            let header = (try? JSONSerialization.jsonObject(with: headerData)) as? [String: Any]
        else {
            throw IdentityError(
                .invalidIDToken,
                "the ID token is not a well-formed JWT (three base64url parts with a JSON header); the authority's response is malformed"
            )
        }
        guard let algorithm = header["alg"] as? String else {
            throw IdentityError(
                .invalidIDToken,
                "the ID token's header names no signing algorithm (`alg`); it cannot be verified"
            )
        }
        self.algorithm = algorithm
        self.keyID = header["kid"] as? String
    }

    /// The `kid` of a token's header, or `nil` when the token is malformed or names no key.
    static func keyID(of token: String) -> String? {
        try? CompactJWT(token).keyID
    }
}
