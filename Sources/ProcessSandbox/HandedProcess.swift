import CProcessControl
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A process that a peer handed over by a pidfd open in the peer (the MSAL bridge handing deviced the
/// D-Bus caller it serves), identified from the process itself: deviced takes its own copy of the pidfd with
/// `pidfd_getfd(2)` through the peer's pidfd (the kernel vouches it is the peer's descriptor; nothing the
/// peer says is believed), checks it is a pidfd (`/proc/self/fdinfo` has `Pid:`), that the process runs as
/// the peer's uid (`/proc/PID/status` `Uid:`, real and effective), and reads its sandbox as a socket peer's
/// (`SandboxReader`: its root, the pidfd checked alive after the read).
public struct HandedProcess: Sendable, Hashable {
    /// The process's pid when it was identified.
    public var pid: Int32
    /// Its sandbox (never `unidentified`: such a process is refused).
    public var sandbox: PeerSandbox
    /// Its executable (`/proc/PID/exe`), kept only if the process was alive after the read; for the record.
    public var executable: String?

    /// A process as given.
    public init(pid: Int32, sandbox: PeerSandbox, executable: String? = nil) {
        self.pid = pid
        self.sandbox = sandbox
        self.executable = executable
    }

    /// Why a handed-over process was not taken.
    public struct Refusal: Error, Sendable, Hashable, CustomStringConvertible {
        /// Whether this kernel cannot take a descriptor of another process (`pidfd_getfd`, Linux 5.6), as
        /// opposed to a refusal of this process or descriptor.
        public var unsupported: Bool
        /// What is wrong and what to do.
        public var description: String

        init(_ description: String, unsupported: Bool = false) {
            self.description = description
            self.unsupported = unsupported
        }
    }

    /// The process whose pidfd is descriptor `number` of the process `peer` names, which must run as `uid`.
    /// - Throws: `Refusal` for a number that is not an open descriptor of the peer, a descriptor that is not a
    ///   pidfd, a process of another uid, one that exited, one whose sandbox cannot be read, or a kernel
    ///   without `pidfd_getfd`.
    public static func identify(
        descriptor number: Int,
        of peer: ProcessHandle,
        uid: UInt32
    ) throws(Refusal) -> HandedProcess {
        guard let target = Int32(exactly: number), target >= 0 else {
            throw Refusal(
                "\(number) is not a descriptor number: pass the number of a pidfd open in the calling process"
            )
        }
        let copy = process_control_pidfd_getfd(peer.pidfd, target)
        guard copy >= 0 else {
            let error = errno
            switch error {
            case ENOSYS:
                throw Refusal(
                    "this kernel cannot hand a descriptor to deviced (pidfd_getfd, Linux 5.6 or later)",
                    unsupported: true
                )
            case EBADF:
                throw Refusal(
                    "descriptor \(target) is not open in the calling process: pass the number of a pidfd it holds"
                )
            case ESRCH:
                throw Refusal("the calling process is gone")
            case EPERM, EACCES:
                throw Refusal(
                    "deviced may not take a descriptor of the calling process (pidfd_getfd needs ptrace access: deviced runs with CAP_SYS_PTRACE, and Yama's ptrace_scope must be below 3)"
                )
            default:
                throw Refusal("descriptor \(target) of the calling process could not be taken (\(errorText(error)))")
            }
        }
        let process = ProcessHandle(adopting: copy)
        // `copy` is read below by number: the handle (which closes it) must live until the end.
        defer { withExtendedLifetime(process) {} }
        guard let pid = pidOfPidfd(copy) else {
            throw Refusal("descriptor \(target) is not a pidfd: pass a pidfd of the process (pidfd_open)")
        }
        guard pid > 0, process.isAlive else {
            throw Refusal(
                pid == 0
                    ? "the process of pidfd \(target) is in a pid namespace deviced cannot see"
                    : "the process of pidfd \(target) has exited"
            )
        }
        guard let (real, effective) = uids(ofProcess: pid) else {
            throw Refusal("the process of pidfd \(target) (pid \(pid)) has exited")
        }
        guard real == uid, effective == uid else {
            throw Refusal(
                "the process of pidfd \(target) (pid \(pid)) runs as uid \(effective) (real \(real)), not as the calling process's uid \(uid): a process may act only for a process of its own user"
            )
        }
        let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")
        // The sandbox (and what was read before it) is kept only if the pidfd is still alive after the read.
        let sandbox = SandboxReader.sandbox(ofProcess: pid, pidfd: copy)
        if case .unidentified(let reason) = sandbox {
            throw Refusal("the process of pidfd \(target) (pid \(pid)) could not be identified: \(reason)")
        }
        return HandedProcess(pid: pid, sandbox: sandbox, executable: executable)
    }

    /// The `Pid:` of a pidfd's `/proc/self/fdinfo` entry (-1 once its process is reaped, 0 when it is outside
    /// this pid namespace); nil when the descriptor is not a pidfd.
    static func pidOfPidfd(_ descriptor: Int32) -> Int32? {
        guard let info = try? String(contentsOfFile: "/proc/self/fdinfo/\(descriptor)", encoding: .utf8) else {
            return nil
        }
        return field("Pid:", in: info).flatMap { Int32($0) }
    }

    /// The real and effective uid of `pid` (`/proc/PID/status`).
    static func uids(ofProcess pid: Int32) -> (real: UInt32, effective: UInt32)? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = field("Uid:", in: status)
        else { return nil }
        let values = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { UInt32($0) }
        guard values.count >= 2 else { return nil }
        return (values[0], values[1])
    }

    /// The value of the first line of `text` that starts with `key`, without the spaces around it.
    private static func field(_ key: String, in text: String) -> String? {
        for line in text.split(separator: "\n") where line.hasPrefix(key) {
            return line.dropFirst(key.count).trimmingCharacters(in: .whitespaces)
        }
        return nil
    }

    private static func errorText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}
