#if canImport(Glibc)
import Glibc
#endif

/// A pidfd this process owns: it names one process whatever its pid becomes later, and is closed when the
/// last reference goes (a connection's peer, kept for the connection's life; a bus caller, kept for its
/// call). Two handles are equal only when they are the same handle.
public final class ProcessHandle: Sendable, Hashable {
    /// The pidfd, open until the handle goes.
    public let pidfd: Int32

    /// Takes ownership of `pidfd` (a pidfd from `pidfd_open`, `SO_PEERPIDFD` or `pidfd_getfd`).
    public init(adopting pidfd: Int32) {
        self.pidfd = pidfd
    }

    deinit {
        close(pidfd)
    }

    /// Whether the process is still running.
    public var isAlive: Bool { SandboxReader.isAlive(pidfd: pidfd) }

    public static func == (lhs: ProcessHandle, rhs: ProcessHandle) -> Bool { lhs === rhs }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }
}
