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
    static func seal(
        _ plaintext: Data,
        additionalData: some ContiguousBytes,
        key: SecureKey
    ) throws(KeychainError) -> Box {
        var nonce = Data(count: nonceByteCount)
        var ciphertext = Data(count: plaintext.count + tagByteCount)
        let status = ciphertext.withUnsafeMutableBytes { ciphertext in
            nonce.withUnsafeMutableBytes { nonce in
                plaintext.withUnsafeBytes { plaintext in
                    additionalData.withUnsafeBytes { additionalData in
                        seal(plaintext, additionalData: additionalData, key: key, nonce: nonce, ciphertext: ciphertext)
                    }
                }
            }
        }
        try Sodium.check(status, "crypto_aead_xchacha20poly1305_ietf_encrypt")
        return Box(nonce: nonce, ciphertext: ciphertext)
    }

    /// Encrypts `plaintext` under `key` and a fresh random nonce, binding `additionalData`, into `nonce`
    /// (`nonceByteCount` long) and `ciphertext` (the plaintext's length plus `tagByteCount`).
    /// - Returns: libsodium's status (0 on success).
    static func seal(
        _ plaintext: UnsafeRawBufferPointer,
        additionalData: UnsafeRawBufferPointer,
        key: SecureKey,
        nonce: UnsafeMutableRawBufferPointer,
        ciphertext: UnsafeMutableRawBufferPointer
    ) -> Int32 {
        precondition(nonce.count == nonceByteCount && ciphertext.count == plaintext.count + tagByteCount)
        randombytes_buf(nonce.baseAddress!, nonceByteCount)
        return crypto_aead_xchacha20poly1305_ietf_encrypt(
            ciphertext.baseAddress!.assumingMemoryBound(to: UInt8.self),
            nil,
            plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self),
            UInt64(plaintext.count),
            additionalData.baseAddress?.assumingMemoryBound(to: UInt8.self),
            UInt64(additionalData.count),
            nil,
            nonce.baseAddress!.assumingMemoryBound(to: UInt8.self),
            key.bytes
        )
    }

    /// Decrypts and authenticates a box; `nil` when the key, nonce, ciphertext or additional data
    /// do not match what was sealed. The caller wipes the returned plaintext when done.
    static func open(_ box: Box, additionalData: some ContiguousBytes, key: SecureKey) -> Data? {
        guard box.nonce.count == nonceByteCount, box.ciphertext.count > tagByteCount else { return nil }
        var plaintext = Data(count: box.ciphertext.count - tagByteCount)
        let opened = plaintext.withUnsafeMutableBytes { out in
            box.ciphertext.withUnsafeBytes { ciphertext in
                additionalData.withUnsafeBytes { ad in
                    box.nonce.withUnsafeBytes { nonce in
                        open(nonce: nonce, ciphertext: ciphertext, additionalData: ad, key: key, into: out)
                    }
                }
            }
        }
        guard opened else {
            Sodium.wipe(&plaintext)
            return nil
        }
        return plaintext
    }

    /// The plaintext length of a ciphertext of `ciphertextByteCount` bytes; `nil` if it cannot be one.
    static func plaintextByteCount(ofCiphertext ciphertextByteCount: Int) -> Int? {
        ciphertextByteCount > tagByteCount ? ciphertextByteCount - tagByteCount : nil
    }

    /// Decrypts and authenticates `ciphertext` (tag included) straight from where it lies (a column SQLite
    /// hands out) into `plaintext`, which must be `plaintextByteCount(ofCiphertext:)` long; false when the
    /// nonce has the wrong length or anything does not match what was sealed (`plaintext` then holds zeros
    /// or nothing, as libsodium leaves it).
    static func open(
        nonce: UnsafeRawBufferPointer,
        ciphertext: UnsafeRawBufferPointer,
        additionalData: UnsafeRawBufferPointer,
        key: SecureKey,
        into plaintext: UnsafeMutableRawBufferPointer
    ) -> Bool {
        guard nonce.count == nonceByteCount, plaintextByteCount(ofCiphertext: ciphertext.count) == plaintext.count
        else { return false }
        let status = crypto_aead_xchacha20poly1305_ietf_decrypt(
            plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self),
            nil,
            nil,
            ciphertext.baseAddress!.assumingMemoryBound(to: UInt8.self),
            UInt64(ciphertext.count),
            additionalData.baseAddress?.assumingMemoryBound(to: UInt8.self),
            UInt64(additionalData.count),
            nonce.baseAddress!.assumingMemoryBound(to: UInt8.self),
            key.bytes
        )
        return status == 0
    }
}
