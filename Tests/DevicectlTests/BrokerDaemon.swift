import Foundation
import ProcessTestSupport
import Testing

/// A real `deviced` on a scratch socket and state directory, and its clients as real processes under
/// other Unix users (`setpriv`). The tests run as root (as CI does); the clients never are.
final class BrokerDaemon: @unchecked Sendable {
    /// The policy's apps (policies/kiosk.json) and a uid the policy does not list.
    static let scannerUID: UInt32 = 1001, timeclockUID: UInt32 = 1002, strangerUID: UInt32 = 1003
    static let scanner = "com.contoso.kiosk.scanner", timeclock = "com.contoso.kiosk.timeclock"

    /// Where the independent varlink client (PyPI `varlink`) is installed for every user (by tools/setup).
    static let pythonPath = "/opt/sharedmode-test-python"

    let cli = DevicectlRunner()
    /// World-readable: the socket, and copies of devicectl and the Python client that any user can run
    /// (the build directory may sit under a home only root can enter).
    let publicDirectory: URL
    var socketPath: String { publicDirectory.appendingPathComponent("broker.sock").path }
    var devicectlCopy: String { publicDirectory.appendingPathComponent("devicectl").path }
    var pythonClient: String { publicDirectory.appendingPathComponent("broker_client.py").path }
    private(set) var process: ChildProcess?

    /// A tmpfs mounted on the state directory (`mount` options), unmounted by `cleanUp`.
    private(set) var mounted = false

    /// Provisions a scratch device from `policy` (as root, straight to the store), its state directory
    /// on a tmpfs of its own when `mount` gives the tmpfs options (e.g. `size=24m`), its socket and public
    /// copies in a scratch directory under `parent` (`/run` for a socket a Flatpak sandbox reaches).
    init(
        policy: String = DevicectlRunner.policy("kiosk.json"),
        mount: String? = nil,
        parent: String = "/tmp"
    ) async throws {
        publicDirectory = URL(fileURLWithPath: "\(parent)/broker-test-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(
            at: publicDirectory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755]
        )
        try ExecutableCopy.copy(
            from: DevicectlRunner.productsDirectory.appendingPathComponent("devicectl").path,
            to: devicectlCopy
        )
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Python/broker_client.py")
        try ExecutableCopy.copy(from: script.path, to: pythonClient, mode: 0o644)
        if let mount {
            try FileManager.default.createDirectory(
                at: cli.stateDirectory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
            let mounting = try await Command.run(
                URL(fileURLWithPath: "/bin/mount"),
                ["-t", "tmpfs", "-o", "\(mount),mode=0700", "tmpfs", cli.stateDirectory.path]
            )
            try #require(mounting.status == 0, "cannot mount a tmpfs for the test: \(mounting.stderr)")
            mounted = true
        }
        let provision = try await cli.run(["provision", "--policy", policy])
        try #require(provision.status == 0, "provisioning failed: \(provision.stderr)")
    }

    /// Starts the daemon (under `wrapper`, a command that ends by running its arguments, when one is given)
    /// and waits until its socket answers.
    func start(_ extra: [String] = [], environment: [String: String] = [:], wrapper: [String] = []) async throws {
        let arguments = ["--state-dir", cli.stateDirectory.path, "--socket", socketPath] + extra
        let daemon =
            try wrapper.first.map { command in
                try ChildProcess(
                    URL(fileURLWithPath: command),
                    wrapper.dropFirst() + [ChildProcess.productsDirectory.appendingPathComponent("deviced").path]
                        + arguments,
                    environment: environment
                )
            } ?? ChildProcess(product: "deviced", arguments, environment: environment)
        process = daemon
        try #require(await Self.waitUntilReady(daemon), "deviced did not become ready: \(daemon.standardError)")
    }

    /// The file the daemon's idle and password clocks read when it was started with `clockArguments()`.
    var clockFile: String { publicDirectory.appendingPathComponent("clock").path }

    /// Sets the daemon's clock to `start` (default: now, in whole seconds) and returns the arguments that
    /// make `start(_:)` run it on that clock: time then stands still until `setClock(_:)` moves it, so no
    /// test of a deadline depends on how fast the machine is.
    func clockArguments(startingAt start: Double = Date().timeIntervalSince1970.rounded(.down)) throws -> [String] {
        try setClock(start)
        return ["--clock-file", clockFile]
    }

    /// The time on the daemon's clock file.
    var clock: Double {
        get throws {
            try #require(
                Double(
                    try String(contentsOfFile: clockFile, encoding: .utf8).trimmingCharacters(
                        in: .whitespacesAndNewlines
                    )
                )
            )
        }
    }

    /// Moves the daemon's clock to `unixTime` (a new file renamed over the old: the daemon never reads half).
    func setClock(_ unixTime: Double) throws {
        try Data("\(unixTime)\n".utf8).write(to: URL(fileURLWithPath: clockFile), options: .atomic)
    }

    /// Moves the daemon's clock on by `seconds`.
    func advanceClock(by seconds: Double) throws {
        try setClock(try clock + seconds)
    }

    /// Waits until `daemon` logged that it is ready (it logs to standard error); false on timeout or exit.
    static func waitUntilReady(_ daemon: ChildProcess, timeout: TimeInterval = ChildProcess.shortestWait) async -> Bool
    {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline && !daemon.hasExited {
            if daemon.standardError.contains("deviced ready") { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return daemon.standardError.contains("deviced ready")
    }

    /// The last `characters` of the daemon's log, for a failure message (it never holds a secret).
    func logTail(_ characters: Int = 4000) -> String {
        String((process?.standardError ?? "").suffix(characters))
    }

    /// Sends SIGTERM and waits for the daemon to exit; returns whether it exited by itself in time.
    @discardableResult
    func stop() async -> Bool {
        guard let process, !process.hasExited else { return true }
        _ = process.send(SIGTERM)
        return await process.waitForExit(timeout: 20)
    }

    static let setpriv = URL(fileURLWithPath: "/usr/bin/setpriv")

    /// setpriv's arguments to run as `uid` in group `gid` (default: the uid's own), no supplementary groups.
    static func asUser(_ uid: UInt32, group gid: UInt32? = nil) -> [String] {
        ["--reuid=\(uid)", "--regid=\(gid ?? uid)", "--clear-groups"]
    }

    /// The environment of a client of this daemon (its socket; no state directory of its own).
    var clientEnvironment: [String: String] { ["DEVICECTL_SOCKET": socketPath, "DEVICECTL_STATE_DIR": ""] }

    /// Runs devicectl as `uid` (group `gid`, default its own) against this daemon.
    func devicectl(
        as uid: UInt32,
        group gid: UInt32? = nil,
        _ arguments: [String],
        stdin: String? = nil
    ) async throws -> Command.Result {
        try await Command.run(
            Self.setpriv,
            Self.asUser(uid, group: gid) + [devicectlCopy] + arguments,
            stdin: stdin,
            environment: clientEnvironment
        )
    }

    /// `devicectl token … --force-refresh` as `uid` (the refresh redeemed at the local glewlwyd), tried up to three
    /// times while the provider answers with a 2xx body that is not JSON: glewlwyd's own fault under a loaded suite
    /// (its log: "get_access_token_from_refresh … Error join_json_string_array", its refresh handler failing while
    /// other tests sign in), which devicectl reports as it should. Any other outcome is returned at once.
    func forcedRefresh(as uid: UInt32, _ arguments: [String]) async throws -> Command.Result {
        var result = try await devicectl(as: uid, arguments)
        for _ in 1..<3 where result.status != 0 && result.stderr.contains("answered with something that is not a JSON")
        {
            result = try await devicectl(as: uid, arguments)
        }
        return result
    }

    /// Starts devicectl as `uid` against this daemon in the background, with `environment` added.
    func startDevicectl(
        as uid: UInt32,
        _ arguments: [String],
        environment: [String: String] = [:]
    ) throws -> ChildProcess {
        try ChildProcess(
            Self.setpriv,
            Self.asUser(uid) + [devicectlCopy] + arguments,
            environment: clientEnvironment.merging(environment) { $1 }
        )
    }

    /// Runs a copy of the built product `name` (a test worker) as `uid` against this daemon, in the background.
    func start(product name: String, as uid: UInt32, _ arguments: [String]) throws -> ChildProcess {
        let copy = publicDirectory.appendingPathComponent(name).path
        if !FileManager.default.fileExists(atPath: copy) {
            try ExecutableCopy.copy(from: DevicectlRunner.productsDirectory.appendingPathComponent(name).path, to: copy)
        }
        return try ChildProcess(Self.setpriv, Self.asUser(uid) + [copy] + arguments, environment: clientEnvironment)
    }

    /// Starts the Python client as `uid` in `mode` (see Tests/Python/broker_client.py).
    func python(as uid: UInt32, _ mode: String, _ arguments: [String] = []) throws -> ChildProcess {
        try #require(
            FileManager.default.fileExists(atPath: Self.pythonPath + "/varlink"),
            "PyPI varlink is not installed in \(Self.pythonPath); run tools/setup"
        )
        return try ChildProcess(
            Self.setpriv,
            Self.asUser(uid) + ["/usr/bin/python3", pythonClient, mode, socketPath] + arguments,
            environment: ["PYTHONPATH": Self.pythonPath]
        )
    }

    /// The Python client's output lines as JSON objects, once it exited (within `timeout`).
    func results(of client: ChildProcess, timeout: TimeInterval = 60) async throws -> [[String: Any]] {
        try #require(
            await client.waitForExit(timeout: timeout),
            "the Python client did not finish: \(client.standardError)"
        )
        #expect(client.exitedNormally, "the Python client failed: \(client.standardError)")
        return try client.lines.map { try #require(try parseJSON($0) as? [String: Any]) }
    }

    /// The audit log's events (as root, straight from the store).
    func auditEvents() async throws -> [[String: Any]] {
        let result = try await cli.run(["audit", "--json"])
        try #require(result.status == 0, "\(result.stderr)")
        return try #require(try parseJSON(result.stdout) as? [[String: Any]])
    }

    /// The daemon's lifetime is the test's: one that stopped early (a failed `#require`, a thrown error)
    /// leaves no daemon, mount or directory behind. `cleanUp()` does the same at the end of a test, after
    /// letting the daemon stop by itself.
    deinit {
        _ = process?.killIfRunning()
        removeEverything()
    }

    func cleanUp() async {
        await stop()
        removeEverything()
    }

    /// Unmounts the state directory's tmpfs (if any) and removes the scratch directories.
    private func removeEverything() {
        if mounted {
            let umount = Process()
            umount.executableURL = URL(fileURLWithPath: "/bin/umount")
            umount.arguments = [cli.stateDirectory.path]
            if (try? umount.run()) != nil { umount.waitUntilExit() }
            mounted = false
        }
        cli.cleanUp()
        try? FileManager.default.removeItem(at: publicDirectory)
    }
}
