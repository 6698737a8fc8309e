import CSodium
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The master key file: exactly 32 raw bytes, mode 0600, owned by the store's user.
/// Created atomically (written to a temporary file, then hard-linked into place) so that several
/// processes creating the same store at once all end up with the one key that won.
enum KeyFile {
    /// Loads the key, or `nil` when the file does not exist.
    static func load(_ url: URL) throws(KeychainError) -> SecureKey? {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw KeychainError(.ioError, "cannot read key file \(url.path): \(String(cString: strerror(errno))); check its owner and permissions")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw KeychainError(.ioError, "cannot inspect key file \(url.path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw KeychainError(.insecureKeyFile,
                "key file \(url.path) is readable by other users (mode \(String(info.st_mode & 0o777, radix: 8))); run: chmod 600 \(url.path)")
        }
        guard info.st_size == SecureKey.byteCount else {
            throw KeychainError(.wrongKey,
                "key file \(url.path) holds \(info.st_size) bytes, not a \(SecureKey.byteCount)-byte key; restore the right key file")
        }
        return try SecureKey { buffer throws(KeychainError) in
            var filled = 0
            while filled < buffer.count {
                let got = read(fd, buffer.baseAddress! + filled, buffer.count - filled)
                if got < 0 && errno == EINTR { continue }
                guard got > 0 else { throw KeychainError(.ioError, "cannot read key file \(url.path)") }
                filled += got
            }
        }
    }

    /// Loads the key, creating a fresh random one first if the file does not exist.
    static func loadOrCreate(_ url: URL) throws(KeychainError) -> SecureKey {
        if let key = try load(url) { return key }
        let key = try SecureKey.random()
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp")
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw KeychainError(.ioError, "cannot create key file in \(url.deletingLastPathComponent().path): \(String(cString: strerror(errno)))")
        }
        defer { unlink(temporary.path) }
        let written = key.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == key.count, synced else {
            throw KeychainError(.ioError, "cannot write key file \(temporary.path): \(String(cString: strerror(errno)))")
        }
        if link(temporary.path, url.path) != 0 {
            guard errno == EEXIST, let winner = try load(url) else {
                throw KeychainError(.ioError, "cannot install key file \(url.path): \(String(cString: strerror(errno)))")
            }
            return winner  // another process created it first
        }
        syncDirectory(url.deletingLastPathComponent())
        return key
    }

    private static func syncDirectory(_ url: URL) {
        let fd = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}
