import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// The idle sign-out through the daemon, as apps of other uids see it: the warning and the sign-out
/// pushed to a Python subscriber, `devicectl activity` canceling the warning, the clock kept across a
/// SIGKILL and restart, `devicectl status` showing the clock. Two on a clock the test moves (`--clock-file`:
/// time stands still until the test moves it, so every step is checked at the policy second it is due,
/// however busy the machine), one on the real clock.
@Suite(.serialized, .tags(.integration, .needsRoot))
struct BrokerIdleTests {
    typealias Daemon = BrokerDaemon

    /// The kiosk policy with an idle sign-out after `timeout` s and a warning `warning` s before, in a file of its own.
    static func idlePolicy(timeout: Int = 30, warning: Int = 10) throws -> URL {
        var document = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: DevicectlRunner.policy("kiosk.json")))
            ) as? [String: Any]
        )
        document["session"] = ["idleSignOutSeconds": timeout, "warningSeconds": warning]
        let policy = FileManager.default.temporaryDirectory.appendingPathComponent(
            "idle-policy-\(UUID().uuidString).json"
        )
        try JSONSerialization.data(withJSONObject: document).write(to: policy)
        return policy
    }

    /// Signs Jo in as root (straight to the store; the broker sees the commit) and returns when.
    static func signInJo(_ daemon: Daemon) async throws {
        let jo = try daemon.cli.writeFile(
            "jo.json",
            Worker.jo.response(issuer: Worker.kioskIssuer, clientID: Worker.kioskClientID)
        )
        let signIn = try await daemon.cli.run(["signin", "--app", Daemon.scanner, "--token-response", jo])
        try #require(signIn.status == 0, "\(signIn.stderr)")
    }

    /// `devicectl activity` as the scanner's uid; returns the time just before it ran.
    @discardableResult
    static func reportActivity(_ daemon: Daemon, timeout: Int = 30) async throws -> Date {
        let before = Date()
        let activity = try await daemon.devicectl(as: Daemon.scannerUID, ["activity"])
        try #require(activity.status == 0, "\(activity.stderr)")
        #expect(
            activity.stdout.contains("signed out after \(timeout) s")
                || activity.stdout.contains("after \(timeout - 1) s"),
            "\(activity.stdout)"
        )
        return before
    }

    /// `devicectl status --json` as root, through the daemon.
    static func status(_ daemon: Daemon) async throws -> [String: Any] {
        let status = try await daemon.cli.run(
            ["status", "--json"],
            environment: ["DEVICECTL_SOCKET": daemon.socketPath]
        )
        return try #require(try parseJSON(status.stdout) as? [String: Any], "\(status.stdout) \(status.stderr)")
    }

    /// Waits until the daemon has written the worker's idle record (it times the worker from then on).
    static func waitForIdleRecord(_ daemon: Daemon) async throws {
        let record = daemon.cli.stateDirectory.appendingPathComponent("idle-activity.json").path
        let deadline = Date().addingTimeInterval(60)
        while !FileManager.default.fileExists(atPath: record) && Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        try #require(
            FileManager.default.fileExists(atPath: record),
            "the daemon never timed the worker: \(daemon.logTail())"
        )
    }

    /// Waits until the `count`th line of `client` that contains `text` has arrived.
    static func waitForLine(_ client: ChildProcess, containing text: String, count: Int = 1) async throws {
        try #require(
            await client.waitForLines(timeout: 60) { $0.filter { $0.contains(text) }.count >= count },
            "no \(text) (#\(count)): \(client.lines) \(client.standardError)"
        )
    }

    @Test func theWarningAndTheIdleSignOutReachAnAppOfAnotherUidAndActivityCancelsTheWarning() async throws {
        let policy = try Self.idlePolicy(timeout: 60, warning: 40)
        defer { try? FileManager.default.removeItem(at: policy) }
        let daemon = try await Daemon(policy: policy.path)
        try await daemon.start(try daemon.clockArguments())
        let start = try daemon.clock
        let subscriber = try daemon.python(as: Daemon.timeclockUID, "subscribe", ["6"])
        try await Self.waitForLine(subscriber, containing: "\"subscribed\"")
        try await Self.signInJo(daemon)
        try await Self.waitForLine(subscriber, containing: "\"signedIn\"")
        try await Self.waitForIdleRecord(daemon)  // the daemon times the worker from the sign-in on

        // 19 s idle: no warning yet.
        try daemon.setClock(start + 19)
        let early = try #require(try await Self.status(daemon)["idle"] as? [String: Any])
        #expect(early["warning"] as? Bool == false && early["idleSeconds"] as? Double == 19, "\(early)")
        // 20 s idle: the warning, 40 s left.
        try daemon.setClock(start + 20)
        try await Self.waitForLine(subscriber, containing: "\"idleWarning\"")
        let status = try await daemon.cli.run(["status"], environment: ["DEVICECTL_SOCKET": daemon.socketPath])
        #expect(
            status.stdout.contains("idle sign-out: after 60 s, warning 40 s before")
                && status.stdout.contains("(warning shown)"),
            "\(status.stdout)"
        )
        // Input on the kiosk: the warning is canceled, and the worker has 60 s again.
        try await Self.reportActivity(daemon, timeout: 60)
        try await Self.waitForLine(subscriber, containing: "\"idleWarningCanceled\"")
        // 20 s after the activity the second warning; 60 s after it, the sign-out (and not a second before).
        try daemon.setClock(start + 40)
        try await Self.waitForLine(subscriber, containing: "\"idleWarning\"", count: 2)
        try daemon.setClock(start + 79)
        #expect(try await Self.status(daemon)["current"] is [String: Any], "signed out before the 60 s were over")
        try daemon.setClock(start + 80)

        let events = try await daemon.results(of: subscriber, timeout: 60)
        #expect(
            events.map { $0["kind"] as? String } == [
                "subscribed", "signedIn", "idleWarning", "idleWarningCanceled", "idleWarning", "signedOut",
            ]
        )
        #expect(events[2]["secondsLeft"] as? Int == 40 && events[4]["secondsLeft"] as? Int == 40, "\(events)")
        #expect(
            events[5]["reason"] as? String == "idle" && (events[5]["current"] is NSNull || events[5]["current"] == nil)
        )
        let audited = try #require(
            try await daemon.auditEvents().last { $0["type"] as? String == "account.signed_out" }
        )
        #expect(audited["reason"] as? String == "idle" && audited["actor"] as? String == "deviced", "\(audited)")
        let after = try await daemon.devicectl(as: Daemon.timeclockUID, ["account", "--json"])
        let accounts = try #require(try parseJSON(after.stdout) as? [String: Any], "\(after.stderr)")
        #expect(accounts["current"] is NSNull || accounts["current"] == nil)
        await daemon.cleanUp()
    }

    @Test func aRestartAfterSIGKILLKeepsTheIdleClockAndDoesNotSignOutAnActiveWorker() async throws {
        // 60 s idle sign-out, warned 10 s before; the daemon is killed 30 s after the worker's sign-in.
        let policy = try Self.idlePolicy(timeout: 60, warning: 10)
        defer { try? FileManager.default.removeItem(at: policy) }
        let daemon = try await Daemon(policy: policy.path)
        try await daemon.start(try daemon.clockArguments())
        let start = try daemon.clock
        try await Self.signInJo(daemon)
        try await Self.reportActivity(daemon, timeout: 60)
        try await Self.waitForIdleRecord(daemon)
        // Killed (no chance to write anything on the way out) and started again 30 s later.
        try daemon.setClock(start + 30)
        _ = daemon.process?.send(SIGKILL)
        _ = await daemon.process?.waitForExit(timeout: 30)
        try await daemon.start(["--clock-file", daemon.clockFile])
        let subscriber = try daemon.python(as: Daemon.timeclockUID, "subscribe", ["3"])
        try await Self.waitForLine(subscriber, containing: "\"subscribed\"")
        // The worker is still signed in, and the clock went on from the persisted activity, not from zero.
        let status = try await Self.status(daemon)
        #expect(status["current"] is [String: Any], "\(status)")
        let idle = try #require(status["idle"] as? [String: Any], "\(status)")
        #expect(idle["idleSeconds"] as? Double == 30, "idle for \(idle["idleSeconds"] ?? "?") s after the restart")
        // Warned 50 s and signed out 60 s after the activity (not 60 s after the restart).
        try daemon.setClock(start + 50)
        try await Self.waitForLine(subscriber, containing: "\"idleWarning\"")
        try daemon.setClock(start + 60)
        let events = try await daemon.results(of: subscriber, timeout: 60)
        #expect(events.map { $0["kind"] as? String } == ["subscribed", "idleWarning", "signedOut"])
        #expect(events.count > 1 && events[1]["secondsLeft"] as? Int == 10, "\(events)")
        await daemon.cleanUp()
    }

    @Test func withTheRealClockTheWarningAndTheSignOutArriveOnTime() async throws {
        let policy = try Self.idlePolicy()
        defer { try? FileManager.default.removeItem(at: policy) }
        let daemon = try await Daemon(policy: policy.path)
        try await daemon.start()
        let subscriber = try daemon.python(as: Daemon.timeclockUID, "subscribe", ["4"])
        try #require(
            await subscriber.waitForLine(timeout: 30) { $0.contains("\"subscribed\"") } != nil,
            "\(subscriber.standardError)"
        )
        try await Self.signInJo(daemon)
        let activityAt = try await Self.reportActivity(daemon)
        let events = try await daemon.results(of: subscriber, timeout: 60)
        #expect(events.map { $0["kind"] as? String } == ["subscribed", "signedIn", "idleWarning", "signedOut"])
        let warned = try #require(events[2]["at"] as? Double)
        let signedOut = try #require(events[3]["at"] as? Double)
        let start = activityAt.timeIntervalSince1970
        // Never before 20 s (the warning) and 30 s (the sign-out) after the activity (`start` is taken before
        // devicectl reports it); late by no more than a loaded machine makes a timer.
        #expect(warned - start >= 19.99 && warned - start < 30, "warning \(warned - start) s after the activity")
        #expect(
            signedOut - start >= 29.99 && signedOut - start < 40,
            "sign-out \(signedOut - start) s after the activity"
        )
        print(
            "BrokerIdleTests: real clock: warning \(String(format: "%.3f", warned - start)) s and sign-out \(String(format: "%.3f", signedOut - start)) s after the activity (devicectl started then; the deadlines are 20 and 30 s)"
        )
        await daemon.cleanUp()
    }
}
