import Foundation
import PathSafety
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// The master key file: exactly 32 raw bytes, mode 0600, owned by the store's user (or root).
/// Created atomically (written to a temporary file, then hard-linked into place) so that several
/// processes creating the same store at once all end up with the one key that won.
///
/// Every key file is reached as a name in a held directory (`KeyFile.Location`): the state directory the
/// store checked and holds (`master.key`, a rotation's `master.key.next`), or, for a key file named
/// outside it (`--key-file`, systemd's `$CREDENTIALS_DIRECTORY`), its parent directory reached the same way
/// (`SafeDirectory.open`: every component owned by root or this user, none writable by others without the
/// sticky bit). The file itself is opened with `O_NOFOLLOW` and must be a regular file owned by this user
/// or root with no permission for group or others: a symbolic link or a file someone else controls is
/// refused, never read through nor written through.
enum KeyFile {
    /// A key file: a name in a held directory.
    struct Location: Sendable {
        /// The directory, held.
        let directory: SafeDirectory
        /// The file's name in it (no `/`).
        let name: String

        /// The path, for messages only (never used to reach the file).
        var path: FilePath { FilePath(directory.path == "/" ? "/" + name : directory.path + "/" + name) }

        /// The same directory's file `name`.
        func sibling(_ name: String) -> Location { Location(directory: directory, name: name) }

        /// What is at the name (the link itself for a symbolic link); nil when nothing is.
        var exists: Bool { (try? directory.status(of: name)) != nil }

        /// The key file at `path`, outside the state directory: its parent directory is reached the way the
        /// state directory is (`SafeDirectory.open`, nothing created).
        /// - Throws: `insecureKeyFile` naming the directory another user could swap and the fix; `ioError`.
        static func explicit(_ path: FilePath) throws(KeychainError) -> Location {
            guard let name = path.lastComponent?.string, name != "..", name != "." else {
                throw KeychainError(.ioError, "key file \(path) names no file; give the path of the key file itself")
            }
            var parent = path.removingLastComponent()
            if parent.isEmpty { parent = "." }
            do {
                let directory = try SafeDirectory.open(
                    parent.string,
                    purpose: "the key file's directory",
                    alternative: "keep the key file in a directory only root (or you) can write"
                )
                return Location(directory: directory, name: name)
            } catch {
                switch error.reason {
                case .unsafe, .notDirectory:
                    throw KeychainError(.insecureKeyFile, "key file \(path) cannot be used safely: \(error.message)")
                case .system(let code) where AccessDiagnosis.isPermissionFailure(code):
                    throw KeychainError(
                        .ioError,
                        AccessDiagnosis.permissionDenied("read the key file", path: path, error: code)
                    )
                case .system:
                    throw KeychainError(.ioError, error.message)
                }
            }
        }
    }

    /// Loads the key, or `nil` when there is no such file.
    static func load(_ location: Location) throws(KeychainError) -> SecureKey? {
        let descriptor: FileDescriptor
        do throws(Errno) {
            descriptor = try location.directory.openFile(location.name, .readOnly, options: [.nonBlocking])
        } catch {
            if error == .noSuchFileOrDirectory { return nil }
            throw failure("read the key file", location, error)
        }
        defer { try? descriptor.close() }  // read-only: nothing to lose if close fails
        return try read(descriptor, location)
    }

    private static func read(_ descriptor: FileDescriptor, _ location: Location) throws(KeychainError) -> SecureKey {
        let path = location.path
        let info: Stat
        do {
            info = try descriptor.stat()
        } catch {
            throw KeychainError(.ioError, "cannot inspect key file \(path): \(error)")
        }
        try checkOwnerAndMode(info, path)
        guard info.size == SecureKey.byteCount else {
            throw KeychainError(
                .wrongKey,
                "key file \(path) holds \(info.size) bytes, not a \(SecureKey.byteCount)-byte key; restore the right key file"
            )
        }
        return try SecureKey { buffer throws(KeychainError) in
            var filled = 0
            while filled < buffer.count {
                let got: Int
                do {
                    got = try descriptor.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
                } catch {
                    throw KeychainError(.ioError, "cannot read key file \(path): \(error)")
                }
                guard got > 0 else {
                    throw KeychainError(
                        .ioError,
                        "key file \(path) ended after \(filled) bytes; restore the right key file"
                    )
                }
                filled += got
            }
        }
    }

    /// A key file is a regular file of this user (or root) that nobody else may read or write.
    private static func checkOwnerAndMode(_ info: Stat, _ path: FilePath) throws(KeychainError) {
        guard info.type == .regular else {
            throw KeychainError(
                .insecureKeyFile,
                "key file \(path) is not a regular file; restore the key file itself there"
            )
        }
        let owner = info.userID.rawValue
        let me = Syscalls.effectiveUserID
        guard owner == me || owner == 0 else {
            throw KeychainError(
                .insecureKeyFile,
                """
                key file \(path) is owned by uid \(owner), not by uid \(me) (this process) or root: its owner could replace \
                the key; run: chown \(me) \(path)
                """
            )
        }
        let mode: UInt32 = UInt32(info.permissions.rawValue)
        guard mode & 0o077 == 0 else {
            let octal = String(mode & 0o777, radix: 8)
            throw KeychainError(
                .insecureKeyFile,
                "key file \(path) is readable by other users (mode \(octal)); run: chmod 600 \(path)"
            )
        }
    }

    /// Loads the key, creating a fresh random one first if the file does not exist.
    static func loadOrCreate(_ location: Location) throws(KeychainError) -> SecureKey {
        if let key = try load(location) { return key }
        let key = try SecureKey.random()
        let temporary = location.sibling("." + location.name + ".\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp")
        try write(key, to: temporary)
        defer { try? location.directory.remove(temporary.name) }
        do throws(Errno) {
            try location.directory.link(temporary.name, to: location.name)
        } catch {
            guard error == .fileExists else { throw failure("install the key file", location, error) }
            // Another process created it first: its key wins.
            guard let winner = try load(location) else {
                throw KeychainError(.ioError, "key file \(location.path) vanished while it was being created; retry")
            }
            return winner
        }
        location.directory.sync()
        return key
    }

    /// Writes `key` to a new file at `location` (mode 0600, flushed to the device); fails when it exists.
    static func create(_ key: SecureKey, at location: Location) throws(KeychainError) {
        try write(key, to: location)
    }

    /// Writes `key` to a new file at `location` (mode 0600, `O_EXCL`: never through a link) and flushes it
    /// to the device; the descriptor is closed and a failed close is an error (the bytes may not have
    /// reached the file).
    private static func write(_ key: SecureKey, to location: Location) throws(KeychainError) {
        let descriptor: FileDescriptor
        do throws(Errno) {
            descriptor = try location.directory.openFile(
                location.name,
                .writeOnly,
                options: [.create, .exclusiveCreate],
                permissions: [.ownerReadWrite]
            )
        } catch {
            throw failure("create the key file", location, error)
        }
        var outcome: Errno?
        do {
            _ = try key.withUnsafeBytes { bytes in try descriptor.writeAll(bytes) }
            try Syscalls.fsync(descriptor)
        } catch {
            outcome = error as? Errno ?? .ioError
        }
        do {
            try descriptor.close()
        } catch {
            outcome = outcome ?? error as? Errno ?? .ioError
        }
        if let outcome {
            try? location.directory.remove(location.name)
            throw failure("write the key file", location, outcome)
        }
    }

    /// The error for a failed system call on the key file: who owns what when permission is denied, and a
    /// symbolic link (`O_NOFOLLOW`'s `ELOOP`) said as such.
    private static func failure(_ action: String, _ location: Location, _ error: Errno) -> KeychainError {
        if error == .tooManySymbolicLinkLevels {
            return KeychainError(
                .insecureKeyFile,
                """
                cannot \(action) \(location.path): it is a symbolic link, and the key is never read or written through one; \
                nothing was changed: remove the link and restore the key file itself, or restore the state directory from backup
                """
            )
        }
        if AccessDiagnosis.isPermissionFailure(error) {
            return KeychainError(.ioError, AccessDiagnosis.permissionDenied(action, path: location.path, error: error))
        }
        return KeychainError(
            .ioError,
            "cannot \(action) \(location.path): \(error); check the state directory's owner, permissions and free space"
        )
    }

    /// Overwrites the key file with zeros, flushes it and unlinks it (after the key was sealed): no
    /// plaintext key stays in the state directory. A missing file is no error; a symbolic link is not
    /// followed (refused, the link left).
    static func destroy(_ location: Location) throws(KeychainError) {
        let descriptor: FileDescriptor
        do throws(Errno) {
            descriptor = try location.directory.openFile(location.name, .writeOnly, options: [.nonBlocking])
        } catch {
            if error == .noSuchFileOrDirectory { return }
            throw failure("open the key file to wipe it", location, error)
        }
        do {
            _ = try descriptor.closeAfter {
                guard try descriptor.stat().type == .regular else { throw Errno.invalidArgument }
                _ = try descriptor.writeAll(repeatElement(UInt8(0), count: SecureKey.byteCount))
                try Syscalls.fsync(descriptor)
            }
            try location.directory.remove(location.name)
        } catch {
            throw failure("wipe the key file", location, error as? Errno ?? .ioError)
        }
        location.directory.sync()
    }
}
