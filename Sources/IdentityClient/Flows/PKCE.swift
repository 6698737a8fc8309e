import Crypto
public import Foundation

/// Proof Key for Code Exchange (RFC 7636) with the `S256` method, plus the other random values an
/// authorization request carries.
struct PKCE: Sendable {
    /// 32 random bytes, base64url (43 characters): sent with the code exchange only.
    let verifier: String
    /// `BASE64URL(SHA256(verifier))`: sent with the authorization request.
    let challenge: String

    /// A fresh random verifier and its challenge.
    init() {
        self.init(verifier: Self.randomToken())
    }

    /// The challenge of a given verifier.
    init(verifier: String) {
        self.verifier = verifier
        challenge = Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8))))
    }

    /// A base64url random string of `bytes` bytes (for verifiers, `state` and `nonce`).
    static func randomToken(bytes: Int = 32) -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode(Data((0..<bytes).map { _ in UInt8.random(in: .min ... .max, using: &generator) }))
    }
}

/// Unpadded base64url (RFC 4648 §5), as JWTs, PKCE and Microsoft's `client_info` use it.
public enum Base64URL {
    /// Encodes without padding.
    public static func encode(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Decodes with or without padding; `nil` for text that is not base64url.
    public static func decode(_ text: some StringProtocol) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        let remainder = base64.utf8.count % 4
        if remainder == 1 { return nil }
        if remainder > 0 { base64 += String(repeating: "=", count: 4 - remainder) }
        return Data(base64Encoded: base64)
    }
}
