import CSodium

/// Random bytes from the system's generator (libsodium's `randombytes_buf`: getrandom(2)), for callers outside the
/// store that need many small random values (correlation ids) and draw them from a buffer filled at once.
public enum RandomBytes {
    /// Fills `buffer` with random bytes. Cannot fail (getrandom(2) blocks only until the kernel's generator is
    /// seeded, at boot).
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        try? Sodium.ensureInitialised()
        randombytes_buf(base, buffer.count)
    }
}
