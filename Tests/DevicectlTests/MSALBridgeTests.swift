import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// Unmodified MSAL Python apps (PyPI msal 1.39.0 + pymsalruntime 0.20.7, `enable_broker_on_linux=True`) on
/// the shared device: Microsoft's broker protocol on each app user's session bus, answered by the MSAL
/// bridge from the real daemon, against the local identity provider. See `MSALSession` for the sandbox.
@Suite(.serialized, .tags(.integration, .needsRoot, .needsIdentityProvider)) struct MSALBridgeTests {
    typealias Daemon = BrokerDaemon
    typealias Provider = IdentityCLITests.Provider

    /// The MSAL client ids policies/kiosk.json lists for the scanner and the timeclock.
    static let scannerClientID = "6a1b9c3e-5d2f-4e8a-b7c0-2f4d6e8a0b1c",
        timeclockClientID = "c7e2d4f6-8a0b-4c1d-9e3f-5a7b9c1d3e5f"

    /// Signs `user` in through devicectl as `uid` (device code, approved through the provider's API).
    static func signIn(_ daemon: Daemon, as uid: UInt32, user: String) async throws {
        let signIn = try await BrokerSignInTests.approvingDeviceCode(daemon, as: uid, ["signin"], user: user)
        try #require(signIn.status == 0, "\(user)'s sign-in failed: \(signIn.standardError)")
    }

    /// The provider's userinfo for `accessToken` (the token goes on standard input, never on a command line).
    static func userinfo(_ accessToken: String) async throws -> [String: Any] {
        let provider = try await Provider.shared()
        let fetch =
            "import sys, urllib.request; print(urllib.request.urlopen(urllib.request.Request(sys.argv[1], "
            + "headers={'Authorization': 'Bearer ' + sys.stdin.read().strip()})).read().decode())"
        let result = try await Command.run(
            URL(fileURLWithPath: "/usr/bin/python3"),
            ["-c", fetch, provider.issuer + "/userinfo"],
            stdin: accessToken
        )
        try #require(result.status == 0, "userinfo refused the token: \(result.stderr)")
        return try #require(try parseJSON(result.stdout) as? [String: Any])
    }

    /// Waits until `condition` holds (every 100 ms, within `timeout`).
    static func eventually(timeout: TimeInterval = 15, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return try await condition()
    }

    @Test func aStockMSALPythonAppTakesPartInTheShiftChange() async throws {
        let daemon = try await BrokerSignInTests.daemon(logLevel: "debug")
        try await Self.signIn(daemon, as: Daemon.scannerUID, user: "worker1")
        let scanner = try await MSALSession(daemon, uid: Daemon.scannerUID)
        let timeclock = try await MSALSession(daemon, uid: Daemon.timeclockUID)

        // One app process across the shift: sign in, (sign-out), silent with force_refresh, (worker 2), sign in.
        let app = try scanner.startApp(
            clientID: Self.scannerClientID,
            [
                "signin", "wait", "--for", scanner.signalFile("signed-out"), "silent", "--force-refresh",
                "wait", "--for", scanner.signalFile("next-worker"), "signin",
            ]
        )
        defer { _ = app.killIfRunning() }
        try #require(
            await app.waitForLines(atLeast: 1, prefix: "{", timeout: 60),
            "no sign-in: \(app.standardError)\n\(scanner.bridgeLog)"
        )
        let first = try #require(try parseJSON(app.lines[0]) as? [String: Any])
        #expect(first["token_source"] as? String == "broker", "\(first)\n\(app.standardError)")
        #expect(first["username"] as? String == "worker1", "\(first)")
        // The bridge's 290 s rule: MSAL asks again before it uses the token longer.
        #expect((first["expires_in"] as? Int).map { $0 <= 290 && $0 > 200 } == true, "\(first)")
        // The token the provider issued to worker 1 for the device.
        let token = try #require(first["access_token"] as? String)
        #expect(try await Self.userinfo(token)["preferred_username"] as? String == "worker1")

        // A second MSAL app under another uid: single sign-on, no sign-in.
        let other = try await timeclock.runApp(clientID: Self.timeclockClientID, ["signin"])
        #expect(
            other.first?["token_source"] as? String == "broker" && other.first?["username"] as? String == "worker1",
            "\(other)\n\(timeclock.bridgeLog)"
        )
        #expect(try await scanner.keyringItems() > 0, "pymsalruntime cached nothing in the Secret Service")

        // The administrator sees both MSAL clients.
        let status = try await daemon.devicectl(as: 0, ["status", "--json"])
        let broker = try #require(
            (try parseJSON(status.stdout) as? [String: Any])?["broker"] as? [String: Any],
            "\(status.stdout) \(status.stderr)"
        )
        let clients = try #require(broker["msalClients"] as? [[String: Any]])
        #expect(
            Set(clients.compactMap { $0["clientId"] as? String }) == [Self.scannerClientID, Self.timeclockClientID],
            "\(clients)"
        )

        // End of shift: a global sign-out. The bridge clears pymsalruntime's items; the app gets no token.
        let signOut = try await daemon.devicectl(as: Daemon.timeclockUID, ["signout", "--reason", "shift-end"])
        #expect(signOut.status == 0, "\(signOut.stderr)")
        #expect(
            try await Self.eventually { try await scanner.keyringItems() == 0 },
            "the keyring still holds MSAL items: \(scanner.bridgeLog)"
        )
        scanner.signal("signed-out")
        try #require(await app.waitForLines(atLeast: 3, prefix: "{", timeout: 60), "\(app.standardError)")
        let afterSignOut = try #require(try parseJSON(app.lines[2]) as? [String: Any])
        #expect(
            afterSignOut["step"] as? String == "silent" && afterSignOut["access_token"] is NSNull,
            "\(afterSignOut)"
        )

        // Worker 2 signs in (through devicectl, in the other app); the same app process then gets worker 2's token.
        try await Self.signIn(daemon, as: Daemon.timeclockUID, user: "worker2")
        scanner.signal("next-worker")
        #expect(await app.waitForExit(timeout: 60), "\(app.standardError)")
        let last = try #require(try app.lines.last.map { try parseJSON($0) } as? [String: Any])
        #expect(
            last["step"] as? String == "signin" && last["username"] as? String == "worker2"
                && last["token_source"] as? String == "broker",
            "\(last)\n\(app.standardError)\n\(scanner.bridgeLog)"
        )
        let secondToken = try #require(last["access_token"] as? String)
        #expect(try await Self.userinfo(secondToken)["preferred_username"] as? String == "worker2")

        // The bridge logs no token, ID token or code.
        for secret in [token, secondToken] {
            #expect(!scanner.bridgeLog.contains(secret) && !timeclock.bridgeLog.contains(secret))
        }
        await scanner.stop()
        await timeclock.stop()
        await daemon.cleanUp()
    }

    @Test func anUnlistedClientIDAndAUidThePolicyDoesNotListGetNothing() async throws {
        let daemon = try await BrokerSignInTests.daemon(logLevel: "debug")
        try await Self.signIn(daemon, as: Daemon.scannerUID, user: "worker1")
        let scanner = try await MSALSession(daemon, uid: Daemon.scannerUID)
        let stranger = try await MSALSession(daemon, uid: Daemon.strangerUID)

        // The scanner's user runs an MSAL app whose client id the policy does not list for it (the timeclock's).
        let unlisted = try await scanner.runApp(clientID: Self.timeclockClientID, ["signin"])
        let refused = try #require(unlisted.first)
        #expect(refused["access_token"] is NSNull && refused["error"] as? String == "broker_error", "\(refused)")
        #expect((refused["error_description"] as? String)?.contains("msalClientIds") == true, "\(refused)")
        let denials = try await daemon.auditEvents().filter {
            $0["type"] as? String == "keychain.access_denied"
                && ($0["details"] as? [String: String])?["msalClientId"] == Self.timeclockClientID
        }
        #expect(!denials.isEmpty, "no audited refusal of the unlisted client id")
        #expect(denials.first?["actor"] as? String == Daemon.scanner)

        // A user the policy does not list: its bridge gets no account and no token while worker 1 is signed in.
        let nothing = try await stranger.runApp(clientID: Self.scannerClientID, ["signin"])
        let strangers = try #require(nothing.first)
        #expect(strangers["access_token"] is NSNull && strangers["username"] is NSNull, "\(strangers)")
        #expect(
            (strangers["error_description"] as? String)?.contains("not an app in the device policy") == true,
            "\(strangers)"
        )
        #expect(!stranger.bridgeLog.isEmpty, "the stranger's bridge never ran")
        #expect(
            try await stranger.callBroker("getAccounts", #"{"clientId":"\#(Self.scannerClientID)","redirectUri":"x"}"#)
                == #"{"accounts":[]}"#
        )
        await scanner.stop()
        await stranger.stop()
        await daemon.cleanUp()
    }

    /// The Flatpak scanner's own policy entry (the scanner's uid), with an MSAL client id of its own.
    static let flatpakScanner = "com.contoso.kiosk.scanner.flatpak",
        flatpakScannerClientID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"

    /// BrokerSignInTests.daemon's kiosk policy with the Flatpak app com.contoso.Scanner of the scanner's uid
    /// as an entry of its own (`flatpakScanner`), sharing `com.microsoft.adalcache` (where the worker's
    /// refresh token is kept) as the kiosk's apps do.
    static func daemonWithAFlatpakScanner() async throws -> Daemon {
        let provider = try await Provider.shared()
        let scratch = DevicectlRunner()
        defer { scratch.cleanUp() }
        let kiosk = try Provider.kioskPolicy(issuer: provider.issuer, in: scratch)
        var policy = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: kiosk))) as? [String: Any]
        )
        policy["apps"] =
            (policy["apps"] as? [[String: Any]] ?? []) + [
                [
                    "id": flatpakScanner, "flatpak": "com.contoso.Scanner", "uid": Daemon.scannerUID,
                    "accessGroups": [flatpakScanner, "com.microsoft.adalcache"],
                    "msalClientIds": [flatpakScannerClientID],
                ]
            ]
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "broker-policy-flatpak-\(UUID().uuidString).json"
        )
        try JSONSerialization.data(withJSONObject: policy).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let daemon = try await Daemon(policy: file.path)
        try await daemon.start(["--log-level", "debug"])
        return daemon
    }

    /// The bridge calls deviced as its own user, which deviced takes for that user's host app; an MSAL app in
    /// a Flatpak sandbox of the same user is handed to deviced by its pidfd (ActForCaller) and served as its
    /// own policy entry: its own msalClientIds decide, its refusals name it, and a Flatpak app the policy
    /// does not list gets nothing.
    @Test func aCallerInAFlatpakSandboxIsServedThroughTheBridgeAsItsOwnPolicyEntry() async throws {
        let daemon = try await Self.daemonWithAFlatpakScanner()
        try await Self.signIn(daemon, as: Daemon.scannerUID, user: "worker1")
        let scanner = try await MSALSession(daemon, uid: Daemon.scannerUID)
        func accounts(_ clientID: String) -> String { #"{"clientId":"\#(clientID)","redirectUri":"x"}"# }
        func silent(_ clientID: String) -> String {
            #"{"authParameters":{"clientId":"\#(clientID)","requestedScopes":["User.Read"],"account":null}}"#
        }
        func error(_ reply: String) -> [String: Any]? {
            ((try? parseJSON(reply)) as? [String: Any])?["brokerTokenResponse"].flatMap { $0 as? [String: Any] }?[
                "error"
            ] as? [String: Any]
        }

        // The host app (the scanner's uid outside a sandbox) through the bridge's own connections, as before.
        let host = try parseJSON(try await scanner.callBroker("getAccounts", accounts(Self.scannerClientID)))
        #expect(
            ((host as? [String: Any])?["accounts"] as? [Any])?.count == 1,
            "the host app's bridge lost the worker: \(host)"
        )
        #expect(
            try await scanner.callBroker("getAccounts", accounts(Self.flatpakScannerClientID)) == #"{"accounts":[]}"#,
            "the host app was served with the Flatpak entry's client id"
        )

        // The Flatpak scanner: its entry's client id is served (the worker, a token) ...
        let listed = try await scanner.callBrokerFromSandbox(
            appID: "com.contoso.Scanner",
            "getAccounts",
            accounts(Self.flatpakScannerClientID)
        )
        let listedAccounts = (try parseJSON(listed) as? [String: Any])?["accounts"] as? [[String: Any]]
        #expect(
            listedAccounts?.count == 1 && listedAccounts?.first?["username"] as? String == "worker1",
            "\(listed)\n\(scanner.bridgeLog)"
        )
        let token = try await scanner.callBrokerFromSandbox(
            appID: "com.contoso.Scanner",
            "acquireTokenSilently",
            silent(Self.flatpakScannerClientID)
        )
        let response = (try parseJSON(token) as? [String: Any])?["brokerTokenResponse"] as? [String: Any]
        #expect(response?["accessToken"] is String && response?["idToken"] is String, "\(token)")
        // ... and the host app's is not: the Flatpak entry's msalClientIds decide, and the refusal names it.
        let refused = error(
            try await scanner.callBrokerFromSandbox(
                appID: "com.contoso.Scanner",
                "acquireTokenSilently",
                silent(Self.scannerClientID)
            )
        )
        #expect(
            (refused?["context"] as? String)?.contains("app \(Self.flatpakScanner)'s msalClientIds") == true,
            "\(String(describing: refused))"
        )
        let denials = try await daemon.auditEvents().filter {
            $0["type"] as? String == "keychain.access_denied"
                && ($0["details"] as? [String: String])?["msalClientId"] == Self.scannerClientID
        }
        #expect(denials.first?["actor"] as? String == Self.flatpakScanner, "\(denials)")
        let details = denials.first?["details"] as? [String: String]
        #expect(
            details?["flatpakAppId"] == "com.contoso.Scanner" && details?["handedOverByPid"] != nil,
            "\(denials)"
        )

        // A Flatpak app the policy does not list is no app at all: not the host app.
        let stranger = error(
            try await scanner.callBrokerFromSandbox(
                appID: "com.contoso.Unlisted",
                "acquireTokenSilently",
                silent(Self.scannerClientID)
            )
        )
        #expect(
            (stranger?["context"] as? String)?.contains("Flatpak app com.contoso.Unlisted of uid") == true,
            "\(String(describing: stranger))"
        )
        #expect(
            try await scanner.callBrokerFromSandbox(
                appID: "com.contoso.Unlisted",
                "getAccounts",
                accounts(Self.scannerClientID)
            ) == #"{"accounts":[]}"#
        )
        await scanner.stop()
        await daemon.cleanUp()
    }

    /// A real Flatpak app (Tests/Flatpak/fixture.bash's scanner, a D-Bus client run with `flatpak run`)
    /// reaches the bridge through the xdg-dbus-proxy flatpak starts for it, only with
    /// `--talk-name=com.microsoft.identity.broker1`; the bridge identifies it as xdg-desktop-portal does
    /// (the bus's pid of the caller is the proxy's, whose root holds the app's `/.flatpak-info`), and deviced
    /// serves it as the Flatpak entry: the worker and a token for that entry's client id, none for the host
    /// app's.
    @Test func aRealFlatpakAppReachesTheBridgeThroughFlatpaksDBusProxy() async throws {
        try await FlatpakAppTests.ensureFixture()
        let daemon = try await Self.daemonWithAFlatpakScanner()
        try await Self.signIn(daemon, as: Daemon.scannerUID, user: "worker1")
        let scanner = try await MSALSession(daemon, uid: Daemon.scannerUID)
        let accounts = #"{"clientId":"\#(Self.flatpakScannerClientID)","redirectUri":"x"}"#

        // Without --talk-name the proxy keeps the broker's name from the app.
        let filtered = try await scanner.callBrokerFromFlatpak(
            app: "com.contoso.Scanner",
            talk: false,
            "getAccounts",
            accounts
        )
        #expect(filtered.status != 0, "the proxy let an app without --talk-name call the broker: \(filtered.reply)")

        let listed = try await scanner.callBrokerFromFlatpak(app: "com.contoso.Scanner", "getAccounts", accounts)
        try #require(listed.status == 0, "\(listed.reply)\n\(scanner.bridgeLog)")
        let listedAccounts = (try parseJSON(listed.reply) as? [String: Any])?["accounts"] as? [[String: Any]]
        #expect(
            listedAccounts?.count == 1 && listedAccounts?.first?["username"] as? String == "worker1",
            "\(listed.reply)\n\(scanner.bridgeLog)"
        )
        let silent =
            #"{"authParameters":{"clientId":"\#(Self.flatpakScannerClientID)","requestedScopes":["User.Read"],"account":null}}"#
        let token = try await scanner.callBrokerFromFlatpak(app: "com.contoso.Scanner", "acquireTokenSilently", silent)
        let response = (try parseJSON(token.reply) as? [String: Any])?["brokerTokenResponse"] as? [String: Any]
        #expect(response?["accessToken"] is String, "\(token.reply)")
        // The host app's client id is not the Flatpak entry's: the app was not taken for its uid's host app.
        let hostClient = #"{"clientId":"\#(Self.scannerClientID)","redirectUri":"x"}"#
        let asHost = try await scanner.callBrokerFromFlatpak(app: "com.contoso.Scanner", "getAccounts", hostClient)
        #expect(asHost.reply == #"{"accounts":[]}"#, "\(asHost.reply)")
        // The timeclock, a Flatpak app the policy does not list here, is no app at all.
        let stranger = try await scanner.callBrokerFromFlatpak(app: "com.contoso.Timeclock", "getAccounts", hostClient)
        #expect(stranger.reply == #"{"accounts":[]}"#, "\(stranger.reply)")
        await scanner.stop()
        await daemon.cleanUp()
    }

    @Test func theRestOfTheProtocolAnswersInJSONAndBadRequestsGetAReadableError() async throws {
        let daemon = try await BrokerSignInTests.daemon(logLevel: "debug")
        try await Self.signIn(daemon, as: Daemon.scannerUID, user: "worker1")
        let scanner = try await MSALSession(daemon, uid: Daemon.scannerUID)
        func error(_ reply: String) throws -> [String: Any] {
            let object = try #require(try parseJSON(reply) as? [String: Any], "\(reply)")
            return try #require(
                (object["brokerTokenResponse"] as? [String: Any])?["error"] as? [String: Any],
                "\(reply)"
            )
        }
        let version = try await scanner.callBroker("getLinuxBrokerVersion", #"{"msalCppVersion":"1.0"}"#)
        #expect((try parseJSON(version) as? [String: Any])?["linuxBrokerVersion"] as? String == "1.0.0", "\(version)")
        // The app forgets the account itself; the device's worker stays signed in.
        #expect(try await scanner.callBroker("removeAccount", #"{"clientId":"\#(Self.scannerClientID)"}"#) == "{}")
        #expect(try await scanner.callBroker("cancelInteractiveFlow", "{}") == "{}")
        for method in ["generateSignedHttpRequest", "acquirePrtSsoCookie", "noSuchMethod"] {
            let refused = try error(try await scanner.callBroker(method, "{}"))
            #expect(
                refused["status"] as? Int == 13 && refused["errorCode"] as? Int == 0 && refused["tag"] as? Int == 0,
                "\(method): \(refused)"
            )
        }
        for request in ["not json", "[]", #"{"authParameters":{"requestedScopes":["User.Read"]}}"#] {
            let refused = try error(try await scanner.callBroker("acquireTokenSilently", request))
            #expect(
                refused["status"] as? Int == 13
                    && (refused["context"] as? String)?.contains("cannot read the request") == true,
                "\(refused)"
            )
        }
        // Still serving, and the worker is still signed in: the account MSAL would list, with GUID-shaped ids.
        let accounts = try #require(
            (try parseJSON(try await scanner.callBroker("getAccounts", #"{"clientId":"\#(Self.scannerClientID)"}"#))
                as? [String: Any])?["accounts"] as? [[String: Any]]
        )
        #expect(accounts.count == 1 && accounts.first?["username"] as? String == "worker1", "\(accounts)")
        let home = try #require(accounts.first?["homeAccountId"] as? String).split(separator: ".")
        #expect(home.count == 2 && home.allSatisfy { UUID(uuidString: String($0)) != nil }, "\(home)")
        // A silent call straight over D-Bus: a token that lives at most 290 s, and an ID token with preferred_username.
        let token = try #require(
            (try parseJSON(
                try await scanner.callBroker(
                    "acquireTokenSilently",
                    #"{"authParameters":{"clientId":"\#(Self.scannerClientID)","requestedScopes":["User.Read"],"account":null}}"#
                )
            ) as? [String: Any])?["brokerTokenResponse"] as? [String: Any]
        )
        let expiresOn = try #require(token["expiresOn"] as? Int)
        #expect(Double(expiresOn) / 1000 <= Date().timeIntervalSince1970 + 291, "\(expiresOn)")
        #expect(token["accessToken"] is String && token["idToken"] is String && token["clientInfo"] is String)
        #expect(!scanner.bridgeLog.contains(try #require(token["accessToken"] as? String)))
        // After a global sign-out every token call is status 2 (interaction required) and nobody is listed.
        let signOut = try await daemon.devicectl(as: Daemon.scannerUID, ["signout"])
        #expect(signOut.status == 0, "\(signOut.stderr)")
        let afterSignOut = try error(
            try await scanner.callBroker(
                "acquireTokenSilently",
                #"{"authParameters":{"clientId":"\#(Self.scannerClientID)","requestedScopes":["User.Read"],"account":null}}"#
            )
        )
        #expect(
            afterSignOut["status"] as? Int == 2
                && (afterSignOut["context"] as? String)?.contains("no account is signed in") == true,
            "\(afterSignOut)"
        )
        #expect(
            try await scanner.callBroker("getAccounts", #"{"clientId":"\#(Self.scannerClientID)"}"#)
                == #"{"accounts":[]}"#
        )
        await scanner.stop()
        await daemon.cleanUp()
    }

    @Test func anMSALAppSignsTheFirstWorkerInByDeviceCodeAndTheAuditNamesItsClientID() async throws {
        let daemon = try await BrokerSignInTests.daemon(logLevel: "debug")
        let scanner = try await MSALSession(daemon, uid: Daemon.scannerUID)
        let lock = try await IdentityCLITests.ProviderLock.acquire(timeout: 120)
        // Nobody is signed in: the app's acquire_token_interactive reaches the bridge, which runs the device's
        // device-code sign-in and shows the code (a desktop notification, and the session's log).
        let app = try scanner.startApp(clientID: Self.scannerClientID, ["signin", "--interactive-timeout", "0"])
        defer { _ = app.killIfRunning() }
        var code: String?
        _ = try await Self.eventually(timeout: 60) {
            code = IdentityCLITests.Device.userCode(in: scanner.bridgeLog)
            return code != nil || app.hasExited
        }
        let shown = try #require(code, "the bridge showed no code: \(app.standardError)\n\(scanner.bridgeLog)")
        let approval = try await Provider.tool([
            "approve", "--port", "\(IdentityCLITests.port)", "--code", shown, "--user", "worker1",
        ])
        lock.release()
        #expect(approval.status == 0, "\(approval.stderr)")
        #expect(await app.waitForExit(timeout: 60), "\(app.standardError)")
        let result = try #require(try app.lines.first.map { try parseJSON($0) } as? [String: Any])
        #expect(
            result["token_source"] as? String == "broker" && result["username"] as? String == "worker1",
            "\(result)\n\(scanner.bridgeLog)"
        )
        let signIns = try await daemon.auditEvents().filter { $0["type"] as? String == "account.signed_in" }
        #expect(signIns.count == 1)
        #expect((signIns.first?["details"] as? [String: String])?["msalClientId"] == Self.scannerClientID, "\(signIns)")
        #expect(signIns.first?["actor"] as? String == Daemon.scanner)
        await scanner.stop()
        await daemon.cleanUp()
    }

    @Test func aSignInNobodyFinishesEndsWithUserCanceledBeforeMSALGivesUpAndCachesNothing() async throws {
        let daemon = try await BrokerSignInTests.daemon(logLevel: "debug")
        // The bridge's deadline, shortened from 240 s (MSALRuntime gives up on a call after 300 s).
        let scanner = try await MSALSession(
            daemon,
            uid: Daemon.scannerUID,
            bridgeArguments: ["--interactive-timeout", "10"]
        )
        let started = Date()
        let results = try await scanner.runApp(
            clientID: Self.scannerClientID,
            ["signin", "--interactive-timeout", "0"]
        )
        let result = try #require(results.first)
        #expect(
            IdentityCLITests.Device.userCode(in: scanner.bridgeLog) != nil,
            "no code was shown: \(scanner.bridgeLog)"
        )
        #expect(result["access_token"] is NSNull && result["error"] as? String == "broker_error", "\(result)")
        #expect((result["error_description"] as? String)?.contains("UserCanceled") == true, "\(result)")
        #expect(Date().timeIntervalSince(started) < 60)
        // The broker stopped the sign-in: nobody is signed in, nothing was audited as a sign-in.
        #expect(await BrokerSignInTests.waitUntilStopped(daemon, method: "SignInWithDeviceCode"), "\(daemon.logTail())")
        let signIns = try await daemon.auditEvents().filter { $0["type"] as? String == "account.signed_in" }
        #expect(signIns.isEmpty)
        let account = try await daemon.devicectl(as: Daemon.scannerUID, ["account", "--json"])
        #expect(
            (try parseJSON(account.stdout) as? [String: Any])?["current"] is NSNull,
            "\(account.stdout) \(account.stderr)"
        )
        await scanner.stop()
        await daemon.cleanUp()
    }
}
