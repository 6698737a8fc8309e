#if canImport(Glibc)
import Glibc
#endif

/// `SO_PEERPIDFD` (Linux 6.5): a pidfd of the process that connected a Unix socket, so that what is read
/// about the peer afterwards can be pinned to that very process.
public enum PeerPIDFD {
    /// The socket option's number (absent from older C headers).
    public static let socketOption: Int32 = 77

    /// Whether this kernel gives a socket peer's pidfd, probed once on a socket pair of the process itself.
    public static let kernelSupports: Bool = {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            return false
        }
        defer {
            close(pair[0])
            close(pair[1])
        }
        var descriptor: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(pair[0], SOL_SOCKET, socketOption, &descriptor, &length) == 0 else { return false }
        close(descriptor)
        return true
    }()

    /// Why sandboxed apps cannot be told apart on this kernel, or nil when they can.
    public static var unsupportedReason: String? {
        guard !kernelSupports else { return nil }
        var names = utsname()
        uname(&names)
        let release = withUnsafeBytes(of: &names.release) {
            String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        return
            "this kernel (\(release)) gives no pidfd of a socket's peer (SO_PEERPIDFD, Linux 6.5 or later), so a sandboxed app could not be told from a recycled process id"
    }
}
