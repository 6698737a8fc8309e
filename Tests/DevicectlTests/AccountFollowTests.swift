import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// `devicectl account --follow`: an app's process (a kiosk's shell script) hears every change deviced pushes.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct AccountFollowTests {
    typealias Daemon = BrokerDaemon

    @Test func anAppFollowingAccountChangesHearsTheShiftEndAndTheDaemonGoingAway() async throws {
        let daemon = try await Daemon()
        try await daemon.signWorkerIn()
        try await daemon.start()
        let follower = try daemon.startDevicectl(as: Daemon.timeclockUID, ["account", "--follow", "--json"])
        defer { _ = follower.killIfRunning() }
        let subscribed = try #require(
            await follower.waitForLine(timeout: 20) { $0.contains("\"subscribed\"") },
            "no subscribed line: \(follower.standardError)"
        )
        let first = try #require(try parseJSON(subscribed) as? [String: Any])
        #expect((first["current"] as? [String: Any])?["username"] as? String == "jo.worker@contoso.example", "\(first)")

        // Root ends the shift: the follower hears it with the reason and the audit sequence.
        let signOut = try await daemon.devicectl(as: 0, ["signout", "--reason", "shift-end"])
        #expect(signOut.status == 0, "\(signOut.stderr)")
        let signedOut = try #require(
            await follower.waitForLine(timeout: 20) { $0.contains("\"signedOut\"") },
            "\(follower.lines)"
        )
        let event = try #require(try parseJSON(signedOut) as? [String: Any])
        #expect(
            event["reason"] as? String == "shift-end"
                && (event["sequence"] as? Int ?? 0) > (first["sequence"] as? Int ?? 0),
            "\(event)"
        )
        let audited = try await daemon.auditEvents().last { $0["type"] as? String == "account.signed_out" }
        #expect(audited?["sequence"] as? Int == event["sequence"] as? Int, "\(String(describing: audited))")
        #expect(!follower.hasExited, "the follower stopped after one change")

        // The daemon going away ends the follow with the broker's error, not silently.
        await daemon.stop()
        #expect(await follower.waitForExit(timeout: 20), "the follower outlived the daemon")
        #expect(follower.status == 69, "\(follower.status) \(follower.standardError)")
        await daemon.cleanUp()
    }
}
