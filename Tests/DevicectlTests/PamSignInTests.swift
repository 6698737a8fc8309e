import Foundation
import PamTestSupport
import ProcessTestSupport
import TestTags
import Testing

/// Workers sign in at the login screen through the PAM module, against a real deviced (its login-screen
/// methods) and the local provider's password grant: policies/kiosk-password.json with the test
/// provider's issuer and `session.user`, a local account the test creates (the kiosk user).
@Suite(.serialized, .tags(.integration, .needsRoot, .needsIdentityProvider)) struct PamSignInTests {
    typealias Daemon = BrokerDaemon
    typealias Provider = IdentityCLITests.Provider

    static let password1 = "worker1-password"

    /// A kiosk user (a local account with a home), removed by `remove`.
    struct KioskUser {
        let name = "kiosk\(UInt32.random(in: 10000...99999))"

        static func create() async throws -> KioskUser {
            let user = KioskUser()
            // A uid of its own: the policy's apps run as 1001 and 1002, which useradd would hand out next.
            let added = PamStack.accountTool(
                "/usr/sbin/useradd",
                ["-m", "-s", "/bin/sh", "-K", "UID_MIN=20000", "-K", "GID_MIN=20000", user.name]
            )
            try #require(added == 0, "useradd exited \(added)")
            return user
        }

        func remove() {
            PamStack.accountTool("/usr/sbin/userdel", ["-r", name])
        }
    }

    /// A daemon on the password policy with `session.user`, its issuer the test provider's (or `issuer`).
    /// `session` adds keys to the policy's `session`.
    static func daemon(
        kioskUser: String,
        issuer: String? = nil,
        session extra: [String: Any] = [:]
    ) async throws
        -> Daemon
    {
        let provider = try await Provider.shared()
        var policy = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: DevicectlRunner.policy("kiosk-password.json")))
            ) as? [String: Any]
        )
        var authority = try #require(policy["authority"] as? [String: Any])
        authority["issuer"] = issuer ?? provider.issuer
        policy["authority"] = authority
        var session = try #require(policy["session"] as? [String: Any])
        session["user"] = kioskUser
        session.merge(extra) { $1 }
        policy["session"] = session
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pam-policy-\(UUID().uuidString).json")
        try JSONSerialization.data(withJSONObject: policy).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        defer { try? FileManager.default.removeItem(at: file) }
        let daemon = try await Daemon(policy: file.path)
        try await daemon.start(["--log-level", "trace"] + (try daemon.clockArguments()))
        return daemon
    }

    /// Root's `devicectl status --json` through the daemon.
    static func status(_ daemon: Daemon) async throws -> String {
        let status = try await daemon.devicectl(as: 0, ["status", "--json"])
        try #require(status.status == 0, "\(status.stderr)")
        return status.stdout
    }

    @Test func aWorkerSignsInWithTheirPasswordAndTheSessionUserIsTheKioskUser() async throws {
        try await PamStack.build()
        let kiosk = try await KioskUser.create()
        defer { kiosk.remove() }
        let daemon = try await Self.daemon(kioskUser: kiosk.name)
        let stack = try PamStack(arguments: [], socket: daemon.socketPath)
        defer { stack.remove() }

        let result = try await stack.host("worker1", answer: Self.password1, tty: "tty7")
        try #require(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("result Success"), "\(lines) \(daemon.logTail())")
        #expect(lines.contains("message 1 Password: "), "\(lines)")
        #expect(lines.contains("user \(kiosk.name)"), "\(lines)")
        #expect(lines.contains("threads 1") && lines.contains("children none"), "\(lines)")
        #expect(lines.contains("descriptors kept"), "\(lines)")
        #expect(try await Self.status(daemon).contains("\"worker1\""), "the worker is not the device's account")
        // The sign-in's audit event names the PAM service; the password is in no audit entry or log line.
        let events = try await daemon.auditEvents()
        let named = events.filter { event in
            (try? JSONSerialization.data(withJSONObject: event)).map { String(decoding: $0, as: UTF8.self) }?
                .contains(stack.service) == true
        }
        #expect(!named.isEmpty, "no audit event names the PAM service \(stack.service): \(events)")
        let details = named.compactMap { $0["details"] as? [String: Any] }
        #expect(details.contains { $0["tty"] as? String == "tty7" }, "the terminal is not in \(named)")
        let audit = try await daemon.cli.run(["audit", "--json"])
        #expect(!audit.stdout.contains(Self.password1) && !daemon.logTail(Int.max).contains(Self.password1))
        await daemon.cleanUp()
    }

    @Test func aWrongPasswordIsAnAuthErrorAndSignsNobodyIn() async throws {
        try await PamStack.build()
        let kiosk = try await KioskUser.create()
        defer { kiosk.remove() }
        let daemon = try await Self.daemon(kioskUser: kiosk.name)
        let stack = try PamStack(arguments: [], socket: daemon.socketPath)
        defer { stack.remove() }

        let result = try await stack.pamtester("worker1", stdin: "not-the-password\n")
        #expect(result.status != 0)
        #expect(result.stderr.contains("Authentication failure"), "\(result.stderr) \(daemon.logTail())")
        #expect(result.stderr.contains("Wrong name or password."), "\(result.stderr)")
        #expect(!(try await Self.status(daemon).contains("\"worker1\"")), "a wrong password signed the worker in")
        await daemon.cleanUp()
    }

    @Test func theProviderDownIsAuthInfoUnavailable() async throws {
        try await PamStack.build()
        let kiosk = try await KioskUser.create()
        defer { kiosk.remove() }
        let daemon = try await Self.daemon(kioskUser: kiosk.name, issuer: "http://127.0.0.1:1/api/oidc")
        let stack = try PamStack(arguments: [], socket: daemon.socketPath)
        defer { stack.remove() }

        let result = try await stack.pamtester("worker1", stdin: Self.password1 + "\n")
        #expect(result.status != 0)
        #expect(result.stderr.contains(PamModuleTests.authInfoUnavailable), "\(result.stderr) \(daemon.logTail())")
        #expect(!(try await Self.status(daemon).contains("\"worker1\"")))
        await daemon.cleanUp()
    }
}

extension PamSignInTests {
    @Test func openSessionIsRefusedWhenLogindCannotConfirmTheSession() async throws {
        try await PamStack.build()
        let kiosk = try await KioskUser.create()
        defer { kiosk.remove() }
        let daemon = try await Self.daemon(kioskUser: kiosk.name)
        let sessionID = "pam\(UInt32.random(in: 1000...9999))"
        let environment = try PamStack.sessionEnvironment(sessionID)
        defer { try? FileManager.default.removeItem(at: environment.file) }
        let stack = try PamStack(arguments: [], socket: daemon.socketPath, session: [environment.line])
        defer { stack.remove() }

        let result = try await stack.pamtester(
            "worker1",
            ["authenticate", "open_session"],
            stdin: Self.password1 + "\n"
        )
        #expect(result.status != 0)
        #expect(result.stdout.contains("successfully authenticated"), "\(result.stdout) \(result.stderr)")
        #expect(result.stderr.contains("logind is not available to the broker"), "\(result.stderr)")
        #expect(result.stderr.contains("Cannot make/remove an entry for the specified session"), "\(result.stderr)")
        let events = try await daemon.auditEvents()
        #expect(!events.contains { $0["type"] as? String == "session.opened" }, "\(events)")
        await daemon.cleanUp()
    }

    @Test func withoutLogindsSessionOpenSessionSaysPamSystemdMustComeFirst() async throws {
        try await PamStack.build()
        let kiosk = try await KioskUser.create()
        defer { kiosk.remove() }
        let daemon = try await Self.daemon(kioskUser: kiosk.name)
        let stack = try PamStack(arguments: [], socket: daemon.socketPath)
        defer { stack.remove() }

        let result = try await stack.pamtester(
            "worker1",
            ["authenticate", "open_session"],
            stdin: Self.password1 + "\n"
        )
        #expect(result.status != 0)
        #expect(result.stdout.contains("successfully authenticated"), "\(result.stdout) \(result.stderr)")
        #expect(result.stderr.contains("pam_systemd must come before pam_sharedmode"), "\(result.stderr)")
        await daemon.cleanUp()
    }

    /// The password throttle applies to the login screen: after the policy's failures the next attempt,
    /// the right password included, is PAM_AUTH_ERR with the broker's message saying when to try again.
    @Test func aThrottledUsernameIsAnAuthErrorSayingWhenToRetry() async throws {
        try await PamStack.build()
        let kiosk = try await KioskUser.create()
        defer { kiosk.remove() }
        let daemon = try await Self.daemon(kioskUser: kiosk.name)
        let stack = try PamStack(arguments: [], socket: daemon.socketPath)
        defer { stack.remove() }
        for attempt in 1...3 {
            let wrong = try await stack.pamtester("worker1", stdin: "wrong-\(attempt)\n")
            #expect(wrong.stderr.contains("Wrong name or password."), "\(attempt): \(wrong.stderr)")
        }
        let throttled = try await stack.pamtester("worker1", stdin: Self.password1 + "\n")
        #expect(throttled.status != 0)
        #expect(throttled.stderr.contains("Authentication failure"), "\(throttled.stderr)")
        #expect(!throttled.stderr.contains("Wrong name or password."), "\(throttled.stderr)")
        #expect(throttled.stderr.contains("try again in 30 s"), "no word of when to retry: \(throttled.stderr)")
        #expect(!(try await Self.status(daemon).contains("\"worker1\"")))
        await daemon.cleanUp()
    }

    /// The device code at the login screen (`flow=deviceCode`): the verification shown as an information
    /// message while the module waits, the worker approving it at the provider from another device.
    @Test func theDeviceCodeIsShownWhileTheModuleWaits() async throws {
        try await PamStack.build()
        let kiosk = try await KioskUser.create()
        defer { kiosk.remove() }
        let daemon = try await Self.daemon(kioskUser: kiosk.name)
        let stack = try PamStack(arguments: ["flow=deviceCode"], socket: daemon.socketPath)
        defer { stack.remove() }

        let lock = try await IdentityCLITests.ProviderLock.acquire(timeout: 120)
        let host = try ChildProcess(URL(fileURLWithPath: PamStack.host), [stack.service, "worker1", "unused"])
        defer { _ = host.killIfRunning() }
        let shown = await host.waitForLine(timeout: ChildProcess.shortestWait) { $0.contains("enter the code ") }
        let code = try #require(
            shown.flatMap { IdentityCLITests.Device.userCode(in: $0 + "\n") },
            "no code shown: \(host.standardOutput) \(daemon.logTail())"
        )
        #expect(shown?.hasPrefix("message 4 To sign in, open http://127.0.0.1:") == true, "\(shown ?? "")")
        let approval = try await IdentityCLITests.Provider.tool([
            "approve", "--port", "\(IdentityCLITests.port)", "--code", code, "--user", "worker1", "--plugin", "oidc",
        ])
        lock.release()
        try #require(approval.status == 0, "tools/idp approve failed: \(approval.stderr)")
        #expect(await host.waitForExit(timeout: ChildProcess.shortestWait), "\(host.standardOutput)")
        #expect(host.lines.contains("result Success"), "\(host.lines) \(daemon.logTail())")
        #expect(host.lines.contains("user \(kiosk.name)"), "\(host.lines)")
        #expect(try await Self.status(daemon).contains("\"worker1\""))
        await daemon.cleanUp()
    }

    /// A flow the policy does not list (`flow=nativeAuth`; kiosk-password.json lists deviceCode, browser
    /// and password) is PAM_AUTHINFO_UNAVAIL with the broker's message, and nothing is asked.
    @Test func aFlowThePolicyDoesNotAllowIsAuthInfoUnavailable() async throws {
        try await PamStack.build()
        let kiosk = try await KioskUser.create()
        defer { kiosk.remove() }
        let daemon = try await Self.daemon(kioskUser: kiosk.name)
        let stack = try PamStack(arguments: ["flow=nativeAuth"], socket: daemon.socketPath)
        defer { stack.remove() }
        let result = try await stack.host("worker1", answer: Self.password1)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("result \(PamModuleTests.authInfoUnavailable)"), "\(lines) \(daemon.logTail())")
        #expect(!lines.contains { $0.hasPrefix("message 1 ") }, "a prompt was shown: \(lines)")
        #expect(lines.contains { $0.hasPrefix("message 3 ") && $0.contains("nativeAuth") }, "\(lines)")
        await daemon.cleanUp()
    }

    /// `session.workerSignedIn` `refuse`: a second worker at the login screen while one is signed in is
    /// PAM_AUTH_ERR with a message, and the first stays the device's worker.
    @Test func aSecondWorkerIsRefusedWhenThePolicySaysSo() async throws {
        try await PamStack.build()
        let kiosk = try await KioskUser.create()
        defer { kiosk.remove() }
        let daemon = try await Self.daemon(kioskUser: kiosk.name, session: ["workerSignedIn": "refuse"])
        let stack = try PamStack(arguments: [], socket: daemon.socketPath)
        defer { stack.remove() }
        let first = try await stack.pamtester("worker1", stdin: Self.password1 + "\n")
        try #require(first.status == 0, "\(first.stderr) \(daemon.logTail())")
        let second = try await stack.pamtester("worker2", stdin: "worker2-password\n")
        #expect(second.status != 0)
        #expect(second.stderr.contains("Authentication failure"), "\(second.stderr)")
        #expect(second.stderr.contains("Another worker is signed in on this device"), "\(second.stderr)")
        let status = try await Self.status(daemon)
        #expect(status.contains("\"worker1\"") && !status.contains("\"worker2\""), "\(status)")
        await daemon.cleanUp()
    }

    /// The shipped stack with Debian's common-auth: a worker signs in through pam_sharedmode and becomes
    /// the kiosk user; a local account (the kiosk user's own name, with a password) goes to pam_unix,
    /// whose wrong password fails; a worker's wrong password does not fall through to pam_unix.
    @Test func theShippedStackSignsAWorkerInAndLetsALocalAccountThrough() async throws {
        try await PamStack.build()
        let kiosk = try await KioskUser.create()
        defer { kiosk.remove() }
        let localPassword = "Local-\(UUID().uuidString.prefix(12))"
        let changed = try await Command.run(
            URL(fileURLWithPath: "/usr/sbin/chpasswd"),
            [],
            stdin: "\(kiosk.name):\(localPassword)\n"
        )
        try #require(changed.status == 0, "\(changed.stderr)")
        let daemon = try await Self.daemon(kioskUser: kiosk.name)
        let stack = try PamStack(shippedWith: ["socket=\(daemon.socketPath)", "helper=\(PamStack.helper)"])
        defer { stack.remove() }

        let wrong = try await stack.host("worker1", answer: "not-the-password")
        #expect(wrong.stdout.contains("result Authentication failure"), "\(wrong.stdout)")
        #expect(!wrong.stdout.contains("message 1 Password: \nmessage 1 Password: "), "asked twice: \(wrong.stdout)")
        let local = try await stack.pamtester(kiosk.name, stdin: localPassword + "\n")
        #expect(local.status == 0, "\(local.stdout) \(local.stderr)")
        let localWrong = try await stack.pamtester(kiosk.name, stdin: "not-\(localPassword)\n")
        #expect(localWrong.status != 0, "\(localWrong.stdout)")
        #expect(!(try await Self.status(daemon).contains("\"worker1\"")))
        let worker = try await stack.host("worker1", answer: Self.password1)
        let lines = worker.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("result Success") && lines.contains("user \(kiosk.name)"), "\(lines)")
        #expect(try await Self.status(daemon).contains("\"worker1\""))
        await daemon.cleanUp()
    }
}
