import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// Values an app, a user or the identity provider chose cannot forge lines or escape sequences on an
/// administrator's terminal: devicectl's text output escapes control characters; JSON stays exact.
@Suite(.tags(.integration))
struct OutputEscapingCLITests {
    /// A fake audit line in red, as an attacker would smuggle it inside a value.
    static let forged =
        "x\n#999 2026-11-24T00:00:00Z account.signed_out actor=\"devicectl\" \u{1B}[31mSIGNED OUT\u{1B}[0m\u{202E}"

    /// No raw control character, and no line of the output starts as the forged one.
    static func expectSafe(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(
            !text.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{202E}" },
            "raw escape in: \(text.debugDescription)",
            sourceLocation: sourceLocation
        )
        #expect(
            !text.split(separator: "\n").contains { $0.hasPrefix("#999") },
            "a forged line: \(text)",
            sourceLocation: sourceLocation
        )
    }

    @Test func anItemLabelIsEscapedInTextAndExactInJSON() async throws {
        let cli = try await AccountCLITests.kioskDevice()
        defer { cli.cleanUp() }
        let add = try await cli.run(
            [
                "keychain", "add-generic-password", "--app", AccountCLITests.scanner, "--service", "svc", "--account",
                "a",
                "--label", Self.forged, "--secret-stdin",
            ],
            stdin: "s"
        )
        try #require(add.status == 0, "\(add.stderr)")
        let list = try await cli.run(["keychain", "list", "--app", AccountCLITests.scanner])
        #expect(list.status == 0)
        Self.expectSafe(list.stdout)
        #expect(
            list.stdout.contains(
                #"label: x\n#999 2026-11-24T00:00:00Z account.signed_out actor="devicectl" \e[31mSIGNED OUT\e[0m\u{202E}"#
            ),
            "\(list.stdout)"
        )
        let find = try await cli.run([
            "keychain", "find-generic-password", "--app", AccountCLITests.scanner, "--service", "svc",
        ])
        Self.expectSafe(find.stdout)
        let json = try await cli.run(["keychain", "list", "--app", AccountCLITests.scanner, "--json"])
        let items = try #require(try parseJSON(json.stdout) as? [[String: Any]])
        #expect(items.first?["label"] as? String == Self.forged, "JSON must keep the label exactly")
    }

    @Test func aUsernameFromTheIdentityProviderIsEscapedInTheAuditLogAndAccountOutput() async throws {
        let cli = try await AccountCLITests.kioskDevice()
        defer { cli.cleanUp() }
        let mallory = Worker(uid: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", username: Self.forged, name: "Mal\u{1B}[2J")
        let file = try cli.write(mallory, as: "mallory.json")
        let signIn = try await cli.run(["signin", "--app", AccountCLITests.scanner, "--token-response", file])
        try #require(signIn.status == 0, "\(signIn.stderr)")
        Self.expectSafe(signIn.stdout)
        let account = try await cli.run(["account", "--app", AccountCLITests.scanner])
        Self.expectSafe(account.stdout)
        let audit = try await cli.run(["audit"])
        #expect(audit.status == 0)
        Self.expectSafe(audit.stdout)
        #expect(audit.stdout.contains(#"account=x\n#999"#), "\(audit.stdout)")
        let events = try #require(try parseJSON(try await cli.run(["audit", "--json"]).stdout) as? [[String: Any]])
        #expect(events.contains { $0["account"] as? String == Self.forged }, "JSON must keep the account exactly")
    }
}

/// Arguments devicectl cannot take for names: bytes that are not UTF-8 would collide as U+FFFD.
@Suite(.tags(.integration))
struct ArgumentEncodingCLITests {
    @Test func anArgumentThatIsNotUTF8IsAUsageErrorNamingIt() async throws {
        let cli = try await AccountCLITests.kioskDevice()
        defer { cli.cleanUp() }
        // Through a shell: Swift passes arguments as strings, which are always UTF-8. The secret is piped by
        // the shell too: devicectl refuses before it reads its input.
        let devicectl = DevicectlRunner.productsDirectory.appendingPathComponent("devicectl").path
        let result = try await Command.run(
            URL(fileURLWithPath: "/bin/sh"),
            [
                "-c",
                "printf s | '\(devicectl)' keychain add-generic-password --app \(AccountCLITests.scanner) --service \"$(printf 'ab\\377')\" --account a --secret-stdin --state-dir '\(cli.cli.stateDirectory.path)'",
            ]
        )
        #expect(result.status == 64, "\(result.stdout) \(result.stderr)")
        #expect(result.stderr.contains("after \"--service\") is not valid UTF-8"), "\(result.stderr)")
        let list = try await cli.run(["keychain", "list", "--app", AccountCLITests.scanner, "--json"])
        #expect((try parseJSON(list.stdout) as? [Any])?.isEmpty == true, "something was added: \(list.stdout)")
    }

    @Test func anEmptiedStoreIsReportedAsDamagedAndKept() async throws {
        let cli = try await AccountCLITests.kioskDevice()
        defer { cli.cleanUp() }
        let database = cli.cli.databasePath
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) }
        try Data().write(to: URL(fileURLWithPath: database))
        let verify = try await cli.run(["audit", "verify"])
        #expect(verify.status == 46, "\(verify.stdout) \(verify.stderr)")
        #expect(!verify.stdout.contains("intact"), "\(verify.stdout)")
        let list = try await cli.run(["keychain", "list", "--app", AccountCLITests.scanner])
        #expect(list.status == 46 && list.stderr.contains("restore it from backup"), "\(list.stderr)")
        #expect((try FileManager.default.attributesOfItem(atPath: database)[.size] as? Int) == 0)
    }
}
