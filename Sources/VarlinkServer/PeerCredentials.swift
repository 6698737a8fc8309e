import Foundation
import NIOCore
public import ProcessSandbox
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
    /// Which app of its uid the peer is: the sandbox it runs in, read from its root at accept and pinned
    /// to the process by its pidfd (`SandboxReader`), or `unpinned` where the kernel gives no pidfd.
    public var sandbox: PeerSandbox
    /// The peer's pidfd from accept (`SO_PEERPIDFD`), kept open while the connection (and anything holding
    /// these credentials) lives, so that a service can act on that very process later (take a descriptor it
    /// hands over, `HandedProcess`); nil where the kernel gives none or sandboxes are not identified.
    public var process: ProcessHandle?

    /// Credentials as given.
    public init(
        pid: Int32,
        uid: UInt32,
        gid: UInt32,
        executable: String? = nil,
        sandbox: PeerSandbox = .host,
        process: ProcessHandle? = nil
    ) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.executable = executable
        self.sandbox = sandbox
        self.process = process
    }

    public var description: String { "pid \(pid) uid \(uid) gid \(gid) \(sandbox)" }
}

extension PeerCredentials {
    /// Reads the credentials of an accepted Unix-domain channel and, when `identifySandboxes`, the sandbox
    /// of the peer (any failure to pin or read it leaves the peer `unidentified`, never `host`) and its pidfd,
    /// kept in `process`; without, the peer is `unpinned` (known by its uid only) and its pidfd is closed.
    static func read(from channel: any Channel, identifySandboxes: Bool) -> EventLoopFuture<PeerCredentials> {
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
                name: SocketOptionName(PeerPIDFD.socketOption)
            )
            return pidfd.map { descriptor -> PeerCredentials in
                // Closed when the last holder of the credentials goes (the connection's end).
                let process = ProcessHandle(adopting: descriptor)
                return PeerCredentials(
                    pid: ucred.pid,
                    uid: ucred.uid,
                    gid: ucred.gid,
                    executable: Self.executable(pidfd: descriptor, pid: ucred.pid),
                    sandbox: identifySandboxes
                        ? SandboxReader.sandbox(ofProcess: ucred.pid, pidfd: descriptor) : .unpinned,
                    process: identifySandboxes ? process : nil
                )
            }.recover { error in
                // No pidfd: the kernel has none to give (ENOPROTOOPT before Linux 6.5), or the peer is gone.
                let unsupported = (error as? IOError)?.errnoCode == ENOPROTOOPT
                let sandbox: PeerSandbox =
                    !identifySandboxes || unsupported
                    ? .unpinned : .unidentified(reason: "the process exited before it could be identified")
                return PeerCredentials(pid: ucred.pid, uid: ucred.uid, gid: ucred.gid, sandbox: sandbox)
            }
        }
    }

    /// The executable of the process behind `pidfd`: `/proc/PID/exe`, kept only if the pidfd still names a
    /// live process afterwards (so a pid reused in between is not misreported).
    private static func executable(pidfd: Int32, pid: Int32) -> String? {
        guard pid > 0, let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe") else {
            return nil
        }
        return SandboxReader.isAlive(pidfd: pidfd) ? path : nil
    }
}
