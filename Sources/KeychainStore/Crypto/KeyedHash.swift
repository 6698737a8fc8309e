import CSodium
import Foundation

/// Keyed BLAKE2b (`crypto_generichash`): blind indexes and key checks.
enum KeyedHash {
    /// Length of a blind index: 128 bits is ample for equality lookups inside one access group.
    static let indexByteCount = 16

    /// `BLAKE2b(key, domain || value)` truncated to `outputByteCount`.
    /// - Throws: `cryptoUnavailable` if libsodium refuses the lengths.
    static func hash(
        _ value: some Collection<UInt8>,
        domain: UInt8,
        key: SecureKey,
        outputByteCount: Int = indexByteCount
    ) throws(KeychainError) -> Data {
        var output = Data(count: outputByteCount)
        let status = output.withUnsafeMutableBytes { out in
            hash(domain: domain, key: key, into: out, messageByteCount: value.count) { message in
                message.copyBytes(from: value)
            }
        }
        try Sodium.check(status, "crypto_generichash")
        return output
    }

    /// `BLAKE2b(key, domain || message)` written to all of `output`, the message assembled by `write` in a
    /// buffer of `messageByteCount` bytes on the stack (no allocation: the point read's lookups use this).
    /// - Returns: libsodium's status (0 on success).
    static func hash(
        domain: UInt8,
        key: SecureKey,
        into output: UnsafeMutableRawBufferPointer,
        messageByteCount: Int,
        _ write: (UnsafeMutableRawBufferPointer) -> Void
    ) -> Int32 {
        withUnsafeTemporaryAllocation(byteCount: messageByteCount + 1, alignment: 1) { input in
            input[0] = domain
            write(UnsafeMutableRawBufferPointer(rebasing: input[1...]))
            return crypto_generichash(
                output.baseAddress!.assumingMemoryBound(to: UInt8.self),
                output.count,
                input.baseAddress!.assumingMemoryBound(to: UInt8.self),
                UInt64(input.count),
                key.bytes,
                key.count
            )
        }
    }
}
