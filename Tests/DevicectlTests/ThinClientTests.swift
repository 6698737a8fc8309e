import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// An app that links only SharedDeviceClient (`thin-app`), run under a policy uid against the real
/// daemon: account changes with the idle countdown, the device-code callback, cancellation, no broker,
/// an untrusted broker, and a link free of the engine.
@Suite(.serialized, .tags(.integration, .needsRoot, .needsIdentityProvider)) struct ThinClientTests {
    typealias Daemon = BrokerDaemon
    typealias Provider = IdentityCLITests.Provider

    /// The `event …` lines a `thin-app watch` printed, without the prefix.
    static func events(_ app: ChildProcess) -> [String] {
        app.lines(prefix: "event ").map { String($0.dropFirst("event ".count)) }
    }

    /// Runs thin-app as `uid` to its end and returns its lines (it must succeed).
    static func finished(
        _ daemon: Daemon,
        as uid: UInt32,
        _ arguments: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> [String] {
        let app = try daemon.start(product: "thin-app", as: uid, arguments)
        #expect(
            await app.waitForExit(timeout: 30),
            "thin-app \(arguments) did not finish",
            sourceLocation: sourceLocation
        )
        #expect(app.status == 0, "thin-app \(arguments) failed: \(app.standardError)", sourceLocation: sourceLocation)
        return app.lines
    }

    @Test func anAppGoesThroughTheBrokerUnderItsOwnUid() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        try await BrokerIdleTests.signInJo(daemon)
        #expect(
            try await Self.finished(daemon, as: Daemon.timeclockUID, ["current"]) == [
                "mode shared", "current \(Worker.jo.username)",
            ]
        )
        let silent = try await Self.finished(daemon, as: Daemon.timeclockUID, ["silent", "User.Read"])
        #expect(silent.first?.hasPrefix("token cache \(Worker.jo.username) ") == true, "\(silent)")

        // The timeclock watches; the scanner ends the shift; the timeclock hears of it through the broker.
        let watcher = try daemon.start(product: "thin-app", as: Daemon.timeclockUID, ["watch", "2"])
        defer { _ = watcher.killIfRunning() }
        try #require(
            await watcher.waitForLine(timeout: 20) { $0.hasPrefix("event subscribed ") } != nil,
            "\(watcher.standardError)"
        )
        let signOut = try await Self.finished(daemon, as: Daemon.scannerUID, ["signout"])
        #expect(signOut.first?.hasPrefix("signed-out \(Worker.jo.username) global true items ") == true, "\(signOut)")
        try #require(await watcher.waitForExit(timeout: 20), "\(watcher.lines)")
        #expect(
            watcher.lines == ["returned", "event subscribed \(Worker.jo.username)", "event signedOut user"],
            "\(watcher.standardError)"
        )
        // A uid the policy does not list is no app: refused by name.
        let stranger = try daemon.start(product: "thin-app", as: Daemon.strangerUID, ["current"])
        #expect(await stranger.waitForExit(timeout: 30))
        #expect(
            stranger.status == 1 && stranger.standardError.contains("error: callerNotInPolicy"),
            "\(stranger.standardError)"
        )
        await daemon.cleanUp()
    }

    /// The wire keeps the keychain's semantics (a delete or find that matches nothing is -25300); the client
    /// lets an app say "nothing there is fine" without matching the error's shape.
    @Test func nothingToDeleteIsItemNotFoundOnTheWireAndZeroForDeleteIfPresent() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        #expect(
            try await Self.finished(daemon, as: Daemon.scannerUID, ["not-found"]) == [
                "if-present 0", "if-present 1",
                "find isItemNotFound true status -25300", "delete isItemNotFound true status -25300",
            ]
        )
        await daemon.cleanUp()
    }

    @Test func accountChangesCarryTheIdleWarningItsCancellationAndTheIdleSignOut() async throws {
        // 60 s idle sign-out, warned 40 s before, on a clock the test moves (`--clock-file`).
        let policy = try BrokerIdleTests.idlePolicy(timeout: 60, warning: 40)
        defer { try? FileManager.default.removeItem(at: policy) }
        let daemon = try await Daemon(policy: policy.path)
        try await daemon.start(try daemon.clockArguments())
        let start = try daemon.clock
        let watcher = try daemon.start(product: "thin-app", as: Daemon.timeclockUID, ["watch", "6"])
        defer { _ = watcher.killIfRunning() }
        try #require(
            await watcher.waitForLine(timeout: 30) { $0 == "event subscribed none" } != nil,
            "\(watcher.standardError)"
        )
        #expect(
            watcher.lines.first == "returned",
            "accountChanges() returned only after the first event: \(watcher.lines)"
        )
        try await BrokerIdleTests.signInJo(daemon)
        try #require(
            await watcher.waitForLine(timeout: 30) { $0.hasPrefix("event signedIn ") } != nil,
            "\(watcher.lines)"
        )
        try await BrokerIdleTests.waitForIdleRecord(daemon)  // the daemon times the worker from the sign-in on
        try daemon.setClock(start + 20)
        try await BrokerIdleTests.waitForLine(watcher, containing: "event idleWarning 40")

        // Input on the kiosk, reported by the other app through its own thin client.
        let activity = try daemon.start(product: "thin-app", as: Daemon.scannerUID, ["activity"])
        try #require(await activity.waitForExit(timeout: 30) && activity.status == 0, "\(activity.standardError)")
        let left = try #require(Int(activity.lines.first?.split(separator: " ").last ?? ""), "\(activity.lines)")
        #expect(left == 60, "after activity the sign-out is \(left) policy seconds away")
        try await BrokerIdleTests.waitForLine(watcher, containing: "event idleWarningCanceled")
        try daemon.setClock(start + 40)
        try await BrokerIdleTests.waitForLine(watcher, containing: "event idleWarning 40", count: 2)
        try daemon.setClock(start + 80)

        try #require(
            await watcher.waitForExit(timeout: 30),
            "the watcher did not see six events: \(watcher.lines) \(watcher.standardError)"
        )
        #expect(watcher.status == 0, "\(watcher.standardError)")
        let events = Self.events(watcher)
        #expect(events.count == 6 && events[1].hasPrefix("signedIn "), "\(events)")
        #expect(
            Array(events.dropFirst(2)) == [
                "idleWarning 40", "idleWarningCanceled -", "idleWarning 40", "signedOut idle",
            ],
            "\(events)"
        )
        await daemon.cleanUp()
    }

    @Test func theDeviceCodeCallbackFiresAndTheOtherAppGetsTokensAndTheBrokersCounts() async throws {
        let daemon = try await BrokerSignInTests.daemon()
        let lock = try await IdentityCLITests.ProviderLock.acquire(timeout: 120)
        let signIn = try daemon.start(product: "thin-app", as: Daemon.scannerUID, ["signin", "User.Read"])
        defer { _ = signIn.killIfRunning() }
        let shown = await signIn.waitForLine(timeout: 30) { $0.hasPrefix("code ") }
        let fields = shown?.split(separator: " ").map(String.init) ?? []
        guard fields.count == 3 else {
            lock.release()
            Issue.record("the device-code callback did not fire: \(signIn.lines) \(signIn.standardError)")
            await daemon.cleanUp()
            return
        }
        #expect(fields[2].hasPrefix("http"), "\(fields)")
        let approval = try await Provider.tool([
            "approve", "--port", "\(IdentityCLITests.port)", "--code", fields[1], "--user", "worker1",
        ])
        lock.release()
        #expect(approval.status == 0, "\(approval.stderr)")
        try #require(
            await signIn.waitForExit(timeout: 60),
            "the sign-in did not finish; the daemon's log ends: \(daemon.logTail())"
        )
        #expect(signIn.status == 0, "\(signIn.standardError)")
        let token = try #require(signIn.lines.last { $0.hasPrefix("token ") }, "\(signIn.lines)")
        #expect(token.hasPrefix("token interactive ") && token.contains("User.Read"), "\(token)")

        // The other app: silently, through the broker.
        let silent = try daemon.start(product: "thin-app", as: Daemon.timeclockUID, ["silent", "User.Read"])
        try #require(await silent.waitForExit(timeout: 30))
        #expect(
            silent.status == 0 && silent.lines.first?.hasPrefix("token cache ") == true,
            "\(silent.lines) \(silent.standardError)"
        )
        let current = try daemon.start(product: "thin-app", as: Daemon.timeclockUID, ["current"])
        try #require(await current.waitForExit(timeout: 30))
        #expect(
            current.lines.first == "mode shared" && current.lines.dropFirst().first?.hasPrefix("current ") == true
                && current.lines.dropFirst().first != "current none",
            "\(current.lines) \(current.standardError)"
        )

        // The sign-out's counts are the broker's: what the audit log recorded for it.
        let signOut = try daemon.start(product: "thin-app", as: Daemon.timeclockUID, ["signout"])
        try #require(await signOut.waitForExit(timeout: 30))
        let line = try #require(signOut.lines.first, "\(signOut.standardError)")
        #expect(line.hasPrefix("signed-out ") && line.contains(" global true items "), "\(line)")
        let removed = try #require(Int(line.split(separator: " ").last ?? ""))
        let audited = try #require(
            try await daemon.auditEvents().last { $0["type"] as? String == "account.signed_out" }
        )
        #expect(
            removed > 0 && (audited["details"] as? [String: Any])?["itemsRemoved"] as? String == "\(removed)",
            "the app was told \(removed), the audit log says \(audited)"
        )
        await daemon.cleanUp()
    }

    /// The uids of the connections open to `daemon`, as root's `devicectl status` lists them.
    static func connectedUIDs(_ daemon: Daemon) async throws -> [Int] {
        let status = try await daemon.cli.run(
            ["status", "--json"],
            environment: ["DEVICECTL_SOCKET": daemon.socketPath]
        )
        let document = try #require(try parseJSON(status.stdout) as? [String: Any], "\(status.stdout) \(status.stderr)")
        return ((document["broker"] as? [String: Any])?["connections"] as? [[String: Any]] ?? []).compactMap {
            $0["uid"] as? Int
        }
    }

    @Test func cancellingTheTaskOfASignInClosesItsConnectionAndCachesNothing() async throws {
        let daemon = try await BrokerSignInTests.daemon()
        let go = daemon.publicDirectory.appendingPathComponent("cancel-now")
        let lock = try await IdentityCLITests.ProviderLock.acquire(timeout: 120)
        let signIn = try daemon.start(
            product: "thin-app",
            as: Daemon.scannerUID,
            ["cancel-signin", "User.Read", go.path]
        )
        defer { _ = signIn.killIfRunning() }
        let shown = await signIn.waitForLine(timeout: 30) { $0.hasPrefix("code ") }
        lock.release()
        try #require(shown != nil, "\(signIn.lines) \(signIn.standardError)")
        // The sign-in is in progress on the app's connection...
        let during = try await Self.connectedUIDs(daemon)
        #expect(during.contains(Int(Daemon.scannerUID)), "\(during)")
        // ...until the app cancels its task: the client closes the connection, the broker drops the call.
        FileManager.default.createFile(atPath: go.path, contents: Data())
        try #require(await signIn.waitForExit(timeout: 30), "\(signIn.lines) \(signIn.standardError)")
        #expect(signIn.status == 0 && signIn.lines.last == "cancelled", "\(signIn.lines) \(signIn.standardError)")
        var connected = try await Self.connectedUIDs(daemon)
        let deadline = Date().addingTimeInterval(10)
        while connected.contains(Int(Daemon.scannerUID)) && Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
            connected = try await Self.connectedUIDs(daemon)
        }
        #expect(
            !connected.contains(Int(Daemon.scannerUID)),
            "the broker still holds the app's connection: \(connected)"
        )
        let current = try daemon.start(product: "thin-app", as: Daemon.timeclockUID, ["current"])
        try #require(await current.waitForExit(timeout: 30))
        #expect(current.lines.last == "current none", "\(current.lines) \(current.standardError)")
        let signIns = try await daemon.auditEvents().filter { $0["type"] as? String == "account.signed_in" }
        #expect(signIns.isEmpty, "\(signIns)")
        await daemon.cleanUp()
    }

    @Test func withNoBrokerEveryCallSaysHowToStartOneAndNothingIsCreated() async throws {
        // The app's home, writable by it: a client that fell back to a store of its own would create one here.
        let home = URL(fileURLWithPath: "/tmp/thin-app-home-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(
            at: home,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        #expect(chown(home.path, Daemon.scannerUID, Daemon.scannerUID) == 0)
        defer { try? FileManager.default.removeItem(at: home) }
        let binary = home.appendingPathComponent("thin-app").path
        try ExecutableCopy.copy(
            from: DevicectlRunner.productsDirectory.appendingPathComponent("thin-app").path,
            to: binary
        )
        let socket = home.appendingPathComponent("no-broker/broker.sock").path
        let environment = [
            "HOME": home.path, "XDG_STATE_HOME": home.appendingPathComponent("state").path, "DEVICECTL_SOCKET": socket,
        ]
        for mode in [["current"], ["silent", "User.Read"], ["signout"], ["watch", "1"]] {
            let run = try await Command.run(
                Daemon.setpriv,
                Daemon.asUser(Daemon.scannerUID) + [binary] + mode,
                environment: environment
            )
            #expect(run.status == 1, "\(mode): \(run.stdout) \(run.stderr)")
            #expect(
                run.stderr.contains("error: brokerUnavailable") && run.stderr.contains("systemctl start deviced")
                    && run.stderr.contains(socket),
                "\(mode): \(run.stderr)"
            )
            if mode[0] == "watch" { #expect(run.stdout == "returned\n", "\(run.stdout)") }
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: home.path)
        #expect(left == ["thin-app"], "the client created \(left)")
    }

    @Test func aBrokerRunByAnotherUserGetsNothing() async throws {
        let daemon = try await Daemon()
        let (fake, socket) = try await BrokerTrustTests.fakeBroker(daemon, as: Daemon.strangerUID)
        let app = try daemon.start(product: "thin-app", as: Daemon.scannerUID, ["--socket", socket, "signout"])
        try #require(await app.waitForExit(timeout: 30))
        #expect(
            app.status == 1 && app.standardError.contains("error: untrustedBroker")
                && app.standardError.contains("uid \(Daemon.strangerUID)"),
            "\(app.lines) \(app.standardError)"
        )
        #expect(try await BrokerTrustTests.received(by: fake) == 0, "the fake broker received bytes")
        await daemon.cleanUp()
    }

    @Test func aReplyOffTheInterfaceIsRefusedNamingTheField() async throws {
        // A broker the client trusts (root runs it) whose replies lack what the interface requires.
        let daemon = try await Daemon()
        let (fake, socket) = try await BrokerTrustTests.fakeBroker(daemon, as: 0)
        let current = try daemon.start(product: "thin-app", as: Daemon.scannerUID, ["--socket", socket, "current"])
        try #require(await current.waitForExit(timeout: 30))
        #expect(current.status == 1 && current.lines.isEmpty, "\(current.lines)")
        #expect(
            current.standardError.contains(
                "error: refused the broker's reply to GetDeviceInformation has the field information missing or mistyped"
            ),
            "\(current.standardError)"
        )
        // A sign-out whose reply has every field is taken as it is: the counts are the broker's.
        let signOut = try daemon.start(product: "thin-app", as: Daemon.scannerUID, ["--socket", socket, "signout"])
        try #require(await signOut.waitForExit(timeout: 30))
        #expect(signOut.lines == ["signed-out none global true items 99"], "\(signOut.lines) \(signOut.standardError)")
        _ = try await BrokerTrustTests.received(by: fake)
        await daemon.cleanUp()
    }

    @Test func theClientsLinkHoldsNoStoreCryptoOrCurl() async throws {
        let binary = DevicectlRunner.productsDirectory.appendingPathComponent("thin-app")
        let symbols = try await Command.run(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", "nm -C '\(binary.path)' | grep -E 'sqlite3_|sodium_|curl_|BoringSSL|JWTKit|GRDB' | head -5"]
        )
        #expect(
            symbols.status == 0 && symbols.stdout.isEmpty,
            "the thin client's link holds: \(symbols.stdout) \(symbols.stderr)"
        )
        // Sanity: the same check finds them in an app that links the engine.
        let engine = DevicectlRunner.productsDirectory.appendingPathComponent("devicectl")
        let engineSymbols = try await Command.run(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", "nm -C '\(engine.path)' | grep -cE 'sqlite3_|sodium_|BoringSSL'"]
        )
        #expect(
            (Int(engineSymbols.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 0,
            "the check finds nothing anywhere: \(engineSymbols.stderr)"
        )
        let libraries = try await Command.run(URL(fileURLWithPath: "/usr/bin/ldd"), [binary.path])
        for library in ["libsqlite3", "libsodium", "libcurl", "libssl", "libcrypto"] {
            #expect(!libraries.stdout.contains(library), "thin-app loads \(library): \(libraries.stdout)")
        }
    }
}
