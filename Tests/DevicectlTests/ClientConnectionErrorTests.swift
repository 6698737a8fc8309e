import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// What an app (the Swift client, in `thin-app`, under a policy uid) and root's `devicectl signout` are told
/// when the broker cannot serve them: which socket, why (nothing there, a stale socket, a directory the uid
/// cannot search, a socket it cannot write), what to do; root calling as an app; a named broker that is down.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct ClientConnectionErrorTests {
    typealias Daemon = BrokerDaemon

    /// Runs `thin-app --socket SOCKET MODE…` as `uid` to its end.
    static func thinApp(
        _ daemon: Daemon,
        as uid: UInt32,
        socket: String,
        _ mode: [String] = ["current"],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> ChildProcess {
        let app = try daemon.start(product: "thin-app", as: uid, ["--socket", socket] + mode)
        #expect(
            await app.waitForExit(timeout: 60),
            "thin-app did not finish: \(app.standardError)",
            sourceLocation: sourceLocation
        )
        return app
    }

    @Test func aMissingDirectoryNothingThereAndAStaleSocketAreToldApartEachWithHowToStartTheBroker() async throws {
        let daemon = try await Daemon()
        let missingDirectory = daemon.publicDirectory.appendingPathComponent("no-such-dir")
        let inMissing = missingDirectory.appendingPathComponent("broker.sock").path
        let missing = try await Self.thinApp(daemon, as: Daemon.scannerUID, socket: inMissing)
        #expect(missing.status == 1, "\(missing.standardError)")
        #expect(
            missing.standardError.contains(
                "error: brokerUnavailable no broker at \(inMissing): the directory \(missingDirectory.path) does not exist"
            )
                && missing.standardError.contains("deviced --socket \(inMissing)"),
            "\(missing.standardError)"
        )

        let absent = try await Self.thinApp(daemon, as: Daemon.scannerUID, socket: daemon.socketPath)
        #expect(absent.status == 1, "\(absent.standardError)")
        #expect(
            absent.standardError.contains(
                "error: brokerUnavailable no broker at \(daemon.socketPath): nothing is there"
            )
                && absent.standardError.contains("deviced --socket \(daemon.socketPath)")
                && absent.standardError.contains("systemctl start deviced.socket"),
            "\(absent.standardError)"
        )

        // A broker killed outright leaves its socket (mode 0666) with nothing accepting on it.
        try await daemon.start()
        _ = daemon.process?.send(SIGKILL)
        try #require(await daemon.process?.waitForExit(timeout: 20) == true)
        try #require(SocketSafetyTests.mode(daemon.socketPath) != nil, "the killed broker's socket is gone")
        let stale = try await Self.thinApp(daemon, as: Daemon.scannerUID, socket: daemon.socketPath)
        #expect(stale.status == 1, "\(stale.standardError)")
        #expect(
            stale.standardError.contains(
                "no broker at \(daemon.socketPath): a socket is there but nothing accepts connections on it"
            )
                && stale.standardError.contains(
                    "the next broker replaces it); start the broker that serves it: deviced --socket \(daemon.socketPath)"
                ),
            "\(stale.standardError)"
        )
        await daemon.cleanUp()
    }

    @Test func theDirectoryTheAppsUidCannotSearchIsNamedAndSoIsASocketItCannotWrite() async throws {
        let daemon = try await Daemon()
        let outer = daemon.publicDirectory.appendingPathComponent("outer")
        let inner = outer.appendingPathComponent("inner")
        try FileManager.default.createDirectory(at: inner, withIntermediateDirectories: true)
        #expect(chmod(outer.path, 0o755) == 0 && chmod(inner.path, 0o755) == 0)
        let socket = inner.appendingPathComponent("broker.sock").path
        let broker = try ChildProcess(
            product: "deviced",
            ["--state-dir", daemon.cli.stateDirectory.path, "--socket", socket]
        )
        defer { _ = broker.killIfRunning() }
        try #require(await Daemon.waitUntilReady(broker), "deviced did not become ready: \(broker.standardError)")
        let reached = try await Self.thinApp(daemon, as: Daemon.scannerUID, socket: socket)
        #expect(
            reached.status == 0 && reached.lines.first == "mode shared",
            "\(reached.lines) \(reached.standardError)"
        )

        // Each directory on the way, in turn, closed to the app's uid: that one is named, with its mode and the fix.
        for (closed, mode) in [(outer, 0o700), (inner, 0o750)] {
            #expect(chmod(closed.path, mode_t(mode)) == 0)
            let refused = try await Self.thinApp(daemon, as: Daemon.scannerUID, socket: socket)
            #expect(refused.status == 1, "\(refused.standardError)")
            #expect(
                refused.standardError.contains(
                    "error: brokerUnavailable cannot reach the broker at \(socket): uid \(Daemon.scannerUID) may not search the directory \(closed.path) (mode \(String(mode, radix: 8)), owner uid 0, group 0)"
                )
                    && refused.standardError.contains("chmod o+x \(closed.path)"),
                "\(refused.standardError)"
            )
            #expect(chmod(closed.path, 0o755) == 0)
        }
        // The socket itself no longer writable by others.
        #expect(chmod(socket, 0o600) == 0)
        let unwritable = try await Self.thinApp(daemon, as: Daemon.scannerUID, socket: socket)
        #expect(
            unwritable.status == 1
                && unwritable.standardError.contains(
                    "uid \(Daemon.scannerUID) may not write to the socket (mode 600, owner uid 0, group 0)"
                )
                && unwritable.standardError.contains("chmod 0666 \(socket)"),
            "\(unwritable.standardError)"
        )
        #expect(chmod(socket, 0o666) == 0)
        let again = try await Self.thinApp(daemon, as: Daemon.scannerUID, socket: socket)
        #expect(again.status == 0, "\(again.standardError)")
        _ = broker.send(SIGTERM)
        #expect(await broker.waitForExit(timeout: 20))
        await daemon.cleanUp()
    }

    @Test func rootCallingAnAppMethodIsToldItIsNeverAnAppAndWhatToDoInstead() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        let root = try await Self.thinApp(daemon, as: 0, socket: daemon.socketPath)
        #expect(root.status == 1, "\(root.lines) \(root.standardError)")
        #expect(
            root.standardError.contains(
                "error: callerNotInPolicy uid 0 (root) is the device's administrator and never an app"
            )
                && root.standardError.contains("run the app as its own user")
                && root.standardError.contains("--app ID"),
            "\(root.standardError)"
        )
        #expect(!root.standardError.contains("list the app"), "root is told to list itself: \(root.standardError)")
        // A uid the policy does not list is still told to list it.
        let stranger = try await Self.thinApp(daemon, as: Daemon.strangerUID, socket: daemon.socketPath)
        #expect(
            stranger.status == 1
                && stranger.standardError.contains("uid \(Daemon.strangerUID) is not an app in the device policy")
                && stranger.standardError.contains("list the app"),
            "\(stranger.standardError)"
        )
        await daemon.cleanUp()
    }

    @Test func thePythonTroubleshootingTableNamesTheExceptionsAPythonAppSees() async throws {
        try #require(
            FileManager.default.fileExists(atPath: Daemon.pythonPath + "/varlink"),
            "PyPI varlink is not installed; run tools/setup"
        )
        let daemon = try await Daemon()
        let directory = daemon.publicDirectory.path
        #expect(
            mkdir(directory + "/closed", 0o700) == 0
                && FileManager.default.createFile(atPath: directory + "/file", contents: Data())
        )
        try await daemon.start()
        _ = daemon.process?.send(SIGKILL)  // its socket stays, with nothing accepting on it
        try #require(await daemon.process?.waitForExit(timeout: 20) == true)
        let script = """
            import sys, varlink
            try:
                with varlink.Client(address="unix:" + sys.argv[1]) as client, client.open("org.sharedmode.Broker1", namespaced=True) as broker:
                    broker.GetCaller()
            except Exception as error:
                print(type(error).__name__, error)
            """
        let readme = try String(
            contentsOf: DevicectlRunner.policiesDirectory.deletingLastPathComponent().appendingPathComponent(
                "README.md"
            ),
            encoding: .utf8
        )
        for (path, expected) in [
            (directory + "/none.sock", "FileNotFoundError"), (directory + "/closed/broker.sock", "PermissionError"),
            (daemon.socketPath, "ConnectionRefusedError"), (directory + "/file/broker.sock", "NotADirectoryError"),
            (directory + "/" + String(repeating: "x", count: 120), "OSError AF_UNIX path too long"),
        ] {
            let run = try await Command.run(
                Daemon.setpriv,
                Daemon.asUser(Daemon.scannerUID) + ["/usr/bin/python3", "-c", script, path],
                environment: ["PYTHONPATH": Daemon.pythonPath]
            )
            #expect(run.stdout.hasPrefix(expected), "\(path): \(run.stdout) \(run.stderr)")
            let row =
                expected == "OSError AF_UNIX path too long"
                ? "| `OSError: AF_UNIX path too long` |" : "| `\(expected)` ("
            #expect(readme.contains(row), "the README's table has no row for \(expected)")
        }
        await daemon.cleanUp()
    }

    /// Runs the built devicectl as root with `environment` added (no `--state-dir` of the runner's).
    static func devicectl(_ arguments: [String], environment: [String: String]) async throws -> Command.Result {
        try await DevicectlRunner.execute(
            DevicectlRunner.productsDirectory.appendingPathComponent("devicectl"),
            arguments,
            environment: environment
        )
    }

    @Test func rootsSignOutNamesTheBrokerOrStoreItActedOnAndNeverFallsBackFromANamedBroker() async throws {
        let daemon = try await Daemon()
        let store = daemon.cli.stateDirectory.path
        try await BrokerIdleTests.signInJo(daemon)
        // The store root's sign-out would fall back to (as /var/lib/devicectl is on a device).
        let other = daemon.publicDirectory.appendingPathComponent("other-store")
        let down = try await Self.devicectl(
            ["signout", "--socket", daemon.socketPath],
            environment: ["DEVICECTL_STATE_DIR": other.path, "DEVICECTL_SOCKET": ""]
        )
        #expect(down.status == 69, "\(down.stdout) \(down.stderr)")
        #expect(
            down.stderr.contains("no broker at \(daemon.socketPath): nothing is there")
                && down.stderr.contains(
                    "Nothing was signed out: a broker named with --socket or $DEVICECTL_SOCKET is never replaced by a store"
                )
                && down.stderr.contains("deviced --socket \(daemon.socketPath)"),
            "\(down.stderr)"
        )
        #expect(!FileManager.default.fileExists(atPath: other.path), "the sign-out fell back to another store")
        // $DEVICECTL_SOCKET names a broker just as --socket does.
        let downByEnvironment = try await Self.devicectl(
            ["signout"],
            environment: ["DEVICECTL_STATE_DIR": other.path, "DEVICECTL_SOCKET": daemon.socketPath]
        )
        #expect(
            downByEnvironment.status == 69 && downByEnvironment.stderr.contains("no broker at \(daemon.socketPath)"),
            "\(downByEnvironment.stderr)"
        )
        #expect(!FileManager.default.fileExists(atPath: other.path), "the sign-out fell back to another store")
        let stillIn = try await daemon.cli.run(["accounts"])
        #expect(
            stillIn.stdout.contains("\(Worker.jo.username)") && stillIn.stdout.contains(": signed in"),
            "\(stillIn.stdout) \(stillIn.stderr)"
        )

        // Through the broker: which broker, and the store it serves.
        try await daemon.start()
        let through = try await Self.devicectl(
            ["signout", "--socket", daemon.socketPath],
            environment: ["DEVICECTL_STATE_DIR": "", "DEVICECTL_SOCKET": ""]
        )
        #expect(through.status == 0, "\(through.stderr)")
        #expect(
            through.stdout.contains("signed out \(Worker.jo.username)")
                && through.stdout.contains("from every app through the broker at \(daemon.socketPath) (store \(store))"),
            "\(through.stdout)"
        )
        // Root's --app works on the store, so it takes no --socket.
        let both = try await daemon.cli.run(["signout", "--app", Daemon.scanner, "--socket", daemon.socketPath])
        #expect(both.status == 64 && both.stderr.contains("drop one of them"), "\(both.stderr)")
        await daemon.stop()

        // No broker named and none at the system's socket: the store, named, and where no broker answered.
        try await BrokerIdleTests.signInJo(daemon)
        let direct = try await daemon.cli.run(["signout", "--json"], environment: ["DEVICECTL_SOCKET": ""])
        #expect(direct.status == 0, "\(direct.stderr)")
        let outcome = try #require(try parseJSON(direct.stdout) as? [String: Any], "\(direct.stdout)")
        #expect(
            outcome["stateDirectory"] as? String == store && outcome["broker"] is NSNull
                && outcome["global"] as? Bool == true,
            "\(outcome)"
        )
        #expect(((outcome["account"] as? [String: Any])?["username"] as? String) == Worker.jo.username, "\(outcome)")
        let nobody = try await daemon.cli.run(["signout"], environment: ["DEVICECTL_SOCKET": ""])
        #expect(nobody.status != 0, "\(nobody.stdout)")
        #expect(
            nobody.stderr.contains("nobody is signed in")
                && nobody.stderr.contains(
                    "looked in the store \(store), as no broker answers at /run/devicectl/broker.sock"
                ),
            "\(nobody.stderr)"
        )
        // A store that is not there (a mistyped --state-dir) is not created to sign out in.
        let mistyped = try await Self.devicectl(
            ["signout", "--state-dir", other.path],
            environment: ["DEVICECTL_SOCKET": ""]
        )
        #expect(
            mistyped.status == 69 && mistyped.stderr.contains("there is no store in \(other.path)"),
            "\(mistyped.stderr)"
        )
        #expect(!FileManager.default.fileExists(atPath: other.path), "signout created a store")
        await daemon.cleanUp()
    }
}
