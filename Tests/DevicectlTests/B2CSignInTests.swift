import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// Azure AD B2C against the real local provider: the user flows are glewlwyd OIDC plugin instances reached
/// at B2C-shaped paths (`/tfp/{tenant}/{policy}/`) through tools/idp's path-rewriting nginx proxy, as
/// policies/kiosk-b2c.json names them (issuer: the sign-up-or-sign-in flow; known authorities: both flows).
@Suite(.serialized, .tags(.integration, .needsRoot, .needsIdentityProvider)) struct B2CSignInTests {
    typealias Daemon = BrokerDaemon
    typealias Provider = IdentityCLITests.Provider

    /// A daemon on policies/kiosk-b2c.json with the test provider's B2C authorities.
    static func daemon() async throws -> (Daemon, Provider) {
        let provider = try await Provider.shared()
        let susi = try #require(provider.b2cSignUpOrSignIn, "tools/idp printed no B2C_SUSI authority")
        let edit = try #require(provider.b2cEditProfile, "tools/idp printed no B2C_EDIT_PROFILE authority")
        var policy = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: DevicectlRunner.policy("kiosk-b2c.json")))
            )
                as? [String: Any]
        )
        var authority = try #require(policy["authority"] as? [String: Any])
        authority["issuer"] = susi
        authority["knownAuthorities"] = [susi, edit]
        policy["authority"] = authority
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("b2c-policy-\(UUID().uuidString).json")
        try JSONSerialization.data(withJSONObject: policy).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let daemon = try await Daemon(policy: file.path)
        try await daemon.start(["--log-level", "debug"])
        return (daemon, provider)
    }

    @Test func aWorkerSignsInThroughTheSignUpOrSignInUserFlowBehindTheB2CPathsAndTheOtherAppGetsSingleSignOn()
        async throws
    {
        let (daemon, provider) = try await Self.daemon()
        let susi = try #require(provider.b2cSignUpOrSignIn)
        let signIn = try await BrokerSignInTests.approvingDeviceCode(
            daemon,
            as: Daemon.scannerUID,
            ["signin"],
            user: "worker1",
            plugin: "b2c-susi"
        )
        #expect(signIn.status == 0, "\(signIn.standardError)\n\(daemon.logTail())")
        let result = try #require(try parseJSON(signIn.standardOutput) as? [String: Any], "\(signIn.standardOutput)")
        let account = try #require(result["account"] as? [String: Any])
        // The B2C authority's environment (the proxy's host and port) and its tenant as the realm.
        #expect(
            account["environment"] as? String
                == URL(string: susi)?.host.map { "\($0):\(URL(string: susi)?.port ?? 0)" },
            "\(account)"
        )
        #expect(account["realm"] as? String == "contoso.onmicrosoft.com", "\(account)")
        #expect(account["username"] as? String == "worker1")
        let token = try await daemon.devicectl(as: Daemon.timeclockUID, ["token", "--scopes", "Files.Read", "--json"])
        let silent = try? parseJSON(token.stdout) as? [String: Any]
        #expect(token.status == 0 && silent?["source"] as? String == "cache", "\(token.stdout) \(token.stderr)")
        // The user flow's own token: the userinfo of the sign-up-or-sign-in plugin names the worker.
        let userinfo = try await daemon.devicectl(
            as: Daemon.timeclockUID,
            ["call", "--scopes", "User.Read", "userinfo"]
        )
        #expect(
            userinfo.stdout.hasPrefix("HTTP 200") && userinfo.stdout.contains("worker1"),
            "\(userinfo.stdout) \(userinfo.stderr)"
        )
        await daemon.cleanUp()
    }

    /// The B2C tutorial's two user flows on a shared device: the worker signs in through sign-up-or-sign-in,
    /// then makes an interactive call with the edit-profile authority; each flow's tokens are its own (its
    /// issuer's), cached under the flow's account (`<oid>-<policy>.<tenant>`) and found again silently per
    /// authority; the two accounts are one worker (another worker through edit profile is refused); an
    /// authority the policy does not list is refused; the global sign-out removes both.
    @Test func theSignUpOrSignInAndEditProfileFlowsAreOneWorkerWithTokensPerFlowAndOneSignOutRemovesBoth() async throws
    {
        let (daemon, provider) = try await Self.daemon()
        let edit = try #require(provider.b2cEditProfile)
        let scanner = Daemon.scannerUID
        let timeclock = Daemon.timeclockUID

        let first = try await BrokerSignInTests.approvingDeviceCode(
            daemon,
            as: scanner,
            ["signin"],
            user: "worker1",
            plugin: "b2c-susi"
        )
        #expect(first.status == 0, "\(first.standardError)\n\(daemon.logTail())")
        let susiAccount = try #require(try Self.account(of: first.standardOutput))
        let oid = try #require(susiAccount["localAccountId"] as? String)
        #expect(
            UUID(uuidString: oid) != nil,
            "the B2C account's local id is the user's object id (oid): \(susiAccount)"
        )
        let susiHome = "\(oid)-b2c_1_susi.contoso.onmicrosoft.com"
        let editHome = "\(oid)-b2c_1_edit_profile.contoso.onmicrosoft.com"
        #expect(susiAccount["homeAccountId"] as? String == susiHome, "\(susiAccount)")

        // The interactive call with the edit-profile authority: the same worker, an account of its own.
        let second = try await BrokerSignInTests.approvingDeviceCode(
            daemon,
            as: scanner,
            ["signin", "--authority", edit],
            user: "worker1",
            plugin: "b2c-edit"
        )
        #expect(second.status == 0, "\(second.standardError)\n\(daemon.logTail())")
        let editAccount = try #require(try Self.account(of: second.standardOutput))
        #expect(editAccount["homeAccountId"] as? String == editHome, "\(editAccount)")
        #expect(editAccount["username"] as? String == "worker1")

        // The device's worker is still the sign-up-or-sign-in account; the app holds one account per flow.
        let current = try await daemon.devicectl(as: timeclock, ["account", "--json"])
        let pair = try #require(try parseJSON(current.stdout) as? [String: Any], "\(current.stdout) \(current.stderr)")
        #expect((pair["current"] as? [String: Any])?["homeAccountId"] as? String == susiHome, "\(pair)")
        let all = try await daemon.devicectl(as: timeclock, ["account", "--all", "--json"])
        let homes =
            (try? parseJSON(all.stdout) as? [[String: Any]])?.compactMap { $0["homeAccountId"] as? String } ?? []
        #expect(Set(homes) == [susiHome, editHome] && homes.count == 2, "\(all.stdout) \(all.stderr)")
        let byPolicy = try await daemon.devicectl(
            as: timeclock,
            ["account", "--policy", "B2C_1_edit_profile", "--json"]
        )
        #expect(
            (try? parseJSON(byPolicy.stdout) as? [[String: Any]])?.map { $0["homeAccountId"] as? String } == [editHome],
            "\(byPolicy.stdout) \(byPolicy.stderr)"
        )

        // Silently, per authority, from the cache (the other app too: single sign-on): each flow's own token.
        let susiToken = try await Self.silentToken(daemon, as: timeclock, authority: nil)
        let editToken = try await Self.silentToken(daemon, as: timeclock, authority: edit)
        #expect(
            susiToken?.source == "cache" && editToken?.source == "cache",
            "\(String(describing: susiToken)) \(String(describing: editToken))"
        )
        #expect(susiToken?.home == susiHome && editToken?.home == editHome)
        #expect(susiToken?.issuer?.hasSuffix("/b2c-susi") == true, "\(String(describing: susiToken?.issuer))")
        #expect(editToken?.issuer?.hasSuffix("/b2c-edit") == true, "\(String(describing: editToken?.issuer))")
        // Refreshed at the edit-profile flow and cached under its account again.
        let refreshed = try await daemon.forcedRefresh(
            as: scanner,
            ["token", "--scopes", "User.Read", "--authority", edit, "--force-refresh", "--json"]
        )
        #expect(
            refreshed.status == 0
                && (try? parseJSON(refreshed.stdout) as? [String: Any])?["source"] as? String == "refresh",
            "\(refreshed.stdout) \(refreshed.stderr)"
        )
        let userinfo = try await daemon.devicectl(
            as: timeclock,
            ["call", "--scopes", "User.Read", "--authority", edit, "userinfo"]
        )
        #expect(
            userinfo.stdout.hasPrefix("HTTP 200") && userinfo.stdout.contains("worker1"),
            "\(userinfo.stdout) \(userinfo.stderr)"
        )

        // An authority the policy does not list: refused before anything reaches it (exit 78, naming the list).
        let unlisted = try await daemon.devicectl(
            as: timeclock,
            [
                "token", "--scopes", "User.Read", "--authority",
                edit.replacingOccurrences(of: "B2C_1_edit_profile", with: "B2C_1_reset"),
            ]
        )
        #expect(
            unlisted.status == 78 && unlisted.stderr.contains("knownAuthorities"),
            "\(unlisted.status) \(unlisted.stderr)"
        )

        // Another worker through the edit-profile flow is another worker: refused, nothing of theirs cached.
        let intruder = try await BrokerSignInTests.approvingDeviceCode(
            daemon,
            as: timeclock,
            ["signin", "--authority", edit],
            user: "worker2",
            plugin: "b2c-edit"
        )
        #expect(intruder.status == 48, "\(intruder.status) \(intruder.standardError)")
        let afterIntruder = try await daemon.devicectl(as: timeclock, ["account", "--all", "--json"])
        #expect((try? parseJSON(afterIntruder.stdout) as? [[String: Any]])?.count == 2, "\(afterIntruder.stdout)")

        // One global sign-out removes both flows' accounts and tokens.
        let signOut = try await daemon.devicectl(as: scanner, ["signout", "--json"])
        #expect(signOut.status == 0, "\(signOut.stderr)")
        let gone = try await daemon.devicectl(as: timeclock, ["token", "--scopes", "User.Read", "--authority", edit])
        #expect(gone.status == 49, "\(gone.status) \(gone.stderr)")
        // The same worker back through sign-up-or-sign-in: the edit-profile flow's tokens did not survive.
        let again = try await BrokerSignInTests.approvingDeviceCode(
            daemon,
            as: scanner,
            ["signin"],
            user: "worker1",
            plugin: "b2c-susi"
        )
        #expect(again.status == 0, "\(again.standardError)")
        let stale = try await daemon.devicectl(as: timeclock, ["token", "--scopes", "User.Read", "--authority", edit])
        #expect(
            stale.status == 50 && stale.stderr.contains("B2C_1_edit_profile".lowercased()),
            "\(stale.status) \(stale.stderr)"
        )
        await daemon.cleanUp()
    }

    /// The `account` of a `--json` sign-in's output.
    static func account(of output: String) throws -> [String: Any]? {
        (try parseJSON(output) as? [String: Any])?["account"] as? [String: Any]
    }

    /// A silent token as `uid` (at `authority`, else the policy's issuer): its source, account and the
    /// access token's issuer (the user flow's plugin that issued it).
    static func silentToken(
        _ daemon: Daemon,
        as uid: UInt32,
        authority: String?
    ) async throws -> (source: String?, home: String?, issuer: String?)? {
        let result = try await daemon.devicectl(
            as: uid,
            ["token", "--scopes", "User.Read", "--print-secret", "--json"]
                + (authority.map { ["--authority", $0] } ?? [])
        )
        guard result.status == 0, let json = try? parseJSON(result.stdout) as? [String: Any] else {
            Issue.record("token failed: \(result.status) \(result.stderr)")
            return nil
        }
        let token = json["accessToken"] as? String ?? ""
        let parts = token.split(separator: ".")
        var payload = parts.count == 3 ? String(parts[1]) : ""
        payload = payload.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        payload += String(repeating: "=", count: (4 - payload.count % 4) % 4)
        let claims = Data(base64Encoded: payload).flatMap {
            try? JSONSerialization.jsonObject(with: $0) as? [String: Any]
        }
        return (
            json["source"] as? String, (json["account"] as? [String: Any])?["homeAccountId"] as? String,
            claims?["iss"] as? String
        )
    }
}
