import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// The master key sealed to the device through the real systemd-creds: with a host key of its own
/// (`SYSTEMD_CREDENTIAL_SECRET`) and with a software TPM2 (Tests/TPM/tpm-sandbox: swtpm behind tpm2-abrmd,
/// its state kept per "device"). A copy of the state directory opens nowhere else, a PCR change refuses to
/// unseal, and no plaintext key stays on disk.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct KeySealingTests {
    static let tpmSandbox = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("TPM/tpm-sandbox")
    static let devicectl = DevicectlRunner.productsDirectory.appendingPathComponent("devicectl")

    /// Every byte of the files in `directory` by name (to show nothing changed), but SQLite's shared-memory
    /// WAL index (`-shm`) and an empty write-ahead log, which hold no data (SQLite removes an empty log
    /// when the last connection closes).
    static func fingerprint(_ directory: URL) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where !name.hasSuffix("-shm") {
            var isDirectory: ObjCBool = false
            let url = directory.appendingPathComponent(name)
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue
            else { continue }
            let bytes = try Data(contentsOf: url)
            if name.hasSuffix("-wal") && bytes.isEmpty { continue }
            files[name] = bytes
        }
        return files
    }

    /// A copy of `directory` (another device's disk image of this one).
    static func copy(_ directory: URL) throws -> URL {
        let copy = URL(fileURLWithPath: directory.path + "-copy-\(UUID().uuidString.prefix(6))")
        try FileManager.default.copyItem(at: directory, to: copy)
        return copy
    }

    /// Provisions with the key file first and reads it, so the test knows the plaintext key it must not find.
    static func provisionAndReadKey(_ cli: DevicectlRunner, environment: [String: String] = [:]) async throws -> Data {
        let provision = try await cli.run(
            ["provision", "--policy", DevicectlRunner.policy("kiosk.json")],
            environment: environment
        )
        try #require(provision.status == 0, "\(provision.stderr)")
        return try Data(contentsOf: cli.stateDirectory.appendingPathComponent("master.key"))
    }

    /// No file of `directory` holds `key`, and there is no master.key.
    static func expectNoPlaintextKey(_ key: Data, in directory: URL) throws {
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("master.key").path))
        for (name, bytes) in try fingerprint(directory) {
            #expect(bytes.range(of: key) == nil, "the plaintext key is in \(name)")
        }
    }

    /// Host keys of their own for this device and another (`SYSTEMD_CREDENTIAL_SECRET`), in a scratch directory.
    struct HostKeys {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "host-keys-\(UUID().uuidString.prefix(8))"
        )
        var here: [String: String] {
            ["SYSTEMD_CREDENTIAL_SECRET": directory.appendingPathComponent("this-device").path]
        }
        var elsewhere: [String: String] {
            ["SYSTEMD_CREDENTIAL_SECRET": directory.appendingPathComponent("other-device").path]
        }

        init() throws { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) }
        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    /// Software TPM2s (Tests/TPM/tpm-sandbox), each kept in a directory of its own under a scratch directory,
    /// on ports of this test's own.
    struct TPMs {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "tpms-\(UUID().uuidString.prefix(8))"
        )
        let port: Int

        /// The TPM of this device, and of another.
        var thisDevice: String { directory.appendingPathComponent("this-device").path }
        var otherDevice: String { directory.appendingPathComponent("other-device").path }

        init(ports: Range<Int>) { port = 23_000 + 2 * Int.random(in: ports) }

        /// devicectl `arguments` on `stateDirectory` with `tpm` as the device's TPM, run through `prefix` (a
        /// shell that changes the TPM first) when given.
        func devicectl(
            _ tpm: String,
            _ arguments: [String],
            stateDirectory: URL,
            prefix: [String] = []
        ) async throws -> Command.Result {
            try await DevicectlRunner.execute(
                KeySealingTests.tpmSandbox,
                [tpm, "\(port)"] + prefix + [KeySealingTests.devicectl.path]
                    + arguments + ["--state-dir", stateDirectory.path]
            )
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    /// A shell that extends `pcr` of the sandbox's TPM, then runs the rest of the command line.
    static func extending(pcr: Int) -> [String] {
        [
            "/bin/bash", "-c", "tpm2_pcrextend \(pcr):sha256=\(String(repeating: "cd", count: 32)) && exec \"$@\"",
            "pcr-change",
        ]
    }

    @Test func aKeySealedToTheHostKeyOpensHereAndACopyWithAnotherHostKeyFailsClearlyChangingNothing() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let hostKeys = try HostKeys()
        defer { hostKeys.remove() }
        let here = hostKeys.here
        let elsewhere = hostKeys.elsewhere
        let key = try await Self.provisionAndReadKey(cli, environment: here)
        let sealed = try await cli.run(["key", "seal", "--with", "host"], environment: here)
        try #require(sealed.status == 0, "\(sealed.stderr)")
        try Self.expectNoPlaintextKey(key, in: cli.stateDirectory)
        #expect(
            FileManager.default.fileExists(atPath: cli.stateDirectory.appendingPathComponent("master.key.cred").path)
        )

        // Root's devicectl opens the sealed store by itself; info says how the key is held; the sealing is audited.
        let info = try await cli.run(["info", "--json"], environment: here)
        #expect(
            info.status == 0
                && (try? parseJSON(info.stdout) as? [String: Any])?["keyProtection"] as? String == "sealed: host",
            "\(info.stdout) \(info.stderr)"
        )
        let jo = try cli.writeFile("jo.json", Worker.jo.response())
        let signIn = try await cli.run(
            ["signin", "--app", "com.contoso.kiosk.scanner", "--token-response", jo],
            environment: here
        )
        #expect(signIn.status == 0, "\(signIn.stderr)")
        let audit = try await cli.run(["audit", "--json"], environment: here)
        let sealedEvent = (try? parseJSON(audit.stdout) as? [[String: Any]])?.first {
            $0["type"] as? String == "device.key_sealed"
        }
        #expect((sealedEvent?["details"] as? [String: String])?["binding"] == "host", "\(audit.stdout)")
        // deviced starts on it (outside systemd it unseals through systemd-creds too).
        let daemon = try ChildProcess(
            product: "deviced",
            ["--state-dir", cli.stateDirectory.path, "--socket", cli.stateDirectory.path + "/b.sock"],
            environment: here
        )
        #expect(await BrokerDaemon.waitUntilReady(daemon), "\(daemon.standardError)")
        _ = daemon.send(SIGTERM)
        _ = await daemon.waitForExit(timeout: 30)

        // The state directory copied to another device (another host key): a clear refusal, nothing changed.
        let copy = try Self.copy(cli.stateDirectory)
        defer { try? FileManager.default.removeItem(at: copy) }
        let before = try Self.fingerprint(copy)
        let stolen = try await DevicectlRunner.execute(
            Self.devicectl,
            ["accounts", "--state-dir", copy.path],
            environment: elsewhere
        )
        #expect(
            stolen.status == 47 && stolen.stderr.contains("another device's host key")
                && stolen.stderr.contains("nothing was changed"),
            "\(stolen.status) \(stolen.stderr)"
        )
        let after = try Self.fingerprint(copy)
        #expect(
            after == before,
            "changed: \(Set(after.keys).union(before.keys).filter { after[$0] != before[$0] }.sorted())"
        )
        let stolenDaemon = try ChildProcess(
            product: "deviced",
            ["--state-dir", copy.path, "--socket", copy.path + "/b.sock"],
            environment: elsewhere
        )
        #expect(
            await stolenDaemon.waitForExit(timeout: 30) && stolenDaemon.status == 78,
            "\(stolenDaemon.standardError)"
        )
        // Sealing again is refused; the sealed store stays as it is.
        let again = try await cli.run(["key", "seal", "--with", "host"], environment: here)
        #expect(again.status == 47 && again.stderr.contains("sealed already"), "\(again.status) \(again.stderr)")
    }

    @Test func aKeySealedByAnEarlierVersionThroughItsPathStillOpensAndRotatesThroughPipes() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let hostKeys = try HostKeys()
        defer { hostKeys.remove() }
        let here = hostKeys.here
        _ = try await Self.provisionAndReadKey(cli, environment: here)
        // Sealed as the earlier version did: systemd-creds given the key file's and the credential's paths.
        let keyFile = cli.stateDirectory.appendingPathComponent("master.key")
        let sealed = cli.stateDirectory.appendingPathComponent("master.key.cred")
        let encrypt = try await DevicectlRunner.execute(
            URL(fileURLWithPath: "/usr/bin/systemd-creds"),
            ["encrypt", "--name=sharedmode-master-key", "--with-key=host", keyFile.path, sealed.path],
            environment: here
        )
        try #require(encrypt.status == 0, "\(encrypt.stderr)")
        try Data(#"{"binding":"host","pcrs":[]}"#.utf8).write(
            to: cli.stateDirectory.appendingPathComponent("master.key.seal")
        )
        try FileManager.default.removeItem(at: keyFile)
        let info = try await cli.run(["info", "--json"], environment: here)
        #expect(
            info.status == 0
                && (try? parseJSON(info.stdout) as? [String: Any])?["keyProtection"] as? String == "sealed: host",
            "\(info.stdout) \(info.stderr)"
        )
        // A rotation seals the new key through systemd-creds' standard input and output; it opens, the old one no more.
        let old = try Data(contentsOf: sealed)
        let rotated = try await cli.run(["key", "rotate"], environment: here)
        #expect(rotated.status == 0 && rotated.stdout.contains("held as: host"), "\(rotated.stdout) \(rotated.stderr)")
        #expect(try Data(contentsOf: sealed) != old)
        let after = try await cli.run(["accounts"], environment: here)
        #expect(after.status == 0, "\(after.stderr)")
        // The new credential is one systemd-creds decrypts by path too (the unit's LoadCredentialEncrypted= does).
        let decrypt = try await DevicectlRunner.execute(
            URL(fileURLWithPath: "/usr/bin/systemd-creds"),
            ["decrypt", "--name=sharedmode-master-key", "--transcode=base64", "--newline=no", sealed.path, "-"],
            environment: here
        )
        #expect(
            decrypt.status == 0 && Data(base64Encoded: decrypt.stdout)?.count == 32,
            "\(decrypt.status) \(decrypt.stderr)"
        )
        // A symbolic link at master.key.cred: deviced and devicectl refuse to read through it (78), its target untouched.
        let victim = cli.stateDirectory.path + "-victim"
        defer { unlink(victim) }
        #expect(
            FileManager.default.createFile(
                atPath: victim,
                contents: Data("root's own".utf8),
                attributes: [.posixPermissions: 0o600]
            )
        )
        try FileManager.default.removeItem(at: sealed)
        try FileManager.default.createSymbolicLink(atPath: sealed.path, withDestinationPath: victim)
        let daemon = try ChildProcess(
            product: "deviced",
            ["--state-dir", cli.stateDirectory.path, "--socket", cli.stateDirectory.path + "/b.sock"],
            environment: here
        )
        #expect(
            await daemon.waitForExit(timeout: 60) && daemon.status == 78
                && daemon.standardError.contains("is a symbolic link"),
            "\(daemon.status) \(daemon.standardError)"
        )
        let refused = try await cli.run(["accounts"], environment: here)
        #expect(
            refused.status == 78 && refused.stderr.contains("is a symbolic link"),
            "\(refused.status) \(refused.stderr)"
        )
        #expect(FileManager.default.contents(atPath: victim) == Data("root's own".utf8))
    }

    @Test func aKeySealedToTheTPMOpensAcrossRestartsButNotUnderAnotherTPMNorAfterAPCRChange() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let tpms = TPMs(ports: 0..<400)
        defer { tpms.remove() }
        let thisTPM = tpms.thisDevice
        let otherTPM = tpms.otherDevice
        /// devicectl with `tpm` as the device's TPM.
        func devicectl(
            _ tpm: String,
            _ arguments: [String],
            stateDirectory: URL? = nil,
            prefix: [String] = []
        ) async throws -> Command.Result {
            try await tpms.devicectl(
                tpm,
                arguments,
                stateDirectory: stateDirectory ?? cli.stateDirectory,
                prefix: prefix
            )
        }
        let provision = try await devicectl(
            thisTPM,
            ["provision", "--policy", DevicectlRunner.policy("kiosk.json"), "--seal", "tpm2", "--tpm2-pcrs", "7"]
        )
        try #require(provision.status == 0, "\(provision.stderr)")
        #expect(!FileManager.default.fileExists(atPath: cli.stateDirectory.appendingPathComponent("master.key").path))
        // Opens again in new processes with the TPM (a restart of the device's services).
        for _ in 0..<2 {
            let info = try await devicectl(thisTPM, ["info", "--json"])
            let json = try? parseJSON(info.stdout) as? [String: Any]
            #expect(
                info.status == 0 && json?["keyProtection"] as? String == "sealed: tpm2 (PCRs 7)"
                    && json?["mode"] as? String == "shared",
                "\(info.stdout) \(info.stderr)"
            )
        }
        // The disk image under another TPM.
        let copy = try Self.copy(cli.stateDirectory)
        defer { try? FileManager.default.removeItem(at: copy) }
        let before = try Self.fingerprint(copy)
        let stolen = try await devicectl(otherTPM, ["accounts"], stateDirectory: copy)
        #expect(
            stolen.status == 47 && stolen.stderr.contains("sealed to another device's TPM"),
            "\(stolen.status) \(stolen.stderr)"
        )
        #expect(try Self.fingerprint(copy) == before)
        // The boot state changed (PCR 7 extended, in the same TPM session: a TPM's PCRs start afresh at each boot).
        let changed = try await devicectl(thisTPM, ["accounts"], prefix: Self.extending(pcr: 7))
        #expect(changed.status == 47 && changed.stderr.contains("PCRs changed"), "\(changed.status) \(changed.stderr)")
        // The same TPM after that "boot": it opens again.
        let rebooted = try await devicectl(thisTPM, ["accounts"])
        #expect(rebooted.status == 0, "\(rebooted.stderr)")
        // A rotation seals the new key to the TPM with the same PCRs; the old credential opens the store no more.
        let oldCredential = try Data(contentsOf: cli.stateDirectory.appendingPathComponent("master.key.cred"))
        let rotated = try await devicectl(thisTPM, ["key", "rotate"])
        #expect(
            rotated.status == 0 && rotated.stdout.contains("held as: tpm2 (PCRs 7)"),
            "\(rotated.stdout) \(rotated.stderr)"
        )
        #expect(!FileManager.default.fileExists(atPath: cli.stateDirectory.appendingPathComponent("master.key").path))
        let afterRotation = try await devicectl(thisTPM, ["info", "--json"])
        #expect(
            afterRotation.status == 0
                && (try? parseJSON(afterRotation.stdout) as? [String: Any])?["keyProtection"] as? String
                    == "sealed: tpm2 (PCRs 7)",
            "\(afterRotation.stdout) \(afterRotation.stderr)"
        )
        let backup = try Self.copy(cli.stateDirectory)
        defer { try? FileManager.default.removeItem(at: backup) }
        try oldCredential.write(to: backup.appendingPathComponent("master.key.cred"))
        let stale = try await devicectl(thisTPM, ["accounts"], stateDirectory: backup)
        #expect(
            stale.status == 47 && stale.stderr.contains("sealed key does not open this store"),
            "\(stale.status) \(stale.stderr)"
        )
    }

    @Test func thePolicysKeyProtectionSealsAtProvisioningAndItsNewPCRsAtTheNextRotation() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let tpms = TPMs(ports: 400..<800)
        defer { tpms.remove() }
        func devicectl(_ arguments: [String], prefix: [String] = []) async throws -> Command.Result {
            try await tpms.devicectl(tpms.thisDevice, arguments, stateDirectory: cli.stateDirectory, prefix: prefix)
        }
        func policy(pcrs: [Int]) throws -> String {
            var document = try #require(
                try JSONSerialization.jsonObject(
                    with: Data(contentsOf: URL(fileURLWithPath: DevicectlRunner.policy("kiosk.json")))
                ) as? [String: Any]
            )
            document["keyProtection"] = ["seal": "tpm2", "tpm2Pcrs": pcrs]
            return try cli.writeFile(
                "kiosk-\(pcrs.map(String.init).joined(separator: "-")).json",
                try JSONSerialization.data(withJSONObject: document)
            )
        }
        // The command line may not contradict the policy.
        let contradicted = try await devicectl(["provision", "--policy", try policy(pcrs: [7]), "--seal", "host"])
        #expect(
            contradicted.status == 64
                && contradicted.stderr.contains("the policy's keyProtection asks for tpm2 (PCRs 7)"),
            "\(contradicted.status) \(contradicted.stderr)"
        )
        #expect(
            !FileManager.default.fileExists(atPath: cli.stateDirectory.appendingPathComponent("keychain.sqlite").path),
            "a refused provisioning left a store"
        )
        // No --seal: the policy's sealing.
        let provision = try await devicectl(["provision", "--policy", try policy(pcrs: [7])])
        try #require(provision.status == 0, "\(provision.stderr)")
        #expect(!FileManager.default.fileExists(atPath: cli.stateDirectory.appendingPathComponent("master.key").path))
        let info = try await devicectl(["info", "--json"])
        #expect(
            (try? parseJSON(info.stdout) as? [String: Any])?["keyProtection"] as? String == "sealed: tpm2 (PCRs 7)",
            "\(info.stdout) \(info.stderr)"
        )
        // The policy now binds PCR 16 too: the update says what to do, the rotation seals the new key so.
        let update = try await devicectl(["provision", "--policy", try policy(pcrs: [7, 16])])
        #expect(
            update.status == 0 && update.stderr.contains("run `devicectl key rotate`"),
            "\(update.status) \(update.stderr)"
        )
        let rotate = try await devicectl(["key", "rotate"])
        #expect(
            rotate.status == 0 && rotate.stdout.contains("held as: tpm2 (PCRs 7+16)"),
            "\(rotate.stdout) \(rotate.stderr)"
        )
        let resealed = try await devicectl(["info", "--json"])
        #expect(
            (try? parseJSON(resealed.stdout) as? [String: Any])?["keyProtection"] as? String
                == "sealed: tpm2 (PCRs 7+16)",
            "\(resealed.stdout)"
        )
        // Bound to PCR 16 for real: extending it refuses to unseal.
        let changed = try await devicectl(["accounts"], prefix: Self.extending(pcr: 16))
        #expect(changed.status == 47 && changed.stderr.contains("PCRs changed"), "\(changed.status) \(changed.stderr)")
        let audit = try await devicectl(["audit", "--json"])
        let rotation = (try? parseJSON(audit.stdout) as? [[String: Any]])?.first {
            $0["type"] as? String == "device.key_rotated"
        }
        #expect((rotation?["details"] as? [String: String])?["keyProtection"] == "tpm2 (PCRs 7+16)", "\(audit.stdout)")
    }
    @Test func aWrongKeyLeavesTheWriteAheadLogOfACopiedRunningStoreAsItWas() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        _ = try await Self.provisionAndReadKey(cli)
        // A writer killed before it closed (a disk image of a running device): the log holds committed frames.
        let python = """
            import os, sqlite3, sys
            db = sqlite3.connect(sys.argv[1], isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("INSERT INTO store_meta (name, value) VALUES ('test.frame', x'00')")
            os._exit(0)
            """
        let writer = try await DevicectlRunner.execute(
            URL(fileURLWithPath: "/usr/bin/python3"),
            ["-c", python, cli.databasePath]
        )
        try #require(writer.status == 0, "\(writer.stderr)")
        let wal = try Data(contentsOf: URL(fileURLWithPath: cli.databasePath + "-wal"))
        try #require(!wal.isEmpty, "the writer left no frames in the log")
        let before = try Self.fingerprint(cli.stateDirectory)
        let otherKey = try cli.writeFile("other.key", Data((0..<32).map { UInt8($0) }))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: otherKey)
        let wrong = try await cli.run(["accounts", "--key-file", otherKey])
        #expect(wrong.status == 47 && wrong.stderr.contains("nothing was changed"), "\(wrong.status) \(wrong.stderr)")
        let after = try Self.fingerprint(cli.stateDirectory)
        #expect(
            after == before,
            "changed: \(Set(after.keys).union(before.keys).filter { after[$0] != before[$0] }.sorted())"
        )
        // The right key opens it with everything there.
        let right = try await cli.run(["info"])
        #expect(right.status == 0 && right.stdout.contains("mode: shared"), "\(right.stdout) \(right.stderr)")
    }
}
