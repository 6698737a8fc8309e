import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Makes the children the tests start die with the test process, however it ends (a crash, SIGKILL, a
/// timed-out CI job), also those that run under another uid, where the kernel clears `PR_SET_PDEATHSIG`
/// (and a parent-death signal would fire when the spawning *thread* ends, which in Swift's pools is any time).
///
/// One watchdog process per test process (`python3`, in a session of its own, ignoring the terminal's
/// signals) reads one end of a socket pair whose other end only the test process holds (close-on-exec, so
/// no child inherits it). The test process sends `+PID` for each child it starts and `-PID` once it has
/// reaped it; the watchdog holds a pidfd for each child announced. When the test process is gone, the
/// kernel closes its end, the watchdog reads end of file and sends SIGKILL through every pidfd it still
/// holds — through the pidfd, so a pid that some other process got since can never be hit — and exits.
public enum ChildWatchdog {
    /// The watchdog's program: reads `+PID`/`-PID` lines until end of file, then kills what is left.
    private static let program = """
        import os, signal
        # Nothing of the test process's but the socket: Foundation's Process learns that a child exited when the
        # descriptors it holds for it reach their end, which a copy held here would postpone for ever.
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.setsid()
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
            signal.signal(number, signal.SIG_IGN)
        children, pending = {}, b""
        while True:
            try:
                chunk = os.read(0, 65536)
            except InterruptedError:
                continue
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\\n")
            for line in lines:
                if len(line) < 2 or line[:1] not in (b"+", b"-"):
                    continue
                pid = int(line[1:])
                if line[:1] == b"+":
                    try:
                        children[pid] = os.pidfd_open(pid)
                    except OSError:
                        pass
                elif pid in children:
                    os.close(children.pop(pid))
        for descriptor in children.values():
            try:
                signal.pidfd_send_signal(descriptor, signal.SIGKILL)
            except OSError:
                pass
        """

    /// The test process's end of the socket pair, or `nil` when no watchdog could be started (then
    /// children are only stopped by the tests themselves, as before).
    private static let channel: Mutex<Int32?> = Mutex(startWatchdog())

    /// Has `pid` (a child this process just started) killed if this process dies before `release(_:)`.
    public static func watch(_ pid: Int32) { send("+\(pid)\n") }

    /// Forgets `pid` once this process has reaped it (its pid may be reused from then on).
    public static func release(_ pid: Int32) { send("-\(pid)\n") }

    private static func send(_ line: String) {
        channel.withLock { descriptor in
            guard let socket = descriptor else { return }
            var bytes = Array(line.utf8)[...]
            while !bytes.isEmpty {
                let sent = bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if sent < 0 {
                    if errno == EINTR { continue }
                    descriptor = nil  // the watchdog is gone; nothing more to tell it
                    close(socket)
                    return
                }
                bytes = bytes.dropFirst(sent)
            }
        }
    }

    private static func startWatchdog() -> Int32? {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            return nil
        }
        defer { close(ends[1]) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[1], 0)  // dup2 clears close-on-exec on the copy
        // Not this process's output pipes: the test runner reads them to their end. (The program closes every
        // other descriptor it inherits first thing.)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        let arguments = ["python3", "-c", program]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid = pid_t()
        guard posix_spawn(&pid, "/usr/bin/python3", &actions, &attributes, &argv, environ) == 0 else {
            close(ends[0])
            return nil
        }
        return ends[0]
    }
}
