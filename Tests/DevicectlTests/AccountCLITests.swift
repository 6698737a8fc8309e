import Foundation
import IdentityClient
import ProcessTestSupport
import TestTags
import Testing

/// `devicectl signin`, `account`, `accounts`, `signout`, `switch` and `cache export|import` end to end
/// through the built binary, each test in its own state directory, with token responses written to files
/// as an identity provider returns them.
@Suite(.tags(.integration))
struct AccountCLITests {
    static let kiosk = DevicectlRunner.policy("kiosk.json")
    static let personal = DevicectlRunner.policy("personal.json")
    static let scanner = "com.contoso.kiosk.scanner"
    static let timeclock = "com.contoso.kiosk.timeclock"
    static let fieldnotes = "com.contoso.fieldnotes"

    /// The cache's credential and account item types: access, refresh and ID token, account.
    static let credentialTypes: Set<Int> = [2001, 2002, 2003, 1003]

    /// A kiosk device (shared mode).
    static func kioskDevice() async throws -> Transcript {
        let cli = Transcript(DevicectlRunner())
        let provision = try await cli.run(["provision", "--policy", kiosk])
        try #require(provision.status == 0, "\(provision.stderr)")
        return cli
    }

    // MARK: - signin, account, accounts

    @Test func signInPrintsTheAccountWithoutTokensAndTheOtherAppGetsSingleSignOn() async throws {
        let cli = try await Self.kioskDevice()
        defer { cli.cleanUp() }
        let jo = Worker.jo
        let ada = Worker.ada
        let joFile = try cli.write(jo, as: "jo.json")
        let adaFile = try cli.write(ada, as: "ada.json")

        let signIn = try await cli.run(["signin", "--app", Self.scanner, "--token-response", joFile, "--json"])
        #expect(signIn.status == 0, "\(signIn.stderr)")
        let account = try #require(try parseJSON(signIn.stdout) as? [String: Any])
        #expect(account["homeAccountId"] as? String == jo.homeAccountID)
        #expect(account["username"] as? String == jo.username)
        #expect(account["name"] as? String == jo.name)
        #expect(account["environment"] as? String == Worker.kioskEnvironment)
        #expect(account["realm"] as? String == Worker.tenant)
        #expect(account["localAccountId"] as? String == jo.uid)
        #expect(
            Set(account.keys).isSubset(of: [
                "homeAccountId", "environment", "realm", "username", "name", "localAccountId",
            ]),
            "unexpected keys: \(account.keys.sorted())"
        )
        let text = try await cli.run(["signin", "--app", Self.scanner, "--token-response", joFile])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(
            text.stdout.contains("signed in: \(jo.username) (\(jo.name)) home_account_id \(jo.homeAccountID)"),
            "\(text.stdout)"
        )

        // The timeclock app sees the same worker (SSO); its first look has no previous account, the next one does.
        let first = try #require(try await cli.json(["account", "--app", Self.timeclock, "--json"]) as? [String: Any])
        #expect(Set(first.keys) == ["current", "previous"], "\(first.keys.sorted())")
        #expect((first["current"] as? [String: Any])?["homeAccountId"] as? String == jo.homeAccountID)
        #expect((first["current"] as? [String: Any])?["username"] as? String == jo.username)
        #expect(first["previous"] is NSNull, "previous: \(first["previous"] ?? "absent")")
        let second = try #require(try await cli.json(["account", "--app", Self.timeclock, "--json"]) as? [String: Any])
        #expect(Set(second.keys) == ["current", "previous"])
        #expect((second["current"] as? [String: Any])?["homeAccountId"] as? String == jo.homeAccountID)
        #expect((second["previous"] as? [String: Any])?["homeAccountId"] as? String == jo.homeAccountID)
        let shown = try await cli.run(["account", "--app", Self.timeclock])
        #expect(shown.status == 0)
        #expect(
            shown.stdout.contains("current: \(jo.username) (\(jo.name)) home_account_id \(jo.homeAccountID)"),
            "\(shown.stdout)"
        )
        // The device administrator's view.
        let device = try #require(try await cli.json(["account", "--json"]) as? [String: Any])
        #expect((device["current"] as? [String: Any])?["homeAccountId"] as? String == jo.homeAccountID)

        // The same worker signing in through the other app is single sign-on, not a new sign-in.
        let sso = try await cli.run(["signin", "--app", Self.timeclock, "--token-response", joFile, "--json"])
        #expect(sso.status == 0, "\(sso.stderr)")

        // Another worker is refused while Jo's shift lasts, and nothing of theirs is stored.
        let refused = try await cli.run(["signin", "--app", Self.timeclock, "--token-response", adaFile, "--json"])
        #expect(refused.status == 48, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains("an account is already signed in"), "\(refused.stderr)")
        #expect(refused.stdout.isEmpty, "\(refused.stdout)")
        let still = try #require(try await cli.json(["account", "--app", Self.scanner, "--json"]) as? [String: Any])
        #expect((still["current"] as? [String: Any])?["homeAccountId"] as? String == jo.homeAccountID)
        let adaItems = try #require(
            try await cli.json([
                "keychain", "list", "--app", Self.timeclock, "--json",
                "--account", ada.cacheAccount(),
            ]) as? [Any]
        )
        #expect(adaItems.isEmpty, "the refused sign-in stored \(adaItems)")

        // `accounts` lists Jo, signed in, with no secrets.
        let statuses = try #require(try await cli.json(["accounts", "--json"]) as? [[String: Any]])
        #expect(statuses.count == 1, "\(statuses)")
        let status = try #require(statuses.first)
        #expect((status["account"] as? [String: Any])?["homeAccountId"] as? String == jo.homeAccountID)
        #expect((status["account"] as? [String: Any])?["username"] as? String == jo.username)
        #expect(status["signedIn"] as? Bool == true)
        #expect(status["signedInBy"] as? String != nil)
        #expect(status["signOutReason"] == nil || status["signOutReason"] is NSNull)
        let listed = try await cli.run(["accounts"])
        #expect(
            listed.stdout.contains(
                "\(jo.username) (\(jo.name)) home_account_id \(jo.homeAccountID) environment \(Worker.kioskEnvironment): signed in"
            ),
            "\(listed.stdout)"
        )

        // One sign-in event: neither the repeated sign-in nor SSO nor the refusal is a new one.
        let events = try #require(
            try await cli.json(["audit", "--json", "--type", "account.signed_in"]) as? [[String: Any]]
        )
        #expect(events.count == 1, "\(events)")
        #expect(events.first?["account"] as? String == jo.username)
        #expect(events.first?["actor"] as? String == Self.scanner)
        #expect((events.first?["details"] as? [String: String])?["mode"] == "shared")
        #expect((events.first?["details"] as? [String: String])?["homeAccountId"] == jo.homeAccountID)
        #expect(try await cli.run(["audit", "verify"]).status == 0)

        cli.expectNoSecrets(of: [jo, ada])
    }

    // MARK: - signout

    @Test func signOutFromOneAppRemovesTheWorkersCredentialsFromEveryApp() async throws {
        let cli = try await Self.kioskDevice()
        defer { cli.cleanUp() }
        let jo = Worker.jo
        let joFile = try cli.write(jo, as: "jo.json")
        try #require(try await cli.run(["signin", "--app", Self.scanner, "--token-response", joFile]).status == 0)
        // Jo's credentials in each app's own group too (an app that cached there), and an item of the app's own.
        for (app, secret) in [(Self.scanner, "AT-IN-SCANNER-GROUP"), (Self.timeclock, "AT-IN-TIMECLOCK-GROUP")] {
            let add = try await cli.run(
                [
                    "keychain", "add-generic-password", "--app", app, "--access-group", app,
                    "--service", "accesstoken-other-app", "--account", jo.cacheAccount(), "--type", "2001",
                    "--secret-stdin",
                ],
                stdin: secret
            )
            try #require(add.status == 0, "\(add.stderr)")
        }
        try await addItem(
            cli.cli,
            app: Self.scanner,
            group: Self.scanner,
            service: "scanner-config",
            account: "settings",
            secret: "cfg"
        )

        let before = try await cli.items(of: jo, app: Self.scanner)
        #expect(Set(before.compactMap { $0["type"] as? Int }) == Self.credentialTypes, "\(before)")
        // account, ID, access and refresh token in adalcache, one access token in its own group
        #expect(before.count == 5, "\(before)")
        #expect(try await cli.items(of: jo, app: Self.timeclock).count == 5)

        // A bogus reason is a usage error and signs nobody out.
        let bogus = try await cli.run(["signout", "--app", Self.timeclock, "--reason", "bogus"])
        #expect(bogus.status == 64, "\(bogus.stdout) \(bogus.stderr)")
        #expect(bogus.stderr.contains("unknown reason bogus"), "\(bogus.stderr)")
        let unchanged = try #require(
            try await cli.json(["account", "--app", Self.scanner, "--json"]) as? [String: Any]
        )
        #expect((unchanged["current"] as? [String: Any])?["homeAccountId"] as? String == jo.homeAccountID)
        #expect(try await cli.items(of: jo, app: Self.scanner).count == 5)

        let signOut = try await cli.run(["signout", "--app", Self.timeclock, "--reason", "shift-end", "--json"])
        #expect(signOut.status == 0, "\(signOut.stderr)")
        let outcome = try #require(try parseJSON(signOut.stdout) as? [String: Any])
        #expect(outcome["global"] as? Bool == true)
        #expect(outcome["itemsRemoved"] as? Int == 6, "\(outcome)")
        #expect(outcome["accessGroups"] as? Int == 3, "\(outcome)")  // adalcache and the two apps' own groups
        #expect((outcome["account"] as? [String: Any])?["homeAccountId"] as? String == jo.homeAccountID)

        // Both apps' views: none of Jo's credentials remain anywhere; the app's own item and the app metadata stay.
        for app in [Self.scanner, Self.timeclock] {
            let all = try #require(
                try await cli.json(["keychain", "list", "--app", app, "--json"]) as? [[String: Any]]
            )
            let left = all.filter {
                $0["account"] as? String == jo.cacheAccount()
                    || Self.credentialTypes.contains($0["type"] as? Int ?? 0)
            }
            #expect(left.isEmpty, "\(app) still holds \(left)")
            #expect(all.contains { $0["type"] as? Int == 3001 }, "\(app): app metadata was removed: \(all)")
        }
        let kept = try await cli.run([
            "keychain", "find-generic-password", "--app", Self.scanner, "--service", "scanner-config",
        ])
        #expect(kept.status == 0, "the scanner's own item was removed: \(kept.stderr)")

        // The scanner now has no current account and remembers Jo as its previous one.
        let scannerView = try #require(
            try await cli.json(["account", "--app", Self.scanner, "--json"]) as? [String: Any]
        )
        #expect(Set(scannerView.keys) == ["current", "previous"])
        #expect(scannerView["current"] is NSNull, "current: \(scannerView["current"] ?? "absent")")
        #expect((scannerView["previous"] as? [String: Any])?["homeAccountId"] as? String == jo.homeAccountID)
        #expect((scannerView["previous"] as? [String: Any])?["username"] as? String == jo.username)
        let text = try await cli.run(["account", "--app", Self.scanner])
        #expect(text.stdout.contains("current: none\n"), "\(text.stdout)")

        let statuses = try #require(try await cli.json(["accounts", "--json"]) as? [[String: Any]])
        #expect(statuses.count == 1)
        #expect(statuses.first?["signedIn"] as? Bool == false)
        #expect(statuses.first?["signOutReason"] as? String == "shift-end")
        #expect(try await cli.run(["accounts"]).stdout.contains(": signed out (shift-end)"))

        let event = try #require(
            (try await cli.json(["audit", "--json", "--type", "account.signed_out"]) as? [[String: Any]])?.last
        )
        #expect(event["actor"] as? String == Self.timeclock)
        #expect(event["account"] as? String == jo.username)
        #expect(event["reason"] as? String == "shift-end")
        let details = try #require(event["details"] as? [String: String])
        #expect(details["scope"] == "global")
        #expect(details["itemsRemoved"] == "6")
        #expect(details["homeAccountId"] == jo.homeAccountID)

        // Nobody is left to sign out.
        let again = try await cli.run(["signout", "--app", Self.timeclock, "--reason", "shift-end"])
        #expect(again.status == 49, "\(again.stdout) \(again.stderr)")
        #expect(again.stderr.contains("nobody is signed in"), "\(again.stderr)")
        let admin = try await cli.run(["signout"])
        #expect(admin.status == 49, "\(admin.stderr)")
        // The reason is checked first, whoever is signed in.
        #expect(try await cli.run(["signout", "--reason", "bogus"]).status == 64)
        #expect(try await cli.run(["audit", "verify"]).status == 0)

        cli.expectNoSecrets(of: [jo], extra: ["AT-IN-SCANNER-GROUP", "AT-IN-TIMECLOCK-GROUP"])
    }

    // MARK: - switch

    @Test func switchSignsTheNextWorkerInUnderOneCorrelationID() async throws {
        let cli = try await Self.kioskDevice()
        defer { cli.cleanUp() }
        let jo = Worker.jo
        let ada = Worker.ada
        let joFile = try cli.write(jo, as: "worker1.json")
        let adaFile = try cli.write(ada, as: "worker2.json")
        try #require(try await cli.run(["signin", "--app", Self.scanner, "--token-response", joFile]).status == 0)
        try #require(try await cli.run(["signout", "--app", Self.scanner, "--reason", "user"]).status == 0)
        let back = try await cli.run(["signin", "--app", Self.scanner, "--token-response", joFile])
        try #require(back.status == 0, "signing Jo back in: \(back.stderr)")

        let switched = try await cli.run(["switch", "--app", Self.scanner, "--token-response", adaFile, "--json"])
        #expect(switched.status == 0, "\(switched.stderr)")
        let summary = try #require(try parseJSON(switched.stdout) as? [String: Any])
        #expect((summary["signedOut"] as? [String: Any])?["homeAccountId"] as? String == jo.homeAccountID)
        #expect((summary["signedIn"] as? [String: Any])?["homeAccountId"] as? String == ada.homeAccountID)
        #expect(summary["error"] == nil || summary["error"] is NSNull, "error: \(summary["error"] ?? "-")")
        let correlationID = try #require(summary["correlationId"] as? String)
        #expect(UUID(uuidString: correlationID) != nil, "correlation id \(correlationID)")

        // Ada is current for every app; Jo's credentials are gone, Ada's are there.
        for app in [Self.scanner, Self.timeclock] {
            let view = try #require(try await cli.json(["account", "--app", app, "--json"]) as? [String: Any])
            #expect(
                (view["current"] as? [String: Any])?["homeAccountId"] as? String == ada.homeAccountID,
                "\(app): \(view)"
            )
        }
        #expect(try await cli.items(of: jo, app: Self.scanner).isEmpty)
        #expect(
            Set(try await cli.items(of: ada, app: Self.timeclock).compactMap { $0["type"] as? Int })
                == Self.credentialTypes
        )
        let statuses = try #require(try await cli.json(["accounts", "--json"]) as? [[String: Any]])
        let signedIn = statuses.filter { $0["signedIn"] as? Bool == true }
            .compactMap { ($0["account"] as? [String: Any])?["homeAccountId"] as? String }
        #expect(signedIn == [ada.homeAccountID], "\(statuses)")

        // The audit log: the switch's three events share its correlation id, and nothing else does.
        let events = try #require(try await cli.json(["audit", "--json"]) as? [[String: Any]])
        let related = events.filter { $0["correlationId"] as? String == correlationID }
        #expect(
            related.compactMap { $0["type"] as? String } == [
                "account.signed_out", "account.signed_in", "account.switched",
            ],
            "\(related)"
        )
        #expect(related.first?["account"] as? String == jo.username)
        #expect(related.first?["reason"] as? String == "shift-end")
        #expect((related.first?["details"] as? [String: String])?["scope"] == "global")
        #expect(related.dropFirst().first?["account"] as? String == ada.username)
        let switchDetails = try #require(related.last?["details"] as? [String: String])
        #expect(switchDetails["from"] == jo.username)
        #expect(switchDetails["to"] == ada.username)
        #expect(events.filter { $0["type"] as? String == "account.signed_in" }.count == 3)  // Jo, Jo again, Ada
        let verify = try await cli.run(["audit", "verify"])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")

        cli.expectNoSecrets(of: [jo, ada])
    }

    @Test func aSwitchWhoseSignInFailsLeavesTheSignOutStanding() async throws {
        let cli = try await Self.kioskDevice()
        defer { cli.cleanUp() }
        let jo = Worker.jo
        let joFile = try cli.write(jo, as: "jo.json")
        try #require(try await cli.run(["signin", "--app", Self.scanner, "--token-response", joFile]).status == 0)

        // A file that is not a token response: refused before anything happens, Jo stays signed in.
        let garbage = try cli.cli.writeFile("garbage.json", Data("{ not json".utf8))
        let refused = try await cli.run(["switch", "--app", Self.scanner, "--token-response", garbage])
        #expect(refused.status == 65, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains("is not a usable token response"), "\(refused.stderr)")
        let missing = try await cli.run([
            "switch", "--app", Self.scanner, "--token-response",
            cli.cli.filesDirectory.appendingPathComponent("absent.json").path,
        ])
        #expect(missing.status == 74, "\(missing.stderr)")
        let still = try #require(try await cli.json(["account", "--app", Self.scanner, "--json"]) as? [String: Any])
        #expect((still["current"] as? [String: Any])?["homeAccountId"] as? String == jo.homeAccountID)
        #expect(try await cli.json(["audit", "--json", "--type", "account.signed_out"]) as? [Any] != nil)
        // A bogus reason is a usage error, checked before anyone is signed out.
        let bogus = try await cli.run([
            "switch", "--app", Self.scanner, "--token-response", joFile, "--reason", "bogus",
        ])
        #expect(bogus.status == 64, "\(bogus.stdout) \(bogus.stderr)")
        #expect((try await cli.json(["audit", "--json", "--type", "account.signed_out"]) as? [Any])?.isEmpty == true)

        // A response that decodes but names no account (no client_info, no id_token): the sign-out commits,
        // the sign-in fails (65), and nobody is signed in.
        let anonymous = try cli.cli.writeFile(
            "anonymous.json",
            Data(#"{"access_token": "AT-ANONYMOUS-SECRET", "token_type": "Bearer", "expires_in": 3600}"#.utf8)
        )
        let failed = try await cli.run(["switch", "--app", Self.scanner, "--token-response", anonymous, "--json"])
        #expect(failed.status == 65, "\(failed.stdout) \(failed.stderr)")
        #expect(failed.stderr.contains("names no account"), "\(failed.stderr)")
        let summary = try #require(try parseJSON(failed.stdout) as? [String: Any], "\(failed.stdout)")
        #expect((summary["signedOut"] as? [String: Any])?["homeAccountId"] as? String == jo.homeAccountID)
        #expect(summary["signedIn"] == nil || summary["signedIn"] is NSNull)
        #expect((summary["error"] as? String)?.isEmpty == false, "\(summary)")
        let correlationID = try #require(summary["correlationId"] as? String)

        let view = try #require(try await cli.json(["account", "--app", Self.scanner, "--json"]) as? [String: Any])
        #expect(view["current"] is NSNull, "current: \(view["current"] ?? "absent")")
        #expect((view["previous"] as? [String: Any])?["homeAccountId"] as? String == jo.homeAccountID)
        #expect(try await cli.items(of: jo, app: Self.scanner).isEmpty)
        let statuses = try #require(try await cli.json(["accounts", "--json"]) as? [[String: Any]])
        #expect(statuses.allSatisfy { $0["signedIn"] as? Bool == false }, "\(statuses)")

        let events = try #require(try await cli.json(["audit", "--json"]) as? [[String: Any]])
        let related = events.filter { $0["correlationId"] as? String == correlationID }
        #expect(related.compactMap { $0["type"] as? String } == ["account.signed_out"], "\(related)")
        #expect(!events.contains { $0["type"] as? String == "account.switched" })

        // With nobody signed in, a switch just signs the next worker in.
        let recovered = try await cli.run(["switch", "--app", Self.timeclock, "--token-response", joFile, "--json"])
        #expect(recovered.status == 0, "\(recovered.stderr)")
        let next = try #require(try parseJSON(recovered.stdout) as? [String: Any])
        #expect(next["signedOut"] == nil || next["signedOut"] is NSNull, "\(next)")
        #expect((next["signedIn"] as? [String: Any])?["homeAccountId"] as? String == jo.homeAccountID)
        let last = try #require((try await cli.json(["audit", "--json"]) as? [[String: Any]])?.last)
        #expect(last["type"] as? String == "account.switched")
        #expect((last["details"] as? [String: String])?["from"] == "(nobody)")
        #expect(try await cli.run(["audit", "verify"]).status == 0)

        cli.expectNoSecrets(of: [jo], extra: ["AT-ANONYMOUS-SECRET"])
    }

    // MARK: - cache export and import

    @Test func cacheExportImportRoundTripsByteForByte() async throws {
        let cli = try await Self.kioskDevice()
        defer { cli.cleanUp() }
        let jo = Worker.jo
        try #require(
            try await cli.run(["signin", "--app", Self.scanner, "--token-response", try cli.write(jo, as: "jo.json")])
                .status == 0
        )

        let export = try await cli.run(["cache", "export", "--app", Self.scanner])
        #expect(export.status == 0, "\(export.stderr)")
        let document = try #require(try parseJSON(export.stdout) as? [String: Any])
        #expect(
            Set(document.keys) == ["AccessToken", "RefreshToken", "IdToken", "Account", "AppMetadata"],
            "\(document.keys.sorted())"
        )
        for section in ["AccessToken", "RefreshToken", "IdToken", "Account", "AppMetadata"] {
            #expect((document[section] as? [String: Any])?.count == 1, "\(section): \(document[section] ?? "absent")")
        }
        let accessToken = try #require((document["AccessToken"] as? [String: [String: Any]])?.values.first)
        #expect(accessToken["secret"] as? String == jo.accessToken)
        #expect(accessToken["home_account_id"] as? String == jo.homeAccountID)
        #expect(
            (document["RefreshToken"] as? [String: [String: Any]])?.values.first?["secret"] as? String
                == jo.refreshToken
        )
        #expect(
            (document["IdToken"] as? [String: [String: Any]])?.values.first?["secret"] as? String
                == jo.idToken(issuer: Worker.kioskIssuer, clientID: Worker.kioskClientID)
        )
        #expect((document["Account"] as? [String: [String: Any]])?.values.first?["username"] as? String == jo.username)
        // The same cache always gives the same bytes.
        #expect(try await cli.run(["cache", "export", "--app", Self.scanner]).stdout == export.stdout)

        // --output: the same bytes in a file only its owner can read.
        let outputFile = cli.cli.filesDirectory.appendingPathComponent("export.json").path
        let toFile = try await cli.run(["cache", "export", "--app", Self.scanner, "--output", outputFile])
        #expect(toFile.status == 0, "\(toFile.stderr)")
        #expect(toFile.stdout.isEmpty, "\(toFile.stdout)")
        let attributes = try FileManager.default.attributesOfItem(atPath: outputFile)
        #expect(
            (attributes[.posixPermissions] as? Int) == 0o600,
            "mode \(String((attributes[.posixPermissions] as? Int) ?? -1, radix: 8))"
        )
        #expect(FileManager.default.contents(atPath: outputFile) == Data(export.stdout.utf8))
        // Over an existing world-readable file, the export still ends up private.
        let existing = try cli.cli.writeFile("existing.json", Data("old\n".utf8))
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: existing)
        #expect(try await cli.run(["cache", "export", "--app", Self.scanner, "--output", existing]).status == 0)
        #expect((try FileManager.default.attributesOfItem(atPath: existing)[.posixPermissions] as? Int) == 0o600)
        #expect(FileManager.default.contents(atPath: existing) == Data(export.stdout.utf8))

        // Into a fresh kiosk: the export there is byte for byte the first one.
        let fresh = try await Self.kioskDevice()
        defer { fresh.cleanUp() }
        let imported = try await fresh.run(["cache", "import", "--app", Self.scanner, outputFile])
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout.contains("imported 5 cache entries"), "\(imported.stdout)")
        let again = try await fresh.run(["cache", "export", "--app", Self.scanner])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout == export.stdout, "the re-export differs:\n\(again.stdout)\n---\n\(export.stdout)")
        // The other kiosk app shares the adalcache group, so it exports the same cache.
        #expect(try await fresh.run(["cache", "export", "--app", Self.timeclock]).stdout == export.stdout)

        // A document that is not a cache: 65, nothing imported.
        let broken = try cli.cli.writeFile("broken.json", Data(#"{"AccessToken": 42}"#.utf8))
        let rejected = try await fresh.run(["cache", "import", "--app", Self.scanner, broken])
        #expect(rejected.status == 65, "\(rejected.stdout) \(rejected.stderr)")
        #expect(try await fresh.run(["cache", "export", "--app", Self.scanner]).stdout == export.stdout)

        // Nothing but the exports shows a token.
        cli.expectNoSecrets(of: [jo], except: ["cache export"])
        fresh.expectNoSecrets(of: [jo], except: ["cache export"])
    }

    // MARK: - private mode

    @Test func privateModeSignOutIsLocalToTheApp() async throws {
        let cli = Transcript(DevicectlRunner())
        defer { cli.cleanUp() }
        try #require(try await cli.run(["provision", "--policy", Self.personal]).status == 0)
        let dana = Worker.dana
        let file = try cli.write(
            dana,
            issuer: Worker.personalIssuer,
            clientID: Worker.personalClientID,
            as: "dana.json"
        )

        let signIn = try await cli.run(["signin", "--app", Self.fieldnotes, "--token-response", file, "--json"])
        #expect(signIn.status == 0, "\(signIn.stderr)")
        let account = try #require(try parseJSON(signIn.stdout) as? [String: Any])
        #expect(account["homeAccountId"] as? String == dana.homeAccountID)
        #expect(account["username"] as? String == dana.username)
        #expect(account["environment"] as? String == "login.microsoftonline.com")
        let view = try #require(try await cli.json(["account", "--app", Self.fieldnotes, "--json"]) as? [String: Any])
        #expect((view["current"] as? [String: Any])?["homeAccountId"] as? String == dana.homeAccountID)
        // The tokens are in the app's first group (it has no com.microsoft.adalcache).
        let items = try await cli.items(of: dana, app: Self.fieldnotes, environment: "login.microsoftonline.com")
        #expect(Set(items.compactMap { $0["type"] as? Int }) == Self.credentialTypes, "\(items)")
        #expect(items.allSatisfy { $0["accessGroup"] as? String == "com.microsoft.identity.universalstorage" })

        let signOut = try await cli.run(["signout", "--app", Self.fieldnotes, "--json"])
        #expect(signOut.status == 0, "\(signOut.stderr)")
        let outcome = try #require(try parseJSON(signOut.stdout) as? [String: Any])
        #expect(outcome["global"] as? Bool == false)
        #expect(outcome["itemsRemoved"] as? Int == 4, "\(outcome)")

        let events = try #require(try await cli.json(["audit", "--json"]) as? [[String: Any]])
        let signedIn = try #require(events.last { $0["type"] as? String == "account.signed_in" })
        #expect((signedIn["details"] as? [String: String])?["mode"] == "private")
        let signedOut = try #require(events.last { $0["type"] as? String == "account.signed_out" })
        #expect(signedOut["actor"] as? String == Self.fieldnotes)
        #expect(signedOut["account"] as? String == dana.username)
        #expect(signedOut["reason"] as? String == "user")
        #expect((signedOut["details"] as? [String: String])?["scope"] == "local")
        #expect((signedOut["details"] as? [String: String])?["homeAccountId"] == dana.homeAccountID)

        let after = try #require(try await cli.json(["account", "--app", Self.fieldnotes, "--json"]) as? [String: Any])
        #expect(after["current"] is NSNull, "current: \(after["current"] ?? "absent")")
        #expect((after["previous"] as? [String: Any])?["homeAccountId"] as? String == dana.homeAccountID)
        #expect(try await cli.items(of: dana, app: Self.fieldnotes, environment: "login.microsoftonline.com").isEmpty)
        let again = try await cli.run(["signout", "--app", Self.fieldnotes])
        #expect(again.status == 49, "\(again.stdout) \(again.stderr)")
        #expect(try await cli.run(["audit", "verify"]).status == 0)

        cli.expectNoSecrets(of: [dana], issuer: Worker.personalIssuer, clientID: Worker.personalClientID)
    }

    // MARK: - unprovisioned device

    @Test func signInOnAnUnprovisionedDeviceExits69AndStoresNothing() async throws {
        let cli = Transcript(DevicectlRunner())
        defer { cli.cleanUp() }
        let jo = Worker.jo
        let file = try cli.write(jo, as: "jo.json")
        let app = ["--app", "com.contoso.scanner", "--entitlements", "com.microsoft.adalcache,com.contoso.scanner"]

        let signIn = try await cli.run(["signin"] + app + ["--token-response", file])
        #expect(signIn.status == 69, "\(signIn.stdout) \(signIn.stderr)")
        #expect(signIn.stderr.contains("not provisioned"), "\(signIn.stderr)")
        #expect(signIn.stdout.isEmpty)
        let switched = try await cli.run(["switch"] + app + ["--token-response", file])
        #expect(switched.status == 69, "\(switched.stderr)")
        // Without entitlements the app cannot even be named.
        #expect(try await cli.run(["signin", "--app", "com.contoso.scanner", "--token-response", file]).status == 64)

        let items = try #require(try await cli.json(["keychain", "list"] + app + ["--json"]) as? [Any])
        #expect(items.isEmpty, "\(items)")
        #expect((try await cli.json(["accounts", "--json"]) as? [Any])?.isEmpty == true)
        cli.expectNoSecrets(of: [jo])
    }
}

// MARK: - Fixtures

/// A worker with token responses as the identity provider returns them: `client_info` base64url
/// `{"uid","utid"}` and an unsigned JWT `id_token` with the claims MSAL reads. Each worker's access and
/// refresh tokens are distinct strings the tests look for in every output.
struct Worker: Sendable {
    let uid: String
    let username: String
    let name: String

    static let tenant = "c0ffee00-1234-4abc-9def-0123456789ab"
    /// The kiosk policy's authority.
    static let kioskIssuer = "http://127.0.0.1:4593/api/oidc"
    static let kioskClientID = "kiosk-apps"
    static let kioskEnvironment = "127.0.0.1:4593"
    /// The personal policy's authority.
    static let personalIssuer = "https://login.microsoftonline.com/\(tenant)/v2.0"
    static let personalClientID = "4b0db8c2-9f26-4417-8bde-3f0e3656f8e0"

    static let jo = Worker(
        uid: "3f2a9c1b-5d4e-4f60-8a7b-1c2d3e4f5a6b",
        username: "jo.worker@contoso.example",
        name: "Jo Worker"
    )
    static let ada = Worker(
        uid: "5f7c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f",
        username: "ada@contoso.example",
        name: "Ada Worker"
    )
    static let dana = Worker(
        uid: "8b1e2f3a-4c5d-4e6f-9a0b-1c2d3e4f5a6b",
        username: "dana@contoso.example",
        name: "Dana Field"
    )

    var homeAccountID: String { "\(uid).\(Self.tenant)" }
    /// The keychain account attribute of the worker's credentials (`<home_account_id>-<environment>`).
    func cacheAccount(environment: String = kioskEnvironment) -> String {
        "\(homeAccountID)-\(environment)".lowercased()
    }

    var accessToken: String { "AT-SECRET-\(uid.prefix(8))-7d1f0c" }
    var refreshToken: String { "RT-SECRET-\(uid.prefix(8))-a93e42" }

    var clientInfo: String {
        Base64URL.encode(
            try! JSONSerialization.data(withJSONObject: ["uid": uid, "utid": Self.tenant], options: [.sortedKeys])
        )
    }

    func idToken(issuer: String, clientID: String) -> String {
        let claims = [
            "aud": clientID, "iss": issuer, "name": name, "oid": uid, "preferred_username": username,
            "sub": "sub-\(uid.prefix(8))", "tid": Self.tenant, "ver": "2.0",
        ]
        let payload = try! JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        return "eyJhbGciOiJub25lIn0.\(Base64URL.encode(payload)).sig"
    }

    /// The token endpoint's response body.
    func response(issuer: String = kioskIssuer, clientID: String = kioskClientID) -> Data {
        let body: [String: Any] = [
            "access_token": accessToken, "refresh_token": refreshToken,
            "id_token": idToken(issuer: issuer, clientID: clientID),
            "client_info": clientInfo, "scope": "openid profile offline_access User.Read", "token_type": "Bearer",
            "expires_in": 3600, "ext_expires_in": 7200,
        ]
        return try! JSONSerialization.data(withJSONObject: body, options: [.sortedKeys, .prettyPrinted])
    }

    /// The strings no output but a cache export may show.
    func secrets(issuer: String = kioskIssuer, clientID: String = kioskClientID) -> [String] {
        [accessToken, refreshToken, idToken(issuer: issuer, clientID: clientID)]
    }
}

/// A `DevicectlRunner` that keeps every command's output, so a test can check at the end that no output
/// showed a token.
final class Transcript {
    let cli: DevicectlRunner
    private(set) var outputs: [(command: String, text: String)] = []

    init(_ cli: DevicectlRunner) { self.cli = cli }

    @discardableResult
    func run(_ arguments: [String], stdin: String? = nil) async throws -> DevicectlRunner.Result {
        let result = try await cli.run(arguments, stdin: stdin)
        outputs.append((arguments.joined(separator: " "), result.stdout + result.stderr))
        return result
    }

    /// Runs `devicectl ARGS` (with `--json` among them), expects exit 0 and parses standard output.
    func json(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws -> Any {
        try parsedJSON(try await run(arguments), of: arguments, sourceLocation: sourceLocation)
    }

    /// Writes the worker's token response to a file and returns its path.
    func write(
        _ worker: Worker,
        issuer: String = Worker.kioskIssuer,
        clientID: String = Worker.kioskClientID,
        as name: String
    ) throws -> String {
        try cli.writeFile(name, worker.response(issuer: issuer, clientID: clientID))
    }

    /// The items with the worker's account attribute that `app` sees (`keychain list --json`).
    func items(
        of worker: Worker,
        app: String,
        environment: String = Worker.kioskEnvironment,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> [[String: Any]] {
        let all = try #require(
            try await json(["keychain", "list", "--app", app, "--json"], sourceLocation: sourceLocation)
                as? [[String: Any]],
            sourceLocation: sourceLocation
        )
        return all.filter { $0["account"] as? String == worker.cacheAccount(environment: environment) }
    }

    /// Expects that no output so far (except of commands starting with one of `except`) shows a token.
    func expectNoSecrets(
        of workers: [Worker],
        issuer: String = Worker.kioskIssuer,
        clientID: String = Worker.kioskClientID,
        extra: [String] = [],
        except: [String] = [],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let secrets = workers.flatMap { $0.secrets(issuer: issuer, clientID: clientID) } + extra
        let checked = outputs.filter { output in !except.contains { output.command.hasPrefix($0) } }
        #expect(checked.count > 0, sourceLocation: sourceLocation)
        for output in checked {
            for secret in secrets where output.text.contains(secret) {
                Issue.record(
                    "`devicectl \(output.command)` showed a token (\(secret.prefix(12))…)",
                    sourceLocation: sourceLocation
                )
            }
        }
    }

    func cleanUp() { cli.cleanUp() }
}
