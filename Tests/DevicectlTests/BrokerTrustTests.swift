import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// Clients check who listens before they send: a fake broker any local user runs on a path a client is
/// given gets nothing, and a broker serving another store than the one named is refused.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct BrokerTrustTests {
    typealias Daemon = BrokerDaemon

    /// A fake broker run by `uid` on a socket in a directory of its own, answering anything with success
    /// until `received(by:)` stops it (it lives as long as the test needs it, however slow the machine).
    static func fakeBroker(_ daemon: Daemon, as uid: UInt32) async throws -> (process: ChildProcess, socket: String) {
        let directory = daemon.publicDirectory.appendingPathComponent("fake-\(uid)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(
            at: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755]
        )
        #expect(chown(directory.path, uid, uid) == 0)
        let socket = directory.appendingPathComponent("broker.sock").path
        let listener = try daemon.attacker(as: uid, "fake-broker", [], socket: socket)
        try #require(
            await listener.waitForLine(timeout: 20) { $0.contains("listening") } != nil,
            "the fake broker did not start: \(listener.standardError)"
        )
        return (listener, socket)
    }

    /// How many bytes the fake broker received: stops it and reads its count.
    static func received(by fake: ChildProcess) async throws -> Int {
        #expect(fake.send(SIGTERM), "the fake broker had stopped by itself: \(fake.standardError)")
        let lines = try await BrokerAttackTests.steps(fake, timeout: 40)
        return try #require(lines.last?["received"] as? Int, "\(lines)")
    }

    @Test func aClientSendsNothingToABrokerRunByAnotherUser() async throws {
        let daemon = try await Daemon()
        try await daemon.signWorkerIn()
        try await daemon.start()
        let (fake, socket) = try await Self.fakeBroker(daemon, as: Daemon.strangerUID)
        // Root's shift-end sign-out, pointed at the fake: refused before anything is sent.
        let signOut = try await Command.run(
            DevicectlRunner.productsDirectory.appendingPathComponent("devicectl"),
            ["signout"],
            environment: ["DEVICECTL_SOCKET": socket, "DEVICECTL_STATE_DIR": daemon.cli.stateDirectory.path]
        )
        #expect(signOut.status == 69, "\(signOut.stdout) \(signOut.stderr)")
        #expect(
            signOut.stderr.contains("refusing the broker at \(socket)")
                && signOut.stderr.contains("uid \(Daemon.strangerUID)"),
            "\(signOut.stderr)"
        )
        #expect(!signOut.stdout.contains("signed out"))
        // An app's secret, pointed at the fake: refused, the secret never leaves the app. (Piped by a shell:
        // devicectl refuses before it reads its input.)
        let add = try await Command.run(
            URL(fileURLWithPath: "/bin/sh"),
            [
                "-c",
                """
                printf the-app-secret | \(Daemon.setpriv.path) \(Daemon.asUser(Daemon.scannerUID).joined(separator: " ")) \
                '\(daemon.devicectlCopy)' keychain add-generic-password --service s --account a --secret-stdin
                """,
            ],
            environment: ["DEVICECTL_SOCKET": socket, "DEVICECTL_STATE_DIR": ""]
        )
        #expect(add.status == 69, "\(add.stdout) \(add.stderr)")
        #expect(try await Self.received(by: fake) == 0, "the fake broker received bytes")
        // The real worker was never signed out.
        let account = try await daemon.devicectl(as: Daemon.timeclockUID, ["account", "--json"])
        #expect(
            account.status == 0 && account.stdout.contains("\"current\" : {"),
            "\(account.stdout) \(account.stderr)"
        )
        await daemon.cleanUp()
    }

    @Test func aBrokerOfTheClientsOwnUserOrOneTheConfigurationNamesIsTalkedTo() async throws {
        let daemon = try await Daemon()
        // A developer's personal broker: the same uid as the client.
        let (own, ownSocket) = try await Self.fakeBroker(daemon, as: Daemon.strangerUID)
        let ownCall = try await Command.run(
            Daemon.setpriv,
            Daemon.asUser(Daemon.strangerUID) + [daemon.devicectlCopy, "account"],
            environment: ["DEVICECTL_SOCKET": ownSocket, "DEVICECTL_STATE_DIR": ""]
        )
        _ = ownCall
        // Its replies are checked against the contract: a reply without a field the interface requires is
        // refused naming the field (the fake answers every call as if it were GetCaller).
        let status = try await Command.run(
            Daemon.setpriv,
            Daemon.asUser(Daemon.strangerUID) + [daemon.devicectlCopy, "status"],
            environment: ["DEVICECTL_SOCKET": ownSocket, "DEVICECTL_STATE_DIR": ""]
        )
        #expect(status.status != 0, "\(status.stdout)")
        #expect(
            status.stderr.contains("the broker's reply to GetStatus has the field status missing or mistyped"),
            "\(status.stderr)"
        )
        #expect(try await Self.received(by: own) > 0, "the client did not talk to its own user's broker")
        // Another user's broker, trusted by name.
        let (named, namedSocket) = try await Self.fakeBroker(daemon, as: Daemon.strangerUID)
        _ = try await Command.run(
            Daemon.setpriv,
            Daemon.asUser(Daemon.scannerUID) + [daemon.devicectlCopy, "account"],
            environment: [
                "DEVICECTL_SOCKET": namedSocket, "DEVICECTL_STATE_DIR": "",
                "DEVICECTL_BROKER_UID": "\(Daemon.strangerUID)",
            ]
        )
        #expect(try await Self.received(by: named) > 0, "DEVICECTL_BROKER_UID did not make the client trust that user")
        await daemon.cleanUp()
    }

    @Test func aBrokerServingAnotherStoreThanTheOneNamedIsRefused() async throws {
        let daemon = try await Daemon()
        try await daemon.signWorkerIn()
        try await daemon.start()
        let other = DevicectlRunner()
        defer { other.cleanUp() }
        #expect(try await other.run(["provision", "--policy", DevicectlRunner.policy("kiosk.json")]).status == 0)
        // Root names the other store, but the socket is this daemon's: nothing is signed out.
        let signOut = try await Command.run(
            DevicectlRunner.productsDirectory.appendingPathComponent("devicectl"),
            ["signout", "--state-dir", other.stateDirectory.path],
            environment: ["DEVICECTL_SOCKET": daemon.socketPath, "DEVICECTL_STATE_DIR": ""]
        )
        #expect(signOut.status == 64, "\(signOut.stdout) \(signOut.stderr)")
        #expect(
            signOut.stderr.contains(other.stateDirectory.path) && signOut.stderr.contains("nothing was done"),
            "\(signOut.stderr)"
        )
        // An app naming the other store through this broker: refused too.
        let app = try await daemon.devicectl(
            as: Daemon.scannerUID,
            ["account", "--state-dir", other.stateDirectory.path]
        )
        #expect(app.status == 64, "\(app.stdout) \(app.stderr)")
        let account = try await daemon.devicectl(as: Daemon.timeclockUID, ["account", "--json"])
        #expect(account.stdout.contains("\"current\" : {"), "the worker was signed out: \(account.stdout)")
        // The same store named explicitly is fine.
        let same = try await Command.run(
            DevicectlRunner.productsDirectory.appendingPathComponent("devicectl"),
            ["signout", "--state-dir", daemon.cli.stateDirectory.path],
            environment: ["DEVICECTL_SOCKET": daemon.socketPath, "DEVICECTL_STATE_DIR": ""]
        )
        #expect(same.status == 0, "\(same.stderr)")
        await daemon.cleanUp()
    }

    @Test func aSecretTooLargeForTheBrokerGetsAClearErrorBeforeAnythingIsSent() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        let secret = String(repeating: "s", count: 3_000_000)
        let add = try await daemon.devicectl(
            as: Daemon.scannerUID,
            [
                "keychain", "add-generic-password", "--service", "big", "--account", "a",
                "--secret-stdin",
            ],
            stdin: secret
        )
        #expect(add.status == 65, "\(add.stdout) \(add.stderr)")
        #expect(add.stderr.contains("at most about 750 KB"), "\(add.stderr)")
        #expect(!add.stderr.contains("cannot reach the broker"))
        // The broker kept serving that app.
        let small = try await daemon.devicectl(
            as: Daemon.scannerUID,
            [
                "keychain", "add-generic-password", "--service", "small", "--account", "a",
                "--secret-stdin",
            ],
            stdin: "fits"
        )
        #expect(small.status == 0, "\(small.stderr)")
        await daemon.cleanUp()
    }
}
