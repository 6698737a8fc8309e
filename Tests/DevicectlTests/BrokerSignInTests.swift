import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// Interactive sign-in done by the broker against the local identity provider (glewlwyd), for apps under
/// their own uids: the tokens stay in the daemon, the apps get them silently through it.
@Suite(.serialized, .tags(.integration, .needsRoot, .needsIdentityProvider)) struct BrokerSignInTests {
    typealias Daemon = BrokerDaemon
    typealias Provider = IdentityCLITests.Provider

    /// - Parameter onATestClock: the broker's idle and password clocks read a file the test moves (`Daemon.setClock`).
    static func daemon(logLevel: String = "info", onATestClock: Bool = false) async throws -> Daemon {
        let provider = try await Provider.shared()
        let scratch = DevicectlRunner()
        defer { scratch.cleanUp() }
        let policy = try Provider.kioskPolicy(issuer: provider.issuer, in: scratch)
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent(
            "broker-policy-\(UUID().uuidString).json"
        )
        try FileManager.default.copyItem(atPath: policy, toPath: copy.path)
        defer { try? FileManager.default.removeItem(at: copy) }
        let daemon = try await Daemon(policy: copy.path)
        try await daemon.start(["--log-level", logLevel] + (onATestClock ? try daemon.clockArguments() : []))
        return daemon
    }

    /// `devicectl signin` (device code) as `uid` in the background, through the broker.
    static func startSignIn(_ daemon: Daemon, as uid: UInt32) throws -> ChildProcess {
        try daemon.startDevicectl(as: uid, ["signin", "--json"])
    }

    /// The authorization URL the app's "browser" (`DEVICECTL_BROWSER` writing to `file`) was given, once it
    /// was (within 120 s, a bound for a hang; empty if never).
    static func authorizationURL(in file: URL, of process: ChildProcess) async throws -> String {
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline && !process.hasExited {
            let url =
                (try? String(contentsOf: file, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            if !url.isEmpty { return url }
            try await Task.sleep(for: .milliseconds(20))
        }
        return (try? String(contentsOf: file, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }

    /// Waits for the user code the sign-in shows (on standard error with --json).
    static func userCode(of process: ChildProcess) async -> String? {
        // 120 s: a bound for a hang (the process exiting ends the wait at once).
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline && !process.hasExited {
            if let code = IdentityCLITests.Device.userCode(in: process.standardError + process.standardOutput) {
                return code
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return IdentityCLITests.Device.userCode(in: process.standardError + process.standardOutput)
    }

    @Test func aDeviceCodeSignInByOneAppGivesTheOtherAppTokensSilentlyThroughTheBroker() async throws {
        // At trace level: the daemon's log must still carry no token or code.
        let daemon = try await Self.daemon(logLevel: "trace")
        // The device authorization request is made under the lock too (see `signInByDeviceCode`).
        let lock = try await IdentityCLITests.ProviderLock.acquire(timeout: 120)
        let signIn = try Self.startSignIn(daemon, as: Daemon.scannerUID)
        defer { _ = signIn.killIfRunning() }
        let code = try #require(await Self.userCode(of: signIn), "no code shown: \(signIn.standardError)")
        let approval = try await Provider.tool([
            "approve", "--port", "\(IdentityCLITests.port)", "--code", code, "--user", "worker1",
        ])
        lock.release()
        #expect(approval.status == 0, "\(approval.stderr)")
        try #require(
            await signIn.waitForExit(timeout: 60),
            "the sign-in did not finish; the daemon's log ends: \(daemon.logTail())"
        )
        #expect(signIn.status == 0, "\(signIn.standardError)")
        let result = try #require(try parseJSON(signIn.standardOutput) as? [String: Any], "\(signIn.standardOutput)")
        #expect((result["account"] as? [String: Any])?["username"] != nil)
        #expect(result["accessToken"] == nil, "the sign-in printed a token")

        // Single sign-on: the timeclock (another uid) gets tokens silently, from the cache and by a refresh
        // the broker redeems at the provider.
        let cached = try await daemon.devicectl(as: Daemon.timeclockUID, ["token", "--scopes", "User.Read", "--json"])
        #expect(cached.status == 0, "\(cached.stderr)")
        let refreshed = try await daemon.forcedRefresh(
            as: Daemon.timeclockUID,
            ["token", "--scopes", "User.Read", "--force-refresh", "--json"]
        )
        #expect(
            refreshed.status == 0 && refreshed.stdout.contains("\"source\" : \"refresh\""),
            "\(refreshed.stdout) \(refreshed.stderr)"
        )
        let shown = try await daemon.devicectl(
            as: Daemon.timeclockUID,
            ["token", "--scopes", "User.Read", "--print-secret", "--json"]
        )
        let token = try #require(
            (try parseJSON(shown.stdout) as? [String: Any])?["accessToken"] as? String,
            "\(shown.stdout)"
        )
        #expect(!token.isEmpty && !cached.stdout.contains(token) && !refreshed.stdout.contains(token))
        // The apps never hold the refresh token: only the broker's store does.
        #expect(!signIn.standardOutput.contains("refresh_token") && !signIn.standardError.contains(token))

        let log = try #require(daemon.process).standardError
        #expect(
            log.contains("silent token") && !log.contains(token) && !log.contains(code),
            "the daemon logged a token or the user code"
        )

        // A global sign-out through the broker; after it, silent calls say nobody is signed in (exit 49).
        let signOut = try await daemon.devicectl(as: Daemon.timeclockUID, ["signout"])
        #expect(signOut.status == 0, "\(signOut.stderr)")
        let after = try await daemon.devicectl(as: Daemon.scannerUID, ["token", "--scopes", "User.Read"])
        #expect(after.status == 49, "\(after.stderr)")
        await daemon.cleanUp()
    }

    @Test func aBrowserSignInThroughTheBrokerListensOnTheAppsLoopbackRedirect() async throws {
        let daemon = try await Self.daemon()
        // The app's "browser" hands the authorization URL to the test, which plays the worker in the browser.
        let urlFile = daemon.publicDirectory.appendingPathComponent("authorization-url")
        _ = FileManager.default.createFile(atPath: urlFile.path, contents: nil, attributes: [.posixPermissions: 0o666])
        let signIn = try daemon.startDevicectl(
            as: Daemon.scannerUID,
            ["signin", "--flow", "browser", "--json"],
            environment: ["DEVICECTL_BROWSER": "printf '%s\\n' >'\(urlFile.path)'"]
        )
        defer { _ = signIn.killIfRunning() }
        let url = try await Self.authorizationURL(in: urlFile, of: signIn)
        try #require(!url.isEmpty, "no authorization URL: \(signIn.standardError)")
        #expect(url.contains("redirect_uri=http%3A%2F%2F127.0.0.1%3A") && url.contains("code_challenge="), "\(url)")
        let browse = try await Provider.tool(["browse", "--user", "worker2", "--", url])
        #expect(browse.status == 0, "\(browse.stderr)")
        #expect(await signIn.waitForExit(timeout: 60))
        #expect(signIn.status == 0, "\(signIn.standardError)")
        let result = try #require(try parseJSON(signIn.standardOutput) as? [String: Any], "\(signIn.standardOutput)")
        #expect((result["account"] as? [String: Any])?["username"] as? String == "worker2")
        let token = try await daemon.devicectl(as: Daemon.timeclockUID, ["token", "--scopes", "User.Read", "--json"])
        #expect(token.status == 0 && token.stdout.contains("worker2"), "\(token.stderr)")
        await daemon.cleanUp()
    }

    @Test func anAppThatVanishesDuringItsSignInCachesNothing() async throws {
        let daemon = try await Self.daemon(logLevel: "debug")
        // The app goes away while the worker is still typing the code; then the worker approves it.
        _ = try await Self.approvingDeviceCode(
            daemon,
            as: Daemon.scannerUID,
            ["signin"],
            user: "worker1",
            beforeApproval: Self.kill
        )
        // The broker says the call stopped: its polling is over, so the approved code can never sign anyone in.
        #expect(await Self.waitUntilStopped(daemon, method: "SignInWithDeviceCode"), "\(daemon.logTail())")
        let account = try await daemon.devicectl(as: Daemon.timeclockUID, ["account", "--json"])
        let accounts = try #require(try parseJSON(account.stdout) as? [String: Any], "\(account.stderr)")
        #expect(accounts["current"] is NSNull || accounts["current"] == nil)
        let signIns = try await daemon.auditEvents().filter { $0["type"] as? String == "account.signed_in" }
        #expect(signIns.isEmpty)
        // The broker still serves, and a new sign-in can start.
        let list = try await daemon.devicectl(as: Daemon.scannerUID, ["keychain", "list", "--json"])
        #expect(list.status == 0, "\(list.stderr)")
        await daemon.cleanUp()
    }

    // MARK: - Shift switch through the broker

    /// Runs `devicectl ARGS --json` as `uid` through the broker, approves the device code it shows as
    /// `user`, and returns the finished process. `beforeApproval` runs once the code is shown.
    static func approvingDeviceCode(
        _ daemon: Daemon,
        as uid: UInt32,
        _ arguments: [String],
        user: String,
        plugin: String = "oidc",
        beforeApproval: (ChildProcess) async throws -> Void = { _ in }
    ) async throws -> ChildProcess {
        let lock = try await IdentityCLITests.ProviderLock.acquire(timeout: 120)
        let process = try daemon.startDevicectl(as: uid, arguments + ["--json"])
        defer { _ = process.killIfRunning() }
        let code = await Self.userCode(of: process)
        guard let code else {
            lock.release()
            Issue.record("no code shown: \(process.standardError)")
            return process
        }
        try await beforeApproval(process)
        let approval = try await Provider.tool([
            "approve", "--port", "\(IdentityCLITests.port)", "--code", code, "--user", user, "--plugin", plugin,
        ])
        lock.release()
        #expect(approval.status == 0, "\(approval.stderr)")
        #expect(
            await process.waitForExit(timeout: 60),
            "devicectl \(arguments[0]) did not finish; the daemon's log ends: \(daemon.logTail())"
        )
        return process
    }

    /// Waits until the daemon logged (at debug) that a `method` call stopped because its caller went away:
    /// the call's task has ended, so nothing it was doing (polling for a device code) can land later.
    static func waitUntilStopped(_ daemon: Daemon, method: String, timeout: TimeInterval = 30) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let stopped = (daemon.process?.standardError ?? "").split(separator: "\n").contains {
                $0.contains("broker call stopped: the caller went away") && $0.contains("broker.method=\(method)")
            }
            if stopped { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// A `beforeApproval` step: the app goes away (SIGKILL) while the worker types the code.
    static func kill(_ process: ChildProcess) async {
        _ = process.send(SIGKILL)
        #expect(await process.waitForExit(timeout: 10))
    }

    @Test func aDeviceCodeSwitchSignsTheWorkerOutFirstAndTheNextInUnderOneCorrelationID() async throws {
        let daemon = try await Self.daemon()
        let first = try await Self.approvingDeviceCode(daemon, as: Daemon.scannerUID, ["signin"], user: "worker1")
        try #require(first.status == 0, "\(first.standardError)")

        // Shift change at the timeclock (its own uid): worker1 is signed out of every app before worker2 signs in.
        let switched = try await Self.approvingDeviceCode(daemon, as: Daemon.timeclockUID, ["switch"], user: "worker2")
        { process in
            #expect(process.standardError.contains("signed out: worker1"), "\(process.standardError)")
            let between = try await daemon.devicectl(as: Daemon.scannerUID, ["account", "--json"])
            let accounts = try #require(try parseJSON(between.stdout) as? [String: Any], "\(between.stderr)")
            #expect(
                accounts["current"] is NSNull || accounts["current"] == nil,
                "the previous worker is still signed in while the next signs in"
            )
        }
        #expect(switched.status == 0, "\(switched.standardError)")
        let summary = try #require(
            try parseJSON(switched.standardOutput) as? [String: Any],
            "\(switched.standardOutput)"
        )
        #expect((summary["signedOut"] as? [String: Any])?["username"] as? String == "worker1")
        #expect((summary["signedIn"] as? [String: Any])?["username"] as? String == "worker2")
        let correlationID = try #require(summary["correlationId"] as? String)

        // The three audit events share the switch's correlation id, in order; the sign-out is the shift's end.
        let events = try await daemon.auditEvents().filter { $0["correlationId"] as? String == correlationID }
        #expect(
            events.map { $0["type"] as? String } == ["account.signed_out", "account.signed_in", "account.switched"],
            "\(events)"
        )
        #expect(events.first?["reason"] as? String == "shift-end" && events.first?["account"] as? String == "worker1")
        #expect(events.last?["actor"] as? String == Daemon.timeclock)
        // Every app sees worker2 now, and gets tokens silently.
        let token = try await daemon.devicectl(as: Daemon.scannerUID, ["token", "--scopes", "User.Read", "--json"])
        #expect(token.status == 0 && token.stdout.contains("worker2"), "\(token.stderr)")
        await daemon.cleanUp()
    }

    @Test func aSwitchWhoseSignInIsCanceledOrDeclinedLeavesNobodySignedIn() async throws {
        let daemon = try await Self.daemon(logLevel: "debug")
        let first = try await Self.approvingDeviceCode(daemon, as: Daemon.scannerUID, ["signin"], user: "worker1")
        try #require(first.status == 0, "\(first.standardError)")

        // Canceled: the switching app goes away while the next worker types the code; the code is approved anyway.
        _ = try await Self.approvingDeviceCode(
            daemon,
            as: Daemon.timeclockUID,
            ["switch"],
            user: "worker2",
            beforeApproval: Self.kill
        )
        #expect(await Self.waitUntilStopped(daemon, method: "SwitchWorker"), "\(daemon.logTail())")
        for uid in [Daemon.scannerUID, Daemon.timeclockUID] {
            let accounts = try #require(
                try parseJSON(try await daemon.devicectl(as: uid, ["account", "--json"]).stdout) as? [String: Any]
            )
            #expect(
                accounts["current"] is NSNull || accounts["current"] == nil,
                "uid \(uid): somebody is signed in after a canceled switch"
            )
            if uid == Daemon.scannerUID {  // the app that saw worker1 (MSAL's previous account is per app)
                #expect((accounts["previous"] as? [String: Any])?["username"] as? String == "worker1")
            }
        }
        var events = try await daemon.auditEvents()
        #expect(events.last { $0["type"] as? String == "account.signed_out" }?["reason"] as? String == "shift-end")
        #expect(!events.contains { $0["type"] as? String == "account.switched" })
        #expect(events.filter { $0["type"] as? String == "account.signed_in" }.count == 1)

        // Declined in the browser: the provider sends the worker back with access_denied. Nobody was signed
        // in, so nobody is signed out; the switch fails and says nobody is signed in now.
        let urlFile = daemon.publicDirectory.appendingPathComponent("switch-authorization-url")
        _ = FileManager.default.createFile(atPath: urlFile.path, contents: nil, attributes: [.posixPermissions: 0o666])
        let declined = try daemon.startDevicectl(
            as: Daemon.timeclockUID,
            ["switch", "--flow", "browser"],
            environment: ["DEVICECTL_BROWSER": "printf '%s\\n' >'\(urlFile.path)'"]
        )
        defer { _ = declined.killIfRunning() }
        let url = try await Self.authorizationURL(in: urlFile, of: declined)
        _ = try await BrokerAPIReplay.sendBackDeclined(url)
        #expect(await declined.waitForExit(timeout: 30))
        #expect(
            declined.status != 0 && declined.standardError.contains("nobody is signed in now"),
            "\(declined.status) \(declined.standardError)"
        )
        events = try await daemon.auditEvents()
        #expect(!events.contains { $0["type"] as? String == "account.switched" })
        let accounts = try #require(
            try parseJSON(try await daemon.devicectl(as: Daemon.scannerUID, ["account", "--json"]).stdout)
                as? [String: Any]
        )
        #expect(accounts["current"] is NSNull || accounts["current"] == nil)
        await daemon.cleanUp()
    }
}
