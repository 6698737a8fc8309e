import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// `devicectl key rotate`: the store under a new master key, held as the old one was, with everything in
/// it still there; the old key opens nothing; a rotation killed at either step leaves a store that opens and
/// is finished later; no rotation while deviced serves the store.
@Suite(.serialized, .tags(.integration)) struct KeyRotationTests {
    static let scanner = ["--app", "com.contoso.kiosk.scanner"]

    /// A provisioned device with a worker signed in and an item of the scanner's.
    static func device(_ cli: DevicectlRunner, environment: [String: String] = [:]) async throws {
        let provision = try await cli.run(
            ["provision", "--policy", DevicectlRunner.policy("kiosk.json")],
            environment: environment
        )
        try #require(provision.status == 0, "\(provision.stderr)")
        let jo = try cli.writeFile("jo.json", Worker.jo.response())
        let signIn = try await cli.run(["signin", "--token-response", jo] + scanner, environment: environment)
        try #require(signIn.status == 0, "\(signIn.stderr)")
        let add = try await cli.run(
            [
                "keychain", "add-generic-password", "--service", "scanner.api", "--account", "device",
                "--secret-stdin",
            ] + scanner,
            stdin: "scanner-secret",
            environment: environment
        )
        try #require(add.status == 0, "\(add.stderr)")
    }

    /// The scanner's item, the worker, the store's and the audit log's checks: all as before the rotation.
    static func expectEverythingOpens(_ cli: DevicectlRunner, environment: [String: String] = [:]) async throws {
        let item = try await cli.run(
            [
                "keychain", "find-generic-password", "--service", "scanner.api", "--account", "device",
                "--print-secret", "--json",
            ] + scanner,
            environment: environment
        )
        #expect(
            item.status == 0 && item.stdout.contains(Data("scanner-secret".utf8).base64EncodedString()),
            "\(item.stdout) \(item.stderr)"
        )
        let account = try await cli.run(["account"] + scanner, environment: environment)
        #expect(
            account.status == 0 && account.stdout.contains("current: jo.worker@contoso.example"),
            "\(account.stdout) \(account.stderr)"
        )
        let verify = try await cli.run(["keychain", "verify"], environment: environment)
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
        let audit = try await cli.run(["audit", "verify"], environment: environment)
        #expect(audit.status == 0, "\(audit.stdout) \(audit.stderr)")
    }

    /// The `device.key_rotated` events of the audit log.
    static func rotations(_ cli: DevicectlRunner, environment: [String: String] = [:]) async throws -> [[String: Any]] {
        let audit = try await cli.run(["audit", "--json"], environment: environment)
        return ((try? parseJSON(audit.stdout) as? [[String: Any]]) ?? []).filter {
            $0["type"] as? String == "device.key_rotated"
        }
    }

    func file(_ cli: DevicectlRunner, _ name: String) -> URL { cli.stateDirectory.appendingPathComponent(name) }

    @Test func theRotatedKeyOpensEverythingAndTheOldKeyNothing() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        try await Self.device(cli)
        let oldKey = try Data(contentsOf: file(cli, "master.key"))
        let oldKeyFile = try cli.writeFile("old.key", oldKey)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: oldKeyFile)
        let rotate = try await cli.run(["key", "rotate", "--json"])
        try #require(rotate.status == 0, "\(rotate.stderr)")
        let summary = try #require(try parseJSON(rotate.stdout) as? [String: Any])
        #expect(
            summary["keyProtection"] as? String == "key file" && (summary["groups"] as? Int ?? 0) >= 2,
            "\(summary)"
        )
        let newKey = try Data(contentsOf: file(cli, "master.key"))
        #expect(newKey.count == 32 && newKey != oldKey)
        #expect(!FileManager.default.fileExists(atPath: file(cli, "master.key.next").path))
        try await Self.expectEverythingOpens(cli)
        let events = try await Self.rotations(cli)
        #expect(
            events.count == 1
                && (events.first?["details"] as? [String: String])?["groups"] == "\(summary["groups"] as? Int ?? -1)",
            "\(events)"
        )
        // The old key (a copy taken before: a backup, a stolen disk image) opens nothing, changing nothing.
        let before = try KeySealingTests.fingerprint(cli.stateDirectory)
        let stale = try await cli.run(["keychain", "list", "--key-file", oldKeyFile] + Self.scanner)
        #expect(
            stale.status == 47 && stale.stderr.contains("does not open this store"),
            "\(stale.status) \(stale.stderr)"
        )
        #expect(try KeySealingTests.fingerprint(cli.stateDirectory) == before)
        // The kept keys tampered with (in a copy): an integrity failure that says what to do, and nothing changes.
        let copy = try KeySealingTests.copy(cli.stateDirectory)
        defer { try? FileManager.default.removeItem(at: copy) }
        _ = try await sqlite3(
            copy.appendingPathComponent("keychain.sqlite").path,
            "UPDATE store_meta SET value = zeroblob(length(value)) WHERE name = 'kept_keys'"
        )
        let tamperedBefore = try KeySealingTests.fingerprint(copy)
        let tampered = try await DevicectlRunner.execute(
            DevicectlRunner.productsDirectory.appendingPathComponent("devicectl"),
            ["account", "--state-dir", copy.path] + Self.scanner
        )
        #expect(
            tampered.status == 46 && tampered.stderr.contains("kept keys failed their integrity check")
                && tampered.stderr.contains("restore the state directory from backup"),
            "\(tampered.status) \(tampered.stderr)"
        )
        #expect(try KeySealingTests.fingerprint(copy) == tamperedBefore)
        // A second rotation over the first: the kept index and integrity keys carry over again.
        let again = try await cli.run(["key", "rotate"])
        #expect(again.status == 0, "\(again.stderr)")
        try await Self.expectEverythingOpens(cli)
    }

    @Test func aRotationKilledAtEitherStepLeavesAStoreThatOpensAndIsFinishedLater() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        try await Self.device(cli)
        let oldKey = try Data(contentsOf: file(cli, "master.key"))

        // Killed before the commit: the store is under the old key, the pending key is stale.
        let early = try await cli.run(["key", "rotate", "--kill-after", "pending-key-written"])
        #expect(early.status == 128 + SIGKILL, "\(early.status) \(early.stderr)")
        // (Only the state directory's own key is rotated.)
        let elsewhere = try await cli.run(["key", "rotate", "--key-file", file(cli, "master.key").path])
        #expect(
            elsewhere.status == 64 && elsewhere.stderr.contains("drop --key-file"),
            "\(elsewhere.status) \(elsewhere.stderr)"
        )
        #expect(FileManager.default.fileExists(atPath: file(cli, "master.key.next").path))
        try await Self.expectEverythingOpens(cli)
        #expect(try Data(contentsOf: file(cli, "master.key")) == oldKey)
        #expect(try await Self.rotations(cli).isEmpty, "a rotation that never committed was audited")

        // Killed after the commit: the store is under the pending key; the next open puts it in place.
        let late = try await cli.run(["key", "rotate", "--kill-after", "committed"])
        #expect(late.status == 128 + SIGKILL, "\(late.status) \(late.stderr)")
        let pending = try Data(contentsOf: file(cli, "master.key.next"))
        let current = try Data(contentsOf: file(cli, "master.key"))
        #expect(pending != oldKey && current == oldKey)
        try await Self.expectEverythingOpens(cli)
        #expect(try Data(contentsOf: file(cli, "master.key")) == pending)
        #expect(!FileManager.default.fileExists(atPath: file(cli, "master.key.next").path))
        #expect(try await Self.rotations(cli).count == 1, "the committed rotation's audit entry is missing")
    }

    @Test(.tags(.needsRoot)) func noRotationWhileDevicedServesTheStore() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        try await Self.device(cli)
        try FileManager.default.createDirectory(at: cli.filesDirectory, withIntermediateDirectories: true)
        let socket = cli.filesDirectory.path + "/b.sock"
        let daemon = try ChildProcess(product: "deviced", ["--state-dir", cli.stateDirectory.path, "--socket", socket])
        defer { _ = daemon.killIfRunning() }
        #expect(await BrokerDaemon.waitUntilReady(daemon), "\(daemon.standardError)")
        // (The key files only: the serving daemon writes its own files meanwhile.)
        let keyFiles = { try KeySealingTests.fingerprint(cli.stateDirectory).filter { $0.key.hasPrefix("master.key") } }
        let before = try keyFiles()
        let refused = try await cli.run(["key", "rotate"])
        #expect(
            refused.status == 69 && refused.stderr.contains("pid \(daemon.pid)")
                && refused.stderr.contains("Stop deviced first"),
            "\(refused.status) \(refused.stderr)"
        )
        #expect(try keyFiles() == before && before.keys.sorted() == ["master.key"], "\(before.keys.sorted())")
        _ = daemon.send(SIGTERM)
        _ = await daemon.waitForExit(timeout: 30)
        // Stopped, rotated, started again: the daemon serves with the new key.
        let rotate = try await cli.run(["key", "rotate"])
        #expect(rotate.status == 0, "\(rotate.stderr)")
        let restarted = try ChildProcess(
            product: "deviced",
            ["--state-dir", cli.stateDirectory.path, "--socket", socket]
        )
        defer { _ = restarted.killIfRunning() }
        #expect(await BrokerDaemon.waitUntilReady(restarted), "\(restarted.standardError)")
        let status = try await cli.run(["status", "--socket", socket, "--json"], stateDir: false)
        #expect(status.status == 0, "\(status.stderr)")
        _ = restarted.send(SIGTERM)
        _ = await restarted.waitForExit(timeout: 30)
    }

    @Test(.tags(.needsRoot)) func aKeySealedToTheHostKeyIsRotatedSealedAlike() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let hostKeys = try KeySealingTests.HostKeys()
        defer { hostKeys.remove() }
        let here = hostKeys.here
        try await Self.device(cli, environment: here)
        let sealed = try await cli.run(["key", "seal", "--with", "host"], environment: here)
        try #require(sealed.status == 0, "\(sealed.stderr)")
        let oldCredential = try Data(contentsOf: file(cli, "master.key.cred"))
        let rotate = try await cli.run(["key", "rotate"], environment: here)
        #expect(rotate.status == 0 && rotate.stdout.contains("held as: host"), "\(rotate.stdout) \(rotate.stderr)")
        #expect(try Data(contentsOf: file(cli, "master.key.cred")) != oldCredential)
        #expect(
            !FileManager.default.fileExists(atPath: file(cli, "master.key").path),
            "a plaintext key is on disk after the rotation"
        )
        #expect(!FileManager.default.fileExists(atPath: file(cli, "master.key.cred.next").path))
        try await Self.expectEverythingOpens(cli, environment: here)
        let info = try await cli.run(["info", "--json"], environment: here)
        #expect(
            (try? parseJSON(info.stdout) as? [String: Any])?["keyProtection"] as? String == "sealed: host",
            "\(info.stdout)"
        )
        // The old credential (a backup of the state directory from before) opens the rotated store no more.
        let copy = try KeySealingTests.copy(cli.stateDirectory)
        defer { try? FileManager.default.removeItem(at: copy) }
        try oldCredential.write(to: copy.appendingPathComponent("master.key.cred"))
        let stale = try await DevicectlRunner.execute(
            KeySealingTests.devicectl,
            ["accounts", "--state-dir", copy.path],
            environment: here
        )
        #expect(
            stale.status == 47 && stale.stderr.contains("sealed key does not open this store"),
            "\(stale.status) \(stale.stderr)"
        )
    }
}
