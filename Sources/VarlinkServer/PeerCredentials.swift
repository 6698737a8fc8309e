import Foundation
import NIOCore
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// Who is at the other end of a Unix socket, as the kernel says: the process, user and group that
/// called `connect()` (SO_PEERCRED). A server decides what a caller may do from these, never from
/// anything the caller sends.
public struct PeerCredentials: Sendable, Hashable, CustomStringConvertible {
    /// The peer's process id at `connect()`.
    public var pid: Int32
    /// The peer's effective user id at `connect()`: the security boundary.
    public var uid: UInt32
    /// The peer's effective group id at `connect()`.
    public var gid: UInt32
    /// The peer's executable (`/proc/PID/exe` through a pidfd where the kernel offers SO_PEERPIDFD, so the
    /// pid cannot have been reused); `nil` when unknown. For the record only: never required.
    public var executable: String?

    /// Credentials as given.
    public init(pid: Int32, uid: UInt32, gid: UInt32, executable: String? = nil) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.executable = executable
    }

    public var description: String { "pid \(pid) uid \(uid) gid \(gid)" }
}

/// SO_PEERPIDFD (Linux ≥ 6.5), absent from older headers.
private let peerPIDFDOption: Int32 = 77

extension PeerCredentials {
    /// Reads the credentials of an accepted Unix-domain channel.
    static func read(from channel: any Channel) -> EventLoopFuture<PeerCredentials> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(ChannelError.operationUnsupported)
        }
        // VarlinkPeer has `struct ucred`'s layout (pid, uid, gid).
        let credentials: EventLoopFuture<VarlinkPeer> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET),
            name: SocketOptionName(SO_PEERCRED)
        )
        return credentials.flatMap { ucred in
            let pidfd: EventLoopFuture<Int32> = provider.unsafeGetSocketOption(
                level: SocketOptionLevel(SOL_SOCKET),
                name: SocketOptionName(peerPIDFDOption)
            )
            return pidfd.map { descriptor -> PeerCredentials in
                defer { _ = close(descriptor) }
                return PeerCredentials(
                    pid: ucred.pid,
                    uid: ucred.uid,
                    gid: ucred.gid,
                    executable: Self.executable(pidfd: descriptor, pid: ucred.pid)
                )
            }.recover { _ in
                PeerCredentials(pid: ucred.pid, uid: ucred.uid, gid: ucred.gid)
            }
        }
    }

    /// The executable of the process behind `pidfd`: `/proc/PID/exe`, kept only if the pidfd still names a
    /// live process afterwards (so a pid reused in between is not misreported).
    private static func executable(pidfd: Int32, pid: Int32) -> String? {
        guard pid > 0, let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe") else {
            return nil
        }
        // A pidfd polls readable once its process has exited.
        var entry = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        let stillAlive = poll(&entry, 1, 0) == 0
        return stillAlive ? path : nil
    }
}
