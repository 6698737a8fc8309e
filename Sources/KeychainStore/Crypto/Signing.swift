import CSodium
public import Foundation

/// An Ed25519 signing key (`crypto_sign_detached`), for audit-log checkpoints. The secret half lives in
/// `sodium_malloc` memory; it leaves this type only through `sealedForStorage`, to be kept in the store.
public struct SigningKey: Sendable {
    /// Bytes in an Ed25519 public key.
    public static let publicKeyByteCount = Int(crypto_sign_PUBLICKEYBYTES)
    /// Bytes in an Ed25519 signature.
    public static let signatureByteCount = Int(crypto_sign_BYTES)
    private static let secretKeyByteCount = Int(crypto_sign_SECRETKEYBYTES)

    private let secret: SecureKey
    /// The public key that verifies this key's signatures.
    public let publicKey: Data

    /// A fresh random key pair.
    public static func generate() throws(KeychainError) -> SigningKey {
        var publicKey = Data(count: publicKeyByteCount)
        let secret = try SecureKey(count: secretKeyByteCount) { buffer throws(KeychainError) in
            let status = publicKey.withUnsafeMutableBytes { out in
                crypto_sign_keypair(
                    out.bindMemory(to: UInt8.self).baseAddress!,
                    buffer.bindMemory(to: UInt8.self).baseAddress!
                )
            }
            try Sodium.check(status, "crypto_sign_keypair")
        }
        return SigningKey(secret: secret, publicKey: publicKey)
    }

    /// Restores a key from the bytes `sealedForStorage` returned.
    /// - Throws: `corruptStore` if the bytes are not an Ed25519 secret key.
    public init(storedBytes bytes: Data) throws(KeychainError) {
        guard bytes.count == Self.secretKeyByteCount else {
            throw KeychainError(.corruptStore, "a stored signing key has the wrong length")
        }
        let secret = try SecureKey(count: Self.secretKeyByteCount) { buffer in bytes.copyBytes(to: buffer) }
        var publicKey = Data(count: Self.publicKeyByteCount)
        let status = publicKey.withUnsafeMutableBytes { out in
            crypto_sign_ed25519_sk_to_pk(out.bindMemory(to: UInt8.self).baseAddress!, secret.bytes)
        }
        try Sodium.check(status, "crypto_sign_ed25519_sk_to_pk")
        self.init(secret: secret, publicKey: publicKey)
    }

    private init(secret: SecureKey, publicKey: Data) {
        self.secret = secret
        self.publicKey = publicKey
    }

    /// The secret key's bytes, to be stored as a keychain item's secret. The caller wipes its copy.
    public func sealedForStorage() -> Data {
        secret.withUnsafeBytes { Data($0) }
    }

    /// The detached Ed25519 signature of `message`.
    /// - Throws: `cryptoUnavailable` if libsodium refuses to sign.
    public func signature(for message: Data) throws(KeychainError) -> Data {
        var signature = Data(count: Self.signatureByteCount)
        let status = signature.withUnsafeMutableBytes { out in
            message.withUnsafeBytes { input in
                crypto_sign_detached(
                    out.bindMemory(to: UInt8.self).baseAddress!,
                    nil,
                    input.bindMemory(to: UInt8.self).baseAddress,
                    UInt64(message.count),
                    secret.bytes
                )
            }
        }
        try Sodium.check(status, "crypto_sign_detached")
        return signature
    }

    /// Whether `signature` is `publicKey`'s valid Ed25519 signature of `message`.
    public static func isValidSignature(_ signature: Data, of message: Data, publicKey: Data) -> Bool {
        guard signature.count == signatureByteCount, publicKey.count == publicKeyByteCount,
            (try? Sodium.ensureInitialised()) != nil
        else { return false }
        return signature.withUnsafeBytes { sig in
            message.withUnsafeBytes { input in
                publicKey.withUnsafeBytes { key in
                    crypto_sign_verify_detached(
                        sig.bindMemory(to: UInt8.self).baseAddress!,
                        input.bindMemory(to: UInt8.self).baseAddress,
                        UInt64(message.count),
                        key.bindMemory(to: UInt8.self).baseAddress!
                    ) == 0
                }
            }
        }
    }
}

/// Unkeyed BLAKE2b-256 (`crypto_generichash`): hash chains anyone can recompute, such as the audit log's.
public enum ChainHash {
    /// Bytes in a chain value.
    public static let byteCount = 32

    /// `BLAKE2b-256(previous || message)`.
    /// - Throws: `cryptoUnavailable` if libsodium refuses (it never does for these lengths).
    public static func next(previous: Data, message: [UInt8]) throws(KeychainError) -> Data {
        var input = [UInt8](previous)
        input.append(contentsOf: message)
        var output = Data(count: byteCount)
        let status = output.withUnsafeMutableBytes { out in
            crypto_generichash(
                out.bindMemory(to: UInt8.self).baseAddress!,
                byteCount,
                input,
                UInt64(input.count),
                nil,
                0
            )
        }
        try Sodium.check(status, "crypto_generichash")
        return output
    }

    /// The SHA-256 of `data` (`crypto_hash_sha256`).
    /// - Throws: `cryptoUnavailable` if libsodium refuses (it never does).
    public static func sha256(_ data: Data) throws(KeychainError) -> Data {
        var digest = Data(count: Int(crypto_hash_sha256_BYTES))
        let status = digest.withUnsafeMutableBytes { output in
            data.withUnsafeBytes { input in
                crypto_hash_sha256(
                    output.bindMemory(to: UInt8.self).baseAddress!,
                    input.bindMemory(to: UInt8.self).baseAddress,
                    UInt64(data.count)
                )
            }
        }
        try Sodium.check(status, "crypto_hash_sha256")
        return digest
    }

    /// The SHA-256 of `data` as lowercase hex: how policies are fingerprinted.
    /// - Throws: `cryptoUnavailable` if libsodium refuses (it never does).
    public static func sha256Hex(_ data: Data) throws(KeychainError) -> String {
        Hex.encode(try sha256(data))
    }
}

/// Lowercase hexadecimal, for fingerprints people compare (policy hashes, public keys, chain values).
public enum Hex {
    /// `bytes` as lowercase hex, two digits per byte.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
