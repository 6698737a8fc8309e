import CSodium
import Foundation

/// Keyed BLAKE2b (`crypto_generichash`): blind indexes and key checks.
enum KeyedHash {
    /// Length of a blind index: 128 bits is ample for equality lookups inside one access group.
    static let indexByteCount = 16

    /// `BLAKE2b(key, domain || 0x00 || value)` truncated to `outputByteCount`.
    /// - Throws: `cryptoUnavailable` if libsodium refuses the lengths.
    static func hash(_ value: some Collection<UInt8>, domain: UInt8, key: SecureKey, outputByteCount: Int = indexByteCount) throws(KeychainError) -> Data {
        var input: [UInt8] = []
        input.reserveCapacity(value.count + 1)
        input.append(domain)
        input.append(contentsOf: value)
        var output = Data(count: outputByteCount)
        let status = output.withUnsafeMutableBytes { out in
            input.withUnsafeBytes { message in
                crypto_generichash(
                    out.bindMemory(to: UInt8.self).baseAddress!, outputByteCount,
                    message.bindMemory(to: UInt8.self).baseAddress!, UInt64(input.count),
                    key.bytes, key.count)
            }
        }
        try Sodium.check(status, "crypto_generichash")
        return output
    }
}
