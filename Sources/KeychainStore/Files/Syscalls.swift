import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// The few file-system calls swift-system does not wrap, one wrapper each, in swift-system's style:
/// the C call runs, `errno` is captured at once (before anything else can overwrite it), `EINTR` is
/// retried, and a failure is thrown as `Errno`.
enum Syscalls {
    /// `fsync(2)`: flushes `descriptor`'s data and metadata to the device.
    static func fsync(_ descriptor: FileDescriptor) throws(Errno) {
        try retrying { Glibc.fsync(descriptor.rawValue) }
    }

    /// The effective user of this process (`geteuid(2)`, which cannot fail).
    static var effectiveUserID: UInt32 { geteuid() }

    /// The login name of `uid` from the system's user database (`getpwuid_r(3)`), or `nil` if it has none.
    static func userName(_ uid: UInt32) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name
        else {
            return nil
        }
        return String(cString: name)
    }

    /// Runs `call` until it returns something other than -1 with `EINTR`; -1 with any other `errno` throws.
    private static func retrying(_ call: () -> Int32) throws(Errno) {
        while call() == -1 {
            let error = Errno(rawValue: errno)
            guard error == .interrupted else { throw error }
        }
    }
}
