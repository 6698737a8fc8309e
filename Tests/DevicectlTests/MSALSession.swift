import Foundation
import ProcessTestSupport
import Testing

/// A sandbox where stock MSAL Python apps (PyPI msal + pymsalruntime, `enable_broker_on_linux=True`) run as
/// `uid` (Tests/MSAL/msal-session): their own mount and network namespaces, where login.microsoftonline.com
/// is a local TLS server answering MSAL's two discovery requests; a private session bus on which the MSAL
/// bridge (our `msal-bridge`, a copy any user can run) is D-Bus-activated as `com.microsoft.identity.broker1`
/// and talks to the test's daemon; an unlocked gnome-keyring (the Secret Service pymsalruntime caches in).
final class MSALSession: @unchecked Sendable {
    /// The venv tools/setup (tools/msal-python-setup) makes: msal 1.39.0 and pymsalruntime 0.20.7.
    static let python = "/opt/sharedmode-msal-python/bin/python"
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("MSAL/msal-session")

    let uid: UInt32
    let directory: URL
    private var stopped = false

    /// Starts the sandbox for `uid`, its bridge pointed at `daemon`'s socket (with `bridgeArguments` added).
    init(_ daemon: BrokerDaemon, uid: UInt32, bridgeArguments: [String] = []) async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: Self.python),
            "\(Self.python) is missing; run tools/setup (it runs tools/msal-python-setup)"
        )
        self.uid = uid
        directory = daemon.publicDirectory.appendingPathComponent("msal-\(uid)")
        let bridge = daemon.publicDirectory.appendingPathComponent("msal-bridge").path
        if !FileManager.default.fileExists(atPath: bridge) {
            try ExecutableCopy.copy(
                from: DevicectlRunner.productsDirectory.appendingPathComponent("msal-bridge").path,
                to: bridge
            )
        }
        let services = daemon.publicDirectory.appendingPathComponent("dbus-services-\(uid)")
        try FileManager.default.createDirectory(
            at: services,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755]
        )
        // The service file tools/install puts in /usr/share/dbus-1/services, with the test's paths.
        let service = """
            [D-BUS Service]
            Name=com.microsoft.identity.broker1
            Exec=\(([bridge, "--socket", daemon.socketPath, "--flow", "deviceCode", "--log-level", "debug"] + bridgeArguments).joined(separator: " "))

            """
        try Data(service.utf8).write(to: services.appendingPathComponent("com.microsoft.identity.broker1.service"))
        let start = try await Command.run(
            Self.script,
            [
                "start", directory.path, "--uid", "\(uid)", "--service-dir", services.path,
                // The sandbox ends with this test process, however it ends.
                "--owner", "\(getpid())",
            ]
        )
        try #require(start.status == 0, "msal-session start failed: \(start.stderr)")
    }

    deinit {
        guard !stopped else { return }
        let process = Process()
        process.executableURL = Self.script
        process.arguments = ["stop", directory.path]
        try? process.run()
        process.waitUntilExit()
    }

    /// Stops everything the sandbox runs (the bridge with it).
    func stop() async {
        guard !stopped else { return }
        stopped = true
        _ = try? await Command.run(Self.script, ["stop", directory.path])
    }

    /// Starts the stock app (Tests/MSAL/msal_app.py) with `clientID` and `steps` in the background; each
    /// step prints one JSON line.
    func startApp(clientID: String, scopes: [String] = ["User.Read"], _ steps: [String]) throws -> ChildProcess {
        let app = directory.appendingPathComponent("bin/msal_app.py").path
        return try ChildProcess(
            Self.script,
            ["run", directory.path, "--", Self.python, app, "--client-id", clientID]
                + scopes.flatMap { ["--scope", $0] } + steps
        )
    }

    /// Runs the stock app to the end and returns each step's JSON object.
    func runApp(clientID: String, scopes: [String] = ["User.Read"], _ steps: [String]) async throws -> [[String: Any]] {
        let app = try startApp(clientID: clientID, scopes: scopes, steps)
        try #require(await app.waitForExit(timeout: 120), "the MSAL app did not finish: \(app.standardError)")
        return try app.lines.map { try #require(try parseJSON($0) as? [String: Any], "\($0)") }
    }

    /// Calls `method` of com.microsoft.identity.Broker1 on the session bus with `busctl` (protocol version
    /// 0.0, a correlation id, `request`) and returns the JSON string the bridge answered.
    func callBroker(_ method: String, _ request: String) async throws -> String {
        let result = try await Command.run(
            Self.script,
            [
                "run", directory.path, "--", "/usr/bin/busctl", "--user", "--json=short", "call",
                "com.microsoft.identity.broker1", "/com/microsoft/identity/broker1",
                "com.microsoft.identity.Broker1", method, "sss", "0.0", UUID().uuidString, request,
            ]
        )
        try #require(result.status == 0, "busctl \(method) failed: \(result.stderr)")
        let reply = try #require(try parseJSON(result.stdout) as? [String: Any], "\(result.stdout)")
        return try #require((reply["data"] as? [Any])?.first as? String, "\(result.stdout)")
    }

    /// The session bus's address on its socket in the host's /tmp (reachable from outside the sandbox's
    /// mount namespace: a Flatpak sandbox or a root-made one).
    func hostBusAddress() throws -> String {
        let addresses = try String(contentsOf: directory.appendingPathComponent("bus-address"), encoding: .utf8)
        let address = try #require(
            addresses.split(separator: ";").first { $0.hasPrefix("unix:path=/tmp/") },
            "the session bus has no socket in /tmp: \(addresses)"
        )
        return address.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Calls `method` as `callBroker` does, from a process of the session's uid in a sandbox that says it is
    /// the Flatpak app `appID` (Tests/Flatpak/fake-sandbox), over the session bus's socket in the host's /tmp.
    func callBrokerFromSandbox(appID: String, _ method: String, _ request: String) async throws -> String {
        let hostSocket = try hostBusAddress()
        let fakeSandbox = Self.script.deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Flatpak/fake-sandbox")
        let result = try await Command.run(
            fakeSandbox,
            [
                appID, "\(uid)",
                "DBUS_SESSION_BUS_ADDRESS=\(hostSocket)",
                "--", "/usr/bin/busctl", "--user", "--json=short", "call",
                "com.microsoft.identity.broker1", "/com/microsoft/identity/broker1",
                "com.microsoft.identity.Broker1", method, "sss", "0.0", UUID().uuidString, request,
            ]
        )
        try #require(result.status == 0, "busctl \(method) from a sandbox failed: \(result.stderr)")
        let reply = try #require(try parseJSON(result.stdout) as? [String: Any], "\(result.stdout)")
        return try #require((reply["data"] as? [Any])?.first as? String, "\(result.stdout)")
    }

    /// Calls `method` as `callBroker` does, from the real Flatpak app `app` (Tests/Flatpak/fixture.bash, its
    /// gdbus) run by the session's uid with `flatpak run`: the app reaches the session bus through the
    /// xdg-dbus-proxy flatpak starts, which lets it call the broker's name only with `talk` (the
    /// `--talk-name` a Flatpak MSAL app needs). Returns gdbus's exit status, and the JSON string the bridge
    /// answered or gdbus's error.
    func callBrokerFromFlatpak(
        app: String,
        talk: Bool = true,
        _ method: String,
        _ request: String
    ) async throws -> (status: Int32, reply: String) {
        let hostSocket = try hostBusAddress()
        let fixture = Self.script.deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Flatpak/fixture.bash")
        let result = try await Command.run(
            URL(fileURLWithPath: "/bin/bash"),
            [fixture.path, "run", "\(uid)", app, "--command=gdbus"]
                + (talk ? ["--talk-name=com.microsoft.identity.broker1"] : [])
                + [
                    "--", "call", "--session", "--timeout", "120", "--dest", "com.microsoft.identity.broker1",
                    "--object-path", "/com/microsoft/identity/broker1",
                    "--method", "com.microsoft.identity.Broker1.\(method)",
                ] + ["0.0", UUID().uuidString, request].map(Self.gvariantString),
            environment: ["FIXTURE_SESSION_BUS": hostSocket]
        )
        guard result.status == 0 else { return (result.status, result.stderr) }
        // gdbus prints the reply as a GVariant tuple: ('JSON',) with ' and \ escaped.
        var text = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(text.hasPrefix("('") && text.hasSuffix("',)"), "gdbus printed: \(text)")
        text = String(text.dropFirst(2).dropLast(3))
        return (0, text.replacingOccurrences(of: "\\'", with: "'").replacingOccurrences(of: "\\\\", with: "\\"))
    }

    /// `text` as a GVariant string literal, as gdbus parses its arguments (else "0.0" is a double).
    static func gvariantString(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }

    /// The items of pymsalruntime's schema (`com.microsoft.identity.secret`) in the uid's Secret Service.
    func keyringItems() async throws -> Int {
        let result = try await Command.run(
            Self.script,
            [
                "run", directory.path, "--", "/usr/bin/python3",
                directory.appendingPathComponent("bin/keyring_items.py").path,
            ]
        )
        try #require(result.status == 0, "keyring_items.py failed: \(result.stderr)")
        let object = try #require(try parseJSON(result.stdout) as? [String: Any])
        return try #require(object["items"] as? Int)
    }

    /// What the session bus's services (the bridge) wrote to standard error.
    var bridgeLog: String {
        (try? String(contentsOf: directory.appendingPathComponent("log/dbus-daemon.log"), encoding: .utf8)) ?? ""
    }

    /// A file the app's `wait --for` step can wait for (the test creates it with `signal`).
    func signalFile(_ name: String) -> String { directory.appendingPathComponent("go-\(name)").path }

    func signal(_ name: String) {
        _ = FileManager.default.createFile(atPath: signalFile(name), contents: Data())
    }
}
