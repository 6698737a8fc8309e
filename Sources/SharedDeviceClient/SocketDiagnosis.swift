#if canImport(Glibc)
import Glibc
#endif

/// Why a connection to the broker's socket could not be made, in words an app's user can act on: what is
/// (or is not) at the path, as this process sees it, and what to do. It looks at the path only after
/// `connect` failed, and only to explain the failure (nothing is created or changed).
struct SocketDiagnosis {
    /// The socket the client tried.
    let socketPath: String
    /// The uid the check runs as (this process's effective uid, the one the kernel checked).
    var uid: uid_t = geteuid()

    /// The longest path a Unix socket address holds (`sun_path` less its NUL).
    static let maximumPathBytes = 107

    /// How to start the broker at this path.
    var startAdvice: String {
        let system = socketPath == BrokerEndpoint.systemSocketPath
        return system
            ? "start the broker: systemctl start deviced.socket (or deviced.service)"
            : """
            start the broker that serves it: deviced --socket \(socketPath) (with the --state-dir of its store); or, \
            for the system's broker, systemctl start deviced.socket and point the app at \(BrokerEndpoint.systemSocketPath)
            """
    }

    /// The message for `connect`'s `errno` (0 when the failure was not a system call's).
    func explain(errno code: Int32, underlying: String) -> String {
        if socketPath.utf8.count > Self.maximumPathBytes {
            return """
                cannot reach the broker at \(socketPath): the path is \(socketPath.utf8.count) bytes, longer than the \
                \(Self.maximumPathBytes) a Unix socket's path may have; give the broker (deviced --socket) and the app a shorter one
                """
        }
        switch code {
        case ENOENT:
            if let missing = firstMissingDirectory() {
                return """
                    no broker at \(socketPath): the directory \(missing) does not exist, so no broker runs there (a broker \
                    makes its socket's directory when it starts); \(startAdvice)
                    """
            }
            return "no broker at \(socketPath): nothing is there, so no broker runs there; \(startAdvice)"
        case ECONNREFUSED:
            return """
                no broker at \(socketPath): a socket is there but nothing accepts connections on it (left by a broker \
                that stopped without removing it; the next broker replaces it); \(startAdvice)
                """
        case EAGAIN:
            return
                "the broker at \(socketPath) is not accepting connections now (its queue of new connections is full); try again"
        case ENOTDIR:
            let culprit = firstComponentThatIsNotADirectory().map { ": \($0) is not a directory" } ?? ""
            return
                "no broker at \(socketPath): a component of the path is not a directory\(culprit); check the socket's path"
        case EACCES, EPERM:
            return permissionMessage()
        default:
            return "cannot reach the broker at \(socketPath): \(underlying); \(startAdvice)"
        }
    }

    /// Permission denied: the first directory on the way this uid may not search, else the socket it may
    /// not write to, else a refusal neither explains (a security module or a sandbox).
    private func permissionMessage() -> String {
        for directory in ancestors() where faccessat(AT_FDCWD, directory, X_OK, AT_EACCESS) != 0 && errno == EACCES {
            let status = Self.status(of: directory)
            return """
                cannot reach the broker at \(socketPath): uid \(uid) may not search the directory \(directory)\(status) on the \
                way to it (connecting needs search permission on every directory of the path); make it searchable by \
                the app's user (chmod o+x \(directory), or chmod g+x \(directory) for a group the app's user is in), \
                or give the broker a socket in a directory every app's user can search
                """
        }
        if faccessat(AT_FDCWD, socketPath, W_OK, AT_EACCESS) != 0 && errno == EACCES {
            let status = Self.status(of: socketPath)
            return """
                cannot reach the broker at \(socketPath): uid \(uid) may not write to the socket\(status) (connecting needs \
                write permission on it); deviced makes its socket connectable by every user (0666), so something changed \
                it: restart the broker, or chmod 0666 \(socketPath)
                """
        }
        return """
            cannot reach the broker at \(socketPath): the kernel refused uid \(uid) the connection (permission denied) \
            although every directory on the way is searchable and the socket writable: a security module (AppArmor, \
            SELinux) or a sandbox refuses it; allow the app the socket (Flatpak: --filesystem=\(socketDirectory))
            """
    }

    /// The directories on the way to the socket, outermost first (`/`, `/run`, `/run/devicectl`; a
    /// relative path's from `.`).
    func ancestors() -> [String] {
        let absolute = socketPath.hasPrefix("/")
        var result = [absolute ? "/" : "."]
        var walked = absolute ? "" : "."
        for part in socketPath.split(separator: "/", omittingEmptySubsequences: true).dropLast() {
            walked += "/" + part
            result.append(walked)
        }
        return result
    }

    /// The socket's directory as the path names it.
    private var socketDirectory: String { ancestors().last ?? "." }

    /// The first directory of the path that does not exist (nil when they all do).
    private func firstMissingDirectory() -> String? {
        ancestors().first { directory in
            var info = stat()
            return lstat(directory, &info) != 0 && errno == ENOENT
        }
    }

    /// The first component of the path that exists but is not a directory.
    private func firstComponentThatIsNotADirectory() -> String? {
        ancestors().first { directory in
            var info = stat()
            return stat(directory, &info) == 0 && (info.st_mode & 0o170000) != 0o040000
        }
    }

    /// ` (mode 700, owner uid 0, group 0)`, or nothing when it cannot be read.
    private static func status(of path: String) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else { return "" }
        return " (mode \(String(info.st_mode & 0o7777, radix: 8)), owner uid \(info.st_uid), group \(info.st_gid))"
    }
}
