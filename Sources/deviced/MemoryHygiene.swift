import CProcessControl
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What the broker does so that a secret it handled (a worker's password, a code, a token) does not stay
/// in its memory after use, and never reaches a core file.
///
/// Swift strings and SwiftNIO's buffers cannot be wiped one by one; the allocator can: started with
/// glibc's tunables `glibc.malloc.perturb` (every freed byte is overwritten), `glibc.malloc.tcache_count=0`
/// (no per-thread cache, whose chunks are freed without it) and a fixed `glibc.malloc.mmap_threshold` of
/// 128 KiB (a large buffer, a big request's, is its own mapping, unmapped when freed: gone rather than
/// overwritten, which costs less), the daemon keeps no copy of a password once
/// the sign-in's buffers are freed. glibc reads tunables only when a process starts, so the daemon starts
/// itself again (`execve` of `/proc/self/exe`, same pid, arguments, descriptors and environment plus the
/// tunables) before anything else. It also makes itself non-dumpable (`PR_SET_DUMPABLE` 0): no core file of
/// a crash holds the decrypted store's secrets, and only a process with `CAP_SYS_PTRACE` reads its memory.
enum MemoryHygiene {
    /// The tunables the daemon runs with (the perturb byte is arbitrary and nonzero).
    static let tunables = [
        "glibc.malloc.perturb=165", "glibc.malloc.tcache_count=0", "glibc.malloc.mmap_threshold=131072",
    ]

    /// Whether `value` (a `GLIBC_TUNABLES` setting) already has every tunable of `tunables`.
    static func hasTunables(_ value: String?) -> Bool {
        let settings = Set((value ?? "").split(separator: ":").map(String.init))
        return tunables.allSatisfy(settings.contains)
    }

    /// Starts the process again with the tunables unless it runs with them; returns only when it does
    /// (or when starting again failed: then the reason, for the log). Call before any other work.
    static func restartWithTunablesIfNeeded() -> String? {
        let current = ProcessInfo.processInfo.environment["GLIBC_TUNABLES"]
        guard !hasTunables(current) else { return nil }
        let value = ([current].compactMap { $0 }.filter { !$0.isEmpty } + tunables).joined(separator: ":")
        guard setenv("GLIBC_TUNABLES", value, 1) == 0 else { return "cannot set GLIBC_TUNABLES: errno \(errno)" }
        // The parent-death signal (a script's `setpriv --pdeathsig`, a test's PR_SET_PDEATHSIG) is the main
        // thread's, and this exec runs on another thread: hand it, and the parent it was meant for, to the new
        // image, whose main thread sets it again before anything else (CProcessControl).
        let parentDeathSignal = process_control_parent_death_signal()
        if parentDeathSignal > 0 {
            setenv(PROCESS_CONTROL_PARENT_DEATH_VARIABLE, "\(parentDeathSignal):\(getppid())", 1)
        }
        execv("/proc/self/exe", CommandLine.unsafeArgv)
        unsetenv(PROCESS_CONTROL_PARENT_DEATH_VARIABLE)
        let failure =
            "cannot start again with the allocator's wiping tunables (execv /proc/self/exe: errno \(errno)); freed buffers keep their bytes"
        // Running on without them: put the environment back as it was.
        if let current { setenv("GLIBC_TUNABLES", current, 1) } else { unsetenv("GLIBC_TUNABLES") }
        return failure
    }

    /// No core files, and no memory reads by same-uid processes without `CAP_SYS_PTRACE`.
    /// - Returns: the reason when it failed, for the log.
    static func refuseCoreDumps() -> String? {
        process_control_set_dumpable(0) == 0 ? nil : "prctl(PR_SET_DUMPABLE, 0) failed: errno \(errno)"
    }
}
