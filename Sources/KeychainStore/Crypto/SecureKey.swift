import CSodium
import Foundation

/// A fixed-length secret key held in `sodium_malloc` memory (guard pages, `mlock`ed, never swapped)
/// and wiped by `sodium_free` when the last reference goes away. Mirrors swift-crypto's `SecureBytes`:
/// the bytes never leave this type except through `withUnsafeBytes`.
final class SecureKey: @unchecked Sendable {
    /// Bytes in a key: every key in the store is 32 bytes.
    static let byteCount = 32

    private let pointer: UnsafeMutableRawPointer
    let count: Int

    /// Allocates `count` bytes and lets `initialise` fill them; the memory is made read-only afterwards.
    init(
        count: Int = SecureKey.byteCount,
        initialise: (UnsafeMutableRawBufferPointer) throws(KeychainError) -> Void
    ) throws(KeychainError) {
        try Sodium.ensureInitialised()
        guard let pointer = sodium_malloc(count) else {
            throw KeychainError(
                .cryptoUnavailable,
                "could not allocate locked memory for a key; raise the memlock limit (ulimit -l)"
            )
        }
        self.pointer = pointer
        self.count = count
        do {
            try initialise(UnsafeMutableRawBufferPointer(start: pointer, count: count))
        } catch {
            sodium_free(pointer)
            throw error
        }
        guard sodium_mprotect_readonly(pointer) == 0 else {
            sodium_free(pointer)
            throw KeychainError(
                .cryptoUnavailable,
                "could not make a key's locked memory read-only (sodium_mprotect_readonly); check the memlock limit (ulimit -l)"
            )
        }
    }

    /// A fresh random key.
    static func random() throws(KeychainError) -> SecureKey {
        try SecureKey { buffer in randombytes_buf(buffer.baseAddress!, buffer.count) }  // returns nothing: cannot fail
    }

    /// A key copied from `bytes`, which must be exactly `byteCount` long. The caller wipes its copy.
    static func copying(_ bytes: Data) throws(KeychainError) -> SecureKey {
        guard bytes.count == byteCount else {
            throw KeychainError(.corruptStore, "a stored key has the wrong length")
        }
        return try SecureKey { buffer in bytes.copyBytes(to: buffer) }
    }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// The raw pointer for libsodium calls that take `const unsigned char *`.
    var bytes: UnsafePointer<UInt8> {
        UnsafePointer(pointer.assumingMemoryBound(to: UInt8.self))
    }

    deinit {
        sodium_free(pointer)  // zeroes the memory before releasing it
    }
}
