import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// The idle sign-out through the daemon, as apps of other uids see it: the warning and the sign-out
/// pushed to a Python subscriber, `devicectl activity` canceling the warning, the clock kept across a
/// SIGKILL and restart, `devicectl status` showing the clock; once with a 10× clock (`--clock-scale`,
/// so the policy's 30 s pass in 3 s) and once with the real clock.
@Suite(.serialized, .tags(.integration, .needsRoot))
struct BrokerIdleTests {
    typealias Daemon = BrokerDaemon

    /// The kiosk policy with an idle sign-out after `timeout` s and a warning `warning` s before, in a file of its own.
    static func idlePolicy(timeout: Int = 30, warning: Int = 10) throws -> URL {
        var document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: DevicectlRunner.policy("kiosk.json")))) as? [String: Any])
        document["session"] = ["idleSignOutSeconds": timeout, "warningSeconds": warning]
        let policy = FileManager.default.temporaryDirectory.appendingPathComponent("idle-policy-\(UUID().uuidString).json")
        try JSONSerialization.data(withJSONObject: document).write(to: policy)
        return policy
    }

    /// Signs Jo in as root (straight to the store; the broker sees the commit) and returns when.
    static func signInJo(_ daemon: Daemon) async throws {
        let jo = try daemon.cli.writeFile("jo.json", Worker.jo.response(issuer: Worker.kioskIssuer, clientID: Worker.kioskClientID))
        let signIn = try await daemon.cli.run(["signin", "--app", Daemon.scanner, "--token-response", jo])
        try #require(signIn.status == 0, "\(signIn.stderr)")
    }

    /// `devicectl activity` as the scanner's uid; returns the time just before it ran.
    @discardableResult
    static func reportActivity(_ daemon: Daemon, timeout: Int = 30) async throws -> Date {
        let before = Date()
        let activity = try await daemon.devicectl(as: Daemon.scannerUID, ["activity"])
        try #require(activity.status == 0, "\(activity.stderr)")
        #expect(activity.stdout.contains("signed out after \(timeout) s") || activity.stdout.contains("after \(timeout - 1) s"), "\(activity.stdout)")
        return before
    }

    @Test func theWarningAndTheIdleSignOutReachAnAppOfAnotherUidAndActivityCancelsTheWarning() async throws {
        // 60 policy seconds with a 40 s warning on a 5x clock: the warning 4 real seconds after the last
        // activity, the sign-out 12 (room for the status and activity calls in between, even on a busy machine:
        // on a 10x clock the sign-out once came before the activity call of a loaded clean-clone run).
        let policy = try Self.idlePolicy(timeout: 60, warning: 40)
        defer { try? FileManager.default.removeItem(at: policy) }
        let daemon = try await Daemon(policy: policy.path)
        try await daemon.start(["--clock-scale", "5"])
        let subscriber = try daemon.python(as: Daemon.timeclockUID, "subscribe", ["6"])
        try #require(await subscriber.waitForLine(timeout: 30) { $0.contains("\"subscribed\"") } != nil, "\(subscriber.standardError)")
        try await Self.signInJo(daemon)
        try #require(await subscriber.waitForLine(timeout: 10) { $0.contains("\"signedIn\"") } != nil)

        // 20 policy seconds (4 real) after the sign-in: the warning, 40 s left.
        try #require(await subscriber.waitForLine(timeout: 10) { $0.contains("\"idleWarning\"") } != nil, "\(subscriber.standardError)")
        let status = try await daemon.cli.run(["status"], environment: ["DEVICECTL_SOCKET": daemon.socketPath])
        #expect(status.stdout.contains("idle sign-out: after 60 s, warning 40 s before") && status.stdout.contains("(warning shown)"), "\(status.stdout)")
        // Input on the kiosk: the warning is canceled, and the worker has 60 s again.
        let activityAt = try await Self.reportActivity(daemon, timeout: 60)
        try #require(await subscriber.waitForLine(timeout: 10) { $0.contains("\"idleWarningCanceled\"") } != nil)

        let events = try await daemon.results(of: subscriber, timeout: 40)
        #expect(events.map { $0["kind"] as? String } == ["subscribed", "signedIn", "idleWarning", "idleWarningCanceled", "idleWarning", "signedOut"])
        #expect(events[2]["secondsLeft"] as? Int == 40 && events[4]["secondsLeft"] as? Int == 40)
        #expect(events[5]["reason"] as? String == "idle" && (events[5]["current"] is NSNull || events[5]["current"] == nil))
        // The second warning and the sign-out come 4 and 12 real seconds after the activity.
        if let warned = events[4]["at"] as? Double, let signedOut = events[5]["at"] as? Double {
            let start = activityAt.timeIntervalSince1970
            #expect((3.8...5.5).contains(warned - start), "warning \(warned - start) s after the activity")
            #expect((11.8...13.5).contains(signedOut - start), "sign-out \(signedOut - start) s after the activity")
        }
        let audited = try #require(try await daemon.auditEvents().last { $0["type"] as? String == "account.signed_out" })
        #expect(audited["reason"] as? String == "idle" && audited["actor"] as? String == "deviced", "\(audited)")
        let after = try await daemon.devicectl(as: Daemon.timeclockUID, ["account", "--json"])
        let accounts = try #require(try parseJSON(after.stdout) as? [String: Any], "\(after.stderr)")
        #expect(accounts["current"] is NSNull || accounts["current"] == nil)
        await daemon.cleanUp()
    }

    @Test func aRestartAfterSIGKILLKeepsTheIdleClockAndDoesNotSignOutAnActiveWorker() async throws {
        // 60 policy seconds, warning 10 s before, 5x clock: signed out 12 real seconds after the last activity,
        // warned at 10; the restart at 6 leaves 4 real seconds for the daemon, the subscriber and the status
        // call to come up, even on a machine busy with the rest of the suite.
        let policy = try Self.idlePolicy(timeout: 60, warning: 10)
        defer { try? FileManager.default.removeItem(at: policy) }
        let daemon = try await Daemon(policy: policy.path)
        try await daemon.start(["--clock-scale", "5"])
        try await Self.signInJo(daemon)
        let activityAt = try await Self.reportActivity(daemon, timeout: 60)
        // 30 policy seconds later the daemon is killed (no chance to write anything on the way out) and restarted.
        let wait = 6 - Date().timeIntervalSince(activityAt)
        if wait > 0 { try await Task.sleep(for: .milliseconds(Int(wait * 1000))) }
        _ = daemon.process?.send(SIGKILL)
        _ = await daemon.process?.waitForExit(timeout: 10)
        try await daemon.start(["--clock-scale", "5"])
        let subscriber = try daemon.python(as: Daemon.timeclockUID, "subscribe", ["3"])
        try #require(await subscriber.waitForLine(timeout: 30) { $0.contains("\"subscribed\"") } != nil, "\(subscriber.standardError)")
        // The worker, active 15 s before, is still signed in after the restart...
        let status = try #require(try parseJSON(try await daemon.cli.run(["status", "--json"], environment: ["DEVICECTL_SOCKET": daemon.socketPath]).stdout)
                                  as? [String: Any])
        let idle = try #require(status["idle"] as? [String: Any], "\(status)")
        #expect(status["current"] != nil && !(status["current"] is NSNull))
        // ...and the clock went on from the last persisted activity (at most 6 s of policy time behind), not from zero.
        let idleSeconds = try #require(idle["idleSeconds"] as? Double)
        #expect(idleSeconds > 25 && idleSeconds < 50, "idle for \(idleSeconds) policy seconds after the restart")
        let events = try await daemon.results(of: subscriber, timeout: 20)
        #expect(events.map { $0["kind"] as? String } == ["subscribed", "idleWarning", "signedOut"])
        // Signed out 60 policy seconds (12 real) after the activity, not 60 after the restart (18 real and more).
        if let signedOut = events.last?["at"] as? Double {
            let after = signedOut - activityAt.timeIntervalSince1970
            #expect((10.8...15.0).contains(after), "signed out \(after) s after the activity")
        }
        await daemon.cleanUp()
    }

    @Test func withTheRealClockTheWarningAndTheSignOutArriveOnTime() async throws {
        let policy = try Self.idlePolicy()
        defer { try? FileManager.default.removeItem(at: policy) }
        let daemon = try await Daemon(policy: policy.path)
        try await daemon.start()
        let subscriber = try daemon.python(as: Daemon.timeclockUID, "subscribe", ["4"])
        try #require(await subscriber.waitForLine(timeout: 30) { $0.contains("\"subscribed\"") } != nil, "\(subscriber.standardError)")
        try await Self.signInJo(daemon)
        let activityAt = try await Self.reportActivity(daemon)
        let events = try await daemon.results(of: subscriber, timeout: 60)
        #expect(events.map { $0["kind"] as? String } == ["subscribed", "signedIn", "idleWarning", "signedOut"])
        let warned = try #require(events[2]["at"] as? Double), signedOut = try #require(events[3]["at"] as? Double)
        let start = activityAt.timeIntervalSince1970
        // Within a second of 20 s (the warning) and 30 s (the sign-out) after the activity.
        #expect(abs(warned - start - 20) < 1, "warning \(warned - start) s after the activity")
        #expect(abs(signedOut - start - 30) < 1, "sign-out \(signedOut - start) s after the activity")
        print("BrokerIdleTests: real clock: warning \(String(format: "%.3f", warned - start)) s and sign-out \(String(format: "%.3f", signedOut - start)) s after the activity (devicectl started then; the deadlines are 20 and 30 s)")
        await daemon.cleanUp()
    }
}
