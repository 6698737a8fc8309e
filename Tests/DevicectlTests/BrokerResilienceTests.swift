import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// The broker under kills, restarts and load: state stays whole, clients reconnect, nothing is lost.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct BrokerResilienceTests {
    typealias Daemon = BrokerDaemon

    /// Every credential item of the device's apps, as root sees them in the store: (group, service, account).
    /// App metadata (MSAL's per-client record) is not a credential and outlives sign-outs.
    static func credentialItems(_ daemon: Daemon) async throws -> Set<String> {
        var items = Set<String>()
        for app in [Daemon.scanner, Daemon.timeclock] {
            let list = try await daemon.cli.run(["keychain", "list", "--app", app, "--json"])
            try #require(list.status == 0, "\(list.stderr)")
            for item in try #require(try parseJSON(list.stdout) as? [[String: Any]])
            where !((item["service"] as? String)?.hasPrefix("org.sharedmode.token-cache/appmetadata-") ?? false) {
                items.insert("\(item["accessGroup"] ?? "")|\(item["service"] ?? "")|\(item["account"] ?? "")")
            }
        }
        return items
    }

    @Test func theDaemonKilledMidSignOutLeavesTheWorkerWhollyInOrOutAndClientsReconnect() async throws {
        let daemon = try await Daemon()
        // Debug logs say when the broker starts a sign-out, so the kill can be aimed inside it.
        try await daemon.start(["--log-level", "debug"])
        var outcomes: [String] = []
        for (round, delay) in [0, 5, 10, 15, 20, 25, 30, 35, 40, 60].enumerated() {
            let fill = try ChildProcess(product: "account-worker", ["fill", daemon.cli.stateDirectory.path, "150"])
            #expect(await fill.waitForExit(timeout: 60) && fill.status == 0, "fill: \(fill.standardError)")
            let before = try await Self.credentialItems(daemon)
            try #require(before.count > 400, "round \(round): \(before.count) items")

            // An app signs the worker out through the broker; the daemon is SIGKILLed `delay` ms after it
            // starts the sign-out.
            let signOut = try daemon.start(product: "thin-app", as: Daemon.scannerUID, ["signout"])
            let process = try #require(daemon.process)
            let deadline = Date().addingTimeInterval(20)
            while !process.standardError.contains("sign-out started") && Date() < deadline { usleep(200) }
            if delay > 0 { usleep(UInt32(delay) * 1000) }
            _ = process.send(SIGKILL)
            _ = await daemon.process?.waitForExit(timeout: 10)
            #expect(await signOut.waitForExit(timeout: 30))

            let after = try await Self.credentialItems(daemon)
            let accounts = try #require(
                try parseJSON(try await daemon.cli.run(["account", "--json"]).stdout) as? [String: Any]
            )
            let signedIn = !(accounts["current"] is NSNull || accounts["current"] == nil)
            if signedIn {
                #expect(after == before, "round \(round): signed in, but \(before.count - after.count) items are gone")
                outcomes.append("in")
            } else {
                #expect(after.isEmpty, "round \(round): signed out, but \(after.count) items remain")
                #expect(signOut.status != 0 || signOut.lines.first?.hasPrefix("signed-out ") == true)
                outcomes.append("out")
            }
            // A new daemon on the same socket serves again; a signed-in worker is signed out through it.
            try await daemon.start(["--log-level", "debug"])
            if signedIn {
                let again = try await daemon.devicectl(as: Daemon.scannerUID, ["signout"])
                #expect(again.status == 0, "\(again.stderr)")
            }
        }
        print("BrokerResilienceTests: outcomes of the killed sign-outs: \(outcomes.joined(separator: " "))")
        await daemon.cleanUp()
    }

    @Test func aClientKeepsWorkingAcrossABrokerRestart() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        let poller = try daemon.start(product: "thin-app", as: Daemon.timeclockUID, ["poll", "40", "50"])
        try #require(await poller.waitForLines(atLeast: 3, prefix: "ok", timeout: 20), "\(poller.standardError)")
        _ = daemon.process?.send(SIGKILL)
        _ = await daemon.process?.waitForExit(timeout: 10)
        try await Task.sleep(for: .milliseconds(300))
        try await daemon.start()
        #expect(await poller.waitForExit(timeout: 30) && poller.status == 0, "\(poller.standardError)")
        let lines = poller.lines
        let firstError = try #require(
            lines.firstIndex { $0.hasPrefix("error") },
            "no call failed while the broker was down: \(lines)"
        )
        #expect(lines[firstError] == "error brokerUnavailable")
        #expect(lines[firstError...].contains("ok none"), "the client did not reconnect: \(lines)")
        await daemon.cleanUp()
    }

    @Test func eightClientProcessesOfTwoAppsForAMinuteLoseNothing() async throws {
        // Four clients of one app keep tens of thousands of items: a quota far above the default 1000.
        let daemon = try await Daemon(
            policy: try Daemon.kioskPolicy(limits: ["itemsPerApp": 1_000_000, "bytesPerApp": 1 << 30])
        )
        try await daemon.start()
        var clients: [ChildProcess] = []
        for index in 0..<8 {
            let uid = index % 2 == 0 ? Daemon.scannerUID : Daemon.timeclockUID
            clients.append(try daemon.start(product: "thin-app", as: uid, ["soak", "60", "c\(index)"]))
        }
        var total = 0
        for (index, client) in clients.enumerated() {
            #expect(await client.waitForExit(timeout: 180), "client \(index) did not finish")
            #expect(client.status == 0, "client \(index): \(client.standardError)")
            let summary = try #require(
                client.lines.first { $0.hasPrefix("soak ") },
                "client \(index): \(client.standardError)"
            )
            total += Int(summary.split(separator: " ")[1]) ?? 0
        }
        print("BrokerResilienceTests: 8 clients made \(total) calls in 60 s (\(total / 60) calls/s) without an error")
        #expect(total > 8 * 60)
        #expect(daemon.process?.hasExited == false)
        await daemon.cleanUp()
    }
}
