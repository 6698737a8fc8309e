import CSodium
public import Foundation

/// The one place that initialises libsodium and hands out random bytes.
enum Sodium {
    /// `sodium_init` is idempotent and thread-safe; calling it through a lazy global keeps it to one call.
    private static let initialised: Bool = sodium_init() >= 0

    /// Makes sure libsodium is ready; every crypto entry point calls this first.
    static func ensureInitialised() throws(KeychainError) {
        guard initialised else {
            throw KeychainError(.cryptoUnavailable, "libsodium failed to initialise; reinstall libsodium23")
        }
    }

    /// Turns a libsodium status into a typed error: every libsodium call that returns one goes through here.
    /// libsodium documents `0` as success and `-1` as failure (invalid lengths, no memory, a forged message).
    static func check(_ status: Int32, _ operation: StaticString) throws(KeychainError) {
        guard status == 0 else {
            throw KeychainError(
                .cryptoUnavailable,
                "libsodium's \(operation) failed (status \(status)); the library or its memory is unusable, reinstall libsodium23 and retry"
            )
        }
    }

    /// `count` random bytes in ordinary memory (nonces, salts: not secret).
    static func randomData(count: Int) -> Data {
        var data = Data(count: count)
        data.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, count) }
        return data
    }

    /// Constant-time comparison of two buffers of equal length.
    static func constantTimeEqual(_ lhs: Data, _ rhs: Data) -> Bool {
        guard lhs.count == rhs.count else { return false }
        return lhs.withUnsafeBytes { l in
            rhs.withUnsafeBytes { r in sodium_memcmp(l.baseAddress!, r.baseAddress!, lhs.count) == 0 }
        }
    }

    /// Overwrites a buffer with zeros in a way the optimiser cannot remove.
    static func wipe(_ data: inout Data) {
        let count = data.count
        guard count > 0 else { return }
        data.withUnsafeMutableBytes { sodium_memzero($0.baseAddress!, count) }
    }
}

/// Wiping secrets that leave the store (item secrets handed to callers), for layers above the store.
public enum SecureMemory {
    /// Overwrites `data` with zeros (`sodium_memzero`) in a way the optimiser cannot remove.
    public static func wipe(_ data: inout Data) { Sodium.wipe(&data) }
}
