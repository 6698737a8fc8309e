import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// Apps of one desktop user told apart by their Flatpak sandbox: two real Flatpak apps
/// (Tests/Flatpak/fixture.bash: a local runtime, a local repository, installed system-wide) run with
/// `flatpak run` by the **same** uid against the real daemon, next to a host process of that uid.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct FlatpakAppTests {
    typealias Daemon = BrokerDaemon

    static let user: UInt32 = Daemon.scannerUID
    static let scannerGroup = Daemon.scanner, timeclockGroup = Daemon.timeclock
    static let launcher = "com.contoso.kiosk.launcher"
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Flatpak/fixture.bash").path

    /// The kiosk policy with the scanner and the timeclock as Flatpak apps of `user`, and (with
    /// `launcher`) a host app of that uid too.
    static func desktopPolicy(launcher: Bool = true, limits: [String: Int]? = nil) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: DevicectlRunner.policy("kiosk.json")))
        var policy = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        var apps: [[String: Any]] = [
            [
                "id": Daemon.scanner, "accessGroups": [scannerGroup, "com.microsoft.adalcache"],
                "flatpak": "com.contoso.Scanner", "uid": user,
            ],
            [
                "id": Daemon.timeclock, "accessGroups": [timeclockGroup, "com.microsoft.adalcache"],
                "flatpak": "com.contoso.Timeclock", "uid": user,
            ],
        ]
        if launcher { apps.append(["id": Self.launcher, "accessGroups": [Self.launcher], "uid": user]) }
        policy["apps"] = apps
        if let limits { policy["limits"] = limits }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "kiosk-flatpak-\(UUID().uuidString).json"
        )
        try JSONSerialization.data(withJSONObject: policy).write(to: file)
        return file.path
    }

    /// Builds and installs the fixture's runtime and apps once (cached).
    static func ensureFixture() async throws {
        let ensure = try await Command.run(URL(fileURLWithPath: "/bin/bash"), [fixture, "ensure"])
        try #require(
            ensure.status == 0,
            "the Flatpak fixture is not ready (tools/setup installs flatpak): \(ensure.stderr)"
        )
    }

    /// `flatpak run APP` as `uid`, the daemon's socket directory reachable, running varlink-call with `arguments`.
    static func sandboxed(
        _ app: String,
        _ daemon: Daemon,
        uid: UInt32 = user,
        _ arguments: [String],
        writableInput: Bool = false
    ) throws -> ChildProcess {
        try ChildProcess(
            URL(fileURLWithPath: "/bin/bash"),
            [fixture, "run", "\(uid)", app, "--filesystem=\(daemon.publicDirectory.path)", "--"] + arguments,
            writableInput: writableInput
        )
    }

    /// The same static varlink-call on the host as `uid`.
    static func host(_ daemon: Daemon, uid: UInt32 = user, _ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(URL(fileURLWithPath: "/bin/bash"), [fixture, "host", "\(uid)", "--"] + arguments)
    }

    /// A varlink call of the broker's interface as JSON text.
    static func call(_ method: String, _ parameters: [String: Any] = [:], more: Bool = false) throws -> String {
        var message: [String: Any] = ["method": "org.sharedmode.Broker1.\(method)", "parameters": parameters]
        if more { message["more"] = true }
        return String(decoding: try JSONSerialization.data(withJSONObject: message), as: UTF8.self)
    }

    /// The replies a finished varlink-call printed, one JSON object per line.
    static func replies(
        _ client: ChildProcess,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws
        -> [[String: Any]]
    {
        try #require(
            await client.waitForExit(timeout: 60),
            "varlink-call did not finish: \(client.standardError)",
            sourceLocation: sourceLocation
        )
        return try client.lines.filter { $0.hasPrefix("{") }.map {
            try #require(try parseJSON($0) as? [String: Any], sourceLocation: sourceLocation)
        }
    }

    static func parameters(_ reply: [String: Any]) -> [String: Any] { reply["parameters"] as? [String: Any] ?? [:] }

    /// GetCaller, an item into `group`, a search of `otherGroup`, and a silent token.
    static func appCalls(group: String, otherGroup: String) throws -> [String] {
        [
            try call("GetCaller"),
            try call(
                "AddGenericPassword",
                [
                    "service": "door", "account": "code", "accessGroup": group,
                    "secret": Data("kept by \(group)".utf8).base64EncodedString(),
                ]
            ),
            try call("FindGenericPassword", ["service": "door", "accessGroup": otherGroup]),
            try call("AcquireTokenSilent", ["scopes": ["User.Read"]]),
        ]
    }

    @Test func twoFlatpakAppsOfOneUserGetTheirOwnGroupsAndNeitherGetsTheOthersNorDoesAHostProcess() async throws {
        try await Self.ensureFixture()
        let policy = try Self.desktopPolicy()
        defer { try? FileManager.default.removeItem(atPath: policy) }
        let daemon = try await Daemon(policy: policy, parent: "/run")
        try await daemon.start()
        try await BrokerIdleTests.signInJo(daemon)

        for (app, id, group, other) in [
            ("com.contoso.Scanner", Daemon.scanner, Self.scannerGroup, Self.timeclockGroup),
            ("com.contoso.Timeclock", Daemon.timeclock, Self.timeclockGroup, Self.scannerGroup),
        ] {
            let client = try Self.sandboxed(
                app,
                daemon,
                [daemon.socketPath] + (try Self.appCalls(group: group, otherGroup: other))
            )
            let replies = try await Self.replies(client)
            try #require(replies.count == 4, "\(app): \(client.lines) \(client.standardError) \(daemon.logTail())")
            let caller = Self.parameters(replies[0])
            #expect(caller["uid"] as? Int == Int(Self.user), "\(app): \(caller)")
            #expect(caller["appId"] as? String == id, "\(app): \(caller)")
            #expect(caller["sandbox"] as? String == "flatpak" && caller["flatpakAppId"] as? String == app)
            #expect(caller["accessGroups"] as? [String] == [group, "com.microsoft.adalcache"])
            #expect(replies[1]["error"] == nil, "\(app) could not add to its own group: \(replies[1])")
            #expect(
                replies[2]["error"] as? String == "org.sharedmode.Broker1.KeychainError"
                    && Self.parameters(replies[2])["status"] as? Int == -34018,
                "\(app) searched the other app's group: \(replies[2])"
            )
            let result = Self.parameters(replies[3])["result"] as? [String: Any]
            #expect(
                (result?["account"] as? [String: Any])?["username"] as? String == Worker.jo.username,
                "\(app) did not get the worker's token: \(replies[3])"
            )
        }

        // A process of the same uid outside any sandbox is the uid's host app: neither Flatpak app's groups.
        let hostClient = try Self.host(
            daemon,
            [
                daemon.socketPath, try Self.call("GetCaller"),
                try Self.call("FindGenericPassword", ["service": "door", "accessGroup": Self.scannerGroup]),
                try Self.call("FindGenericPassword", ["service": "door", "accessGroup": Self.timeclockGroup]),
            ]
        )
        let host = try await Self.replies(hostClient)
        try #require(host.count == 3, "\(hostClient.lines) \(hostClient.standardError)")
        #expect(Self.parameters(host[0])["appId"] as? String == Self.launcher, "\(host[0])")
        #expect(
            Self.parameters(host[0])["sandbox"] as? String == "host"
                && Self.parameters(host[0])["flatpakAppId"] as? String == nil
        )
        for refused in host.dropFirst() {
            #expect(
                Self.parameters(refused)["status"] as? Int == -34018,
                "the host process read a sandbox's group: \(refused)"
            )
        }

        // While the timeclock holds a subscription, the administrator sees which app of uid 1001 it is.
        let subscriber = try Self.sandboxed(
            "com.contoso.Timeclock",
            daemon,
            [daemon.socketPath, try Self.call("SubscribeAccountChanges", more: true)]
        )
        defer { _ = subscriber.killIfRunning() }
        try #require(
            await subscriber.waitForLine(timeout: 60) { $0.contains("subscribed") } != nil,
            "\(subscriber.lines) \(subscriber.standardError)"
        )
        let status = try await daemon.cli.run(
            ["status", "--json"],
            environment: ["DEVICECTL_SOCKET": daemon.socketPath]
        )
        let summary = try #require(try parseJSON(status.stdout) as? [String: Any], "\(status.stderr)")
        let connections = try #require((summary["broker"] as? [String: Any])?["connections"] as? [[String: Any]])
        #expect(
            connections.contains {
                $0["flatpakAppId"] as? String == "com.contoso.Timeclock" && $0["sandbox"] as? String == "flatpak"
                    && $0["appId"] as? String == Daemon.timeclock && $0["uid"] as? Int == Int(Self.user)
            },
            "\(connections)"
        )
        #expect((summary["broker"] as? [String: Any])?["flatpakUnavailable"] == nil)
        let text = try await daemon.cli.run(["status"], environment: ["DEVICECTL_SOCKET": daemon.socketPath])
        #expect(
            text.stdout.contains("uid \(Self.user) (flatpak com.contoso.Timeclock) \(Daemon.timeclock) pid"),
            "\(text.stdout)"
        )
        _ = subscriber.killIfRunning()
        await daemon.cleanUp()
    }

    /// A process that connects, hands its connection to a child and exits before the daemon reads who it
    /// is: its pidfd is dead, so whatever `/proc/PID` says now may be another process's; it is no app.
    @Test func aPeerWhoseProcessIsGoneBeforeItIsIdentifiedIsNoApp() async throws {
        try await Self.ensureFixture()
        let policy = try Self.desktopPolicy()
        defer { try? FileManager.default.removeItem(atPath: policy) }
        let daemon = try await Daemon(policy: policy, parent: "/run")
        try await daemon.start()
        let deviced = try #require(daemon.process)

        // The daemon is stopped, so it accepts the connection only after the process that made it has exited.
        try #require(deviced.send(SIGSTOP))
        var resumed = false
        defer { if !resumed { _ = deviced.send(SIGCONT) } }
        let client = try Self.sandboxed(
            "com.contoso.Scanner",
            daemon,
            [
                "--handoff", daemon.socketPath, try Self.call("GetCaller"),
                try Self.call("FindGenericPassword", ["service": "door", "accessGroup": Self.scannerGroup]),
            ],
            writableInput: true
        )
        defer { _ = client.killIfRunning() }
        try #require(
            await client.waitForLine(timeout: 60) { $0 == "handed-off" } != nil,
            "\(client.lines) \(client.standardError)"
        )
        resumed = deviced.send(SIGCONT)
        client.writeLine("go")
        // The fixture's process exits once the connection is handed over; the child prints the replies.
        try #require(
            await client.waitForLines(timeout: 60) { $0.filter { $0.hasPrefix("{") }.count == 2 },
            "\(client.lines) \(client.standardError) \(daemon.logTail())"
        )
        let replies = try client.lines.filter { $0.hasPrefix("{") }.map {
            try #require(try parseJSON($0) as? [String: Any])
        }
        let caller = Self.parameters(replies[0])
        #expect(caller["sandbox"] as? String == "unidentified" && caller["appId"] as? String == nil, "\(caller)")
        #expect(replies[1]["error"] as? String == "org.sharedmode.Broker1.CallerNotInPolicy", "\(replies[1])")
        #expect(
            (Self.parameters(replies[1])["message"] as? String)?.contains("could not tell which app of uid") == true,
            "\(replies[1])"
        )
        // The refusal is audited with why the caller could not be identified.
        let refusal = try await daemon.auditEvents().last { $0["type"] as? String == "keychain.access_denied" }
        let details = try #require(refusal?["details"] as? [String: Any], "\(String(describing: refusal))")
        #expect(details["sandboxed"] as? String == "unknown" && details["identityError"] != nil, "\(details)")
        await daemon.cleanUp()
    }

    /// Each app of a uid holds its own share of connections, and the uid as a whole no more than its apps'
    /// shares: a user does not multiply its share by starting more sandboxes or host processes.
    @Test func connectionsAreCountedPerAppWithinTheUidsTotal() async throws {
        try await Self.ensureFixture()
        // Two Flatpak apps, no host app: the uid's total is 2 × 2.
        let policy = try Self.desktopPolicy(launcher: false, limits: ["connectionsPerApp": 2])
        defer { try? FileManager.default.removeItem(atPath: policy) }
        let daemon = try await Daemon(policy: policy, parent: "/run")
        try await daemon.start()
        var held: [ChildProcess] = []
        defer { for client in held { _ = client.killIfRunning() } }
        let subscribe = [daemon.socketPath, try Self.call("SubscribeAccountChanges", more: true)]

        func hold(_ start: () throws -> ChildProcess) async throws {
            let client = try start()
            held.append(client)
            try #require(
                await client.waitForLine(timeout: 60) { $0.contains("subscribed") } != nil,
                "\(client.lines) \(client.standardError) \(daemon.logTail())"
            )
        }
        func refusal(_ client: ChildProcess) async throws -> String? {
            let replies = try await Self.replies(client)
            #expect(replies.first?["error"] as? String == "org.sharedmode.Broker1.TooManyConnections", "\(replies)")
            return replies.first.map { Self.parameters($0)["scope"] as? String } ?? nil
        }

        for _ in 0..<2 { try await hold { try Self.sandboxed("com.contoso.Scanner", daemon, subscribe) } }
        #expect(try await refusal(try Self.sandboxed("com.contoso.Scanner", daemon, subscribe)) == "app")
        // The other app of the same uid still has its own share.
        for _ in 0..<2 { try await hold { try Self.sandboxed("com.contoso.Timeclock", daemon, subscribe) } }
        // The uid's total is reached: a host process of that uid (no app) gets nothing more.
        #expect(try await refusal(try Self.host(daemon, subscribe)) == "user")
        // Another user is not affected.
        let other = try Self.host(daemon, uid: Daemon.timeclockUID, [daemon.socketPath, try Self.call("GetCaller")])
        let answer = try await Self.replies(other)
        #expect(Self.parameters(answer.first ?? [:])["uid"] as? Int == Int(Daemon.timeclockUID), "\(answer)")
        for client in held { _ = client.killIfRunning() }
        await daemon.cleanUp()
    }

    /// On a kernel without SO_PEERPIDFD (Debian 12's stock 6.1; here `deviced --without-peer-pidfd`), a
    /// sandbox cannot be pinned to its process: Flatpak entries are refused, status says why, and every
    /// process of a uid is its host app as before.
    @Test func withoutPeerPidfdsFlatpakEntriesAreRefusedAndStatusSaysWhy() async throws {
        try await Self.ensureFixture()
        let policy = try Self.desktopPolicy()
        defer { try? FileManager.default.removeItem(atPath: policy) }
        let daemon = try await Daemon(policy: policy, parent: "/run")
        try await daemon.start(["--without-peer-pidfd"])
        let client = try Self.sandboxed(
            "com.contoso.Scanner",
            daemon,
            [
                daemon.socketPath, try Self.call("GetCaller"),
                try Self.call("FindGenericPassword", ["service": "door", "accessGroup": Self.scannerGroup]),
            ]
        )
        let replies = try await Self.replies(client)
        try #require(replies.count == 2, "\(client.lines) \(client.standardError)")
        let caller = Self.parameters(replies[0])
        #expect(caller["sandbox"] as? String == "unpinned" && caller["appId"] as? String == Self.launcher, "\(caller)")
        #expect(Self.parameters(replies[1])["status"] as? Int == -34018, "\(replies[1])")

        let status = try await daemon.cli.run(["status"], environment: ["DEVICECTL_SOCKET": daemon.socketPath])
        #expect(
            status.stdout.contains("Flatpak apps: REFUSED: deviced was started with --without-peer-pidfd"),
            "\(status.stdout)"
        )
        await daemon.cleanUp()

        // A policy of uid-only apps is served on that path exactly as before.
        let kiosk = try await Daemon()
        try await kiosk.start(["--without-peer-pidfd"])
        try await BrokerIdleTests.signInJo(kiosk)
        let timeclock = try await kiosk.devicectl(as: Daemon.timeclockUID, ["account", "--json"])
        #expect(timeclock.status == 0 && timeclock.stdout.contains(Worker.jo.username), "\(timeclock.stderr)")
        let plain = try await kiosk.cli.run(["status"], environment: ["DEVICECTL_SOCKET": kiosk.socketPath])
        #expect(!plain.stdout.contains("Flatpak apps"), "\(plain.stdout)")
        await kiosk.cleanUp()
    }
}
