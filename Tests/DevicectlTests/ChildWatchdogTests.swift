import Foundation
import ProcessTestSupport
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A test run that dies (a crash, SIGKILL, a CI job's timeout) leaves nothing running: the children it started
/// die with it, also those under another uid, for which the kernel clears a parent-death signal.
@Suite(.tags(.integration, .needsRoot)) struct ChildWatchdogTests {
    /// The state and start time (clock ticks after boot) of process `pid`, from /proc/PID/stat; nil once it is gone.
    static func stat(_ pid: pid_t) -> (state: String, startTime: String)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = text.lastIndex(of: ")")
        else { return nil }
        // After the command's closing parenthesis: state is field 3, starttime field 22.
        let fields = text[text.index(after: end)...].split(separator: " ")
        guard fields.count > 19 else { return nil }
        return (String(fields[0]), String(fields[19]))
    }

    @Test func aChildUnderAnotherUidDiesWithTheProcessThatStartedIt() async throws {
        // The probe starts `sleep` as the stranger's uid through ChildProcess; the test then kills the probe.
        let probe = try ChildProcess(
            product: "watchdog-probe",
            ["/usr/bin/setpriv"] + BrokerDaemon.asUser(BrokerDaemon.strangerUID)
                + ["/bin/sleep", "3600"]
        )
        defer { _ = probe.killIfRunning() }
        let line = try #require(
            await probe.waitForLine(timeout: 60) { $0.hasPrefix("child ") },
            "\(probe.standardError)"
        )
        let pid = try #require(pid_t(line.dropFirst("child ".count)))
        // Known by its start time from now on: a process that gets the pid later cannot pass for it.
        let started = try #require(Self.stat(pid)?.startTime, "the child \(pid) was gone before the probe died")
        #expect(probe.send(SIGKILL))
        #expect(await probe.waitForExit(timeout: 60) && probe.killedBySignal == SIGKILL, "\(probe.reasonDescription)")
        let deadline = Date().addingTimeInterval(60)
        func alive() -> Bool { Self.stat(pid).map { $0.startTime == started && $0.state != "Z" } ?? false }
        while alive() && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!alive(), "the child \(pid) outlived the process that started it")
        if alive() { kill(pid, SIGKILL) }
    }
}
