import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// systemd socket activation (`sd_listen_fds(3)`): the listening socket systemd passed as fd 3, when
/// `$LISTEN_PID` is this process and `$LISTEN_FDS` is at least 1.
enum SocketActivation {
    /// The first passed descriptor (3), or `nil` on a plain start. The variables are removed so that
    /// child processes do not take the socket for theirs.
    static func inheritedListener(environment: [String: String] = ProcessInfo.processInfo.environment) -> Int32? {
        guard let pid = environment["LISTEN_PID"].flatMap(Int32.init), pid == getpid(),
            let count = environment["LISTEN_FDS"].flatMap(Int.init), count >= 1
        else { return nil }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        let descriptor: Int32 = 3
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        return descriptor
    }
}
