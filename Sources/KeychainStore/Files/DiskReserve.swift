import Foundation
import PathSafety
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Space kept on the store's filesystem for the writes that must never fail: a global sign-out, a shift
/// switch, a deprovisioning. A file of `bytes` allocated blocks (`posix_fallocate`) beside the database;
/// when such a write finds the disk full, the file is deleted to hand its space to SQLite (the deletes
/// need pages in the WAL), the write is retried, and the reserve is made again once there is room.
/// The file is reached relative to the state directory held by the store, never through a symbolic link.
struct DiskReserve: Sendable {
    static let fileName = "disk-reserve"
    /// The default reserve: 8 MiB, several times what a global sign-out of 100 apps × 10 tokens writes.
    static let defaultBytes = 8 << 20

    let path: String
    let bytes: Int
    /// The state directory, held.
    let directory: SafeDirectory

    init(directory: SafeDirectory, bytes: Int = defaultBytes) {
        path = directory.path + "/" + Self.fileName
        self.bytes = bytes
        self.directory = directory
    }

    /// Whether the reserve is there, whole.
    var isInPlace: Bool {
        guard let info = try? directory.status(of: Self.fileName) else { return false }
        return info.type == .regular && Int(info.blocksAllocated) * 512 >= bytes
    }

    /// Allocates the reserve (mode 0600) if it is not in place.
    /// - Throws: `ioError` when the filesystem has no room for it (nothing is left behind then).
    func make() throws(KeychainError) {
        guard !isInPlace else { return }
        let descriptor: Int32
        do throws(Errno) {
            descriptor = try directory.openFile(
                Self.fileName,
                .writeOnly,
                options: [.create],
                permissions: [.ownerReadWrite]
            ).rawValue
        } catch {
            throw KeychainError(.ioError, "cannot create the disk reserve \(path): \(error)")
        }
        let status = posix_fallocate(descriptor, 0, off_t(bytes))
        _ = close(descriptor)
        guard status == 0 else {
            try? directory.remove(Self.fileName)
            throw KeychainError(
                status == ENOSPC ? .diskFull : .ioError,
                "cannot reserve \(bytes) bytes for sign-outs in \(path): \(String(cString: strerror(status)))"
            )
        }
    }

    /// Gives the reserve's space back to the filesystem. Returns whether there was one.
    @discardableResult
    func release() -> Bool {
        (try? directory.remove(Self.fileName)) != nil
    }
}
