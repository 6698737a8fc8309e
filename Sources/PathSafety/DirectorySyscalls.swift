public import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// The `*at` calls swift-system does not wrap, one wrapper each, in swift-system's style: the C call runs,
/// `errno` is captured at once, `EINTR` is retried, and a failure is thrown as `Errno`.
enum DirectorySyscalls {
    /// `O_PATH` (Linux; Glibc's module leaves it out, it needs `_GNU_SOURCE`): a descriptor that names a file
    /// (a directory to resolve names in, a symbolic link to read) without opening it for I/O.
    static let O_PATH: Int32 = 0o10_000_000

    /// `openat(2)`: `name` relative to `directory`.
    static func open(
        _ name: String,
        in directory: FileDescriptor,
        _ flags: Int32,
        permissions: mode_t = 0
    ) throws(Errno) -> FileDescriptor {
        FileDescriptor(rawValue: try retrying { Glibc.openat(directory.rawValue, name, flags, permissions) })
    }

    /// `mkdirat(2)`.
    static func makeDirectory(_ name: String, in directory: FileDescriptor, permissions: mode_t) throws(Errno) {
        _ = try retrying { Glibc.mkdirat(directory.rawValue, name, permissions) }
    }

    /// `fchmodat(2)` (follows nothing it is not given: callers name a file in a directory only they can write).
    static func setPermissions(_ name: String, in directory: FileDescriptor, _ permissions: mode_t) throws(Errno) {
        _ = try retrying { Glibc.fchmodat(directory.rawValue, name, permissions, 0) }
    }

    /// `renameat(2)`.
    static func rename(
        _ name: String,
        in source: FileDescriptor,
        to newName: String,
        in destination: FileDescriptor
    ) throws(Errno) {
        _ = try retrying { Glibc.renameat(source.rawValue, name, destination.rawValue, newName) }
    }

    /// `linkat(2)` without `AT_SYMLINK_FOLLOW`: a second name `newName` for `name`; fails with `fileExists`
    /// when `newName` is taken (nothing is replaced).
    static func link(
        _ name: String,
        in source: FileDescriptor,
        to newName: String,
        in destination: FileDescriptor
    ) throws(Errno) {
        _ = try retrying { Glibc.linkat(source.rawValue, name, destination.rawValue, newName, 0) }
    }

    /// `unlinkat(2)`; `directory: true` removes an empty directory (`AT_REMOVEDIR`).
    static func unlink(_ name: String, in directory: FileDescriptor, isDirectory: Bool = false) throws(Errno) {
        _ = try retrying { Glibc.unlinkat(directory.rawValue, name, isDirectory ? AT_REMOVEDIR : 0) }
    }

    /// `readlinkat(2)` on a descriptor of the link itself (`O_PATH|O_NOFOLLOW`, empty name).
    static func linkTarget(of link: FileDescriptor) throws(Errno) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = try retrying { Int32(Glibc.readlinkat(link.rawValue, "", &buffer, buffer.count - 1)) }
        guard Int(count) < buffer.count - 1 else { throw Errno.fileNameTooLong }
        return String(decoding: buffer[..<Int(count)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func retrying(_ call: () -> Int32) throws(Errno) -> Int32 {
        try retryingOnInterrupt(call)
    }
}

/// Runs the system call `call` until it returns something other than -1 with `EINTR`; -1 with any other
/// `errno` (captured at once) throws it as `Errno`. The one wrapper of the project's thin syscall shims.
public func retryingOnInterrupt(_ call: () -> Int32) throws(Errno) -> Int32 {
    while true {
        let result = call()
        if result != -1 { return result }
        let error = Errno(rawValue: errno)
        guard error == .interrupted else { throw error }
    }
}
