import Foundation
import ProcessTestSupport
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A deviced started to die with its parent (`setpriv --pdeathsig KILL`, as tools/demo starts it, or a test's
/// PR_SET_PDEATHSIG) still does after it started itself again with the allocator's tunables: the kernel keeps
/// that signal per thread, and the restart runs on a thread of the Swift runtime, so deviced carries it across.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct DaemonLifetimeTests {
    @Test func aDaemonStartedToDieWithItsParentDiesWhenTheParentIsKilled() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let provision = try await cli.run(["provision", "--policy", DevicectlRunner.policy("kiosk.json")])
        try #require(provision.status == 0, "\(provision.stderr)")
        let run = URL(fileURLWithPath: cli.stateDirectory.path + "-run")
        try FileManager.default.createDirectory(
            at: run,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755]
        )
        defer { try? FileManager.default.removeItem(at: run) }
        let socket = run.appendingPathComponent("broker.sock").path
        let deviced = DevicectlRunner.productsDirectory.appendingPathComponent("deviced").path
        // The parent: a shell that starts deviced to die with it, says its pid, and waits.
        let parent = try ChildProcess(
            URL(fileURLWithPath: "/bin/bash"),
            [
                "-c",
                """
                setpriv --pdeathsig KILL '\(deviced)' --state-dir '\(cli.stateDirectory.path)' --socket '\(socket)' --log-level warning &
                echo $!
                wait
                """,
            ]
        )
        var daemonPID: pid_t = 0
        for _ in 0..<400 where daemonPID == 0 || !FileManager.default.fileExists(atPath: socket) {
            daemonPID = parent.lines.first.flatMap { pid_t($0) } ?? 0
            try await Task.sleep(for: .milliseconds(50))
        }
        try #require(
            daemonPID > 0 && FileManager.default.fileExists(atPath: socket),
            "deviced did not start: \(parent.standardError)"
        )
        // It restarted itself with the tunables (same pid): its environment has them.
        let environment = try String(
            decoding: Data(contentsOf: URL(fileURLWithPath: "/proc/\(daemonPID)/environ")),
            as: UTF8.self
        )
        #expect(environment.contains("glibc.malloc.perturb"), "deviced did not start itself again with the tunables")

        _ = parent.send(SIGKILL)
        var gone = false
        for _ in 0..<600 where !gone {
            // Gone, or a zombie waiting for init to reap it.
            let state = (try? String(contentsOfFile: "/proc/\(daemonPID)/stat", encoding: .utf8))?.split(separator: " ")
                .dropFirst(2).first
            gone = state == nil || state == "Z" || state == "X"
            if !gone { try await Task.sleep(for: .milliseconds(50)) }
        }
        if !gone { kill(daemonPID, SIGKILL) }
        #expect(gone, "deviced outlived the parent it was started to die with")
    }
}
