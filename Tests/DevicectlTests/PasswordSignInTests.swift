import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// The password flow (`authority.flows` lists `password`: the resource-owner password grant) through the
/// broker, against the local provider's confidential client (glewlwyd issues password-grant tokens only to
/// a client that authenticates): policies/kiosk-password.json with the test provider's issuer.
@Suite(.serialized, .tags(.integration, .needsRoot, .needsIdentityProvider)) struct PasswordSignInTests {
    typealias Daemon = BrokerDaemon
    typealias Provider = IdentityCLITests.Provider

    static let password1 = "worker1-password", password2 = "worker2-password"

    /// A daemon on policies/kiosk-password.json (issuer: the test provider), with the back-off shortened
    /// to `failures` failures and `backoff` seconds, on a clock the test moves (`BrokerDaemon.setClock`):
    /// a back-off lasts until the test moves the clock past it, however slow the machine.
    static func daemon(failures: Int = 3, backoff: Int = 30, environment: [String: String] = [:]) async throws -> Daemon
    {
        let provider = try await Provider.shared()
        var policy = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: DevicectlRunner.policy("kiosk-password.json")))
            )
                as? [String: Any]
        )
        var authority = try #require(policy["authority"] as? [String: Any])
        authority["issuer"] = provider.issuer
        policy["authority"] = authority
        policy["limits"] = ["passwordFailuresBeforeBackoff": failures, "passwordBackoffSeconds": backoff]
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "password-policy-\(UUID().uuidString).json"
        )
        try JSONSerialization.data(withJSONObject: policy).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        defer { try? FileManager.default.removeItem(at: file) }
        let daemon = try await Daemon(policy: file.path)
        try await daemon.start(["--log-level", "trace"] + (try daemon.clockArguments()), environment: environment)
        return daemon
    }

    /// `devicectl signin --flow password` as `uid` with the password on standard input.
    static func signIn(
        _ daemon: Daemon,
        as uid: UInt32,
        user: String,
        password: String,
        _ extra: [String] = []
    ) async throws -> Command.Result {
        try await daemon.devicectl(
            as: uid,
            ["signin", "--flow", "password", "--username", user, "--password-stdin", "--json"] + extra,
            stdin: password + "\n"
        )
    }

    /// Every byte of the daemon's store and its other files, as text (the password must be in none).
    static func storeBytes(_ daemon: Daemon) throws -> String {
        let files = try FileManager.default.contentsOfDirectory(atPath: daemon.cli.stateDirectory.path)
        return try files.map { name in
            String(
                decoding: try Data(contentsOf: daemon.cli.stateDirectory.appendingPathComponent(name)),
                as: UTF8.self
            )
        }.joined()
    }

    @Test func aPasswordSignInGivesTwoAPIsSilentlySingleSignOnAndASwitchAndThePasswordGoesNowhere() async throws {
        let daemon = try await Self.daemon()
        let signIn = try await Self.signIn(daemon, as: Daemon.scannerUID, user: "worker1", password: Self.password1)
        try #require(signIn.status == 0, "\(signIn.stderr)")
        let result = try #require(try parseJSON(signIn.stdout) as? [String: Any])
        #expect((result["account"] as? [String: Any])?["username"] as? String == "worker1", "\(result)")
        // Two APIs from that one sign-in, silently; the other app gets single sign-on.
        for (uid, scope) in [
            (Daemon.scannerUID, "User.Read"), (Daemon.scannerUID, "Files.Read"), (Daemon.timeclockUID, "Files.Read"),
        ] {
            let token = try await daemon.devicectl(as: uid, ["token", "--scopes", scope, "--json"])
            #expect(token.status == 0, "\(token.stderr)")
            #expect((try parseJSON(token.stdout) as? [String: Any])?["source"] as? String == "cache", "\(token.stdout)")
        }
        // The shift switch with a password: worker 1 out of every app, worker 2 in.
        let switched = try await daemon.devicectl(
            as: Daemon.timeclockUID,
            ["switch", "--flow", "password", "--username", "worker2", "--password-stdin", "--json"],
            stdin: Self.password2 + "\n"
        )
        #expect(switched.status == 0, "\(switched.stderr)")
        #expect(
            switched.stdout.contains("\"worker2\"") && switched.stdout.contains("\"worker1\""),
            "\(switched.stdout)"
        )

        let events = try await daemon.auditEvents()
        let signIns = events.filter { $0["type"] as? String == "account.signed_in" }
        #expect(
            signIns.count == 2 && signIns.allSatisfy { ($0["details"] as? [String: String])?["flow"] == "password" },
            "\(signIns)"
        )
        #expect(events.contains { $0["type"] as? String == "account.switched" })
        // The password is in no log line (trace level), audit event, output or byte of the store.
        let audit = try await daemon.cli.run(["audit", "--json"])
        for password in [Self.password1, Self.password2] {
            for (place, text) in [
                ("the daemon's log", daemon.logTail(Int.max)), ("the audit log", audit.stdout),
                ("devicectl's output", signIn.stdout + signIn.stderr + switched.stdout + switched.stderr),
                ("the store", try Self.storeBytes(daemon)),
            ] {
                #expect(!text.contains(password), "the password is in \(place)")
            }
        }
        await daemon.cleanUp()
    }

    /// The password leaves no copy in the daemon's memory once the sign-in is done (the right one and a
    /// wrong one): what a core of the daemon would hold (its writable memory, freed heap chunks included)
    /// has it nowhere. The daemon runs with the allocator wiping freed memory (`MemoryHygiene`).
    @Test func thePasswordIsInNoCoreOfTheDaemonAfterTheSignIn() async throws {
        let daemon = try await Self.daemon(failures: 10)
        let signIn = try await Self.signIn(daemon, as: Daemon.scannerUID, user: "worker1", password: Self.password1)
        try #require(signIn.status == 0, "\(signIn.stderr)")
        let wrongPassword = "not-the-password-of-worker1"
        let wrong = try await Self.signIn(daemon, as: Daemon.timeclockUID, user: "worker1", password: wrongPassword)
        #expect(wrong.status == 55, "\(wrong.stderr)")
        // Short ones too (15 bytes or fewer: Swift keeps such a string inline, in stacks and other values,
        // not in a heap buffer of its own): a wrong one, and the right one of a worker through the shift switch.
        let shortWrong = "Sh0rt-Wr0ng-9"
        let shortRight = "w5-password"
        let short = try await Self.signIn(daemon, as: Daemon.timeclockUID, user: "worker1", password: shortWrong)
        #expect(short.status == 55, "\(short.stderr)")
        let switched = try await daemon.devicectl(
            as: Daemon.timeclockUID,
            ["switch", "--flow", "password", "--username", "w5", "--password-stdin"],
            stdin: shortRight + "\n"
        )
        #expect(switched.status == 0, "\(switched.stderr)")
        let pid = try #require(daemon.process?.pid)
        let passwords = [Self.password1, wrongPassword, shortWrong, shortRight]
        let scan = try ProcessMemory.occurrences(
            of: ([Daemon.scanner, "worker1"] + passwords).map { Data($0.utf8) },
            inWritableMemoryOf: pid
        )
        // The scan sees the daemon's heap: the app id the policy gave is there, and so is a short string the
        // daemon keeps (the first worker's username, 7 bytes, in its audit and account records).
        #expect(
            scan.counts[0] > 0 && scan.counts[1] > 0 && scan.bytesRead > 1_000_000,
            "the scan read \(scan.bytesRead) bytes (\(scan.bytesUnreadable) unreadable), found the app id \(scan.counts[0]) times, the username \(scan.counts[1])"
        )
        for (password, count) in zip(passwords, scan.counts.dropFirst(2)) {
            #expect(
                count == 0,
                "the password \(password) is \(count) times in the daemon's memory (\(scan.bytesRead) bytes read)"
            )
        }
        await daemon.cleanUp()
    }

    @Test func aWrongPasswordIsRefusedCachesNothingIsAuditedAndRepeatedFailuresBackOff() async throws {
        let daemon = try await Self.daemon(failures: 2, backoff: 3)
        let wrong = "not-the-password-\(UUID().uuidString.prefix(8))"
        let first = try await Self.signIn(daemon, as: Daemon.scannerUID, user: "worker1", password: wrong)
        #expect(first.status == 55, "\(first.stdout) \(first.stderr)")
        #expect(first.stderr.contains("username or password") && !first.stderr.contains(wrong), "\(first.stderr)")
        let nobody = try await daemon.devicectl(as: Daemon.scannerUID, ["account", "--json"])
        #expect((try parseJSON(nobody.stdout) as? [String: Any])?["current"] is NSNull, "\(nobody.stdout)")
        let failures = try await daemon.auditEvents().filter { $0["type"] as? String == "account.sign_in_failed" }
        #expect(failures.count == 1 && failures.first?["account"] as? String == "worker1", "\(failures)")

        // The second failure in a row starts the back-off: even the right password is held back, without
        // asking the provider, until it is over.
        let second = try await Self.signIn(daemon, as: Daemon.timeclockUID, user: "worker1", password: wrong)
        #expect(second.status == 55, "\(second.stderr)")
        let held = try await Self.signIn(daemon, as: Daemon.scannerUID, user: "worker1", password: Self.password1)
        #expect(held.status == 75 && held.stderr.contains("try again in"), "\(held.status) \(held.stderr)")
        try daemon.advanceClock(by: 3)
        let after = try await Self.signIn(daemon, as: Daemon.scannerUID, user: "worker1", password: Self.password1)
        #expect(after.status == 0, "\(after.stderr)")
        let audit = try await daemon.cli.run(["audit", "--json"])
        let store = try Self.storeBytes(daemon)
        #expect(!audit.stdout.contains(wrong) && !daemon.logTail(Int.max).contains(wrong) && !store.contains(wrong))
        #expect(audit.stdout.contains("password back-off"), "the held-back attempt is not audited")
        await daemon.cleanUp()
    }

    /// The last round's attack: one app interleaving the sign-in (and sign-out) of a worker whose password it
    /// knows with two guesses at another worker got 40 guesses in 4 s, since any success reset the device's
    /// count. Now the app's own count holds it back, another app still signs workers in, root is counted per
    /// username, and a restart of the daemon forgets nothing.
    @Test func oneAppInterleavingAKnownWorkersSignInWithGuessesIsHeldBackAndOthersAreServed() async throws {
        let daemon = try await Self.daemon(failures: 3, backoff: 30)
        var guesses = 0
        var held: [String] = []
        for _ in 0..<5 {
            let known = try await Self.signIn(daemon, as: Daemon.scannerUID, user: "worker1", password: Self.password1)
            if known.status == 0 {
                let out = try await daemon.devicectl(as: Daemon.scannerUID, ["signout"])
                #expect(out.status == 0, "\(out.stderr)")
            } else {
                held.append(known.stderr)
            }
            for _ in 0..<2 {
                let guess = try await Self.signIn(
                    daemon,
                    as: Daemon.scannerUID,
                    user: "Worker2",
                    password: "guess-\(UUID().uuidString.prefix(8))"
                )
                switch guess.status {
                case 55: guesses += 1
                case 75: held.append(guess.stderr)
                default: Issue.record("a guess ended with \(guess.status): \(guess.stderr)")
                }
            }
        }
        #expect(guesses == 3, "\(guesses) guesses reached the provider")
        // 15 attempts: the first two known sign-ins and three guesses went through, the other 10 were held back.
        #expect(held.count == 10, "\(held)")
        #expect(
            held.allSatisfy { $0.contains("by this app failed recently") && $0.contains("try again in") },
            "\(held)"
        )
        let failed = try await daemon.auditEvents().filter { $0["type"] as? String == "account.sign_in_failed" }
        #expect(failed.count == 3, "\(failed.count) failures reached the provider and the audit log")

        // Another app signs a worker in meanwhile; the guessed-at worker's own (short) back-off holds every app,
        // case aside, and says so.
        let victim = try await Self.signIn(daemon, as: Daemon.timeclockUID, user: "worker1", password: Self.password1)
        #expect(victim.status == 0, "the other app was held back: \(victim.stderr)")
        let out = try await daemon.devicectl(as: 0, ["signout"])
        #expect(out.status == 0, "\(out.stderr)")
        let target = try await Self.signIn(daemon, as: Daemon.timeclockUID, user: "worker2", password: Self.password2)
        #expect(
            target.status == 75 && target.stderr.contains("for this username failed recently"),
            "\(target.status) \(target.stderr)"
        )

        // A restart forgets nothing: the attacking app is still held back.
        await daemon.stop()
        try await daemon.start(["--log-level", "trace", "--clock-file", daemon.clockFile])
        let again = try await Self.signIn(daemon, as: Daemon.scannerUID, user: "worker3", password: "guess")
        #expect(again.status == 75 && again.stderr.contains("by this app"), "\(again.status) \(again.stderr)")
        let kept = try String(
            contentsOf: daemon.cli.stateDirectory.appendingPathComponent("password-throttle.json"),
            encoding: .utf8
        )
        #expect(!kept.contains("worker"), "the throttle's file names a worker: \(kept)")
        await daemon.cleanUp()
    }

    @Test func aPolicyWithoutThePasswordFlowRefusesIt() async throws {
        let daemon = try await BrokerSignInTests.daemon()
        let refused = try await Self.signIn(daemon, as: Daemon.scannerUID, user: "worker1", password: Self.password1)
        #expect(
            refused.status == 78 && refused.stderr.contains("authority.flows"),
            "\(refused.status) \(refused.stderr)"
        )
        let events = try await daemon.auditEvents()
        #expect(!events.contains { ($0["type"] as? String)?.hasPrefix("account.") == true })
        await daemon.cleanUp()
    }
}
