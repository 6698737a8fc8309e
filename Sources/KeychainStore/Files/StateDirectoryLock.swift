#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// One daemon per state directory: an exclusive `flock` on `deviced.lock` in it, held for the daemon's
/// life (the kernel releases it when the process ends, however it ends). The file holds the holder's pid
/// so a second daemon can name it.
final class StateDirectoryLock {
    static let fileName = "deviced.lock"
    private let descriptor: Int32

    /// Takes the lock of `directory`.
    /// - Throws: `StateDirectoryLockError` naming the daemon that holds it, or why the file cannot be used.
    init(directory: URL) throws(StateDirectoryLockError) {
        let path = directory.appendingPathComponent(Self.fileName).path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw StateDirectoryLockError(held: false, "cannot open the lock file \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            var buffer = [UInt8](repeating: 0, count: 32)
            let count = pread(descriptor, &buffer, buffer.count, 0)
            _ = close(descriptor)
            guard code == EWOULDBLOCK else {
                throw StateDirectoryLockError(held: false, "cannot lock \(path): \(String(cString: strerror(code)))")
            }
            let holder = count > 0 ? String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : "?"
            throw StateDirectoryLockError(held: true, """
                another deviced (pid \(holder)) already serves the state directory \(directory.path); \
                stop it first (systemctl stop deviced), or give this one another --state-dir
                """)
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pwrite(descriptor, pid, pid.count, 0)
        self.descriptor = descriptor
    }

    deinit { _ = close(descriptor) }
}

/// The state directory's lock could not be taken.
struct StateDirectoryLockError: Error, CustomStringConvertible {
    /// Another daemon holds it (as opposed to the file being unusable).
    let held: Bool
    let description: String
    init(held: Bool, _ description: String) {
        self.held = held
        self.description = description
    }
}
