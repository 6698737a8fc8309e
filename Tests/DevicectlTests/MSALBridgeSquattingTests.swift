import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// D-Bus name squatting: any process of an app user's uid may own `com.microsoft.identity.broker1` on that
/// user's session bus before the MSAL bridge does. It then hears that user's MSAL apps, and the real bridge
/// says it cannot start; but what it can get from deviced is that uid's share and nothing more: the broker
/// knows it by its uid from the kernel, whatever it claims on the bus.
@Suite(.serialized, .tags(.integration, .needsRoot, .needsIdentityProvider)) struct MSALBridgeSquattingTests {
    typealias Daemon = BrokerDaemon

    /// Owns the broker's name on the session bus (Debian's python3-dbus), prints `owned`, and holds it until
    /// the file named by its argument exists (the test ends it; it never lives a fixed time).
    static let squatter = """
        import dbus, os, sys, time
        bus = dbus.SessionBus()
        reply = bus.request_name("com.microsoft.identity.broker1", dbus.bus.NAME_FLAG_DO_NOT_QUEUE)
        print("owned" if reply == dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER else "refused %d" % reply, flush=True)
        while not os.path.exists(sys.argv[1]):
            time.sleep(0.05)
        """

    @Test func aSameUserProcessOwningTheBrokerNameFirstGetsNothingBeyondItsUidsShare() async throws {
        let daemon = try await BrokerSignInTests.daemon(logLevel: "debug")
        let session = try await MSALSession(daemon, uid: Daemon.scannerUID)
        let squatter = try ChildProcess(
            MSALSession.script,
            [
                "run", session.directory.path, "--", "/usr/bin/python3", "-c", Self.squatter,
                session.signalFile("squatter-done"),
            ]
        )
        defer { session.signal("squatter-done") }
        var owned = false
        for _ in 0..<600 where !owned && !squatter.hasExited {
            owned = squatter.lines.first == "owned"
            if !owned { try await Task.sleep(for: .milliseconds(50)) }
        }
        try #require(owned, "the squatter did not get the name: \(squatter.lines) \(squatter.standardError)")

        // The real bridge, started on that bus now, cannot take the name and says why (no silent second broker).
        let bridge = daemon.publicDirectory.appendingPathComponent("msal-bridge").path
        let refused = try await Command.run(
            MSALSession.script,
            [
                "run", session.directory.path, "--", bridge, "--socket", daemon.socketPath,
                "--flow", "deviceCode",
            ]
        )
        #expect(
            refused.status != 0 && refused.stderr.contains("owned by another process"),
            "\(refused.status) \(refused.stderr)"
        )

        // Whatever the squatter claims on the bus, deviced knows it by its uid: the scanner's app and its groups,
        // never the timeclock's share, never an administrator's.
        let own = try await daemon.devicectl(
            as: Daemon.scannerUID,
            [
                "keychain", "add-generic-password", "--access-group", Daemon.scanner,
                "--service", "squatter", "--account", "a", "--secret-stdin",
            ],
            stdin: "x"
        )
        #expect(own.status == 0, "its own share: \(own.stdout) \(own.stderr)")
        let other = try await daemon.devicectl(
            as: Daemon.scannerUID,
            [
                "keychain", "find-generic-password", "--access-group", Daemon.timeclock,
                "--service", "badge",
            ]
        )
        #expect(other.status == 77, "another app's group: \(other.status) \(other.stderr)")
        let status = try await daemon.devicectl(as: Daemon.scannerUID, ["status"])
        #expect(status.status != 0, "the squatter's uid read the administrator's status")

        session.signal("squatter-done")
        #expect(await squatter.waitForExit(timeout: 30), "the squatter did not end")
        await session.stop()
        await daemon.cleanUp()
    }
}
