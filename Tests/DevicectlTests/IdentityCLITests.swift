import Foundation
import ProcessTestSupport
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `devicectl signin`, `token`, `call`, `signout` and `audit` against a real OpenID Connect provider:
/// Debian's glewlwyd on loopback port 4599, started by `tools/idp start` (idempotent, so every test
/// may start it). Workers sign in by device code (approved through `tools/idp approve`) or in the browser
/// (`tools/idp browse` as `DEVICECTL_BROWSER`). Each test has its own state directory and runs in parallel
/// with the others; a device-code sign-in takes a poll interval (5 s).
///
/// Device-code sign-ins request and approve their code one at a time (`ProviderLock`): glewlwyd's SQLite
/// backend mixes up concurrent device authorization requests.
///
/// Isolation between parallel tests: only `refreshTokenRevokedMeansSignInAgainAndTheCacheStillAnswers`
/// revokes refresh tokens, and it signs in at the provider's ES256 issuer (glewlwyd plugin `oidc-es256`)
/// and revokes only there, so the other tests' refresh tokens (RS256 issuer) stay valid.
@Suite(.tags(.integration, .needsIdentityProvider))
struct IdentityCLITests {
    static let scanner = "com.contoso.kiosk.scanner"
    static let timeclock = "com.contoso.kiosk.timeclock"
    static let port = 4599

    // MARK: - Shift change

    @Test func shiftChangeOnASharedKioskThroughTheProvider() async throws {
        let provider = try await Provider.shared()
        let cli = Device()
        defer { cli.cleanUp() }
        try await cli.provision(policy: provider.kioskPolicy(issuer: provider.issuer, in: cli.runner))

        // Worker 1 starts the shift in the scanner app, by device code.
        let ana = try await cli.signInByDeviceCode(app: Self.scanner, as: "worker1")
        try #require(
            ana.result.status == 0,
            "signin exited \(ana.result.status): \(ana.result.stdout) \(ana.result.stderr)"
        )
        #expect(ana.result.stdout.contains("To sign in, open http://127.0.0.1:\(Self.port)/"), "\(ana.result.stdout)")
        #expect(ana.result.stdout.contains("enter the code \(ana.code)"), "\(ana.result.stdout)")
        #expect(ana.result.stdout.contains("signed in: worker1 (Ana Worker) home_account_id "), "\(ana.result.stdout)")
        #expect(ana.result.stdout.contains("environment 127.0.0.1:\(Self.port)"), "\(ana.result.stdout)")
        let granted = ana.result.stdout.split(separator: "\n").first { $0.hasPrefix("scopes: ") }
        #expect(
            granted?.contains("User.Read") == true && granted?.contains("Files.Read") == true,
            "\(ana.result.stdout)"
        )

        // The timeclock app sees her without signing in (single sign-on through the shared group).
        let seen = try #require(try await cli.json(["account", "--app", Self.timeclock, "--json"]) as? [String: Any])
        let current = try #require(seen["current"] as? [String: Any], "\(seen)")
        #expect(current["username"] as? String == "worker1")
        #expect(current["name"] as? String == "Ana Worker")
        let anaID = try #require(current["homeAccountId"] as? String)
        #expect(ana.result.stdout.contains(anaID))

        // Its token call is silent: no second sign-in, and the token itself is not printed.
        let silent = try await cli.run(["token", "--app", Self.timeclock, "--scopes", "Files.Read"])
        #expect(silent.status == 0, "\(silent.stdout) \(silent.stderr)")
        #expect(silent.stdout.contains("account: worker1 (Ana Worker)"), "\(silent.stdout)")
        #expect(silent.stdout.contains("Files.Read"), "\(silent.stdout)")
        #expect(!silent.stdout.contains("To sign in") && !silent.stderr.contains("To sign in"))
        #expect(!silent.stdout.lowercased().contains("access token"), "\(silent.stdout)")
        let quiet = try #require(
            try await cli.json(["token", "--app", Self.timeclock, "--scopes", "Files.Read", "--json"]) as? [String: Any]
        )
        #expect(quiet["accessToken"] == nil, "\(quiet)")
        #expect((quiet["account"] as? [String: Any])?["homeAccountId"] as? String == anaID)
        #expect(["cache", "refresh"].contains(quiet["source"] as? String), "\(quiet)")
        #expect((quiet["correlationId"] as? String)?.isEmpty == false, "\(quiet)")
        let secret = try #require(
            try await cli.json(["token", "--app", Self.timeclock, "--scopes", "Files.Read", "--print-secret", "--json"])
                as? [String: Any]
        )
        let anaAccessToken = try #require(secret["accessToken"] as? String, "\(secret)")
        #expect(anaAccessToken.count > 20)
        #expect((secret["scopes"] as? [String])?.contains("Files.Read") == true, "\(secret)")
        let anaRefreshToken = try await cli.refreshToken(app: Self.scanner)
        // Only the secrets' owner ever sees them: the database holds them encrypted.
        cli.expectNotInDatabase([anaAccessToken, anaRefreshToken])

        // The API sees Ana.
        let userinfo = try await cli.run(["call", "--app", Self.timeclock, "--scopes", "User.Read", "userinfo"])
        #expect(userinfo.status == 0, "\(userinfo.stdout) \(userinfo.stderr)")
        #expect(userinfo.stdout.hasPrefix("HTTP 200"), "\(userinfo.stdout)")
        #expect(
            userinfo.stdout.contains("Ana Worker") && userinfo.stdout.contains("\"preferred_username\" : \"worker1\""),
            "\(userinfo.stdout)"
        )
        #expect(try await cli.signInEvents().count == 1, "the silent calls signed somebody in")

        // Worker 2 cannot sign in on the timeclock while Ana's shift lasts; Ana stays signed in.
        let refused = try await cli.signInByDeviceCode(app: Self.timeclock, as: "worker2")
        #expect(refused.result.status == 48, "\(refused.result.stdout) \(refused.result.stderr)")
        #expect(refused.result.stderr.contains("already signed in"), "\(refused.result.stderr)")
        #expect(!refused.result.stdout.contains("signed in:"), "\(refused.result.stdout)")
        for app in [Self.scanner, Self.timeclock] {
            let still = try #require(try await cli.json(["account", "--app", app, "--json"]) as? [String: Any])
            #expect((still["current"] as? [String: Any])?["username"] as? String == "worker1", "\(app): \(still)")
        }
        #expect(try await cli.run(["token", "--app", Self.scanner, "--scopes", "User.Read"]).status == 0)

        // Shift end, signed out from the timeclock: the scanner has nobody either.
        let signOut = try await cli.run(["signout", "--app", Self.timeclock, "--reason", "shift-end"])
        #expect(signOut.status == 0, "\(signOut.stdout) \(signOut.stderr)")
        let none = try await cli.run(["token", "--app", Self.scanner, "--scopes", "User.Read"])
        #expect(none.status == 49, "\(none.stdout) \(none.stderr)")
        #expect(none.stderr.contains("no account"), "\(none.stderr)")
        #expect(none.stdout.isEmpty, "\(none.stdout)")
        let noCall = try await cli.run(["call", "--app", Self.scanner, "--scopes", "User.Read", "userinfo"])
        #expect(noCall.status == 49, "\(noCall.stdout) \(noCall.stderr)")

        // Worker 2's shift: the timeclock signs Ben in, and the API sees Ben.
        let ben = try await cli.signInByDeviceCode(app: Self.timeclock, as: "worker2")
        try #require(
            ben.result.status == 0,
            "signin exited \(ben.result.status): \(ben.result.stdout) \(ben.result.stderr)"
        )
        #expect(ben.result.stdout.contains("signed in: worker2 (Ben Worker) home_account_id "), "\(ben.result.stdout)")
        let benInfo = try await cli.run(["call", "--app", Self.timeclock, "--scopes", "User.Read", "userinfo"])
        #expect(benInfo.status == 0, "\(benInfo.stdout) \(benInfo.stderr)")
        #expect(benInfo.stdout.hasPrefix("HTTP 200"), "\(benInfo.stdout)")
        #expect(benInfo.stdout.contains("Ben Worker") && !benInfo.stdout.contains("Ana Worker"), "\(benInfo.stdout)")
        let scannerView = try #require(
            try await cli.json(["account", "--app", Self.scanner, "--json"]) as? [String: Any]
        )
        #expect((scannerView["current"] as? [String: Any])?["username"] as? String == "worker2", "\(scannerView)")
        #expect((scannerView["previous"] as? [String: Any])?["homeAccountId"] as? String == anaID, "\(scannerView)")
        let benSecret = try #require(
            try await cli.json(["token", "--app", Self.scanner, "--scopes", "User.Read", "--print-secret", "--json"])
                as? [String: Any]
        )
        let benAccessToken = try #require(benSecret["accessToken"] as? String, "\(benSecret)")
        let benRefreshToken = try await cli.refreshToken(app: Self.timeclock)

        // The audit log tells the story in order, and verifies.
        let events = try #require(try await cli.json(["audit", "--json"]) as? [[String: Any]])
        let story = events.filter { ["account.signed_in", "account.signed_out"].contains($0["type"] as? String) }
        #expect(
            story.map { "\($0["type"] ?? "") \($0["account"] ?? "")" }
                == ["account.signed_in worker1", "account.signed_out worker1", "account.signed_in worker2"],
            "\(story)"
        )
        if story.count == 3 {
            #expect(story[0]["actor"] as? String == Self.scanner, "\(story[0])")
            #expect(story[1]["actor"] as? String == Self.timeclock, "\(story[1])")
            #expect(story[1]["reason"] as? String == "shift-end", "\(story[1])")
            #expect(
                (story[1]["details"] as? [String: Any])?["scope"] as? String == "global",
                "not a global sign-out: \(story[1])"
            )
            #expect((story[1]["details"] as? [String: Any])?["homeAccountId"] as? String == anaID, "\(story[1])")
            #expect(story[2]["actor"] as? String == Self.timeclock, "\(story[2])")
        }
        let verify = try await cli.run(["audit", "verify"])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")

        // No output but --print-secret's shows a token; the database never holds one in clear.
        cli.expectNoSecrets([anaAccessToken, anaRefreshToken, benAccessToken, benRefreshToken])
        cli.expectNotInDatabase([anaAccessToken, anaRefreshToken, benAccessToken, benRefreshToken])
    }

    // MARK: - Refresh token revoked

    @Test func refreshTokenRevokedMeansSignInAgainAndTheCacheStillAnswers() async throws {
        let provider = try await Provider.shared()
        let cli = Device()
        defer { cli.cleanUp() }
        try await cli.provision(policy: provider.kioskPolicy(issuer: provider.issuerES256, in: cli.runner))
        let ana = try await cli.signInByDeviceCode(app: Self.scanner, as: "worker1", plugin: "oidc-es256")
        try #require(
            ana.result.status == 0,
            "signin exited \(ana.result.status): \(ana.result.stdout) \(ana.result.stderr)"
        )
        #expect(ana.result.stdout.contains("signed in: worker1 (Ana Worker)"), "\(ana.result.stdout)")
        let before = try #require(
            try await cli.json(["token", "--app", Self.scanner, "--scopes", "User.Read", "--json"]) as? [String: Any]
        )
        #expect(before["source"] as? String == "cache", "\(before)")

        let revoke = try await Provider.tool([
            "revoke", "--port", "\(Self.port)", "--user", "worker1", "--plugin", "oidc-es256",
        ])
        try #require(revoke.status == 0, "\(revoke.stdout) \(revoke.stderr)")

        let refused = try await cli.run(["token", "--app", Self.scanner, "--scopes", "User.Read", "--force-refresh"])
        #expect(refused.status == 50, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.lowercased().contains("sign in"), "\(refused.stderr)")
        #expect(refused.stdout.isEmpty, "\(refused.stdout)")

        // The failed refresh changed nothing: the cached token still answers, and Ana is still current.
        let after = try #require(
            try await cli.json(["token", "--app", Self.scanner, "--scopes", "User.Read", "--json"]) as? [String: Any]
        )
        #expect(after["source"] as? String == "cache", "\(after)")
        #expect(after["expiresOn"] as? String == before["expiresOn"] as? String, "\(before) \(after)")
        let account = try #require(try await cli.json(["account", "--app", Self.scanner, "--json"]) as? [String: Any])
        #expect((account["current"] as? [String: Any])?["username"] as? String == "worker1", "\(account)")
        #expect(try await cli.json(["audit", "--json", "--type", "account.signed_out"]) as? [Any] != nil)
        #expect((try await cli.json(["audit", "--json", "--type", "account.signed_out"]) as? [Any])?.isEmpty == true)
    }

    // MARK: - Provider unreachable

    @Test func providerUnreachableSignsNobodyIn() async throws {
        let cli = Device()
        defer { cli.cleanUp() }
        try await cli.provision(policy: Provider.kioskPolicy(issuer: "http://127.0.0.1:1/api/oidc", in: cli.runner))
        let process = try cli.runner.start(["signin", "--app", Self.scanner])
        defer { process.killIfRunning() }
        let exited = await process.waitForExit(timeout: 60)
        try #require(exited, "signin is still running after 60 s: \(process.standardOutput) \(process.standardError)")
        #expect(process.status == 69, "\(process.standardOutput) \(process.standardError)")
        #expect(process.standardError.contains("127.0.0.1:1"), "\(process.standardError)")
        #expect(!process.standardOutput.contains("signed in"), "\(process.standardOutput)")

        let account = try #require(try await cli.json(["account", "--app", Self.scanner, "--json"]) as? [String: Any])
        #expect(account["current"] is NSNull, "\(account)")
        #expect(try await cli.signInEvents().isEmpty)
        #expect(try await cli.run(["token", "--app", Self.scanner, "--scopes", "User.Read"]).status == 49)
    }

    // MARK: - Browser

    @Test func browserSignInThroughTheLoopbackRedirect() async throws {
        let provider = try await Provider.shared()
        let cli = Device()
        defer { cli.cleanUp() }
        try await cli.provision(policy: provider.kioskPolicy(issuer: provider.issuer, in: cli.runner))
        let browser = "'\(Provider.toolPath)' browse --user worker2 --"
        let process = try BackgroundProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "DEVICECTL_BROWSER=\(browser)",
                DevicectlRunner.productsDirectory.appendingPathComponent("devicectl").path,
                "signin", "--app", Self.timeclock, "--flow", "browser", "--json",
                "--state-dir", cli.runner.stateDirectory.path,
            ]
        )
        defer { process.killIfRunning() }
        let exited = await process.waitForExit(timeout: 60)
        try #require(exited, "signin is still running after 60 s: \(process.standardOutput) \(process.standardError)")
        cli.record("signin --flow browser", process.standardOutput + process.standardError)
        try #require(process.status == 0, "\(process.standardOutput) \(process.standardError)")
        // Standard output is the JSON result alone, for scripts, even though the browser command prints
        // (tools/idp browse prints the app's HTTP status).
        #expect(process.standardOutput.hasPrefix("{"), "\(process.standardOutput)")
        let result = try #require(try parseJSON(process.standardOutput) as? [String: Any], "\(process.standardOutput)")
        let account = try #require(result["account"] as? [String: Any], "\(result)")
        #expect(account["username"] as? String == "worker2", "\(result)")
        #expect(account["name"] as? String == "Ben Worker", "\(result)")
        #expect(account["environment"] as? String == "127.0.0.1:\(Self.port)", "\(result)")
        #expect(result["accessToken"] == nil, "\(result)")

        let shown = try #require(try await cli.json(["account", "--app", Self.scanner, "--json"]) as? [String: Any])
        #expect((shown["current"] as? [String: Any])?["username"] as? String == "worker2", "\(shown)")
        let userinfo = try await cli.run(["call", "--app", Self.scanner, "--scopes", "User.Read", "userinfo"])
        #expect(userinfo.status == 0 && userinfo.stdout.contains("Ben Worker"), "\(userinfo.stdout) \(userinfo.stderr)")
        let events = try await cli.signInEvents()
        #expect(events.count == 1 && events.first?["account"] as? String == "worker2", "\(events)")
    }

    // MARK: - API errors

    @Test func anAPIThatRefusesTheTokenIsExit53WithTheStatus() async throws {
        let provider = try await Provider.shared()
        let cli = Device()
        defer { cli.cleanUp() }
        try await cli.provision(policy: provider.kioskPolicy(issuer: provider.issuer, in: cli.runner))
        let ana = try await cli.signInByDeviceCode(app: Self.scanner, as: "worker1")
        try #require(
            ana.result.status == 0,
            "signin exited \(ana.result.status): \(ana.result.stdout) \(ana.result.stderr)"
        )

        // The ES256 issuer's userinfo does not accept the RS256 issuer's tokens: 401.
        let unauthorized = try await cli.run([
            "call", "--app", Self.scanner, "--scopes", "User.Read", provider.issuerES256 + "/userinfo",
        ])
        #expect(unauthorized.status == 53, "\(unauthorized.stdout) \(unauthorized.stderr)")
        #expect(unauthorized.stderr.contains("HTTP 401"), "\(unauthorized.stderr)")
        #expect(!unauthorized.stdout.contains("HTTP 200"), "\(unauthorized.stdout)")
        // A path the provider does not have: 404.
        let missing = try await cli.run([
            "call", "--app", Self.scanner, "--scopes", "User.Read", provider.issuer + "/no-such-endpoint",
        ])
        #expect(missing.status == 53, "\(missing.stdout) \(missing.stderr)")
        #expect(missing.stderr.contains("HTTP 404"), "\(missing.stderr)")
        // Neither failure signed Ana out: the real endpoint still answers.
        let userinfo = try await cli.run(["call", "--app", Self.scanner, "--scopes", "User.Read", "userinfo"])
        #expect(userinfo.status == 0 && userinfo.stdout.contains("Ana Worker"), "\(userinfo.stdout) \(userinfo.stderr)")
        let secret = try #require(
            try await cli.json(["token", "--app", Self.scanner, "--scopes", "User.Read", "--print-secret", "--json"])
                as? [String: Any]
        )
        cli.expectNoSecrets([try #require(secret["accessToken"] as? String)])
    }

    // MARK: - Apps outside the policy

    @Test func anAppNotInThePolicyCannotSignIn() async throws {
        let provider = try await Provider.shared()
        let cli = Device()
        defer { cli.cleanUp() }
        try await cli.provision(policy: provider.kioskPolicy(issuer: provider.issuer, in: cli.runner))
        let process = try cli.runner.start(["signin", "--app", "com.contoso.unknown"])
        defer { process.killIfRunning() }
        let exited = await process.waitForExit(timeout: 60)
        try #require(exited, "signin is still running after 60 s: \(process.standardOutput) \(process.standardError)")
        #expect(process.status == 77, "\(process.standardOutput) \(process.standardError)")
        #expect(process.standardError.contains("com.contoso.unknown"), "\(process.standardError)")
        #expect(
            !process.standardOutput.contains("To sign in"),
            "a device code was requested: \(process.standardOutput)"
        )
        let token = try await cli.run(["token", "--app", "com.contoso.unknown", "--scopes", "User.Read"])
        #expect(token.status == 77, "\(token.stdout) \(token.stderr)")
        #expect(try await cli.signInEvents().isEmpty)
    }
}

extension IdentityCLITests {
    // MARK: - The provider

    /// The local glewlwyd of `tools/idp` on port 4599.
    struct Provider: Sendable {
        let issuer: String
        let issuerES256: String
        /// The B2C-shaped authorities of the two user flows, through tools/idp's proxy.
        var b2cSignUpOrSignIn: String?
        var b2cEditProfile: String?

        static let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        static let toolPath = packageRoot.appendingPathComponent("tools/idp").path

        /// `tools/idp start`, run once per test run by the first test that needs the provider.
        private static let started = Task<Result<Provider, BackgroundProcessError>, Never> {
            do {
                let start = try await tool(["start", "--port", "\(port)"])
                guard start.status == 0 else {
                    return .failure(
                        BackgroundProcessError(message: "tools/idp start exited \(start.status): \(start.stderr)")
                    )
                }
                var values: [String: String] = [:]
                for line in start.stdout.split(separator: "\n") {
                    let parts = line.split(separator: "=", maxSplits: 1)
                    if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
                }
                guard let issuer = values["ISSUER"], let es256 = values["ISSUER_ES256"] else {
                    return .failure(
                        BackgroundProcessError(message: "tools/idp start printed no issuers: \(start.stdout)")
                    )
                }
                return .success(
                    Provider(
                        issuer: issuer,
                        issuerES256: es256,
                        b2cSignUpOrSignIn: values["B2C_SUSI"],
                        b2cEditProfile: values["B2C_EDIT_PROFILE"]
                    )
                )
            } catch {
                return .failure(BackgroundProcessError(message: "cannot run tools/idp: \(error)"))
            }
        }

        /// Starts the provider once per test run (`tools/idp start` is idempotent) and returns its issuers.
        static func shared() async throws -> Provider { try await started.value.get() }

        /// Runs `tools/idp ARGS`.
        static func tool(_ arguments: [String]) async throws -> DevicectlRunner.Result {
            try await DevicectlRunner.execute(URL(fileURLWithPath: toolPath), arguments)
        }

        func kioskPolicy(issuer: String, in runner: DevicectlRunner) throws -> String {
            try Self.kioskPolicy(issuer: issuer, in: runner)
        }

        /// policies/kiosk.json with `issuer` instead of the demo's provider, written to the runner's files.
        static func kioskPolicy(issuer: String, in runner: DevicectlRunner) throws -> String {
            let shipped = try String(contentsOfFile: DevicectlRunner.policy("kiosk.json"), encoding: .utf8)
            let demoIssuer = "\"http://127.0.0.1:4593/api/oidc\""
            guard shipped.contains(demoIssuer) else {
                throw BackgroundProcessError(message: "policies/kiosk.json no longer names \(demoIssuer)")
            }
            return try runner.writeFile(
                "kiosk.json",
                Data(shipped.replacingOccurrences(of: demoIssuer, with: "\"\(issuer)\"").utf8)
            )
        }
    }

    // MARK: - A device under test

    /// One test's device: its runner, and every command's output so far (to look for leaked secrets).
    final class Device: @unchecked Sendable {
        let runner = DevicectlRunner()
        private var outputs: [(command: String, text: String)] = []

        func record(_ command: String, _ text: String) { outputs.append((command, text)) }

        @discardableResult
        func run(_ arguments: [String]) async throws -> DevicectlRunner.Result {
            let result = try await runner.run(arguments)
            record(arguments.joined(separator: " "), result.stdout + result.stderr)
            return result
        }

        /// Runs `devicectl ARGS` (with `--json` among them), expects exit 0 and parses standard output.
        func json(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws -> Any {
            try parsedJSON(try await run(arguments), of: arguments, sourceLocation: sourceLocation)
        }

        func provision(policy: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let result = try await run(["provision", "--policy", policy])
            try #require(
                result.status == 0,
                "provision exited \(result.status): \(result.stderr)",
                sourceLocation: sourceLocation
            )
        }

        /// The audit log's `account.signed_in` events.
        func signInEvents() async throws -> [[String: Any]] {
            try #require(try await json(["audit", "--json", "--type", "account.signed_in"]) as? [[String: Any]])
        }

        /// The refresh token the app's cache holds (from `cache export`, which writes it to a 0600 file).
        func refreshToken(app: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
            let file = runner.filesDirectory.appendingPathComponent("export-\(UUID().uuidString).json").path
            let export = try await run(["cache", "export", "--app", app, "--output", file])
            try #require(
                export.status == 0,
                "cache export exited \(export.status): \(export.stderr)",
                sourceLocation: sourceLocation
            )
            let cache = try #require(
                try parseJSON(String(contentsOfFile: file, encoding: .utf8)) as? [String: Any],
                sourceLocation: sourceLocation
            )
            try? FileManager.default.removeItem(atPath: file)
            let entries = (cache["RefreshToken"] as? [String: [String: Any]]) ?? [:]
            return try #require(
                entries.values.compactMap { $0["secret"] as? String }.first,
                "no refresh token in \(cache.keys.sorted())",
                sourceLocation: sourceLocation
            )
        }

        struct DeviceCodeSignIn {
            var code: String
            var result: DevicectlRunner.Result
        }

        /// `devicectl signin --app APP` (device code) in the background, with `environment` added to this
        /// process's: waits for the code, approves it at the provider as `user` (the worker typing the code),
        /// and waits for the command to finish. When the
        /// command ends before showing a code, returns its result with an empty code.
        ///
        /// glewlwyd with its SQLite backend mixes up concurrent device authorization requests (one of them
        /// gets a user code stored without its scopes, which can never be approved: `deviceServerError`, or an
        /// approval that the device code being polled never sees), so requesting the code and approving it
        /// happen under `ProviderLock`. Should a code still come out
        /// unusable (another test process without the lock), the sign-in starts over once, as a worker would.
        func signInByDeviceCode(
            app: String,
            as user: String,
            plugin: String = "oidc",
            extra: [String] = [],
            environment: [String: String] = [:],
            sourceLocation: SourceLocation = #_sourceLocation
        ) async throws -> DeviceCodeSignIn {
            let arguments = ["signin", "--app", app, "--flow", "device-code"] + extra
            var attempt = 0
            while true {
                attempt += 1
                let lock = try await ProviderLock.acquire(timeout: 120)
                let process = try runner.start(arguments, environment: environment)
                defer { process.killIfRunning() }
                var code = ""
                let deadline = Date().addingTimeInterval(30)
                while code.isEmpty, !process.hasExited, Date() < deadline {
                    code = Self.userCode(in: process.standardOutput + process.standardError) ?? ""
                    if code.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
                }
                if code.isEmpty { code = Self.userCode(in: process.standardOutput + process.standardError) ?? "" }
                var approval: DevicectlRunner.Result?
                if !code.isEmpty {
                    approval = try await Provider.tool([
                        "approve", "--port", "\(port)", "--code", code,
                        "--user", user, "--plugin", plugin,
                    ])
                }
                lock.release()
                if let approval, approval.status != 0 {
                    if attempt == 1 && approval.stderr.contains("deviceServerError") {
                        print(
                            "IdentityCLITests: the provider stored code \(code) unusably (\(approval.stderr)); signing in again"
                        )
                        process.killIfRunning()
                        _ = await process.waitForExit(timeout: 10)
                        continue
                    }
                    Issue.record(
                        "tools/idp approve exited \(approval.status): \(approval.stderr)",
                        sourceLocation: sourceLocation
                    )
                } else if code.isEmpty, !process.hasExited {
                    Issue.record(
                        "signin showed no code within 30 s: \(process.standardOutput) \(process.standardError)",
                        sourceLocation: sourceLocation
                    )
                }
                let exited = await process.waitForExit(timeout: 60)
                if !exited {
                    process.killIfRunning()
                    _ = await process.waitForExit(timeout: 10)
                    Issue.record("signin did not finish within 60 s of the approval", sourceLocation: sourceLocation)
                }
                let result = DevicectlRunner.Result(
                    status: exited ? process.status : -1,
                    stdout: process.standardOutput,
                    stderr: process.standardError
                )
                record(arguments.joined(separator: " "), result.stdout + result.stderr)
                return DeviceCodeSignIn(code: code, result: result)
            }
        }

        /// The user code of "… and enter the code ABCD-EFGH".
        static func userCode(in text: String) -> String? {
            guard let range = text.range(of: "enter the code ") else { return nil }
            let rest = text[range.upperBound...]
            guard let end = rest.firstIndex(where: { $0 == "\n" }) else { return nil }  // the line is not complete yet
            let code = rest[..<end].trimmingCharacters(
                in: CharacterSet.whitespaces.union(CharacterSet(charactersIn: "."))
            )
            return code.isEmpty ? nil : code
        }

        /// Expects that no command's output, except `--print-secret`'s, contains one of `secrets`.
        func expectNoSecrets(_ secrets: [String], sourceLocation: SourceLocation = #_sourceLocation) {
            let checked = outputs.filter { !$0.command.contains("--print-secret") }
            #expect(!checked.isEmpty, sourceLocation: sourceLocation)
            for output in checked {
                for secret in secrets where output.text.contains(secret) {
                    Issue.record(
                        "`devicectl \(output.command)` showed a token (\(secret.prefix(12))…)",
                        sourceLocation: sourceLocation
                    )
                }
            }
        }

        /// Expects that none of `secrets` is in the database file (or its write-ahead log) in clear.
        func expectNotInDatabase(_ secrets: [String], sourceLocation: SourceLocation = #_sourceLocation) {
            let files = [runner.databasePath, runner.databasePath + "-wal"]
            let contents = files.compactMap { FileManager.default.contents(atPath: $0) }
            #expect(!contents.isEmpty, "no database at \(runner.databasePath)", sourceLocation: sourceLocation)
            for data in contents {
                for secret in secrets where data.range(of: Data(secret.utf8)) != nil {
                    Issue.record(
                        "the database holds a token in clear (\(secret.prefix(12))…)",
                        sourceLocation: sourceLocation
                    )
                }
            }
        }

        func cleanUp() { runner.cleanUp() }
    }

    /// An exclusive `flock` on a file next to the provider's directory, held while a test requests a device
    /// code and approves it (see `signInByDeviceCode`). It serializes this process's tests and any other
    /// process that takes the same lock; waiting polls without blocking a thread.
    final class ProviderLock: @unchecked Sendable {
        static let path =
            (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") + "/devicectl-idp-\(port)-device-code.lock"
        private let descriptor: Int32
        private var held = true

        private init(_ descriptor: Int32) { self.descriptor = descriptor }

        /// The shortest wait for the lock, whatever a test asks for: every test that signs in by device code
        /// queues here, and on a loaded machine each holds it for a minute or more. (A bound for a holder that
        /// hangs, never a speed.)
        static let shortestWait: TimeInterval = 1800

        static func acquire(timeout: TimeInterval) async throws -> ProviderLock {
            let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw BackgroundProcessError(message: "cannot open \(path): errno \(errno)") }
            let timeout = max(timeout, shortestWait)
            let deadline = Date().addingTimeInterval(timeout)
            while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
                guard Date() < deadline else {
                    close(descriptor)
                    throw BackgroundProcessError(message: "\(path) stayed locked for \(Int(timeout)) s")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            return ProviderLock(descriptor)
        }

        func release() {
            guard held else { return }
            held = false
            flock(descriptor, LOCK_UN)
            close(descriptor)
        }

        deinit { release() }
    }
}
