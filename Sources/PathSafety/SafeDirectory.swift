public import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A directory reached safely (see `open(_:purpose:alternative:creatingWith:)`) and held by a descriptor
/// (`O_PATH|O_DIRECTORY`), so that every later call names its files relative to this very directory: a
/// path someone swaps afterwards changes nothing. Files are opened with `O_NOFOLLOW`: a symbolic link
/// planted in the directory is refused, never followed.
public final class SafeDirectory: Sendable {
    /// The absolute path the directory was reached by (for messages; never used to reach it again).
    public let path: String
    /// The descriptor of the directory (`O_PATH`: usable as the directory of `*at` calls only).
    public let descriptor: FileDescriptor
    /// The directory's owner.
    public let ownerID: UInt32
    /// The directory's permission bits (sticky, setgid and setuid bits included).
    public let permissions: UInt32

    init(path: String, descriptor: FileDescriptor, ownerID: UInt32, permissions: UInt32) {
        self.path = path
        self.descriptor = descriptor
        self.ownerID = ownerID
        self.permissions = permissions
    }

    deinit { try? descriptor.close() }

    /// A path that reaches this directory through its descriptor (`/proc/self/fd/N`), for the calls that
    /// take a path only (`bind(2)` of a Unix socket): the kernel resolves it to the directory held, not to
    /// whatever is at `path` now. Valid while this object lives.
    public var descriptorPath: String { "/proc/self/fd/\(descriptor.rawValue)" }

    /// Whether `descriptorPath` reaches this very directory: `/proc` is mounted and is this process's (the
    /// path's device and inode are the descriptor's). Calls that take a path only must check it first.
    public var descriptorPathReachesItself: Bool {
        guard let held = try? descriptor.stat(), let reached = try? FilePath(descriptorPath).stat() else {
            return false
        }
        return held.deviceID == reached.deviceID && held.inode == reached.inode
    }

    /// Opens the file `name` in this directory (`openat`), never following a symbolic link at `name`
    /// (`O_NOFOLLOW`, `ELOOP` then) and closed on exec.
    public func openFile(
        _ name: String,
        _ access: FileDescriptor.AccessMode,
        options: FileDescriptor.OpenOptions = [],
        permissions: FilePermissions = [.ownerReadWrite]
    ) throws(Errno) -> FileDescriptor {
        let flags = access.rawValue | options.rawValue | O_NOFOLLOW | O_CLOEXEC
        return try DirectorySyscalls.open(name, in: descriptor, flags, permissions: mode_t(permissions.rawValue))
    }

    /// What is at `name` in this directory, the link itself for a symbolic link (`fstatat`, `AT_SYMLINK_NOFOLLOW`).
    public func status(of name: String) throws(Errno) -> Stat {
        try Stat(FilePath(name), relativeTo: descriptor, flags: .symlinkNoFollow)
    }

    /// Sets the permission bits of `name` in this directory (`fchmodat`). Only for a name nobody else can
    /// replace: a file in a directory only this process's user can write.
    public func setPermissions(of name: String, to permissions: FilePermissions) throws(Errno) {
        try DirectorySyscalls.setPermissions(name, in: descriptor, mode_t(permissions.rawValue))
    }

    /// Renames `name` in this directory to `newName` in `destination` (`renameat`; this directory by default).
    public func rename(_ name: String, to newName: String, in destination: SafeDirectory? = nil) throws(Errno) {
        try DirectorySyscalls.rename(name, in: descriptor, to: newName, in: (destination ?? self).descriptor)
    }

    /// Gives the file `name` in this directory a second name `newName` there (`linkat`, a symbolic link at
    /// `name` not followed): fails with `fileExists` when `newName` is taken, which is never replaced.
    public func link(_ name: String, to newName: String) throws(Errno) {
        try DirectorySyscalls.link(name, in: descriptor, to: newName, in: descriptor)
    }

    /// Removes `name` from this directory (`unlinkat`); `isDirectory` removes an empty directory.
    public func remove(_ name: String, isDirectory: Bool = false) throws(Errno) {
        try DirectorySyscalls.unlink(name, in: descriptor, isDirectory: isDirectory)
    }

    /// Creates the directory `name` in this directory (`mkdirat`) with `permissions` (less the umask).
    public func makeDirectory(_ name: String, permissions: FilePermissions) throws(Errno) {
        try DirectorySyscalls.makeDirectory(name, in: descriptor, permissions: mode_t(permissions.rawValue))
    }

    /// Holds the directory `name` in this directory without following a symbolic link there; the caller
    /// checks its owner and mode (`ownerID`, `permissions`) before trusting it.
    public func subdirectory(_ name: String) throws(Errno) -> SafeDirectory {
        let child = try DirectorySyscalls.open(
            name,
            in: descriptor,
            DirectorySyscalls.O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
        )
        do throws(Errno) {
            let info = try child.stat()
            return SafeDirectory(
                path: path == "/" ? "/" + name : path + "/" + name,
                descriptor: child,
                ownerID: info.userID.rawValue,
                permissions: UInt32(info.mode.rawValue) & 0o7777
            )
        } catch {
            try? child.close()
            throw error
        }
    }

    /// Flushes the directory's entries to the device (new or renamed names made durable). Best effort.
    public func sync() {
        guard let readable = try? DirectorySyscalls.open(".", in: descriptor, O_RDONLY | O_DIRECTORY | O_CLOEXEC) else {
            return
        }
        _ = fsync(readable.rawValue)
        try? readable.close()
    }
}
