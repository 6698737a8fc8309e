import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// `devicectl keychain …` end to end through the built binary.
@Suite(.tags(.integration))
struct KeychainCLITests {
    static let scanner = [
        "--app", "com.contoso.scanner", "--entitlements", "com.microsoft.adalcache,com.contoso.scanner",
    ]
    static let timeclock = [
        "--app", "com.contoso.timeclock", "--entitlements", "com.microsoft.adalcache,com.contoso.timeclock",
    ]

    @Test func addThenFindShowsAttributesAndOnlyWithPrintSecretTheSecret() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let add = try await cli.run(
            ["keychain", "add-generic-password"] + Self.scanner
                + [
                    "--service", "graph", "--account", "worker-1", "--label", "Graph token", "--type", "2001",
                    "--secret-stdin",
                ],
            stdin: "tok-SECRET-123\n"
        )
        #expect(add.status == 0, "\(add.stderr)")
        #expect(add.stdout.contains("com.microsoft.adalcache"))

        let find = try await cli.run(["keychain", "find-generic-password"] + Self.scanner + ["--service", "graph"])
        #expect(find.status == 0)
        #expect(find.stdout.contains("account: worker-1"))
        #expect(find.stdout.contains("label: Graph token"))
        #expect(find.stdout.contains("type: 2001"))
        #expect(!find.stdout.contains("tok-SECRET-123"))

        let shown = try await cli.run(
            ["keychain", "find-generic-password"] + Self.scanner + ["--service", "graph", "--print-secret"]
        )
        #expect(shown.stdout.contains("secret: tok-SECRET-123\n"))  // the trailing newline of stdin was dropped

        let json = try await cli.run(
            ["keychain", "find-generic-password"] + Self.scanner + ["--service", "graph", "--json", "--print-secret"]
        )
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["account"] as? String == "worker-1")
        #expect(object["accessGroup"] as? String == "com.microsoft.adalcache")
        #expect(object["secretBase64"] as? String == Data("tok-SECRET-123".utf8).base64EncodedString())

        let plainJSON = try await cli.run(
            ["keychain", "find-generic-password"] + Self.scanner + ["--service", "graph", "--json"]
        )
        #expect(!plainJSON.stdout.contains("secret"))
    }

    @Test func listShowsMetadataOfTheCallersGroupsOnlyAndNeverSecrets() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        try await cli.run(
            ["keychain", "add-generic-password"] + Self.scanner + [
                "--access-group", "com.contoso.scanner",
                "--service", "private-svc", "--account", "a", "--secret-stdin",
            ],
            stdin: "PRIVATE-SECRET"
        )
        try await cli.run(
            ["keychain", "add-generic-password"] + Self.scanner + [
                "--service", "shared-svc", "--account", "b", "--secret-stdin",
            ],
            stdin: "SHARED-SECRET"
        )
        let mine = try await cli.run(["keychain", "list", "--json"] + Self.scanner)
        let items = try #require(try JSONSerialization.jsonObject(with: Data(mine.stdout.utf8)) as? [[String: Any]])
        #expect(Set(items.compactMap { $0["service"] as? String }) == ["private-svc", "shared-svc"])
        #expect(!mine.stdout.contains("SECRET"))
        let theirs = try await cli.run(["keychain", "list"] + Self.timeclock)
        #expect(theirs.stdout.contains("shared-svc"))
        #expect(!theirs.stdout.contains("private-svc"))
        #expect(!theirs.stdout.contains("SECRET"))
    }

    @Test func updateAndDeleteChangeAllMatches() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        for account in ["a", "b"] {
            try await cli.run(
                ["keychain", "add-generic-password"] + Self.scanner + [
                    "--service", "svc", "--account", account, "--secret-stdin",
                ],
                stdin: "old"
            )
        }
        let update = try await cli.run(
            ["keychain", "update-generic-password"] + Self.scanner + [
                "--service", "svc", "--set-label", "new", "--secret-stdin",
            ],
            stdin: "rotated"
        )
        #expect(update.status == 0)
        #expect(update.stdout.contains("updated 2 item(s)"))
        let found = try await cli.run(
            ["keychain", "find-generic-password"] + Self.scanner + ["--service", "svc", "--all", "--print-secret"]
        )
        #expect(found.stdout.components(separatedBy: "secret: rotated").count == 3)
        #expect(found.stdout.components(separatedBy: "label: new").count == 3)
        let delete = try await cli.run(["keychain", "delete-generic-password"] + Self.scanner + ["--service", "svc"])
        #expect(delete.stdout.contains("deleted 2 item(s)"))
        #expect(
            try await cli.run(["keychain", "find-generic-password"] + Self.scanner + ["--service", "svc"]).status == 44
        )
    }

    @Test func documentedExitCodesForNotFoundDuplicateEntitlementAndUsage() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let add =
            ["keychain", "add-generic-password"] + Self.scanner + [
                "--access-group", "com.contoso.scanner", "--service", "s", "--account", "a", "--secret-stdin",
            ]
        #expect(try await cli.run(add, stdin: "x").status == 0)
        let duplicate = try await cli.run(add, stdin: "y")
        #expect(duplicate.status == 45)
        #expect(duplicate.stderr.contains("already exists"))
        let notFound = try await cli.run(
            ["keychain", "find-generic-password"] + Self.scanner + ["--service", "nothing"]
        )
        #expect(notFound.status == 44)
        #expect(notFound.stderr.contains("-25300"))
        let denied = try await cli.run(
            ["keychain", "find-generic-password"] + Self.timeclock + [
                "--access-group", "com.contoso.scanner", "--service", "s",
            ]
        )
        #expect(denied.status == 77)
        #expect(denied.stderr.contains("not entitled"))
        // Someone else's item is simply not found without naming the group.
        #expect(
            try await cli.run(["keychain", "find-generic-password"] + Self.timeclock + ["--service", "s"]).status == 44
        )
        // A secret on the command line is not accepted.
        let noStdin = try await cli.run(
            ["keychain", "add-generic-password"] + Self.scanner + ["--service", "s2", "--account", "a"]
        )
        #expect(noStdin.status == 64)
        #expect(noStdin.stderr.contains("--secret-stdin"))
        let badGroup = try await cli.run(["keychain", "list", "--app", "x", "--entitlements", "bad group"])
        #expect(badGroup.status == 65)
    }

    @Test func wrongKeyFileOrPassphraseExits47AndChangesNothing() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        try await cli.run(
            ["keychain", "add-generic-password"] + Self.scanner + [
                "--service", "s", "--account", "a", "--secret-stdin",
            ],
            stdin: "kept"
        )
        let before = try await sqlite3(cli.databasePath, "SELECT hex(nonce) || hex(ciphertext) FROM items")
        let otherKey = cli.stateDirectory.appendingPathComponent("other.key")
        FileManager.default.createFile(
            atPath: otherKey.path,
            contents: Data(repeating: 7, count: 32),
            attributes: [.posixPermissions: 0o600]
        )
        let wrong = try await cli.run(["keychain", "list", "--key-file", otherKey.path] + Self.scanner)
        #expect(wrong.status == 47)
        #expect(wrong.stderr.contains("does not open this store"))
        let passphraseFile = cli.stateDirectory.appendingPathComponent("pass")
        try "guess\n".write(to: passphraseFile, atomically: true, encoding: .utf8)
        #expect(try await cli.run(["keychain", "verify", "--passphrase-file", passphraseFile.path]).status == 47)
        #expect(try await sqlite3(cli.databasePath, "SELECT hex(nonce) || hex(ciphertext) FROM items") == before)
        let right = try await cli.run(
            ["keychain", "find-generic-password"] + Self.scanner + ["--service", "s", "--print-secret"]
        )
        #expect(right.stdout.contains("secret: kept"))
    }

    @Test func tamperingWithRawSQLIsCaughtByFindAndVerifyWithExit46() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        for (account, secret) in [("alice", "ALICE-SECRET"), ("bob", "BOB-SECRET"), ("carol", "CAROL-SECRET")] {
            try await cli.run(
                ["keychain", "add-generic-password"] + Self.scanner + [
                    "--service", "svc", "--account", account, "--secret-stdin",
                ],
                stdin: secret
            )
        }
        #expect(try await cli.run(["keychain", "verify"]).status == 0)
        // Give alice's row bob's sealed secret.
        _ = try await sqlite3(
            cli.databasePath,
            """
            UPDATE items SET nonce = (SELECT nonce FROM items WHERE id = 2), ciphertext = (SELECT ciphertext FROM items WHERE id = 2) WHERE id = 1;
            """
        )
        let find = try await cli.run(
            ["keychain", "find-generic-password"] + Self.scanner + [
                "--service", "svc", "--account", "alice", "--print-secret",
            ]
        )
        #expect(find.status == 46)
        #expect(!find.stdout.contains("BOB-SECRET"))
        #expect(find.stderr.contains("item #1"))
        let carol = try await cli.run(
            ["keychain", "find-generic-password"] + Self.scanner + ["--account", "carol", "--print-secret"]
        )
        #expect(carol.stdout.contains("secret: CAROL-SECRET"))
        let verify = try await cli.run(["keychain", "verify"])
        #expect(verify.status == 46)
        #expect(verify.stdout.contains("damaged: item #1 in com.microsoft.adalcache"))
        #expect(!verify.stdout.contains("item #2"))
        let json = try await cli.run(["keychain", "verify", "--json"])
        let report = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect((report["damagedItems"] as? [[String: Any]])?.compactMap { $0["rowID"] as? Int } == [1])
    }

    @Test func stateDirectoryComesFromTheEnvironmentWhenNotGiven() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let add = try await cli.run(
            ["keychain", "add-generic-password"] + Self.scanner + [
                "--service", "s", "--account", "a", "--secret-stdin",
            ],
            stdin: "x",
            stateDir: false,
            environment: ["DEVICECTL_STATE_DIR": cli.stateDirectory.path]
        )
        #expect(add.status == 0, "\(add.stderr)")
        #expect(FileManager.default.fileExists(atPath: cli.databasePath))
        #expect(FileManager.default.fileExists(atPath: cli.stateDirectory.appendingPathComponent("master.key").path))
    }

    @Test func keychainHelpListsEverySubcommand() async throws {
        let help = try await DevicectlRunner().run(["keychain", "--help"], stateDir: false)
        for command in [
            "add-generic-password", "find-generic-password", "update-generic-password", "delete-generic-password",
            "list", "verify",
        ] {
            #expect(help.stdout.contains(command))
        }
    }
}
