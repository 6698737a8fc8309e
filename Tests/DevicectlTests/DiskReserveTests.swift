import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// The disk reserve for sign-outs on a full disk, made again by the running daemon as soon as there is room:
/// a disk filled again after one full-disk sign-out still lets the next shift end.
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
}
