import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// `devicectl provision`, `deprovision`, `info` and policy-driven keychain entitlements, end to end through
/// the built binary, each test in its own state directory.
@Suite(.tags(.integration))
struct DeviceCLITests {
    static let kiosk = DevicectlRunner.policy("kiosk.json")
    static let personal = DevicectlRunner.policy("personal.json")
    static let scanner = "com.contoso.kiosk.scanner"
    static let timeclock = "com.contoso.kiosk.timeclock"

    /// The keys `info --json` documents.
    static let infoKeys: Set<String> = [
        "mode", "deviceId", "deviceName", "policyId", "policySha256", "provisionedAt",
        "extraDeviceInformation", "error",
    ]

    // MARK: - provision

    @Test func provisionKioskPrintsTheDeviceAndTheSamePolicyAgainChangesNothing() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let sha = try await sha256(of: Self.kiosk)

        let first = try await cli.run(["provision", "--policy", Self.kiosk])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("provisioned shared-mode device \"Front desk kiosk 3\" (id "))
        #expect(first.stdout.contains("policy sha256 \(sha)\n"))
        let keyLine = try #require(first.stdout.split(separator: "\n").first { $0.hasPrefix("audit public key ") })
        let publicKey = String(keyLine.dropFirst("audit public key ".count).prefix { $0 != " " })
        #expect(publicKey.count == 64 && publicKey.allSatisfy(\.isHexDigit), "public key: \(publicKey)")
        #expect(first.stderr.isEmpty, "\(first.stderr)")

        // The state directory and its files are private to the user (README).
        let attributes = try FileManager.default.attributesOfItem(atPath: cli.stateDirectory.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)

        let info = try #require(try await cli.json(["info", "--json"]) as? [String: Any])
        #expect(info["mode"] as? String == "shared")
        #expect(info["deviceName"] as? String == "Front desk kiosk 3")
        #expect(info["policyId"] as? String == "contoso-frontdesk-kiosk-2026-11")
        #expect(info["policySha256"] as? String == sha)
        let deviceID = try #require(info["deviceId"] as? String)
        #expect(UUID(uuidString: deviceID) != nil && deviceID == deviceID.lowercased(), "device id \(deviceID)")
        #expect(first.stdout.contains("(id \(deviceID))"))

        // The same policy again: nothing changes, in text and in JSON, and nothing is logged.
        let again = try await cli.run(["provision", "--policy", Self.kiosk])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("already provisioned with this policy; nothing changed"))
        #expect(again.stdout.contains("audit public key \(publicKey)"))
        let againJSON = try #require(
            try await cli.json(["provision", "--policy", Self.kiosk, "--json"]) as? [String: Any]
        )
        #expect(againJSON["outcome"] as? String == "unchanged")
        #expect((againJSON["device"] as? [String: Any])?["deviceId"] as? String == deviceID)
        #expect(againJSON["auditPublicKey"] as? String == publicKey)

        let events = try #require(try await cli.json(["audit", "--json"]) as? [[String: Any]])
        #expect(events.count == 1, "events: \(events)")
        let provisioned = try #require(events.first)
        #expect(provisioned["type"] as? String == "device.provisioned")
        #expect(provisioned["sequence"] as? Int == 1)
        let details = try #require(provisioned["details"] as? [String: String])
        #expect(details["deviceId"] == deviceID)
        #expect(details["mode"] == "shared")
        #expect(details["policySha256"] == sha)
        #expect(details["auditPublicKey"] == publicKey)
        #expect(
            (provisioned["actor"] as? String)?.hasPrefix("devicectl (uid \(getuid()) ") == true,
            "actor: \(provisioned["actor"] ?? "-")"
        )
    }

    @Test func provisionJSONReportsTheOutcomeAndTheDeviceInformation() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let result = try await cli.run(["provision", "--policy", Self.kiosk, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try #require(try parseJSON(result.stdout) as? [String: Any])
        #expect(Set(summary.keys) == ["outcome", "device", "auditPublicKey"])
        #expect(summary["outcome"] as? String == "provisioned")
        let key = try #require(summary["auditPublicKey"] as? String)
        #expect(key.count == 64 && key.allSatisfy(\.isHexDigit))
        let device = try #require(summary["device"] as? [String: Any])
        #expect(device["mode"] as? String == "shared")
        #expect(device["deviceName"] as? String == "Front desk kiosk 3")
        #expect(device["policyId"] as? String == "contoso-frontdesk-kiosk-2026-11")
        #expect(device["policySha256"] as? String == (try await sha256(of: Self.kiosk)))
        #expect(device["provisionedAt"] is String)
        let extra = try #require(device["extraDeviceInformation"] as? [String: String])
        #expect(extra["joinStatus"] == "provisioned")
        #expect(extra["ssoProviderMode"] == "shared")
        #expect(extra["clientId"] == "kiosk-apps")
        #expect(extra["authority"] == "http://127.0.0.1:4593/api/oidc")
        #expect(extra["deviceIdentifier"] == device["deviceId"] as? String)

        // The summary's device is what `info --json` reports afterwards.
        let info = try #require(try await cli.json(["info", "--json"]) as? [String: Any])
        for key in ["mode", "deviceId", "deviceName", "policyId", "policySha256", "provisionedAt"] {
            #expect(info[key] as? String == device[key] as? String, "\(key)")
        }
    }

    @Test func aChangeOfModeNeedsForceAndThenWipesEveryAppsItems() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let provision = try await cli.run(["provision", "--policy", Self.kiosk, "--json"])
        try #require(provision.status == 0, "\(provision.stderr)")
        let summary = try #require(try parseJSON(provision.stdout) as? [String: Any])
        let deviceID = try #require((summary["device"] as? [String: Any])?["deviceId"] as? String)
        try await addItem(
            cli,
            app: Self.scanner,
            group: "com.microsoft.adalcache",
            service: "graph",
            account: "worker-1",
            secret: "tok-1"
        )
        try await addItem(
            cli,
            app: Self.scanner,
            group: Self.scanner,
            service: "scanner-config",
            account: "a",
            secret: "cfg"
        )

        // Without --force: usage error, nothing changes.
        let refused = try await cli.run(["provision", "--policy", Self.personal])
        #expect(refused.status == 64, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains("--force"), "\(refused.stderr)")
        #expect(refused.stderr.contains("from shared to private"), "\(refused.stderr)")
        let still = try #require(try await cli.json(["info", "--json"]) as? [String: Any])
        #expect(still["mode"] as? String == "shared")
        #expect(still["policySha256"] as? String == (try await sha256(of: Self.kiosk)))
        #expect(
            try await cli.run(["keychain", "find-generic-password", "--app", Self.scanner, "--service", "graph"]).status
                == 0
        )
        #expect((try await cli.json(["audit", "--json"]) as? [Any])?.count == 1)

        // With --force: private mode, same device id, every app's items gone.
        let forced = try await cli.run(["provision", "--policy", Self.personal, "--force", "--json"])
        #expect(forced.status == 0, "\(forced.stderr)")
        let changed = try #require(try parseJSON(forced.stdout) as? [String: Any])
        #expect(changed["outcome"] as? String == "mode_changed")
        let device = try #require(changed["device"] as? [String: Any])
        #expect(device["mode"] as? String == "private")
        #expect(device["deviceId"] as? String == deviceID)
        #expect(device["deviceName"] as? String == "Dana's field laptop")
        let info = try #require(try await cli.json(["info", "--json"]) as? [String: Any])
        #expect(info["mode"] as? String == "private")
        #expect(info["policyId"] as? String == "contoso-personal-2026-11")
        #expect(info["deviceId"] as? String == deviceID)
        #expect((info["extraDeviceInformation"] as? [String: String])?["joinStatus"] == "provisioned")
        let text = try await cli.run(["info"])
        #expect(text.stdout.contains("mode: private\n"))

        let last = try #require((try await cli.json(["audit", "--json"]) as? [[String: Any]])?.last)
        #expect(last["type"] as? String == "device.mode_changed")
        #expect(last["reason"] as? String == "forced mode change")
        let details = try #require(last["details"] as? [String: String])
        #expect(details["from"] == "shared")
        #expect(details["to"] == "private")
        #expect(details["itemsRemoved"] == "2")
        #expect(details["groupsRemoved"] == "2")

        // The kiosk apps are no longer on the device; the personal app sees nothing of theirs.
        let scanner = try await cli.run([
            "keychain", "find-generic-password", "--app", Self.scanner, "--service", "graph",
        ])
        #expect(scanner.status == 77, "\(scanner.stderr)")
        let notes = try await cli.json(["keychain", "list", "--json", "--app", "com.contoso.fieldnotes"]) as? [Any]
        #expect(notes?.isEmpty == true)
        // Going back to the kiosk policy does not bring the shredded items back.
        #expect(try await cli.run(["provision", "--policy", Self.kiosk, "--force"]).status == 0)
        let back = try await cli.run(["keychain", "find-generic-password", "--app", Self.scanner, "--service", "graph"])
        #expect(back.status == 44, "\(back.stdout) \(back.stderr)")
        // the device's own record, key and anchor
        #expect(try await sqlite3(cli.databasePath, "SELECT count(*) FROM items") == "3")
        #expect(try await cli.run(["audit", "verify"]).status == 0)
    }

    @Test func aChangedPolicyWithTheSameModeShredsOnlyGroupsNoAppKeeps() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        try #require(try await cli.run(["provision", "--policy", Self.kiosk]).status == 0)
        try await addItem(
            cli,
            app: Self.scanner,
            group: "com.microsoft.adalcache",
            service: "graph",
            account: "worker-1",
            secret: "shared-tok"
        )
        try await addItem(
            cli,
            app: Self.scanner,
            group: Self.scanner,
            service: "s",
            account: "a",
            secret: "scanner-own"
        )
        try await addItem(
            cli,
            app: Self.timeclock,
            group: Self.timeclock,
            service: "t",
            account: "a",
            secret: "timeclock-own"
        )

        // The same kiosk, without the timeclock app.
        var policy = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: Self.kiosk))) as? [String: Any]
        )
        policy["apps"] = (policy["apps"] as? [[String: Any]])?.filter { $0["id"] as? String != Self.timeclock }
        policy["id"] = "contoso-frontdesk-kiosk-2026-12"
        try FileManager.default.createDirectory(at: cli.stateDirectory, withIntermediateDirectories: true)
        let file = cli.stateDirectory.appendingPathComponent("kiosk-v2.json")
        try JSONSerialization.data(withJSONObject: policy, options: [.prettyPrinted, .sortedKeys]).write(to: file)

        let update = try await cli.run(["provision", "--policy", file.path, "--json"])
        #expect(update.status == 0, "\(update.stderr)")
        let summary = try #require(try parseJSON(update.stdout) as? [String: Any])
        #expect(summary["outcome"] as? String == "updated")
        #expect((summary["device"] as? [String: Any])?["policyId"] as? String == "contoso-frontdesk-kiosk-2026-12")
        #expect((summary["device"] as? [String: Any])?["mode"] as? String == "shared")

        let kept = try await cli.run([
            "keychain", "find-generic-password", "--app", Self.scanner, "--all", "--print-secret",
        ])
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(kept.stdout.contains("secret: shared-tok"))
        #expect(kept.stdout.contains("secret: scanner-own"))
        #expect(try await cli.run(["keychain", "list", "--app", Self.timeclock]).status == 77)
        let last = try #require(
            (try await cli.json(["audit", "--json", "--type", "policy.updated"]) as? [[String: Any]])?.last
        )
        #expect((last["details"] as? [String: String])?["itemsRemoved"] == "1")
        #expect((last["details"] as? [String: String])?["groupsRemoved"] == "1")
        #expect((last["details"] as? [String: String])?["previousPolicySha256"] == (try await sha256(of: Self.kiosk)))
    }

    @Test func anInvalidPolicyExits65AndCreatesOrChangesNothing() async throws {
        let scratch = DevicectlRunner()  // holds the policy files
        defer { scratch.cleanUp() }
        try FileManager.default.createDirectory(at: scratch.stateDirectory, withIntermediateDirectories: true)
        var text = try String(contentsOfFile: Self.kiosk, encoding: .utf8)
        text = text.replacingOccurrences(of: "\"mode\": \"shared\"", with: "\"mode\": \"communal\"")
        let invalid = scratch.stateDirectory.appendingPathComponent("invalid.json")
        try text.write(to: invalid, atomically: true, encoding: .utf8)
        let garbage = scratch.stateDirectory.appendingPathComponent("garbage.json")
        try "{ not json".write(to: garbage, atomically: true, encoding: .utf8)

        // A fresh device: no state directory appears.
        let fresh = DevicectlRunner()
        defer { fresh.cleanUp() }
        for file in [invalid, garbage] {
            let result = try await fresh.run(["provision", "--policy", file.path])
            #expect(result.status == 65, "\(file.lastPathComponent): \(result.stderr)")
            #expect(result.stderr.contains("invalid policy"), "\(result.stderr)")
            #expect(result.stderr.contains("nothing was changed"), "\(result.stderr)")
            #expect(result.stdout.isEmpty)
        }
        #expect(try await fresh.run(["provision", "--policy", invalid.path, "--json"]).status == 65)
        #expect(
            !FileManager.default.fileExists(atPath: fresh.stateDirectory.path),
            "an invalid policy created the state directory"
        )
        let missing = try await fresh.run([
            "provision", "--policy", scratch.stateDirectory.appendingPathComponent("absent.json").path,
        ])
        #expect(missing.status == 74, "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: fresh.stateDirectory.path))

        // A provisioned device: the record, items and audit log are untouched, even with --force.
        let device = DevicectlRunner()
        defer { device.cleanUp() }
        try #require(try await device.run(["provision", "--policy", Self.kiosk]).status == 0)
        try await addItem(device, app: Self.scanner, service: "graph", account: "w", secret: "keep-me")
        let snapshot =
            "SELECT hex(nonce) || hex(ciphertext) FROM items ORDER BY id; SELECT sequence, hex(chain) FROM audit_events ORDER BY sequence"
        let before = try await sqlite3(device.databasePath, snapshot)
        let infoBefore = try await device.run(["info", "--json"]).stdout
        for arguments in [
            ["provision", "--policy", invalid.path], ["provision", "--policy", garbage.path, "--force"],
        ] {
            let result = try await device.run(arguments)
            #expect(result.status == 65, "\(arguments): \(result.stderr)")
        }
        #expect(try await sqlite3(device.databasePath, snapshot) == before)
        #expect(try await device.run(["info", "--json"]).stdout == infoBefore)
    }

    // MARK: - info

    @Test func infoOnANeverProvisionedDeviceIsPrivateAndCreatesNothing() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let text = try await cli.run(["info"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("mode: private\n"))
        #expect(text.stdout.contains("device: not provisioned\n"))
        #expect(text.stdout.contains("joinStatus: notProvisioned\n"))
        #expect(text.stderr.isEmpty)

        let json = try await cli.run(["info", "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let info = try #require(try parseJSON(json.stdout) as? [String: Any])
        #expect(info["mode"] as? String == "private")
        #expect(info["error"] is NSNull, "error: \(info["error"] ?? "absent")")
        for key in ["deviceId", "deviceName", "policyId", "policySha256", "provisionedAt"] {
            #expect(info[key] == nil || info[key] is NSNull, "\(key) = \(info[key] ?? "-") on an unprovisioned device")
        }
        let extra = try #require(info["extraDeviceInformation"] as? [String: String])
        #expect(extra["joinStatus"] == "notProvisioned")
        #expect(extra["ssoProviderMode"] == "private")
        #expect(extra["ssoProviderInstalled"] == "false")
        #expect(extra["deviceIdentifier"] == nil)

        #expect(!FileManager.default.fileExists(atPath: cli.stateDirectory.path), "info created the state directory")
    }

    @Test func infoJSONHasTheDocumentedKeys() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        try #require(try await cli.run(["provision", "--policy", Self.kiosk]).status == 0)
        let info = try #require(try await cli.json(["info", "--json"]) as? [String: Any])
        let missing = Self.infoKeys.subtracting(info.keys)
        #expect(missing.isEmpty, "info --json lacks \(missing.sorted())")
        #expect(info["error"] is NSNull)
        for key in ["mode", "deviceId", "deviceName", "policyId", "policySha256", "provisionedAt"] {
            #expect(info[key] is String, "\(key) = \(info[key] ?? "absent")")
        }
        let provisionedAt = try #require(info["provisionedAt"] as? String)
        #expect((try? Date.ISO8601FormatStyle().parse(provisionedAt)) != nil, "provisionedAt \(provisionedAt)")
        #expect(info["extraDeviceInformation"] is [String: String])

        let text = try await cli.run(["info"])
        #expect(text.status == 0)
        #expect(text.stdout.contains("mode: shared\n"))
        #expect(text.stdout.contains("device: Front desk kiosk 3 (id \(info["deviceId"] as? String ?? "?"))"))
        #expect(
            text.stdout.contains("policy: contoso-frontdesk-kiosk-2026-11 sha256 \(try await sha256(of: Self.kiosk))")
        )
        #expect(text.stdout.contains("joinStatus: provisioned\n"))
    }

    @Test func infoOnABrokenStoreShowsTheDefaultInformationAndFails() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        try #require(try await cli.run(["provision", "--policy", Self.kiosk]).status == 0)
        try #require(try await cli.run(["info", "--json"]).stdout.contains("\"shared\""))
        // Garbage over the database file (no devicectl process is running).
        let garbage = Data((0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) })
        try garbage.write(to: URL(fileURLWithPath: cli.databasePath))

        let text = try await cli.run(["info"])
        #expect(text.status != 0, "info on a broken store exited 0")
        #expect(text.stdout.contains("mode: private\n"), "\(text.stdout)")
        #expect(text.stdout.contains("device: not provisioned\n"), "\(text.stdout)")
        #expect(text.stderr.hasPrefix("devicectl: error: "), "\(text.stderr)")

        let json = try await cli.run(["info", "--json"])
        #expect(json.status != 0)
        #expect(json.status == text.status)
        let info = try #require(try parseJSON(json.stdout) as? [String: Any])
        #expect(info["mode"] as? String == "private")
        #expect((info["extraDeviceInformation"] as? [String: String])?["joinStatus"] == "notProvisioned")
        let error = try #require(info["error"] as? String, "error: \(info["error"] ?? "absent")")
        #expect(!error.isEmpty)
        #expect(json.stderr.contains("devicectl: error: "), "\(json.stderr)")
    }

    // MARK: - Keychain entitlements from the policy

    @Test func keychainAppsTakeTheirEntitlementsFromThePolicy() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        try #require(try await cli.run(["provision", "--policy", Self.kiosk]).status == 0)

        let add = try await cli.run(
            [
                "keychain", "add-generic-password", "--app", Self.scanner, "--access-group", "com.microsoft.adalcache",
                "--service", "graph", "--account", "worker-1", "--secret-stdin",
            ],
            stdin: "tok-SHARED"
        )
        #expect(add.status == 0, "\(add.stderr)")
        #expect(add.stdout.contains("added item to com.microsoft.adalcache"))
        // Without a group the item goes to the policy's first group for the app: its own.
        let defaultGroup = try await cli.run(
            [
                "keychain", "add-generic-password", "--app", Self.scanner,
                "--service", "graph", "--account", "worker-2", "--secret-stdin",
            ],
            stdin: "tok-2"
        )
        #expect(
            defaultGroup.stdout.contains("added item to \(Self.scanner)"),
            "\(defaultGroup.stdout) \(defaultGroup.stderr)"
        )
        try await addItem(
            cli,
            app: Self.scanner,
            group: Self.scanner,
            service: "scanner-config",
            account: "a",
            secret: "SCANNER-PRIVATE"
        )

        // The timeclock app finds the shared item…
        let shared = try await cli.run([
            "keychain", "find-generic-password", "--app", Self.timeclock, "--service", "graph",
            "--account", "worker-1", "--print-secret",
        ])
        #expect(shared.status == 0, "\(shared.stderr)")
        #expect(shared.stdout.contains("access group: com.microsoft.adalcache"))
        #expect(shared.stdout.contains("secret: tok-SHARED\n"))
        // …but not the scanner's own group: naming it is refused (77) and audited, searching does not find it.
        let denied = try await cli.run([
            "keychain", "find-generic-password", "--app", Self.timeclock, "--access-group", Self.scanner,
            "--service", "scanner-config", "--print-secret",
        ])
        #expect(denied.status == 77, "\(denied.stdout) \(denied.stderr)")
        #expect(denied.stderr.contains("not entitled"), "\(denied.stderr)")
        #expect(!denied.stdout.contains("SCANNER-PRIVATE") && !denied.stderr.contains("SCANNER-PRIVATE"))
        let hidden = try await cli.run([
            "keychain", "find-generic-password", "--app", Self.timeclock, "--service", "scanner-config",
        ])
        #expect(hidden.status == 44, "\(hidden.stderr)")
        let list = try #require(
            try await cli.json(["keychain", "list", "--json", "--app", Self.timeclock]) as? [[String: Any]]
        )
        // The shared item only: the one the scanner stored without naming a group is in the scanner's own.
        #expect(Set(list.compactMap { $0["account"] as? String }) == ["worker-1"])

        // An app the policy does not list: refused and audited.
        let stranger = try await cli.run(["keychain", "list", "--app", "com.contoso.unlisted"])
        #expect(stranger.status == 77, "\(stranger.stderr)")
        #expect(stranger.stderr.contains("not listed in the device policy"), "\(stranger.stderr)")
        let strangerAdd = try await cli.run(
            [
                "keychain", "add-generic-password", "--app", "com.contoso.unlisted",
                "--service", "x", "--account", "y", "--secret-stdin",
            ],
            stdin: "nope"
        )
        #expect(strangerAdd.status == 77)

        let denials = try #require(
            try await cli.json(["audit", "--json", "--type", "keychain.access_denied"]) as? [[String: Any]]
        )
        #expect(denials.count == 3, "denials: \(denials)")
        #expect(denials.first?["actor"] as? String == Self.timeclock)
        #expect((denials.first?["details"] as? [String: String])?["app"] == Self.timeclock)
        #expect(denials.first?["reason"] as? String == "missing entitlement")
        #expect(
            denials.dropFirst().allSatisfy { ($0["details"] as? [String: String])?["app"] == "com.contoso.unlisted" }
        )
        #expect(denials.dropFirst().allSatisfy { $0["reason"] as? String == "app not in device policy" })
        #expect(try await cli.run(["audit", "verify"]).status == 0)

        // Entitlements come from the policy now: --entitlements is a usage error (even repeating the policy's).
        let explicit = try await cli.run([
            "keychain", "list", "--app", Self.scanner, "--entitlements", "com.microsoft.adalcache,\(Self.scanner)",
        ])
        #expect(explicit.status == 64, "\(explicit.stderr)")
        #expect(explicit.stderr.contains("drop --entitlements"), "\(explicit.stderr)")
        let widen = try await cli.run([
            "keychain", "find-generic-password", "--app", Self.timeclock, "--entitlements", Self.scanner,
            "--service", "scanner-config", "--print-secret",
        ])
        #expect(widen.status == 64)
        #expect(!widen.stdout.contains("SCANNER-PRIVATE"))
    }

    // MARK: - deprovision

    @Test func deprovisionRemovesEveryItemAndKeepsTheAuditLogVerifiable() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let provision = try await cli.run(["provision", "--policy", Self.kiosk, "--json"])
        try #require(provision.status == 0)
        let firstID = try #require(
            ((try parseJSON(provision.stdout) as? [String: Any])?["device"] as? [String: Any])?["deviceId"] as? String
        )
        try await addItem(
            cli,
            app: Self.scanner,
            group: "com.microsoft.adalcache",
            service: "graph",
            account: "worker-1",
            secret: "tok-1"
        )
        try await addItem(cli, app: Self.scanner, group: Self.scanner, service: "cfg", account: "a", secret: "cfg-1")
        try await addItem(
            cli,
            app: Self.timeclock,
            group: Self.timeclock,
            service: "cfg",
            account: "b",
            secret: "cfg-2"
        )

        let deprovision = try await cli.run(["deprovision", "--reason", "device returned to stock", "--json"])
        #expect(deprovision.status == 0, "\(deprovision.stderr)")
        let outcome = try #require(try parseJSON(deprovision.stdout) as? [String: Any])
        #expect(outcome["wasProvisioned"] as? Bool == true)
        #expect(outcome["itemsRemoved"] as? Int == 5)  // three app items, the device record and its signing key
        #expect(outcome["groupsRemoved"] as? Int == 4)  // adalcache, scanner, timeclock, the device's own

        let info = try await cli.run(["info"])
        #expect(info.status == 0)
        #expect(info.stdout.contains("mode: private\n"))
        #expect(info.stdout.contains("device: not provisioned\n"))
        // The items are gone for any app that names the groups, and from the file.
        let find = try await cli.run([
            "keychain", "find-generic-password", "--app", Self.scanner,
            "--entitlements", "com.microsoft.adalcache,\(Self.scanner),\(Self.timeclock)", "--service", "graph",
        ])
        #expect(find.status == 44, "\(find.stdout) \(find.stderr)")
        let list =
            try await cli.json([
                "keychain", "list", "--json", "--app", Self.scanner,
                "--entitlements", "com.microsoft.adalcache,\(Self.scanner),\(Self.timeclock)",
            ]) as? [Any]
        #expect(list?.isEmpty == true)
        // the audit trust anchor only
        #expect(try await sqlite3(cli.databasePath, "SELECT count(*) FROM items") == "1")
        #expect(try await sqlite3(cli.databasePath, "SELECT count(*) FROM access_groups") == "1")

        // The audit log stays readable and verifiable.
        let verify = try await cli.run(["audit", "verify"])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
        #expect(verify.stdout.contains("audit log intact: 2 event(s)"), "\(verify.stdout)")
        let events = try #require(try await cli.json(["audit", "--json"]) as? [[String: Any]])
        #expect(events.compactMap { $0["type"] as? String } == ["device.provisioned", "device.deprovisioned"])
        #expect(events.last?["reason"] as? String == "device returned to stock")

        // Deprovisioning again does nothing; provisioning again makes a new device with a new key.
        let again = try await cli.run(["deprovision"])
        #expect(again.status == 0)
        #expect(again.stdout.contains("not provisioned; nothing to do"))
        let second = try await cli.run(["provision", "--policy", Self.kiosk, "--json"])
        #expect(second.status == 0, "\(second.stderr)")
        let secondSummary = try #require(try parseJSON(second.stdout) as? [String: Any])
        #expect(secondSummary["outcome"] as? String == "provisioned")
        #expect((secondSummary["device"] as? [String: Any])?["deviceId"] as? String != firstID)
        let keys = try #require(
            try await cli.json(["audit", "--json", "--type", "device.provisioned"]) as? [[String: Any]]
        )
        let publicKeys = keys.compactMap { ($0["details"] as? [String: String])?["auditPublicKey"] }
        #expect(publicKeys.count == 2 && Set(publicKeys).count == 2, "\(publicKeys)")
        #expect(try await cli.run(["audit", "verify"]).status == 0)
    }
}

// MARK: - Helpers

/// Adds an item through the CLI as `app` (entitlements from the device policy) and requires success.
func addItem(
    _ cli: DevicectlRunner,
    app: String,
    group: String? = nil,
    service: String,
    account: String,
    secret: String,
    sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    let result = try await cli.run(
        ["keychain", "add-generic-password", "--app", app] + (group.map { ["--access-group", $0] } ?? [])
            + ["--service", service, "--account", account, "--secret-stdin"],
        stdin: secret
    )
    try #require(
        result.status == 0,
        "adding \(service)/\(account) as \(app): \(result.stderr)",
        sourceLocation: sourceLocation
    )
}

/// The SHA-256 of a file, lowercase hex, from coreutils' `sha256sum` (independent of the code under test).
func sha256(of path: String) async throws -> String {
    let result = try await DevicectlRunner.execute(URL(fileURLWithPath: "/usr/bin/sha256sum"), [path])
    try #require(result.status == 0, "sha256sum: \(result.stderr)")
    return String(result.stdout.prefix { $0 != " " })
}
