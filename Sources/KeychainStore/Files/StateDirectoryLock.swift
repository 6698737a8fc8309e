public import Foundation
public import PathSafety
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// The state directory held by one process: an exclusive `flock` on `deviced.lock` in it, held by the
/// daemon for its life and by a key rotation while it runs (the kernel releases it when the process ends,
/// however it ends). The file holds the holder's pid so the next one can name it.
public final class StateDirectoryLock: Sendable {
    /// The lock file in the state directory.
    public static let fileName = "deviced.lock"
    private let descriptor: Int32

    /// Takes the lock of `directory`.
    /// - Throws: `StateDirectoryLockError` naming the process that holds it, or why the file cannot be used.
    public convenience init(directory: URL) throws(StateDirectoryLockError) {
        let held: SafeDirectory
        do {
            held = try SafeDirectory.open(
                directory.path,
                purpose: "the state directory",
                alternative: "choose another with --state-dir"
            )
        } catch {
            throw StateDirectoryLockError(holder: nil, error.message)
        }
        try self.init(held: held)
    }

    /// Takes the lock of the state directory `held` (reached and checked already).
    /// - Throws: `StateDirectoryLockError` naming the process that holds it, or why the file cannot be used.
    public init(held: SafeDirectory) throws(StateDirectoryLockError) {
        let path = held.path + "/" + Self.fileName
        let descriptor: Int32
        do throws(Errno) {
            descriptor = try held.openFile(
                Self.fileName,
                .readWrite,
                options: [.create],
                permissions: [.ownerReadWrite]
            ).rawValue
        } catch {
            throw StateDirectoryLockError(holder: nil, "cannot open the lock file \(path): \(error)")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            var buffer = [UInt8](repeating: 0, count: 32)
            let count = pread(descriptor, &buffer, buffer.count, 0)
            _ = close(descriptor)
            guard code == EWOULDBLOCK else {
                throw StateDirectoryLockError(holder: nil, "cannot lock \(path): \(String(cString: strerror(code)))")
            }
            let holder =
                count > 0
                ? String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                : "?"
            throw StateDirectoryLockError(
                holder: holder,
                "the state directory \(held.path) is held by pid \(holder) (a deviced serving it, or a key rotation)"
            )
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pwrite(descriptor, pid, pid.count, 0)
        self.descriptor = descriptor
    }

    deinit { _ = close(descriptor) }
}

/// The state directory's lock could not be taken.
public struct StateDirectoryLockError: Error, CustomStringConvertible {
    /// The pid another process holds it with (`?` when the file does not say); nil when the file itself
    /// cannot be used.
    public let holder: String?
    public let description: String
    /// Whether another process holds it (as opposed to the file being unusable).
    public var held: Bool { holder != nil }

    init(holder: String?, _ description: String) {
        self.holder = holder
        self.description = description
    }
}
