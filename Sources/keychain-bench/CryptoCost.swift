import CSodium
import BenchSupport
import Foundation

/// The libsodium work of one `find`, timed on its own with the same primitives and sizes as the store:
/// three keyed BLAKE2b-128 blind indexes (group, service, account) and one XChaCha20-Poly1305 open
/// of the sealed payload. It cannot call the store's internals, so it rebuilds equal-sized inputs.
struct CryptoCost {
    /// Three `crypto_generichash` calls, keyed, 16-byte output (one timed unit per lookup).
    var blindIndexes: Samples
    /// One `crypto_aead_xchacha20poly1305_ietf_decrypt` of the payload.
    var aeadOpen: Samples
    /// Bytes of the sealed payload (ciphertext including the tag).
    var ciphertextBytes: Int

    static func measure(group: String, services: [String], accounts: [String], secretBytes: Int,
                        keys: [Int], generator: inout SplitMix64) throws -> CryptoCost {
        guard sodium_init() >= 0 else { throw BenchError("libsodium failed to initialise") }
        let hashKey = generator.bytes(32)
        let aeadKey = generator.bytes(32)
        let nonce = generator.bytes(Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES))
        let tagBytes = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)

        // The store's inputs: domain byte, then (for scoped values) a 4-byte group length, the group and the value.
        func indexInput(_ domain: UInt8, _ value: String?) -> [UInt8] {
            guard let value else { return [domain] + Array(group.utf8) }
            let length = UInt32(group.utf8.count).littleEndian
            return [domain] + withUnsafeBytes(of: length) { Array($0) } + Array(group.utf8) + Array(value.utf8)
        }
        // The store's payload layout: version, 3 length-prefixed strings, 4 absent optionals, 2 dates, the secret.
        let sample = keys.first ?? 0
        let plaintextBytes = 1 + (4 + group.utf8.count) + (4 + services[sample].utf8.count) + (4 + accounts[sample].utf8.count)
            + 4 + 8 + 8 + 4 + secretBytes
        let plaintext = generator.bytes(plaintextBytes)
        let additionalData = generator.bytes(6 + 1 + 3 * (1 + 16) + 2)
        var ciphertext = [UInt8](repeating: 0, count: plaintextBytes + tagBytes)
        var written: UInt64 = 0
        plaintext.withUnsafeBytes { message in
            additionalData.withUnsafeBytes { ad in
                nonce.withUnsafeBytes { n in
                    _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                        &ciphertext, &written,
                        message.bindMemory(to: UInt8.self).baseAddress!, UInt64(plaintextBytes),
                        ad.bindMemory(to: UInt8.self).baseAddress!, UInt64(additionalData.count),
                        nil, n.bindMemory(to: UInt8.self).baseAddress!,
                        aeadKey.withUnsafeBytes { $0.bindMemory(to: UInt8.self).baseAddress! })
                }
            }
        }

        var blindIndexes = Samples(capacity: keys.count)
        var aeadOpen = Samples(capacity: keys.count)
        var output = [UInt8](repeating: 0, count: 16)
        var opened = [UInt8](repeating: 0, count: plaintextBytes)
        let groupInput = indexInput(1, nil)
        try hashKey.withUnsafeBytes { rawKey in
            let key = rawKey.bindMemory(to: UInt8.self).baseAddress!
            try additionalData.withUnsafeBytes { rawAD in
                let ad = rawAD.bindMemory(to: UInt8.self).baseAddress!
                try nonce.withUnsafeBytes { rawNonce in
                    let n = rawNonce.bindMemory(to: UInt8.self).baseAddress!
                    try aeadKey.withUnsafeBytes { rawAEADKey in
                        let k = rawAEADKey.bindMemory(to: UInt8.self).baseAddress!
                        for (position, item) in keys.enumerated() {
                            let serviceInput = indexInput(2, services[item])
                            let accountInput = indexInput(3, accounts[item])
                            let hashStart = monotonicNanos()
                            crypto_generichash(&output, 16, groupInput, UInt64(groupInput.count), key, 32)
                            crypto_generichash(&output, 16, serviceInput, UInt64(serviceInput.count), key, 32)
                            crypto_generichash(&output, 16, accountInput, UInt64(accountInput.count), key, 32)
                            let hashEnd = monotonicNanos()
                            blindIndexes.append(hashEnd - hashStart)

                            let openStart = monotonicNanos()
                            let status = crypto_aead_xchacha20poly1305_ietf_decrypt(
                                &opened, &written, nil, ciphertext, UInt64(ciphertext.count),
                                ad, UInt64(additionalData.count), n, k)
                            let openEnd = monotonicNanos()
                            aeadOpen.append(openEnd - openStart)
                            guard status == 0 else { throw BenchError("AEAD self-test failed at read \(position)") }
                            consume(Int(output[0]) &+ Int(opened[0]))
                        }
                    }
                }
            }
        }
        return CryptoCost(blindIndexes: blindIndexes, aeadOpen: aeadOpen, ciphertextBytes: ciphertext.count)
    }
}
