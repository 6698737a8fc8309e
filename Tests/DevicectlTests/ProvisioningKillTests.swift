import Foundation
import ProcessTestSupport
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Atomicity of provisioning under SIGKILL: a `device-worker` switches a device between the kiosk
/// (shared) and personal (private) policies with force, filling the new mode's groups with hundreds of
/// items in between, and is killed at a random moment, over and over. After every kill the device is
/// checked from outside, through the built `devicectl` binary and the `sqlite3` shell: it must be in
/// exactly one of the states the worker's steps lead through, with an intact audit log that agrees with
/// the recorded mode, and with every app group either completely filled or absent.
///
/// No timing is asserted: the random delay only chooses where the kill lands, and every wait is a
/// generous bound against a hung child.
@Suite(.serialized, .timeLimit(.minutes(5)), .tags(.integration))
struct ProvisioningKillTests {
    static let rounds = 15
    static let itemsPerGroup = 100
    static let kiosk = DevicectlRunner.policy("kiosk.json")
    static let personal = DevicectlRunner.policy("personal.json")

    /// The groups each mode's policy entitles its apps to (from policies/kiosk.json and personal.json),
    /// and each app's groups.
    static let groups: [String: [String]] = [
        "shared": ["com.microsoft.adalcache", "com.contoso.kiosk.scanner", "com.contoso.kiosk.timeclock"],
        "private": ["com.microsoft.identity.universalstorage", "com.contoso.fieldnotes"],
    ]
    static let apps: [String: [String: [String]]] = [
        "shared": [
            "com.contoso.kiosk.scanner": ["com.contoso.kiosk.scanner", "com.microsoft.adalcache"],
            "com.contoso.kiosk.timeclock": ["com.contoso.kiosk.timeclock", "com.microsoft.adalcache"],
        ],
        "private": ["com.contoso.fieldnotes": ["com.microsoft.identity.universalstorage", "com.contoso.fieldnotes"]],
    ]
    static let policyIDs = ["shared": "contoso-frontdesk-kiosk-2026-11", "private": "contoso-personal-2026-11"]

    /// What the device is: its mode (`none` before provisioning) and whether its app groups are filled.
    struct DeviceState: Equatable, CustomStringConvertible {
        var mode: String
        var filled: Bool
        var description: String { "\(mode) \(filled ? "full" : "empty")" }

        /// The state the worker's next step leads to.
        var next: DeviceState {
            if mode == "none" { return DeviceState(mode: "shared", filled: false) }
            if !filled { return DeviceState(mode: mode, filled: true) }
            return DeviceState(mode: mode == "shared" ? "private" : "shared", filled: false)
        }

        /// The state a worker output line reports (`ready`, `provisioned`, `filled`, `switched`).
        init?(line: String) {
            let words = line.split(separator: " ").map(String.init)
            switch words.first {
            case "ready" where words.count == 3: self.init(mode: words[1], filled: words[2] == "full")
            case "provisioned" where words.count == 2: self.init(mode: words[1], filled: false)
            case "filled" where words.count == 3: self.init(mode: words[1], filled: true)
            case "switched" where words.count == 2: self.init(mode: words[1], filled: false)
            default: return nil
            }
        }

        init(mode: String, filled: Bool) {
            self.mode = mode
            self.filled = filled
        }
    }

    @Test func provisioningKilledWithSIGKILLLeavesAConsistentDevice() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let worker = DevicectlRunner.productsDirectory.appendingPathComponent("device-worker")
        try #require(
            FileManager.default.isExecutableFile(atPath: worker.path),
            "\(worker.path) is missing; build the device-worker product"
        )
        let baseline = try await Self.baselineCounts()

        var state = DeviceState(mode: "none", filled: false)
        var modeChanges = 0
        var stepsObserved = 0
        for round in 0..<Self.rounds {
            let process = try BackgroundProcess(
                worker,
                [
                    "--dir", cli.stateDirectory.path, "--shared", Self.kiosk,
                    "--private", Self.personal, "--items", "\(Self.itemsPerGroup)",
                ]
            )
            defer { process.killIfRunning() }
            let ready = await process.waitForLine(timeout: 60) { $0.hasPrefix("ready ") }
            try #require(
                ready != nil,
                "round \(round): the worker never became ready; stdout: \(process.standardOutput) stderr: \(process.standardError)"
            )
            // The worker sees what devicectl saw after the previous kill.
            #expect(
                ready.flatMap(DeviceState.init(line:)) == state,
                "round \(round): worker found \(ready ?? "-"), devicectl saw \(state)"
            )
            // Kill points: after at least 0, 1 or 2 further steps (so the device surely moves on), plus a
            // random 50–400 ms, which lands anywhere in a fill, a mode change or a commit.
            let minimumSteps = round % 3
            let progressed = await process.waitForLines(timeout: 60) { $0.count >= 1 + minimumSteps }
            try #require(
                progressed,
                "round \(round): the worker completed fewer than \(minimumSteps) steps in 60 s; stderr: \(process.standardError)"
            )
            try await Task.sleep(for: .milliseconds(Int.random(in: 50...400)))
            try #require(
                process.send(SIGKILL),
                "round \(round): kill failed (did the worker die by itself? stderr: \(process.standardError))"
            )
            let exited = await process.waitForExit(timeout: 30)
            try #require(exited, "round \(round): the worker did not die after SIGKILL")
            #expect(
                process.killedBySignal == SIGKILL,
                "round \(round): the worker ended with status \(process.status), not SIGKILL"
            )
            #expect(process.standardError.isEmpty, "round \(round): worker stderr: \(process.standardError)")

            // What the worker acknowledged: every line after `ready` is one committed step, in order.
            let lines = process.lines
            let reported = lines.dropFirst().map { line -> DeviceState? in
                let parsed = DeviceState(line: line)
                #expect(parsed != nil, "round \(round): unexpected worker line \(line)")
                return parsed
            }
            var acknowledged = state
            for step in reported.compactMap({ $0 }) {
                #expect(step == acknowledged.next, "round \(round): the worker went from \(acknowledged) to \(step)")
                acknowledged = step
            }
            let switchesPrinted = lines.filter { $0.hasPrefix("switched ") }.count
            stepsObserved += reported.count

            // The device as devicectl and sqlite3 see it: the acknowledged state, or the one step after it
            // (committed while the kill prevented its line).
            let observed = try await Self.checkConsistency(cli, round: round, baseline: baseline)
            #expect(
                observed == acknowledged || observed == acknowledged.next,
                "round \(round): the device is \(observed) but the worker acknowledged \(acknowledged) (output: \(lines))"
            )
            // Mode changes logged: the earlier ones, the acknowledged ones, and the unacknowledged one if the
            // step that committed without its line was a switch.
            let unacknowledgedSwitch = observed != acknowledged && acknowledged.mode != "none" && acknowledged.filled
            let changes = try await Self.modeChangeEvents(cli).count
            let expectedChanges = modeChanges + switchesPrinted + (unacknowledgedSwitch ? 1 : 0)
            #expect(
                changes == expectedChanges,
                "round \(round): \(changes) mode changes logged, expected \(expectedChanges) (\(switchesPrinted) acknowledged this round)"
            )
            state = observed
            modeChanges = changes
        }
        // The device went through fills and mode changes (guaranteed by the minimum steps per round).
        #expect(
            stepsObserved >= Self.rounds,
            "the worker completed only \(stepsObserved) steps in \(Self.rounds) rounds"
        )
        #expect(modeChanges >= 4, "only \(modeChanges) mode changes in \(Self.rounds) rounds")
    }

    // MARK: - Checks through devicectl and sqlite3

    /// Checks the device after a kill and returns its state.
    static func checkConsistency(
        _ cli: DevicectlRunner,
        round: Int,
        baseline: (items: Int, groups: Int)
    ) async throws -> DeviceState {
        // Device information (this also opens the store, recovering the WAL the killed process left).
        let infoResult = try await cli.run(["info", "--json"])
        try #require(infoResult.status == 0, "round \(round): info failed: \(infoResult.stderr)")
        let info = try #require(try parseJSON(infoResult.stdout) as? [String: Any])
        #expect(info["error"] is NSNull, "round \(round): info error \(info["error"] ?? "-")")
        let mode = try #require(info["mode"] as? String)
        try #require(mode == "shared" || mode == "private", "round \(round): mode \(mode)")
        let provisioned = info["deviceId"] is String
        if provisioned {
            #expect(
                info["policyId"] as? String == policyIDs[mode],
                "round \(round): mode \(mode) with policy \(info["policyId"] ?? "-")"
            )
            #expect(info["policySha256"] as? String == (try await sha256(of: mode == "shared" ? kiosk : personal)))
        }

        // The audit log is intact and agrees with the mode.
        let verify = try await cli.run(["audit", "verify", "--json"])
        #expect(
            verify.status == 0,
            "round \(round): audit verify exited \(verify.status): \(verify.stdout) \(verify.stderr)"
        )
        let report = try #require(try parseJSON(verify.stdout) as? [String: Any])
        #expect(report["intact"] as? Bool == true, "round \(round): \(report["problems"] ?? "-")")
        let events = try #require(try await cli.json(["audit", "--json"]) as? [[String: Any]])
        #expect(report["eventCount"] as? Int == events.count)
        let types = events.compactMap { $0["type"] as? String }
        #expect(
            Set(types).isSubset(of: ["device.provisioned", "device.mode_changed"]),
            "round \(round): events \(Set(types))"
        )
        if provisioned {
            #expect(
                types.first == "device.provisioned" && types.filter { $0 == "device.provisioned" }.count == 1,
                "round \(round): events \(types)"
            )
            let changes = events.filter { $0["type"] as? String == "device.mode_changed" }
            // Provisioning is shared; each change flips the mode, and they chain from → to.
            #expect(
                (changes.count % 2 == 0 ? "shared" : "private") == mode,
                "round \(round): \(changes.count) mode changes logged but the device is \(mode)"
            )
            var expectedFrom = "shared"
            for change in changes {
                let details = change["details"] as? [String: String] ?? [:]
                #expect(
                    details["from"] == expectedFrom && details["to"] != expectedFrom && details["to"] != nil,
                    "round \(round): mode change #\(change["sequence"] ?? "-") \(details)"
                )
                expectedFrom = details["to"] ?? "?"
            }
            let lastModeEvent = try #require(events.last)
            let lastMode = (lastModeEvent["details"] as? [String: String]).flatMap { $0["to"] ?? $0["mode"] }
            #expect(lastMode == mode, "round \(round): the newest event says \(lastMode ?? "-"), info says \(mode)")
        } else {
            #expect(events.isEmpty, "round \(round): an unprovisioned device has events \(types)")
        }

        // The store: intact, and the app groups all there and complete, or all absent.
        let store = try await cli.run(["keychain", "verify"])
        #expect(store.status == 0, "round \(round): keychain verify: \(store.stdout) \(store.stderr)")
        let items = Int(try await sqlite3(cli.databasePath, "SELECT count(*) FROM items")) ?? -1
        let groupRows = Int(try await sqlite3(cli.databasePath, "SELECT count(*) FROM access_groups")) ?? -1
        guard provisioned else {
            #expect(
                items == 0 && groupRows == 0,
                "round \(round): an unprovisioned device holds \(items) items in \(groupRows) groups"
            )
            return DeviceState(mode: "none", filled: false)
        }
        let modeGroups = groups[mode] ?? []
        let full = (
            items: baseline.items + modeGroups.count * itemsPerGroup, groups: baseline.groups + modeGroups.count
        )
        let filled = items == full.items && groupRows == full.groups
        #expect(
            filled || (items == baseline.items && groupRows == baseline.groups),
            "round \(round): \(mode) device holds \(items) items in \(groupRows) groups: neither empty (\(baseline)) nor full (\(full))"
        )

        // Each app sees all of its groups' items or none, with the worker's secrets.
        for (app, appGroups) in (apps[mode] ?? [:]).sorted(by: { $0.key < $1.key }) {
            let listed = try #require(
                try await cli.json(["keychain", "list", "--json", "--app", app]) as? [[String: Any]]
            )
            #expect(
                listed.count == (filled ? appGroups.count * itemsPerGroup : 0),
                "round \(round): \(app) lists \(listed.count) items"
            )
            for group in appGroups {
                let accounts = Set(
                    listed.filter { $0["accessGroup"] as? String == group }.compactMap { $0["account"] as? String }
                )
                #expect(
                    accounts == (filled ? Set((0..<itemsPerGroup).map { "item-\($0)" }) : []),
                    "round \(round): \(app) sees \(accounts.count) items in \(group)"
                )
            }
            if filled, let group = appGroups.last {
                let index = (round * 37) % itemsPerGroup
                let found = try await cli.run([
                    "keychain", "find-generic-password", "--json", "--print-secret", "--app", app,
                    "--access-group", group, "--service", "fill", "--account", "item-\(index)",
                ])
                #expect(found.status == 0, "round \(round): \(group)/item-\(index): \(found.stderr)")
                let object = try parseJSON(found.stdout) as? [String: Any]
                #expect(
                    object?["secretBase64"] as? String
                        == DeviceWorkerFixture.fillSecret(group: group, index: index).base64EncodedString(),
                    "round \(round): \(group)/item-\(index) has another secret"
                )
            }
        }
        return DeviceState(mode: mode, filled: filled)
    }

    static func modeChangeEvents(_ cli: DevicectlRunner) async throws -> [[String: Any]] {
        try #require(try await cli.json(["audit", "--json", "--type", "device.mode_changed"]) as? [[String: Any]])
    }

    /// Items and access-group rows of a freshly provisioned device (its own record, signing key and audit
    /// anchor), measured with devicectl in a scratch state directory rather than assumed.
    static func baselineCounts() async throws -> (items: Int, groups: Int) {
        let scratch = DevicectlRunner()
        defer { scratch.cleanUp() }
        try #require(try await scratch.run(["provision", "--policy", kiosk]).status == 0)
        let items = try #require(Int(try await sqlite3(scratch.databasePath, "SELECT count(*) FROM items")))
        let groups = try #require(Int(try await sqlite3(scratch.databasePath, "SELECT count(*) FROM access_groups")))
        return (items, groups)
    }
}
