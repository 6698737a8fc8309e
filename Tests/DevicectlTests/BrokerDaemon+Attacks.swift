import Foundation
import ProcessTestSupport
import Synchronization
import Testing

/// What the attack tests add to the daemon fixture: a hostile client (Tests/Python/broker_attacks.py)
/// under another uid, the daemon's resident memory, and a victim app's silent token.
extension BrokerDaemon {
    /// The kiosk policy with `limits` set, and an app of its own (`com.contoso.kiosk.app<uid>`) for each of
    /// `appUIDs`, written to a temporary file (its path).
    static func kioskPolicy(limits: [String: Int], appUIDs: [UInt32] = []) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: DevicectlRunner.policy("kiosk.json")))
        var policy = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        policy["limits"] = limits
        let apps = try #require(policy["apps"] as? [[String: Any]])
        policy["apps"] =
            apps
            + appUIDs.map {
                ["id": "com.contoso.kiosk.app\($0)", "accessGroups": ["com.contoso.kiosk.app\($0)"], "uid": $0]
            }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "kiosk-limits-\(UUID().uuidString).json"
        )
        try JSONSerialization.data(withJSONObject: policy).write(to: file)
        return file.path
    }

    /// The attacker script (Tests/Python/broker_attacks.py), copied where every user can read it.
    func attackScript() throws -> String {
        let script = publicDirectory.appendingPathComponent("broker_attacks.py").path
        if !FileManager.default.fileExists(atPath: script) {
            let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Python/broker_attacks.py")
            try ExecutableCopy.copy(from: source.path, to: script, mode: 0o644)
        }
        return script
    }

    /// Starts the attacker script as `uid` in `mode` against `socket` (default: this daemon's).
    func attacker(
        as uid: UInt32,
        _ mode: String,
        _ arguments: [String] = [],
        socket: String? = nil
    ) throws -> ChildProcess {
        try ChildProcess(
            Self.setpriv,
            Self.asUser(uid) + ["/usr/bin/python3", try attackScript(), mode, socket ?? socketPath] + arguments
        )
    }

    /// The daemon's resident set size now, in MiB (from /proc).
    func residentMiB() -> Double? { statusMiB("VmRSS:") }

    /// The largest resident set size the daemon ever had, in MiB (the kernel's high-water mark: no sample missed).
    func peakResidentMiB() -> Double? { statusMiB("VmHWM:") }

    /// A size `field` of the daemon's /proc/PID/status, in MiB.
    private func statusMiB(_ field: String) -> Double? {
        guard let pid = process?.pid, let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field) }),
            let kilobytes = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return nil }
        return kilobytes / 1024
    }

    /// Samples the daemon's resident size every 20 ms until `stop` is called; `peak` is the largest seen.
    func sampleMemory() -> MemorySampler {
        let sampler = MemorySampler()
        let thread = Thread { [self] in
            while !sampler.stopped {
                if let now = residentMiB() { sampler.record(now) }
                usleep(20_000)
            }
        }
        thread.start()
        return sampler
    }

    /// Waits until the daemon's resident size is at most `bound` MiB (within `timeout`); the last reading.
    func residentMiB(settlingBelow bound: Double, timeout: TimeInterval = 15) async -> Double {
        let deadline = Date().addingTimeInterval(timeout)
        var now = residentMiB() ?? .infinity
        while now > bound && Date() < deadline {
            try? await Task.sleep(for: .milliseconds(200))
            now = residentMiB() ?? .infinity
        }
        return now
    }

    /// A victim app (the timeclock, its own uid) asks the broker for a token silently; the line it printed.
    /// (A copy of the app made just now can be briefly busy for exec while another test forks: retried.)
    func victimSilentToken() async throws -> String {
        var line = ""
        for _ in 0..<3 {
            let victim = try start(
                product: "thin-app",
                as: Self.timeclockUID,
                ["silent", AccountWorkerFixture.fillScope(0)]
            )
            #expect(await victim.waitForExit(timeout: 30), "the victim's silent token did not finish")
            line = victim.lines.first ?? "error: \(victim.standardError)"
            guard line.contains("Text file busy") else { return line }
            try await Task.sleep(for: .milliseconds(200))
        }
        return line
    }

    /// Signs the kiosk's worker in for both apps straight in the store (as root), with `tokens` access
    /// tokens per group: the victim then gets tokens silently from the broker's cache.
    func signWorkerIn(tokens: Int = 3) async throws {
        let fill = try ChildProcess(product: "account-worker", ["fill", cli.stateDirectory.path, "\(tokens)"])
        try #require(
            await fill.waitForExit(timeout: 60) && fill.status == 0,
            "fill: \(fill.reasonDescription) \(fill.status): \(fill.standardError) \(fill.standardOutput)"
        )
    }

    /// `keychain verify` and `audit verify` as root, straight on the store: both must hold after an attack.
    func verifyStore() async throws {
        let keychain = try await cli.run(["keychain", "verify"])
        #expect(keychain.status == 0, "keychain verify: \(keychain.stdout) \(keychain.stderr)")
        let audit = try await cli.run(["audit", "verify"])
        #expect(audit.status == 0, "audit verify: \(audit.stdout) \(audit.stderr)")
    }
}

/// The peak of the daemon's resident memory while an attack runs.
final class MemorySampler: Sendable {
    private let state = Mutex<(peak: Double, stopped: Bool)>((0, false))

    var peak: Double { state.withLock { $0.peak } }
    var stopped: Bool { state.withLock { $0.stopped } }
    func record(_ value: Double) { state.withLock { $0.peak = max($0.peak, value) } }
    func stop() { state.withLock { $0.stopped = true } }
}
