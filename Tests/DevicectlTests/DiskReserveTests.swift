import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// The disk reserve for sign-outs on a full disk, made again by the running daemon as soon as there is room:
/// a disk filled again after one full-disk sign-out still lets the next shift end; an app's keychain add never
/// makes it (an app must not trade its items for it), an account change does.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct DiskReserveTests {
    typealias Daemon = BrokerDaemon

    /// `diskReserve` of root's `devicectl status --json` (nil when the broker does not say).
    static func reserve(_ daemon: Daemon) async throws -> Bool? {
        let status = try await daemon.devicectl(as: 0, ["status", "--json"])
        try #require(status.status == 0, "\(status.stderr)")
        let summary = try #require(try parseJSON(status.stdout) as? [String: Any])
        return (summary["broker"] as? [String: Any])?["diskReserve"] as? Bool
    }

    /// Fills the state directory's filesystem to its last block with a file of its own (a real process).
    static func fill(_ daemon: Daemon, _ name: String) async throws -> String {
        let filler = daemon.cli.stateDirectory.appendingPathComponent(name).path
        let fill = try await Command.run(URL(fileURLWithPath: "/bin/sh"), ["-c", "cat /dev/zero > '\(filler)'"])
        #expect(fill.stderr.contains("No space left"), "\(fill.stderr)")
        return filler
    }

    @Test func theReserveIsMadeAgainOnceThereIsRoomSoASecondFullDiskStillEndsTheShift() async throws {
        let daemon = try await Daemon(mount: "size=24m")
        try await daemon.signWorkerIn(tokens: 20)
        try await daemon.start(["--log-level", "debug"])
        #expect(try await Self.reserve(daemon) == true)

        // The first full disk: the sign-out uses the reserve, and status says it is gone.
        var filler = try await Self.fill(daemon, "filler-1")
        let first = try await daemon.devicectl(as: 0, ["signout"])
        try #require(first.status == 0, "\(first.stdout) \(first.stderr) \(daemon.logTail())")
        #expect(try await Self.reserve(daemon) == false)
        let text = try await daemon.devicectl(as: 0, ["status"])
        #expect(text.stdout.contains("disk reserve: MISSING") && text.stdout.contains("free space"), "\(text.stdout)")

        // Room again: the daemon makes the reserve without being asked (its timer), before anything else happens.
        try FileManager.default.removeItem(atPath: filler)
        let removed = Date()
        var back = false
        while !back && Date().timeIntervalSince(removed) < 60 {
            back = try await Self.reserve(daemon) == true
            if !back { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(back, "the reserve was not made again within 60 s: \(daemon.logTail())")
        print(
            "DiskReserveTests: the reserve was made again \(Int(Date().timeIntervalSince(removed) * 1000)) ms after there was room"
        )
        #expect(daemon.logTail(Int.max).contains("in place again"))

        // The next worker, then the disk filled again: the next shift still ends.
        try await daemon.signWorkerIn(tokens: 20)
        let signedIn = try await daemon.devicectl(as: Daemon.timeclockUID, ["account", "--json"])
        #expect(!signedIn.stdout.contains("\"current\" : null"), "\(signedIn.stdout) \(signedIn.stderr)")
        filler = try await Self.fill(daemon, "filler-2")
        let second = try await daemon.devicectl(as: 0, ["signout"])
        #expect(
            second.status == 0,
            "the second full-disk sign-out failed: \(second.stdout) \(second.stderr) \(daemon.logTail())"
        )
        let account = try await daemon.devicectl(as: Daemon.timeclockUID, ["account", "--json"])
        #expect(account.stdout.contains("\"current\" : null"), "\(account.stdout) \(account.stderr)")
        try? FileManager.default.removeItem(atPath: filler)
        try await daemon.verifyStore()
        await daemon.cleanUp()
    }

    /// Fills the state directory's filesystem as the uid the policy does not list, in `directory` (that uid's
    /// own, on the same filesystem): the process opens nothing of root's but the directory it is handed as a
    /// descriptor, as a user reaches a directory of its own elsewhere on a shared filesystem.
    static func fillAsStranger(_ directory: URL, _ name: String) async throws {
        let fill = try await Command.run(
            URL(fileURLWithPath: "/bin/sh"),
            [
                "-c",
                "directory=$1; shift; exec 3<\"$directory\" && exec /usr/bin/setpriv \"$@\"", "fill",
                directory.path,
            ] + Daemon.asUser(Daemon.strangerUID) + ["/bin/sh", "-c", "cat /dev/zero > /proc/self/fd/3/\(name)"]
        )
        #expect(fill.stderr.contains("No space left"), "\(fill.stderr)")
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent(name).path)
        #expect((attributes[.ownerAccountID] as? NSNumber)?.uint32Value == Daemon.strangerUID, "\(attributes)")
    }

    @Test(.tags(.needsIdentityProvider))
    func aDiskAnUnlistedUserFilledGetsTheReserveBackFromASignInButNeverFromAKeychainAdd() async throws {
        let provider = try await IdentityCLITests.Provider.shared()
        var policy = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: DevicectlRunner.policy("kiosk-password.json")))
            ) as? [String: Any]
        )
        var authority = try #require(policy["authority"] as? [String: Any])
        authority["issuer"] = provider.issuer
        policy["authority"] = authority
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("reserve-policy-\(UUID()).json")
        try JSONSerialization.data(withJSONObject: policy).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        defer { try? FileManager.default.removeItem(at: file) }
        let daemon = try await Daemon(policy: file.path, mount: "size=24m")
        try await daemon.signWorkerIn(tokens: 20)
        // No timer: only what the daemon does on a call can make the reserve again.
        try await daemon.start(["--log-level", "debug", "--disk-reserve-check-seconds", "0"])
        #expect(try await Self.reserve(daemon) == true)
        let stranger = daemon.cli.stateDirectory.appendingPathComponent("stranger")
        try FileManager.default.createDirectory(at: stranger, withIntermediateDirectories: false)
        try FileManager.default.setAttributes(
            [.ownerAccountID: Daemon.strangerUID, .groupOwnerAccountID: Daemon.strangerUID, .posixPermissions: 0o700],
            ofItemAtPath: stranger.path
        )

        // The stranger fills the disk; the shift still ends, on the reserve.
        try await Self.fillAsStranger(stranger, "filler-1")
        let first = try await daemon.devicectl(as: 0, ["signout"])
        try #require(first.status == 0, "\(first.stdout) \(first.stderr) \(daemon.logTail())")
        #expect(try await Self.reserve(daemon) == false)

        // Room again. An app's keychain add takes some of it and leaves the reserve missing.
        try FileManager.default.removeItem(at: stranger.appendingPathComponent("filler-1"))
        let add = try await daemon.devicectl(
            as: Daemon.scannerUID,
            ["keychain", "add-generic-password", "--service", "s1", "--account", "a1", "--secret-stdin"],
            stdin: "scanner-item"
        )
        #expect(add.status == 0, "\(add.stderr)")
        #expect(try await Self.reserve(daemon) == false, "a keychain add made the reserve: \(daemon.logTail())")

        // The next worker's sign-in (through the broker, against the provider) makes it again.
        let signIn = try await PasswordSignInTests.signIn(
            daemon,
            as: Daemon.scannerUID,
            user: "worker1",
            password: PasswordSignInTests.password1
        )
        try #require(signIn.status == 0, "\(signIn.stdout) \(signIn.stderr) \(daemon.logTail())")
        let deadline = Date().addingTimeInterval(ChildProcess.shortestWait)
        var back = try await Self.reserve(daemon) == true
        while !back && Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
            back = try await Self.reserve(daemon) == true
        }
        #expect(back, "the sign-in did not make the reserve again: \(daemon.logTail())")

        // The stranger fills the disk again: that worker's shift ends too.
        try await Self.fillAsStranger(stranger, "filler-2")
        let second = try await daemon.devicectl(as: 0, ["signout"])
        #expect(second.status == 0, "\(second.stdout) \(second.stderr) \(daemon.logTail())")
        let account = try await daemon.devicectl(as: Daemon.timeclockUID, ["account", "--json"])
        #expect(account.stdout.contains("\"current\" : null"), "\(account.stdout) \(account.stderr)")
        try FileManager.default.removeItem(at: stranger)
        try await daemon.verifyStore()
        await daemon.cleanUp()
    }
}
