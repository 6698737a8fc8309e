import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// The broker daemon end to end: a real `deviced` on a real socket, clients as separate processes under
/// the policy's uids (devicectl, and an independent varlink implementation in Python).
@Suite(.serialized, .tags(.integration, .needsRoot)) struct BrokerDaemonTests {
    typealias Daemon = BrokerDaemon

    @Test func eachAppReadsOnlyItsOwnGroupsAndTheSharedOneWhateverItClaims() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        let add = try await daemon.devicectl(
            as: Daemon.scannerUID,
            [
                "keychain", "add-generic-password", "--service", "s1", "--account", "a1",
                "--access-group", Daemon.scanner, "--secret-stdin",
            ],
            stdin: "scanner-private"
        )
        #expect(add.status == 0, "\(add.stderr)")
        let shared = try await daemon.devicectl(
            as: Daemon.scannerUID,
            [
                "keychain", "add-generic-password", "--service", "shared", "--account", "a1",
                "--access-group", "com.microsoft.adalcache", "--secret-stdin",
            ],
            stdin: "for-every-app"
        )
        #expect(shared.status == 0, "\(shared.stderr)")

        // The scanner reads its own secret; no --app needed: the broker knows it by its uid.
        let own = try await daemon.devicectl(
            as: Daemon.scannerUID,
            ["keychain", "find-generic-password", "--service", "s1", "--print-secret"]
        )
        #expect(own.status == 0 && own.stdout.contains("scanner-private"), "\(own.stderr)")

        // The timeclock cannot: not by searching its groups (not found), not by naming the scanner's group
        // (missing entitlement, -34018), not by claiming to be the scanner (exit 77).
        let search = try await daemon.devicectl(
            as: Daemon.timeclockUID,
            ["keychain", "find-generic-password", "--service", "s1", "--print-secret"]
        )
        #expect(search.status == 44 && !search.stdout.contains("scanner-private"))
        let named = try await daemon.devicectl(
            as: Daemon.timeclockUID,
            [
                "keychain", "find-generic-password", "--service", "s1", "--access-group", Daemon.scanner,
                "--print-secret",
            ]
        )
        #expect(
            named.status == 77 && named.stderr.contains("-34018") && !named.stdout.contains("scanner-private"),
            "\(named.stderr)"
        )
        let claimed = try await daemon.devicectl(
            as: Daemon.timeclockUID,
            [
                "keychain", "find-generic-password", "--app", Daemon.scanner, "--service", "s1", "--print-secret",
            ]
        )
        #expect(
            claimed.status == 77 && claimed.stderr.contains("names another app")
                && !claimed.stdout.contains("scanner-private")
        )

        // The shared group works for both.
        let sharedRead = try await daemon.devicectl(
            as: Daemon.timeclockUID,
            ["keychain", "find-generic-password", "--service", "shared", "--print-secret"]
        )
        #expect(sharedRead.status == 0 && sharedRead.stdout.contains("for-every-app"), "\(sharedRead.stderr)")

        // An unlisted uid gets nothing and is audited; so is the timeclock's try at the scanner's group.
        let stranger = try await daemon.devicectl(as: Daemon.strangerUID, ["keychain", "list"])
        #expect(stranger.status == 77 && stranger.stderr.contains("uid \(Daemon.strangerUID) is not an app"))
        let denials = try await daemon.auditEvents().filter { $0["type"] as? String == "keychain.access_denied" }
        // The daemon copies each audit event to its log at info (for the journal), never a secret.
        let process = try #require(daemon.process)
        let deadline = Date().addingTimeInterval(10)
        while !process.standardError.contains("audit.actor=uid \(Daemon.strangerUID)") && Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let logged = process.standardError.split(separator: "\n").filter { $0.contains("audit event") }
        #expect(
            logged.contains {
                $0.contains("audit.type=keychain.access_denied") && $0.contains("audit.actor=uid \(Daemon.strangerUID)")
            },
            "\(process.standardError)"
        )
        #expect(!process.standardError.contains("scanner-private") && !process.standardError.contains("for-every-app"))
        #expect(
            denials.contains {
                $0["actor"] as? String == "uid \(Daemon.strangerUID)"
                    && $0["reason"] as? String == "uid not in device policy"
            }
        )
        #expect(
            denials.contains {
                $0["actor"] as? String == "uid \(Daemon.timeclockUID)"
                    && ($0["details"] as? [String: String])?["group"] == Daemon.scanner
            }
        )
        // Without the daemon the non-root app cannot open the store at all (the broker is the only way in).
        await daemon.stop()
        let direct = try await daemon.devicectl(
            as: Daemon.scannerUID,
            [
                "keychain", "find-generic-password", "--app", Daemon.scanner, "--service", "s1", "--state-dir",
                daemon.cli.stateDirectory.path,
            ]
        )
        #expect(direct.status != 0 && !direct.stdout.contains("scanner-private"))
        await daemon.cleanUp()
    }

    @Test func anIndependentVarlinkClientIntrospectsCallsAndGetsErrors() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        let results = try await daemon.results(of: try daemon.python(as: Daemon.scannerUID, "conformance"))
        let steps = Dictionary(results.map { ($0["step"] as? String ?? "", $0) }) { first, _ in first }
        #expect((steps["GetInfo"]?["interfaces"] as? [String]) == ["org.varlink.service", "org.sharedmode.Broker1"])
        #expect(steps["GetInfo"]?["product"] as? String == "deviced")
        // Served verbatim: the repository's interface file is the API.
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("Sources/BrokerContract/org.sharedmode.Broker1.varlink")
        #expect(
            steps["GetInterfaceDescription"]?["description"] as? String
                == (try String(contentsOf: file, encoding: .utf8))
        )
        #expect(steps["InterfaceNotFound"]?["error"] as? String == "org.varlink.service.InterfaceNotFound")
        #expect(steps["GetCaller"]?["appId"] as? String == Daemon.scanner)
        #expect(steps["GetCaller"]?["uid"] as? Int == Int(Daemon.scannerUID))
        #expect(steps["GetDeviceInformation"]?["mode"] as? String == "shared")
        #expect(steps["ItemNotFound"]?["error"] as? String == "org.sharedmode.Broker1.KeychainError")
        #expect((steps["ItemNotFound"]?["parameters"] as? [String: Any])?["status"] as? Int == -25300)
        // Nobody is signed in: the app holds no account.
        #expect((steps["GetAccounts"]?["accounts"] as? [Any])?.isEmpty == true, "\(steps["GetAccounts"] ?? [:])")
        // A call's authority the policy does not list: refused, naming the list.
        #expect(steps["UnlistedAuthority"]?["error"] as? String == "org.sharedmode.Broker1.AccountError")
        let refusal = steps["UnlistedAuthority"]?["parameters"] as? [String: Any]
        #expect(
            refusal?["code"] as? String == "authorityNotAllowed"
                && (refusal?["message"] as? String)?.contains("knownAuthorities") == true,
            "\(refusal ?? [:])"
        )
        await daemon.cleanUp()
    }

    @Test func aGlobalSignOutByOneAppReachesTheOtherAppsSubscription() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        // The timeclock (its own uid) subscribes: first `subscribed`, then the sign-in, then the sign-out.
        let subscriber = try daemon.python(as: Daemon.timeclockUID, "subscribe", ["3"])
        try #require(
            await subscriber.waitForLine(timeout: 30) { $0.contains("\"subscribed\"") } != nil,
            "\(subscriber.standardError)"
        )

        // The worker signs in (root's path, straight to the store: the broker sees the commit too).
        let jo = try daemon.cli.writeFile(
            "jo.json",
            Worker.jo.response(issuer: Worker.kioskIssuer, clientID: Worker.kioskClientID)
        )
        let signIn = try await daemon.cli.run(["signin", "--app", Daemon.scanner, "--token-response", jo])
        #expect(signIn.status == 0, "\(signIn.stderr)")
        try #require(
            await subscriber.waitForLine(timeout: 10) { $0.contains("\"signedIn\"") } != nil,
            "\(subscriber.standardError)"
        )

        // Single sign-on across uids: both apps see the worker through the broker.
        for uid in [Daemon.scannerUID, Daemon.timeclockUID] {
            let account = try await daemon.devicectl(as: uid, ["account", "--json"])
            #expect(account.status == 0 && account.stdout.contains(Worker.jo.username), "uid \(uid): \(account.stderr)")
        }
        // The scanner signs out through the broker: globally, and the timeclock hears of it.
        let signedOutAt = Date()
        let signOut = try await daemon.devicectl(as: Daemon.scannerUID, ["signout", "--reason", "shift-end", "--json"])
        #expect(signOut.status == 0 && signOut.stdout.contains("\"global\" : true"), "\(signOut.stderr)")
        let events = try await daemon.results(of: subscriber, timeout: 20)
        #expect(events.map { $0["kind"] as? String } == ["subscribed", "signedIn", "signedOut"])
        #expect(events[1]["current"] as? String == Worker.jo.username)
        #expect(events[2]["reason"] as? String == "shift-end")
        #expect(events[2]["current"] is NSNull || events[2]["current"] == nil)
        if let at = events[2]["at"] as? Double {
            // Pushed well within a second of the sign-out command (the goal is 50 ms after the commit).
            #expect(at - signedOutAt.timeIntervalSince1970 < 5)
        }
        let after = try await daemon.devicectl(as: Daemon.timeclockUID, ["account", "--json"])
        let afterAccounts = try #require(try parseJSON(after.stdout) as? [String: Any], "\(after.stderr)")
        #expect(afterAccounts["current"] is NSNull || afterAccounts["current"] == nil)
        #expect((afterAccounts["previous"] as? [String: Any])?["username"] as? String == Worker.jo.username)
        // No token crossed into any client's output.
        for secret in Worker.jo.secrets(issuer: Worker.kioskIssuer, clientID: Worker.kioskClientID) {
            #expect(!subscriber.standardOutput.contains(secret) && !signOut.stdout.contains(secret))
        }
        await daemon.cleanUp()
    }

    @Test func anAdministratorsGroupMemberSignsTheWorkerOutOfEveryAppAndOthersMayNot() async throws {
        // `staff` (gid 50) exists on every Debian system; the policy makes it the administrators' group.
        var document = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: DevicectlRunner.policy("kiosk.json")))
            ) as? [String: Any]
        )
        document["administratorsGroup"] = "staff"
        let policy = FileManager.default.temporaryDirectory.appendingPathComponent(
            "admin-policy-\(UUID().uuidString).json"
        )
        try JSONSerialization.data(withJSONObject: document).write(to: policy)
        defer { try? FileManager.default.removeItem(at: policy) }
        let daemon = try await Daemon(policy: policy.path)
        try await daemon.start()
        let jo = try daemon.cli.writeFile(
            "jo.json",
            Worker.jo.response(issuer: Worker.kioskIssuer, clientID: Worker.kioskClientID)
        )
        try #require(try await daemon.cli.run(["signin", "--app", Daemon.scanner, "--token-response", jo]).status == 0)

        // An app may not sign out as an administrator; neither may an unlisted uid.
        for uid in [Daemon.scannerUID, Daemon.strangerUID] {
            let refused = try await daemon.devicectl(as: uid, ["signout", "--reason", "admin"])
            #expect(refused.status == 77, "uid \(uid): \(refused.stderr)")
        }
        let still = try await daemon.devicectl(as: Daemon.timeclockUID, ["account", "--json"])
        #expect(still.stdout.contains(Worker.jo.username))
        // A member of the administrators' group (by its gid; it is no app) can.
        let admin = try await daemon.devicectl(as: 1005, group: 50, ["signout", "--reason", "admin", "--json"])
        #expect(admin.status == 0 && admin.stdout.contains("\"global\" : true"), "\(admin.stderr)")
        let events = try await daemon.auditEvents()
        #expect(
            events.contains {
                $0["type"] as? String == "account.signed_out" && $0["reason"] as? String == "admin"
                    && $0["actor"] as? String == "uid 1005"
            }
        )
        #expect(
            events.contains {
                $0["type"] as? String == "keychain.access_denied" && $0["reason"] as? String == "not an administrator"
            }
        )

        // Root's `devicectl signout` (no --app) goes through the running broker: a remote sign-out.
        try #require(try await daemon.cli.run(["signin", "--app", Daemon.scanner, "--token-response", jo]).status == 0)
        let remote = try await daemon.cli.run(["signout"], environment: ["DEVICECTL_SOCKET": daemon.socketPath])
        #expect(remote.status == 0 && remote.stdout.contains("through the broker"), "\(remote.stdout) \(remote.stderr)")
        let last = try #require(try await daemon.auditEvents().last { $0["type"] as? String == "account.signed_out" })
        #expect(last["actor"] as? String == "uid 0" && last["reason"] as? String == "admin", "\(last)")
        await daemon.cleanUp()
    }

    @Test func statusShowsTheBrokerTheDeviceTheWorkerAndTheConnectedApps() async throws {
        // Nothing provisioned, no broker.
        let blank = DevicectlRunner()
        defer { blank.cleanUp() }
        let nothing = try await blank.run(
            ["status", "--json"],
            environment: ["DEVICECTL_SOCKET": "/nonexistent/broker.sock"]
        )
        let empty = try #require(try parseJSON(nothing.stdout) as? [String: Any], "\(nothing.stderr)")
        #expect(
            (empty["broker"] as? [String: Any])?["running"] as? Bool == false && empty["provisioned"] as? Bool == false
        )

        // Provisioned, broker not running: root reads the store.
        let daemon = try await Daemon()
        let socket = ["DEVICECTL_SOCKET": daemon.socketPath]
        let stopped = try #require(
            try parseJSON(try await daemon.cli.run(["status", "--json"], environment: socket).stdout) as? [String: Any]
        )
        #expect((stopped["broker"] as? [String: Any])?["running"] as? Bool == false)
        #expect(
            stopped["provisioned"] as? Bool == true && stopped["mode"] as? String == "shared"
                && stopped["current"] == nil
        )

        // Running, a worker signed in, the timeclock subscribed.
        try await daemon.start()
        let jo = try daemon.cli.writeFile(
            "jo.json",
            Worker.jo.response(issuer: Worker.kioskIssuer, clientID: Worker.kioskClientID)
        )
        try #require(try await daemon.cli.run(["signin", "--app", Daemon.scanner, "--token-response", jo]).status == 0)
        let subscriber = try daemon.python(as: Daemon.timeclockUID, "subscribe", ["5"])
        defer { _ = subscriber.killIfRunning() }
        try #require(
            await subscriber.waitForLine(timeout: 30) { $0.contains("\"subscribed\"") } != nil,
            "\(subscriber.standardError)"
        )
        let running = try await daemon.cli.run(["status", "--json"], environment: socket)
        let status = try #require(try parseJSON(running.stdout) as? [String: Any], "\(running.stderr)")
        let broker = try #require(status["broker"] as? [String: Any])
        #expect(broker["running"] as? Bool == true && broker["version"] as? String != nil)
        let connections = try #require(broker["connections"] as? [[String: Any]])
        #expect(
            connections.contains {
                $0["uid"] as? Int == Int(Daemon.timeclockUID) && $0["appId"] as? String == Daemon.timeclock
            },
            "\(connections)"
        )
        #expect(
            (status["current"] as? [String: Any])?["username"] as? String == Worker.jo.username
                && status["signedInAt"] != nil
        )
        #expect((status["lastAuditSequence"] as? Int ?? 0) >= 2)
        let text = try await daemon.cli.run(["status"], environment: socket)
        #expect(
            text.stdout.contains("broker: running on \(daemon.socketPath)")
                && text.stdout.contains("uid \(Daemon.timeclockUID) \(Daemon.timeclock)"),
            "\(text.stdout)"
        )
        // An app may not ask.
        let app = try await daemon.devicectl(as: Daemon.scannerUID, ["status"])
        #expect(app.status == 77, "\(app.stderr)")
        await daemon.cleanUp()
    }

    @Test func badInputGetsItsErrorAndTheDaemonKeepsServing() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        let results = try await daemon.results(of: try daemon.python(as: Daemon.scannerUID, "bad-inputs"))
        let steps = Dictionary(results.map { ($0["step"] as? String ?? "", $0) }) { first, _ in first }
        let protocolError = "org.sharedmode.Broker1.ProtocolError"
        for (step, error, closed) in [
            ("oversized", protocolError, true), ("malformed", protocolError, true),
            ("not-an-object", protocolError, true),
            ("unqualified-method", protocolError, true),
            ("unknown-method", "org.varlink.service.MethodNotFound", false),
            ("unknown-interface", "org.varlink.service.InterfaceNotFound", false),
            ("wrong-parameter-type", "org.varlink.service.InvalidParameter", false),
            ("missing-more", "org.varlink.service.ExpectedMore", false),
            ("invalid-base64", "org.varlink.service.InvalidParameter", false),
        ] {
            let result = try #require(steps[step], "no result for \(step)")
            #expect(result["error"] as? String == error, "\(step): \(result)")
            if closed { #expect(result["closed"] as? Bool == true, "\(step) should end the connection") }
            #expect(result["serving"] as? Bool == true, "the daemon stopped serving after \(step)")
        }
        #expect((steps["wrong-parameter-type"]?["parameters"] as? [String: Any])?["parameter"] as? String == "scopes")
        #expect(steps["vanished-mid-message"]?["serving"] as? Bool == true)
        #expect(await daemon.stop(), "deviced did not stop on SIGTERM")
        #expect(
            daemon.process?.exitedNormally == true && daemon.process?.status == 0,
            "\(daemon.process?.standardError ?? "")"
        )
        await daemon.cleanUp()
    }

    @Test func aFloodOfConnectionsIsRefusedCleanlyAndSilentConnectionsAreClosed() async throws {
        let daemon = try await Daemon()
        // A long idle timeout while connections are held (a loaded machine may take seconds between steps)...
        try await daemon.start(["--max-connections", "3", "--idle-timeout", "600"])
        let limits = try await daemon.results(of: try daemon.python(as: Daemon.scannerUID, "limits", ["3"]))
        let steps = Dictionary(limits.map { ($0["step"] as? String ?? "", $0) }) { first, _ in first }
        #expect(steps["held"]?["admitted"] as? Int == 3, "\(limits)")
        #expect(steps["over-limit"]?["error"] as? String == "org.sharedmode.Broker1.TooManyConnections")
        #expect((steps["over-limit"]?["parameters"] as? [String: Any])?["limit"] as? Int == 3)
        #expect(steps["held-served"]?["answered"] as? Int == 3)
        #expect(steps["after-release"]?["serving"] as? Bool == true)

        // ...and a short one for the connection that sends nothing.
        #expect(await daemon.stop())
        try await daemon.start(["--max-connections", "3", "--idle-timeout", "2"])
        let idle = try #require(try await daemon.results(of: try daemon.python(as: Daemon.scannerUID, "idle")).first)
        #expect(idle["closed"] as? Bool == true)
        let seconds = try #require(idle["seconds"] as? Double)
        #expect(seconds >= 1.5 && seconds < 10, "closed after \(seconds) s; the idle timeout is 2 s")
        #expect(idle["serving"] as? Bool == true)
        await daemon.cleanUp()
    }

    @Test func systemdSocketActivationAndReadinessNotification() async throws {
        let daemon = try await Daemon()
        // systemd's own tool passes a listening socket as fd 3 with LISTEN_FDS/LISTEN_PID, as deviced.socket does.
        let notify = try NotifySocket()
        defer { notify.close() }
        let activated = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/systemd-socket-activate"),
            [
                "-l", daemon.socketPath, "-E", "NOTIFY_SOCKET=\(notify.path)", "-E", "JOURNAL_STREAM=8:1234",
                DevicectlRunner.productsDirectory.appendingPathComponent("deviced").path, "--state-dir",
                daemon.cli.stateDirectory.path,
                "--socket", "/nonexistent/ignored.sock",
            ]
        )
        // The tool starts deviced at the first connection (deviced.socket's SocketMode=0666 is chmod here).
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: daemon.socketPath) && Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: daemon.socketPath)
        let caller = try await daemon.devicectl(as: Daemon.scannerUID, ["keychain", "list", "--json"])
        #expect(caller.status == 0, "\(caller.stderr)")
        try #require(await Daemon.waitUntilReady(activated), "\(activated.standardError)")
        #expect(activated.standardError.contains("inherited"), "deviced should say it adopted the inherited socket")
        // Under systemd (JOURNAL_STREAM), every log line starts with its syslog priority: info is <6>.
        let ready = try #require(activated.standardError.split(separator: "\n").first { $0.contains("deviced ready") })
        #expect(ready.hasPrefix("<6>deviced: deviced ready"), "\(ready)")
        #expect(notify.receive(timeout: 5)?.contains("READY=1") == true)
        _ = activated.send(SIGTERM)
        #expect(await activated.waitForExit(timeout: 20))
        #expect(notify.receive(timeout: 5)?.contains("STOPPING=1") == true)
        await daemon.cleanUp()
    }
}

/// A datagram socket standing in for systemd's `$NOTIFY_SOCKET`.
final class NotifySocket: @unchecked Sendable {
    let path = "/tmp/notify-\(UUID().uuidString.prefix(8)).sock"
    private let descriptor: Int32

    init() throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            for (index, byte) in path.utf8.enumerated() { bytes[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(bound == 0, "cannot bind \(path)")
    }

    /// The next datagram, or nil after `timeout` seconds.
    func receive(timeout: Int32) -> String? {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, timeout * 1000) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(descriptor, &buffer, buffer.count, 0)
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil
    }

    func close() {
        _ = Glibc.close(descriptor)
        unlink(path)
    }
}
