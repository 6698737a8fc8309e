import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// The broker's account events end to end: a change the broker makes itself reaches its subscribers as it
/// commits, once (the change signal it also rings, arriving later, adds nothing); a change another process
/// makes straight to the store still arrives through the signal.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct BrokerAccountEventTests {
    typealias Daemon = BrokerDaemon

    @Test func aSignOutThroughTheBrokerIsPushedOnceAndAnotherProcesssChangeStillArrives() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        let jo = try daemon.cli.writeFile(
            "jo.json",
            Worker.jo.response(issuer: Worker.kioskIssuer, clientID: Worker.kioskClientID)
        )
        // Signed in before anyone subscribes (root's path, straight to the store).
        let signIn = try await daemon.cli.run(["signin", "--app", Daemon.scanner, "--token-response", jo])
        try #require(signIn.status == 0, "\(signIn.stderr)")
        // The timeclock (its own uid) subscribes for three events.
        let subscriber = try daemon.python(as: Daemon.timeclockUID, "subscribe", ["3"])
        try #require(
            await subscriber.waitForLine(timeout: 30) { $0.contains("\"subscribed\"") } != nil,
            "\(subscriber.standardError)"
        )

        // The scanner signs out through the broker: the broker's own change.
        let signOut = try await daemon.devicectl(as: Daemon.scannerUID, ["signout", "--reason", "shift-end", "--json"])
        #expect(signOut.status == 0, "\(signOut.stderr)")
        try #require(
            await subscriber.waitForLine(timeout: 30) { $0.contains("\"signedOut\"") } != nil,
            "\(subscriber.standardError)"
        )
        // Then another process's change. A second copy of the sign-out (from the signal the broker rang) would
        // come before it, as the third event.
        let again = try await daemon.cli.run(["signin", "--app", Daemon.scanner, "--token-response", jo])
        try #require(again.status == 0, "\(again.stderr)")

        let events = try await daemon.results(of: subscriber, timeout: 30)
        #expect(events.map { $0["kind"] as? String } == ["subscribed", "signedOut", "signedIn"])
        let audit = try await daemon.auditEvents()
        let signedOut = try #require(audit.last { $0["type"] as? String == "account.signed_out" })
        let signedIn = try #require(audit.last { $0["type"] as? String == "account.signed_in" })
        #expect(
            events.dropFirst().map { $0["sequence"] as? Int } == [
                signedOut["sequence"] as? Int, signedIn["sequence"] as? Int,
            ]
        )
        #expect(events[1]["reason"] as? String == "shift-end")
        #expect(events[2]["current"] as? String == Worker.jo.username)
        await daemon.cleanUp()
    }
}
