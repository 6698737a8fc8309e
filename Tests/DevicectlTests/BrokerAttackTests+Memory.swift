import Foundation
import ProcessTestSupport
import Testing

/// What many apps together can make the daemon hold: calls kept behind never-ending subscriptions, as
/// values or as bytes, by eight apps at once (uids 2001-2008, sixteen connections each).
extension BrokerAttackTests {
    static let attackingApps: [UInt32] = Array(2001...2008)

    /// The attacking apps' connections open now, as root's `GetStatus` lists them, once `condition` holds
    /// of their count (nil when it did not within `timeout`).
    static func attackConnections(
        _ daemon: Daemon,
        timeout: TimeInterval = 90,
        until condition: (Int) -> Bool
    ) async throws -> Int? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let count = try await ThinClientTests.connectedUIDs(daemon).filter { attackingApps.contains(UInt32($0)) }
                .count
            if condition(count) { return count }
            guard Date() < deadline else { return nil }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    /// Starts `held` attackers (one per attacking app: 16 connections, each a subscription and a ~1 MB call
    /// of `shape` behind it) and waits until the daemon has read everything they sent.
    static func holdCalls(_ daemon: Daemon, shape: String) async throws -> [ChildProcess] {
        let attackers = try attackingApps.map { try daemon.attacker(as: $0, "held", ["16", "1000000", shape]) }
        for attacker in attackers {
            let sent = try #require(
                await attacker.waitForLine(timeout: 180) { $0.contains("\"sent\"") },
                "the attacker's bytes were not all read: \(attacker.standardError)"
            )
            #expect(sent.contains("\"unread\": 0"), "\(sent)")
        }
        return attackers
    }

    /// Ends the attackers (SIGTERM: they report each connection, then close them); their connections' reports.
    static func connectionReports(_ attackers: [ChildProcess]) async throws -> [[String: Any]] {
        for attacker in attackers { _ = attacker.send(SIGTERM) }
        var reports: [[String: Any]] = []
        for attacker in attackers {
            reports += try await steps(attacker).filter { $0["step"] as? String == "connection" }
        }
        return reports
    }

    /// Starts `unread-held` attackers as `apps` (16 connections each pipelining 8 reads of their 700 KB
    /// secret, replies of ~1.9 MB: the item and `items`; never reading) and waits until each connection got a reply or was closed; the number closed
    /// by the broker once they are ended.
    static func leaveRepliesUnread(_ daemon: Daemon, as apps: [UInt32]) async throws -> Int {
        let attackers = try apps.map { try daemon.attacker(as: $0, "unread-held", ["16", "8", "big-0", "attacker"]) }
        for attacker in attackers {
            let stalled = try #require(
                await attacker.waitForLine(timeout: 180) { $0.contains("\"stalled\"") },
                "the attacker's connections were not all answered: \(attacker.standardError)"
            )
            #expect(stalled.contains("\"pending\": 0"), "\(stalled)")
        }
        try await victimAndRootAreServed(daemon)
        for attacker in attackers { _ = attacker.send(SIGTERM) }
        var closed = 0
        for attacker in attackers { closed += try await steps(attacker).compactMap { $0["closed"] as? Int }.last ?? 0 }
        return closed
    }

    @Test func repliesAppsLeaveUnreadAreBoundedPerAppAndOverAllApps() async throws {
        let daemon = try await Daemon(
            policy: try Daemon.kioskPolicy(limits: ["connectionsPerApp": 16], appUIDs: Self.attackingApps)
        )
        try await daemon.signWorkerIn()
        // Only the unread-reply limits end these connections: the reply timeout is an hour.
        try await daemon.start(["--reply-timeout", "3600"])
        for app in Self.attackingApps {
            let added = try await Self.steps(try daemon.attacker(as: app, "add", ["1", "700000", "big"]))
            #expect(added.first?["added"] as? Int == 1, "\(added)")
        }
        try await Self.victimAndRootAreServed(daemon)
        let idle = try #require(daemon.residentMiB())
        let memory = daemon.sampleMemory()
        // One app: a reply of ~1.9 MB on each of its 16 connections (30 MB) goes over its 8 MiB.
        let closedForOneApp = try await Self.leaveRepliesUnread(daemon, as: [Self.attackingApps[0]])
        #expect(closedForOneApp >= 1, "one app held all its unread replies: over its 8 MiB")
        let oneAppPeak = memory.peak
        try #require(
            try await Self.attackConnections(daemon) { $0 == 0 } != nil,
            "the attacker's connections stayed open"
        )
        // Eight apps: over the 32 MiB of all of them together, whatever each app's share.
        let closedForEightApps = try await Self.leaveRepliesUnread(daemon, as: Self.attackingApps)
        memory.stop()
        #expect(closedForEightApps >= 8 * closedForOneApp, "eight apps held more unread replies than 32 MiB allow")
        try #require(
            try await Self.attackConnections(daemon) { $0 == 0 } != nil,
            "the attackers' connections stayed open"
        )
        let after = await daemon.residentMiB(settlingBelow: idle + 16, timeout: 30)
        let highWater = try #require(daemon.peakResidentMiB())
        print(
            "BrokerAttackTests: unread replies of 8 apps × 16 connections × 8 reads of ~1.9 MB: resident \(Int(idle)) MiB idle, peak \(Int(oneAppPeak)) MiB (one app, \(closedForOneApp) of 16 closed), \(Int(memory.peak)) MiB (eight apps, \(closedForEightApps) of 128 closed; high-water mark \(Int(highWater)) MiB), \(Int(after)) MiB after"
        )
        #expect(highWater < 200, "peak \(highWater) MiB (VmHWM); idle \(idle) MiB")
        #expect(after <= idle + 16, "the memory did not come back: \(after) MiB after, \(idle) MiB idle")
        try await daemon.verifyStore()
        await daemon.cleanUp()
    }

    @Test func eightAppsHoldingCallsBehindSubscriptionsKeepTheDaemonUnder200MiBAndItsMemoryComesBack() async throws {
        let daemon = try await Daemon(
            policy: try Daemon.kioskPolicy(limits: ["connectionsPerApp": 16], appUIDs: Self.attackingApps)
        )
        try await daemon.signWorkerIn()
        // The message deadline (10 s by default) as long as it goes: a loaded machine may take longer than 10 s
        // to send 128 messages of 1 MB, and then that deadline, not the limits under test, would refuse them.
        try await daemon.start(["--message-timeout", "3600"])
        try await Self.victimAndRootAreServed(daemon)
        let idle = try #require(daemon.residentMiB())
        let memory = daemon.sampleMemory()

        // 1 MB of [{"":0},…] (~28 MiB decoded, the attack: 459 MiB for one app before): each call is
        // refused as it comes in, over the values a message may hold, and its connection closed.
        let valueAttackers = try await Self.holdCalls(daemon, shape: "values")
        try await Self.victimAndRootAreServed(daemon)
        try #require(try await Self.attackConnections(daemon) { $0 == 0 } != nil, "the refused connections stayed open")
        let valueReports = try await Self.connectionReports(valueAttackers)
        #expect(valueReports.count == 128)
        for report in valueReports {
            #expect(
                report["error"] as? String == "org.sharedmode.Broker1.ProtocolError"
                    && report["closed"] as? Bool == true,
                "\(report)"
            )
            #expect((report["reason"] as? String ?? "").contains("more than 1024 values (the limit"), "\(report)")
        }
        let valuesPeak = memory.peak

        // 1 MB strings: held as bytes, 16 MiB per app at most, and 48 MiB over all of them together (50 calls).
        let stringAttackers = try await Self.holdCalls(daemon, shape: "string")
        try await Self.victimAndRootAreServed(daemon)
        try #require(
            try await Self.attackConnections(daemon) { $0 <= 50 } != nil,
            "more than 50 calls of 1 MB were held"
        )
        try await Self.victimAndRootAreServed(daemon)
        let stringReports = try await Self.connectionReports(stringAttackers)
        memory.stop()
        #expect(stringReports.count == 128)
        // Each connection was held whole (the subscription and its call: no error, open) or refused and closed.
        let refused = stringReports.filter { $0["error"] is String }
        let held = stringReports.filter { !($0["error"] is String) && $0["closed"] as? Bool == false }
        #expect(
            held.count <= 50 && held.count + refused.count == 128,
            "\(held.count) connections held, \(refused.count) refused"
        )
        for report in refused {
            #expect(
                report["error"] as? String == "org.sharedmode.Broker1.ProtocolError"
                    && report["closed"] as? Bool == true,
                "\(report)"
            )
            #expect((report["reason"] as? String ?? "").contains("(the server's limit)"), "\(report)")
        }
        try #require(
            try await Self.attackConnections(daemon) { $0 == 0 } != nil,
            "the attackers' connections stayed open"
        )
        let after = await daemon.residentMiB(settlingBelow: idle + 16, timeout: 30)
        let highWater = try #require(daemon.peakResidentMiB())
        print(
            "BrokerAttackTests: 8 apps × 16 held calls: resident \(Int(idle)) MiB idle, peak \(Int(valuesPeak)) MiB (values), \(Int(memory.peak)) MiB (strings, \(held.count) held; high-water mark \(Int(highWater)) MiB), \(Int(after)) MiB after"
        )
        #expect(highWater < 200, "peak \(highWater) MiB (VmHWM); idle \(idle) MiB")
        #expect(after <= idle + 16, "the memory did not come back: \(after) MiB after, \(idle) MiB idle")
        try await daemon.verifyStore()
        await daemon.cleanUp()
    }
}
