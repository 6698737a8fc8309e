import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// The master key file: exactly 32 raw bytes, mode 0600, owned by the store's user.
/// Created atomically (written to a temporary file, then hard-linked into place) so that several
/// processes creating the same store at once all end up with the one key that won.
enum KeyFile {
    /// Loads the key, or `nil` when the file does not exist.
    static func load(_ path: FilePath) throws(KeychainError) -> SecureKey? {
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .noFollow])
        } catch {
            let error = error as? Errno ?? .ioError
            if error == .noSuchFileOrDirectory { return nil }
            throw failure("read the key file", path, error)
        }
        defer { try? descriptor.close() }  // read-only: nothing to lose if close fails
        return try read(descriptor, path: path)
    }

    private static func read(_ descriptor: FileDescriptor, path: FilePath) throws(KeychainError) -> SecureKey {
        let info: Stat
        do {
            info = try descriptor.stat()
        } catch {
            throw KeychainError(.ioError, "cannot inspect key file \(path): \(error)")
        }
        let mode: UInt32 = UInt32(info.permissions.rawValue)
        guard mode & 0o077 == 0 else {
            let octal = String(mode & 0o777, radix: 8)
            throw KeychainError(.insecureKeyFile, "key file \(path) is readable by other users (mode \(octal)); run: chmod 600 \(path)")
        }
        guard info.size == SecureKey.byteCount else {
            throw KeychainError(.wrongKey,
                "key file \(path) holds \(info.size) bytes, not a \(SecureKey.byteCount)-byte key; restore the right key file")
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
                guard got > 0 else { throw KeychainError(.ioError, "key file \(path) ended after \(filled) bytes; restore the right key file") }
                filled += got
            }
        }
    }

    /// Loads the key, creating a fresh random one first if the file does not exist.
    static func loadOrCreate(_ path: FilePath) throws(KeychainError) -> SecureKey {
        if let key = try load(path) { return key }
        let key = try SecureKey.random()
        let directory = path.removingLastComponent()
        let baseName: String = path.lastComponent?.string ?? "key"
        let suffix: UInt32 = UInt32.random(in: 0...UInt32.max)
        let temporary: FilePath = directory.appending("." + baseName + ".\(getpid()).\(suffix).tmp")
        try write(key, to: temporary)
        defer { try? Syscalls.unlink(temporary) }
        do throws(Errno) {
            try Syscalls.link(temporary, path)
        } catch {
            guard error == .fileExists else { throw failure("install the key file", path, error) }
            // Another process created it first: its key wins.
            guard let winner = try load(path) else {
                throw KeychainError(.ioError, "key file \(path) vanished while it was being created; retry")
            }
            return winner
        }
        syncDirectory(directory)
        return key
    }

    /// Writes `key` to a new file at `path` (mode 0600, flushed to the device); fails when it exists.
    static func create(_ key: SecureKey, at path: FilePath) throws(KeychainError) {
        try write(key, to: path)
    }

    /// Writes `key` to a new file at `path` (mode 0600) and flushes it to the device; the descriptor is
    /// closed and a failed close is an error (the bytes may not have reached the file).
    private static func write(_ key: SecureKey, to path: FilePath) throws(KeychainError) {
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(path, .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec, .noFollow],
                                                 permissions: [.ownerReadWrite])
        } catch {
            throw failure("create the key file", path, error as? Errno ?? .ioError)
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
            try? Syscalls.unlink(path)
            throw failure("write the key file", path, outcome)
        }
    }

    /// The error for a failed system call on the key file: who owns what when permission is denied.
    private static func failure(_ action: String, _ path: FilePath, _ error: Errno) -> KeychainError {
        if AccessDiagnosis.isPermissionFailure(error) {
            return KeychainError(.ioError, AccessDiagnosis.permissionDenied(action, path: path, error: error))
        }
        return KeychainError(.ioError, "cannot \(action) \(path): \(error); check the state directory's owner, permissions and free space")
    }

    /// Overwrites the key file with zeros, flushes it and unlinks it (after the key was sealed): no
    /// plaintext key stays in the state directory. A missing file is no error.
    static func destroy(_ path: FilePath) throws(KeychainError) {
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(path, .writeOnly, options: [.closeOnExec, .noFollow])
        } catch {
            if (error as? Errno) == .noSuchFileOrDirectory { return }
            throw failure("open the key file to wipe it", path, error as? Errno ?? .ioError)
        }
        do {
            _ = try descriptor.closeAfter {
                _ = try descriptor.writeAll(repeatElement(UInt8(0), count: SecureKey.byteCount))
                try Syscalls.fsync(descriptor)
            }
            try Syscalls.unlink(path)
        } catch {
            throw failure("wipe the key file", path, error as? Errno ?? .ioError)
        }
        syncDirectory(path.removingLastComponent())
    }

    /// Makes the new name durable. Best effort: the key is already written and synced.
    static func syncDirectory(_ directory: FilePath) {
        guard let descriptor = try? FileDescriptor.open(directory, .readOnly, options: [.directory, .closeOnExec]) else { return }
        _ = try? descriptor.closeAfter { try Syscalls.fsync(descriptor) }
    }
}
