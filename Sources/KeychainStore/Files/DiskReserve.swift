#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Space kept on the store's filesystem for the writes that must never fail: a global sign-out, a shift
/// switch, a deprovisioning. A file of `bytes` allocated blocks (`posix_fallocate`) beside the database;
/// when such a write finds the disk full, the file is deleted to hand its space to SQLite (the deletes
/// need pages in the WAL), the write is retried, and the reserve is made again once there is room.
struct DiskReserve: Sendable {
    static let fileName = "disk-reserve"
    /// The default reserve: 8 MiB, several times what a global sign-out of 100 apps × 10 tokens writes.
    static let defaultBytes = 8 << 20

    let path: String
    let bytes: Int

    init(directory: URL, bytes: Int = defaultBytes) {
        path = directory.appendingPathComponent(Self.fileName).path
        self.bytes = bytes
    }

    /// Whether the reserve is there, whole.
    var isInPlace: Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG && Int(info.st_blocks) * 512 >= bytes
    }

    /// Allocates the reserve (mode 0600) if it is not in place.
    /// - Throws: `ioError` when the filesystem has no room for it (nothing is left behind then).
    func make() throws(KeychainError) {
        guard !isInPlace else { return }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw KeychainError(.ioError, "cannot create the disk reserve \(path): \(String(cString: strerror(errno)))")
        }
        let status = posix_fallocate(descriptor, 0, off_t(bytes))
        _ = close(descriptor)
        guard status == 0 else {
            _ = unlink(path)
            throw KeychainError(status == ENOSPC ? .diskFull : .ioError,
                "cannot reserve \(bytes) bytes for sign-outs in \(path): \(String(cString: strerror(status)))")
        }
    }

    /// Gives the reserve's space back to the filesystem. Returns whether there was one.
    @discardableResult
    func release() -> Bool {
        unlink(path) == 0
    }
}
