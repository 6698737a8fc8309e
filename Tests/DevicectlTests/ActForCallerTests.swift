import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// `ActForCaller`, the MSAL bridge's hand-over of its D-Bus caller to deviced, with real processes against
/// the real daemon: a host process of the scanner's uid (`Tests/Python/act_for_caller.py`) holds a pidfd of
/// another process and hands its number over; deviced copies it with pidfd_getfd and identifies the process
/// itself. The process handed over is a real Flatpak app (the fixture of FlatpakAppTests, `flatpak run`)
/// or one in a root-made sandbox (`Tests/Flatpak/fake-sandbox`, whose pid the test knows at once).
@Suite(.serialized, .tags(.integration, .needsRoot)) struct ActForCallerTests {
    typealias Daemon = BrokerDaemon

    static let user = FlatpakAppTests.user
    static let testsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    static let fakeSandbox = testsDirectory.appendingPathComponent("Flatpak/fake-sandbox")

    /// The desktop policy (the scanner and the timeclock as Flatpak apps of `user`, the launcher its host app).
    static func daemon(_ options: [String] = []) async throws -> Daemon {
        let policy = try FlatpakAppTests.desktopPolicy()
        defer { try? FileManager.default.removeItem(atPath: policy) }
        let daemon = try await Daemon(policy: policy)
        try await daemon.start(["--log-level", "debug"] + options)
        return daemon
    }

    /// A process of `uid` in a root-made sandbox of `appID` that sleeps until the test ends it, once it runs
    /// as `uid` in its sandbox.
    static func sandboxedProcess(_ appID: String, uid: UInt32 = user) async throws -> ChildProcess {
        let process = try ChildProcess(fakeSandbox, [appID, "\(uid)", "--", "/usr/bin/sleep", "infinity"])
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, !process.hasExited {
            let status = (try? String(contentsOfFile: "/proc/\(process.pid)/status", encoding: .utf8)) ?? ""
            if status.contains("Name:\tsleep\n"), status.contains("Uid:\t\(uid)\t\(uid)\t"),
                FileManager.default.fileExists(atPath: "/proc/\(process.pid)/root/.flatpak-info")
            {
                return process
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        _ = process.killIfRunning()
        throw ChildProcessError(message: "the sandboxed process did not start: \(process.standardError)")
    }

    /// The helper, copied where every uid (and a fake sandbox, which binds /tmp) can read it.
    static func helper(_ daemon: Daemon) throws -> String {
        let copy = daemon.publicDirectory.appendingPathComponent("act_for_caller.py").path
        if !FileManager.default.fileExists(atPath: copy) {
            try ExecutableCopy.copy(
                from: testsDirectory.appendingPathComponent("Python/act_for_caller.py").path,
                to: copy,
                mode: 0o644
            )
        }
        return copy
    }

    /// The replies of the helper run as `uid` on the host: `handover` (see the helper), then `calls`.
    static func act(
        _ daemon: Daemon,
        as uid: UInt32 = user,
        _ handover: [String],
        _ calls: [String] = []
    ) async throws -> [[String: Any]] {
        let client = try ChildProcess(
            Daemon.setpriv,
            Daemon.asUser(uid) + ["/usr/bin/python3", try helper(daemon), daemon.socketPath] + handover + calls
        )
        return try await FlatpakAppTests.replies(client)
    }

    /// The helper as `user`, its connection acting for process `pid` and held open (until a line on its
    /// standard input, or the test kills it), once it says so.
    static func holdingConnection(_ daemon: Daemon, actingFor pid: Int32) async throws -> ChildProcess {
        let holding = try ChildProcess(
            Daemon.setpriv,
            Daemon.asUser(user) + ["/usr/bin/python3", try helper(daemon), daemon.socketPath, "pid", "\(pid)", "wait"],
            writableInput: true
        )
        guard await holding.waitForLine(timeout: 30, where: { $0 == "waiting" }) != nil else {
            _ = holding.killIfRunning()
            throw ChildProcessError(
                message: "the acting connection was not held: \(holding.lines) \(holding.standardError)"
            )
        }
        return holding
    }

    static func parameters(_ reply: [String: Any]?) -> [String: Any] {
        FlatpakAppTests.parameters(reply ?? [:])
    }

    /// The `actForCallerRefused` (or `code`) message of `reply`, nil when it is not that refusal.
    static func refusal(_ reply: [String: Any]?, code: String = "actForCallerRefused") -> String? {
        guard reply?["error"] as? String == "org.sharedmode.Broker1.AccountError",
            parameters(reply)["code"] as? String == code
        else { return nil }
        return parameters(reply)["message"] as? String
    }

    @Test func aHostProcessHandingAFlatpakAppsPidfdIsServedAsThatAppOnItsConnectionOnly() async throws {
        let daemon = try await Self.daemon()
        let scanner = try await Self.sandboxedProcess("com.contoso.Scanner")
        defer { _ = scanner.killIfRunning() }
        let replies = try await Self.act(
            daemon,
            ["pid", "\(scanner.pid)"],
            [
                try FlatpakAppTests.call("GetCaller"),
                try FlatpakAppTests.call(
                    "AddGenericPassword",
                    [
                        "service": "door", "account": "code", "accessGroup": FlatpakAppTests.scannerGroup,
                        "secret": Data("kept by the scanner".utf8).base64EncodedString(),
                    ]
                ),
                try FlatpakAppTests.call(
                    "FindGenericPassword",
                    ["service": "door", "accessGroup": FlatpakAppTests.timeclockGroup]
                ),
                // Once per connection.
                try FlatpakAppTests.call("ActForCaller", ["callerPidfd": 3]),
            ]
        )
        try #require(replies.count == 5, "\(replies) \(daemon.logTail())")
        let acted = Self.parameters(replies[0])
        #expect(replies[0]["error"] == nil, "\(replies[0])")
        #expect(acted["uid"] as? Int == Int(Self.user) && acted["appId"] as? String == Daemon.scanner, "\(acted)")
        #expect(acted["sandbox"] as? String == "flatpak" && acted["flatpakAppId"] as? String == "com.contoso.Scanner")
        let caller = Self.parameters(replies[1])
        #expect(caller["appId"] as? String == Daemon.scanner, "\(caller)")
        #expect(caller["accessGroups"] as? [String] == [FlatpakAppTests.scannerGroup, "com.microsoft.adalcache"])
        #expect(replies[2]["error"] == nil, "the scanner could not add to its own group: \(replies[2])")
        #expect(
            Self.parameters(replies[3])["status"] as? Int == -34018,
            "the scanner searched the timeclock's group: \(replies[3])"
        )
        #expect(Self.refusal(replies[4])?.contains("acts for process \(scanner.pid) already") == true, "\(replies[4])")

        // Without ActForCaller the same host process is its uid's host app: not the scanner.
        let host = try await Self.act(daemon, ["number", "-1"], [try FlatpakAppTests.call("GetCaller")])
        try #require(host.count == 2, "\(host)")
        #expect(Self.refusal(host[0])?.contains("-1 is not a descriptor number") == true, "\(host[0])")
        #expect(Self.parameters(host[1])["appId"] as? String == FlatpakAppTests.launcher, "\(host[1])")
        #expect(Self.parameters(host[1])["sandbox"] as? String == "host", "\(host[1])")

        // deviced keeps the pidfd of a connection's peer while the connection is open (and none of the
        // handed one: what it read of it is kept), and closes it with the connection.
        let deviced = try #require(daemon.process?.pid)
        let holding = try await Self.holdingConnection(daemon, actingFor: scanner.pid)
        defer { _ = holding.killIfRunning() }
        #expect(Self.pidfds(of: deviced) == 1, "deviced holds \(Self.pidfds(of: deviced)) pidfds for one connection")
        _ = holding.writeLine("done")
        #expect(await holding.waitForExit(timeout: 30), "\(holding.standardError)")
        #expect(
            try await MSALBridgeTests.eventually { Self.pidfds(of: deviced) == 0 },
            "deviced still holds \(Self.pidfds(of: deviced)) pidfds after its connections closed"
        )
        await daemon.cleanUp()
    }

    /// A connection that acts for a Flatpak app holds one of that app's connections from then on (not its
    /// host app's): the app cannot multiply its share through the bridge.
    @Test func aConnectionActingForAFlatpakAppCountsAgainstThatAppsConnections() async throws {
        let policy = try FlatpakAppTests.desktopPolicy(limits: ["connectionsPerApp": 1])
        defer { try? FileManager.default.removeItem(atPath: policy) }
        let daemon = try await Daemon(policy: policy)
        try await daemon.start()
        let scanner = try await Self.sandboxedProcess("com.contoso.Scanner")
        defer { _ = scanner.killIfRunning() }
        let acting = try await Self.holdingConnection(daemon, actingFor: scanner.pid)
        defer { _ = acting.killIfRunning() }
        // The scanner's one connection is the one acting for it: the scanner's own is refused, per app.
        // (It only listens: a refused connection gets its refusal at once, and a call sent meanwhile could
        // meet the closed socket first.)
        let listen = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX)
            s.connect(sys.argv[1])
            s.settimeout(30)
            try:
                print(s.recv(65536).rstrip(b"\\0").decode())
            except socket.timeout:
                print("admitted")
            """
        let own = try ChildProcess(
            Self.fakeSandbox,
            ["com.contoso.Scanner", "\(Self.user)", "--", "/usr/bin/python3", "-c", listen, daemon.socketPath]
        )
        #expect(await own.waitForExit(timeout: 30), "\(own.standardError)")
        let refused = own.lines.compactMap { try? parseJSON($0) as? [String: Any] }.first
        #expect(
            refused?["error"] as? String == "org.sharedmode.Broker1.TooManyConnections"
                && Self.parameters(refused)["scope"] as? String == "app",
            "\(own.lines) \(own.standardError)"
        )
        // The uid's host app (the launcher) still has its own connection.
        let host = try await Self.act(daemon, ["number", "-1"], [try FlatpakAppTests.call("GetCaller")])
        #expect(Self.parameters(host.last)["appId"] as? String == FlatpakAppTests.launcher, "\(host)")
        _ = acting.writeLine("done")
        await daemon.cleanUp()
    }

    /// How many pidfds process `pid` holds.
    static func pidfds(of pid: Int32) -> Int {
        let directory = "/proc/\(pid)/fd"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return entries.count {
            let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\($0)")) ?? ""
            return target == "anon_inode:[pidfd]" || target.hasPrefix("pidfd:")
        }
    }

    @Test func aHostProcessHandingARealFlatpakAppsPidfdIsServedAsThatApp() async throws {
        try await FlatpakAppTests.ensureFixture()
        let policy = try FlatpakAppTests.desktopPolicy()
        defer { try? FileManager.default.removeItem(atPath: policy) }
        let daemon = try await Daemon(policy: policy, parent: "/run")
        try await daemon.start()
        // The timeclock, run with `flatpak run`, connected and waiting (its own connection is its business).
        let timeclock = try FlatpakAppTests.sandboxed(
            "com.contoso.Timeclock",
            daemon,
            ["--wait-stdin", daemon.socketPath],
            writableInput: true
        )
        defer { _ = timeclock.killIfRunning() }
        try #require(
            await timeclock.waitForLine(timeout: 60) { $0 == "connected" } != nil,
            "\(timeclock.lines) \(timeclock.standardError)"
        )
        let pid = try #require(Self.process(named: "varlink-call", uid: Self.user, app: "com.contoso.Timeclock"))
        let replies = try await Self.act(daemon, ["pid", "\(pid)"], [try FlatpakAppTests.call("GetCaller")])
        try #require(replies.count == 2, "\(replies) \(daemon.logTail())")
        #expect(Self.parameters(replies[0])["appId"] as? String == Daemon.timeclock, "\(replies[0])")
        let caller = Self.parameters(replies[1])
        #expect(
            caller["appId"] as? String == Daemon.timeclock
                && caller["flatpakAppId"] as? String == "com.contoso.Timeclock",
            "\(caller)"
        )
        #expect(caller["accessGroups"] as? [String] == [FlatpakAppTests.timeclockGroup, "com.microsoft.adalcache"])
        _ = timeclock.writeLine("go")
        #expect(await timeclock.waitForExit(timeout: 60), "\(timeclock.standardError)")
        await daemon.cleanUp()
    }

    /// The pid of the process named `name` (its comm) that runs as `uid` in the Flatpak sandbox of `app`.
    static func process(named name: String, uid: UInt32, app: String) -> Int32? {
        let pids = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }
        return pids.first { pid in
            let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            let info = (try? String(contentsOfFile: "/proc/\(pid)/root/.flatpak-info", encoding: .utf8)) ?? ""
            return status.contains("Name:\t\(name)\n") && status.contains("Uid:\t\(uid)\t\(uid)\t")
                && info.contains("name=\(app)\n")
        }
    }

    @Test func aFlatpakAppThePolicyDoesNotListIsRefusedAsItselfAndAudited() async throws {
        let daemon = try await Self.daemon()
        let unlisted = try await Self.sandboxedProcess("com.contoso.Unlisted")
        defer { _ = unlisted.killIfRunning() }
        let replies = try await Self.act(
            daemon,
            ["pid", "\(unlisted.pid)"],
            [try FlatpakAppTests.call("FindGenericPassword", ["service": "door"])]
        )
        try #require(replies.count == 2, "\(replies)")
        #expect(replies[0]["error"] == nil && Self.parameters(replies[0])["appId"] is NSNull, "\(replies[0])")
        #expect(Self.parameters(replies[0])["flatpakAppId"] as? String == "com.contoso.Unlisted", "\(replies[0])")
        #expect(replies[1]["error"] as? String == "org.sharedmode.Broker1.CallerNotInPolicy", "\(replies[1])")
        #expect(Self.parameters(replies[1])["flatpakAppId"] as? String == "com.contoso.Unlisted", "\(replies[1])")
        let denial = try await daemon.auditEvents().last { $0["type"] as? String == "keychain.access_denied" }
        #expect(
            denial?["actor"] as? String == "uid \(Self.user) flatpak com.contoso.Unlisted",
            "\(String(describing: denial))"
        )
        let details = denial?["details"] as? [String: String]
        #expect(
            details?["pid"] == "\(unlisted.pid)" && details?["handedOverByPid"] != nil,
            "\(String(describing: details))"
        )
        await daemon.cleanUp()
    }

    @Test func aPidfdOfAnotherUidsProcessAFileADeadProcessOrASandboxedCallerIsRefused() async throws {
        let daemon = try await Self.daemon()
        let getCaller = try FlatpakAppTests.call("GetCaller")
        // Another uid's process: the timeclock's uid, in the scanner's sandbox.
        let other = try await Self.sandboxedProcess("com.contoso.Scanner", uid: Daemon.timeclockUID)
        defer { _ = other.killIfRunning() }
        let otherUid = try await Self.act(daemon, ["pid", "\(other.pid)"], [getCaller])
        try #require(otherUid.count == 2, "\(otherUid)")
        #expect(
            Self.refusal(otherUid[0])?.contains("runs as uid \(Daemon.timeclockUID)") == true,
            "\(otherUid[0])"
        )
        // Refused: the connection stays the host process's.
        #expect(Self.parameters(otherUid[1])["appId"] as? String == FlatpakAppTests.launcher, "\(otherUid[1])")

        let file = try await Self.act(daemon, ["file", "/etc/hostname"])
        #expect(Self.refusal(file.first)?.contains("is not a pidfd") == true, "\(file)")
        let exited = try await Self.act(daemon, ["exited"])
        #expect(Self.refusal(exited.first)?.contains("has exited") == true, "\(exited)")
        let notOpen = try await Self.act(daemon, ["number", "999"])
        #expect(Self.refusal(notOpen.first)?.contains("descriptor 999 is not open") == true, "\(notOpen)")

        // A caller in a sandbox may not act for another process, even one of its own uid.
        let scanner = try await Self.sandboxedProcess("com.contoso.Scanner")
        defer { _ = scanner.killIfRunning() }
        let sandboxedCaller = try ChildProcess(
            Self.fakeSandbox,
            [
                "com.contoso.Timeclock", "\(Self.user)", "--", "/usr/bin/python3", try Self.helper(daemon),
                daemon.socketPath, "pid", "\(scanner.pid)", getCaller,
            ]
        )
        let sandboxed = try await FlatpakAppTests.replies(sandboxedCaller)
        try #require(sandboxed.count == 2, "\(sandboxed) \(sandboxedCaller.standardError)")
        #expect(
            Self.refusal(sandboxed[0])?.contains("only a host process may act for another") == true,
            "\(sandboxed[0])"
        )
        #expect(Self.parameters(sandboxed[1])["appId"] as? String == Daemon.timeclock, "\(sandboxed[1])")
        await daemon.cleanUp()
    }

    @Test func aBrokerThatDoesNotPinProcessesSaysActForCallerIsUnsupported() async throws {
        let daemon = try await Self.daemon(["--without-peer-pidfd"])
        let scanner = try await Self.sandboxedProcess("com.contoso.Scanner")
        defer { _ = scanner.killIfRunning() }
        let replies = try await Self.act(daemon, ["pid", "\(scanner.pid)"])
        #expect(
            Self.refusal(replies.first, code: "actForCallerUnsupported")?.contains("--without-peer-pidfd") == true,
            "\(replies)"
        )
        await daemon.cleanUp()
    }
}
