import CSodium
import Foundation

/// XChaCha20-Poly1305-IETF: the only cipher the store uses. Every seal takes a fresh random 24-byte nonce.
enum AEAD {
    static let nonceByteCount = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    static let tagByteCount = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)

    /// A sealed box: nonce and ciphertext (tag included) as stored in the database.
    struct Box {
        var nonce: Data
        var ciphertext: Data
    }

    /// Encrypts `plaintext` under `key`, binding `additionalData`.
    /// - Throws: `cryptoUnavailable` if libsodium refuses (it never does for valid lengths).
    static func seal(_ plaintext: Data, additionalData: some ContiguousBytes, key: SecureKey) throws(KeychainError) -> Box {
        let nonce = Sodium.randomData(count: nonceByteCount)
        var ciphertext = Data(count: plaintext.count + tagByteCount)
        var written: UInt64 = 0
        let status = ciphertext.withUnsafeMutableBytes { out in
            plaintext.withUnsafeBytes { message in
                additionalData.withUnsafeBytes { ad in
                    nonce.withUnsafeBytes { n in
                        crypto_aead_xchacha20poly1305_ietf_encrypt(
                            out.bindMemory(to: UInt8.self).baseAddress!, &written,
                            message.bindMemory(to: UInt8.self).baseAddress!, UInt64(plaintext.count),
                            ad.bindMemory(to: UInt8.self).baseAddress!, UInt64(ad.count),
                            nil, n.bindMemory(to: UInt8.self).baseAddress!, key.bytes)
                    }
                }
            }
        }
        try Sodium.check(status, "crypto_aead_xchacha20poly1305_ietf_encrypt")
        return Box(nonce: nonce, ciphertext: ciphertext)
    }

    /// Decrypts and authenticates a box; `nil` when the key, nonce, ciphertext or additional data
    /// do not match what was sealed. The caller wipes the returned plaintext when done.
    static func open(_ box: Box, additionalData: some ContiguousBytes, key: SecureKey) -> Data? {
        guard box.nonce.count == nonceByteCount, box.ciphertext.count > tagByteCount else { return nil }
        var plaintext = Data(count: box.ciphertext.count - tagByteCount)
        var written: UInt64 = 0
        let status = plaintext.withUnsafeMutableBytes { out in
            box.ciphertext.withUnsafeBytes { c in
                additionalData.withUnsafeBytes { ad in
                    box.nonce.withUnsafeBytes { n in
                        crypto_aead_xchacha20poly1305_ietf_decrypt(
                            out.bindMemory(to: UInt8.self).baseAddress!, &written, nil,
                            c.bindMemory(to: UInt8.self).baseAddress!, UInt64(box.ciphertext.count),
                            ad.bindMemory(to: UInt8.self).baseAddress!, UInt64(ad.count),
                            n.bindMemory(to: UInt8.self).baseAddress!, key.bytes)
                    }
                }
            }
        }
        guard status == 0 else {
            Sodium.wipe(&plaintext)
            return nil
        }
        return plaintext
    }
}
