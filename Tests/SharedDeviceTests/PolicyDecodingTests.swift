import Foundation
import KeychainStore
import ProcessSandbox
import SharedDevice
import Testing

/// Strict decoding of device policies: every problem names its JSON path.
struct PolicyDecodingTests {
    static let policiesDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("policies")

    static func kiosk() throws -> [String: Any] {
        let data = try Data(contentsOf: policiesDirectory.appendingPathComponent("kiosk.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// The decoding error for the kiosk policy after `edit`.
    static func error(after edit: (inout [String: Any]) -> Void) throws -> PolicyError? {
        var document = try kiosk()
        edit(&document)
        do {
            _ = try DevicePolicy.decode(try JSONSerialization.data(withJSONObject: document))
            return nil
        } catch {
            return error as? PolicyError
        }
    }

    @Test func shippedKioskPolicyDecodesAsSharedWithTwoAppsSharingTheMSALGroup() throws {
        let policy = try DevicePolicy.load(contentsOf: Self.policiesDirectory.appendingPathComponent("kiosk.json"))
        #expect(policy.device.mode == .shared)
        #expect(policy.apps.map(\.id) == ["com.contoso.kiosk.scanner", "com.contoso.kiosk.timeclock"])
        // Each app's own group first (its items' default), the shared MSAL group second.
        #expect(policy.apps.allSatisfy { $0.accessGroups == [$0.id, "com.microsoft.adalcache"] })
        #expect(policy.app("com.contoso.kiosk.timeclock")?.uid == 1002)
        #expect(policy.session.idleSignOutSeconds == 900)
        #expect(policy.audit.checkpointInterval == 100)
        #expect(policy.authority.scopes.contains("offline_access"))
    }

    @Test func anAppWhoseFirstGroupAnotherAppListsIsReportedWithItsOwnGroupToListFirst() throws {
        #expect(
            try DevicePolicy.load(contentsOf: Self.policiesDirectory.appendingPathComponent("kiosk.json"))
                .sharedDefaultGroups.isEmpty
        )
        var document = try Self.kiosk()
        var apps = document["apps"] as! [[String: Any]]
        apps[0]["accessGroups"] = ["com.microsoft.adalcache", "com.contoso.kiosk.scanner"]
        apps[1]["accessGroups"] = ["com.microsoft.adalcache"]
        document["apps"] = apps
        let policy = try DevicePolicy.decode(try JSONSerialization.data(withJSONObject: document))
        #expect(
            policy.sharedDefaultGroups == [
                DevicePolicy.SharedDefaultGroup(
                    appID: "com.contoso.kiosk.scanner",
                    group: "com.microsoft.adalcache",
                    sharedWith: ["com.contoso.kiosk.timeclock"],
                    privateGroup: "com.contoso.kiosk.scanner"
                ),
                DevicePolicy.SharedDefaultGroup(
                    appID: "com.contoso.kiosk.timeclock",
                    group: "com.microsoft.adalcache",
                    sharedWith: ["com.contoso.kiosk.scanner"],
                    privateGroup: nil
                ),
            ]
        )
    }

    @Test(arguments: [
        ("{\n  \"version\": 1,\n  \"apps\": [1, 2,,]\n}", "a syntax error at line 3, column 17"),
        ("{\n  \"version\": 1\n  \"device\": {}\n}", "a syntax error at line 3, column 3"),
        ("{\n  \"device\": {\"name\": \"Café kiosk\" \"mode\": \"shared\"}\n}", "a syntax error at line 2, column 35"),
        ("{\n  \"version\": 1,\n  \"apps\": [\n", "the document ends at line 4, column 1"),
    ])
    func aDocumentThatIsNotJSONNamesTheLineAndColumnOfItsFirstSyntaxError(text: String, expected: String) throws {
        do {
            _ = try DevicePolicy.decode(Data(text.utf8))
            Issue.record("decoded: \(text)")
        } catch {
            #expect(error.path == "(document)" && error.problem.hasPrefix("not valid JSON: \(expected)"), "\(error)")
        }
    }

    @Test func shippedPersonalPolicyDecodesAsPrivateWithDefaults() throws {
        let policy = try DevicePolicy.load(contentsOf: Self.policiesDirectory.appendingPathComponent("personal.json"))
        #expect(policy.device.mode == .private)
        #expect(policy.session.idleSignOutSeconds == 0)
        #expect(policy.audit.checkpointInterval == 100)
    }

    @Test func unknownKeysAreRejectedWithTheirPath() throws {
        #expect(try Self.error { $0["colour"] = "blue" }?.path == "colour")
        let nested = try Self.error { document in
            var apps = document["apps"] as! [[String: Any]]
            apps[1]["entitlements"] = ["x"]
            document["apps"] = apps
        }
        #expect(nested?.path == "apps[1].entitlements")
        #expect(nested?.problem.contains("unknown key") == true)
        #expect(nested?.problem.contains("accessGroups") == true)
    }

    @Test func wrongTypesNameThePathAndTheExpectedType() throws {
        let uid = try Self.error { document in
            var apps = document["apps"] as! [[String: Any]]
            apps[0]["uid"] = "1001"
            document["apps"] = apps
        }
        #expect(uid == PolicyError(path: "apps[0].uid", problem: "expected an integer, found a string"))
        let mode = try Self.error { $0["device"] = ["name": "k", "mode": true] }
        #expect(mode == PolicyError(path: "device.mode", problem: "expected a string, found a boolean"))
        let fraction = try Self.error { $0["audit"] = ["checkpointInterval": 2.5] }
        #expect(fraction?.path == "audit.checkpointInterval")
        #expect(try Self.error { $0["apps"] = [:] as [String: Any] }?.problem == "expected an array, found an object")
    }

    /// The broker tells apps apart by uid: each app names its Unix user (`uid` or `user`), one per app, never root.
    @Test func eachAppHasAUnixUserOfItsOwnByUidOrName() throws {
        func apps(_ edit: @escaping (inout [[String: Any]]) -> Void) -> (inout [String: Any]) -> Void {
            { document in
                var apps = document["apps"] as! [[String: Any]]
                edit(&apps)
                document["apps"] = apps
            }
        }
        var document = try Self.kiosk()
        apps {
            $0[0]["uid"] = nil
            $0[0]["user"] = "nobody"
        }(&document)
        document["administratorsGroup"] = "kiosk-admins"
        let policy = try DevicePolicy.decode(try JSONSerialization.data(withJSONObject: document))
        #expect(policy.apps[0].uid == 65534 && policy.apps[0].user == "nobody")
        #expect(policy.app(uid: 65534)?.id == "com.contoso.kiosk.scanner")
        #expect(policy.app(uid: 1002)?.id == "com.contoso.kiosk.timeclock")
        #expect(policy.app(uid: 4242) == nil)
        #expect(policy.administratorsGroup == "kiosk-admins")

        #expect(try Self.error(after: apps { $0[1]["uid"] = 1001 })?.path == "apps[1].uid")
        #expect(
            try Self.error(after: apps { $0[1]["uid"] = 1001 })?.problem.contains("one uid is one host app") == true
        )
        #expect(try Self.error(after: apps { $0[0]["uid"] = 0 })?.path == "apps[0].uid")
        #expect(
            try Self.error(
                after: apps {
                    $0[0]["uid"] = nil
                    $0[0]["user"] = "root"
                }
            )?.path == "apps[0].user"
        )
        #expect(
            try Self.error(
                after: apps {
                    $0[0]["uid"] = nil
                    $0[0]["user"] = "no-such-user-4f2a"
                }
            )?.problem
                .contains("no user \"no-such-user-4f2a\"") == true
        )
        // 1001 is not nobody's uid
        #expect(try Self.error(after: apps { $0[0]["user"] = "nobody" })?.path == "apps[0].uid")
        #expect(
            try Self.error(after: apps { $0[0]["uid"] = nil })?.problem.contains("missing key \"uid\" (or \"user\")")
                == true
        )
        #expect(try Self.error(after: apps { $0[0]["user"] = "Bad User!" })?.path == "apps[0].user")
        #expect(try Self.error(after: { $0["administratorsGroup"] = "bad group!" })?.path == "administratorsGroup")
    }

    @Test func duplicateAppIdsAreRejected() throws {
        let error = try Self.error { document in
            var apps = document["apps"] as! [[String: Any]]
            apps[1]["id"] = apps[0]["id"]
            document["apps"] = apps
        }
        #expect(error?.path == "apps[1].id")
        #expect(error?.problem.contains("duplicate app id") == true)
    }

    @Test(arguments: [
        ("", "empty access group"), ("bad group", "malformed access group"), (".lead", "malformed access group"),
        ("devicectl.device", "reserved for the device"),
    ])
    func emptyMalformedOrReservedAccessGroupsAreRejected(group: String, problem: String) throws {
        let error = try Self.error { document in
            var apps = document["apps"] as! [[String: Any]]
            apps[1]["accessGroups"] = ["com.microsoft.adalcache", group]
            document["apps"] = apps
        }
        #expect(error?.path == "apps[1].accessGroups[1]")
        #expect(error?.problem.contains(problem) == true)
    }

    @Test func appsNeedAtLeastOneAccessGroupAndNoRepeats() throws {
        let empty = try Self.error { document in
            var apps = document["apps"] as! [[String: Any]]
            apps[0]["accessGroups"] = [String]()
            document["apps"] = apps
        }
        #expect(empty?.path == "apps[0].accessGroups")
        let repeated = try Self.error { document in
            var apps = document["apps"] as! [[String: Any]]
            apps[0]["accessGroups"] = ["a.b", "a.b"]
            document["apps"] = apps
        }
        #expect(repeated?.path == "apps[0].accessGroups[1]")
    }

    @Test func anAppListsTheMSALClientIdsItMayUse() throws {
        var document = try Self.kiosk()
        var apps = document["apps"] as! [[String: Any]]
        apps[0]["msalClientIds"] = ["04b07795-8ddb-461a-bbee-02f9e1bf7b46", "kiosk-apps"]
        apps[1]["msalClientIds"] = nil
        document["apps"] = apps
        let policy = try DevicePolicy.decode(try JSONSerialization.data(withJSONObject: document))
        #expect(policy.apps[0].msalClientIds == ["04b07795-8ddb-461a-bbee-02f9e1bf7b46", "kiosk-apps"])
        // Absent: the app may use no MSAL client id through the bridge.
        #expect(policy.apps[1].msalClientIds == nil)

        let cases: [(Any, String, String)] = [
            ("kiosk-apps", "apps[0].msalClientIds", "expected an array"),
            (["kiosk-apps", "kiosk-apps"], "apps[0].msalClientIds[1]", "listed twice"),
            (["kiosk apps"], "apps[0].msalClientIds[0]", "malformed client id"),
            ([""], "apps[0].msalClientIds[0]", "non-empty"),
            ([7], "apps[0].msalClientIds[0]", "expected a string"),
            (Array(repeating: "x", count: 65), "apps[0].msalClientIds", "at most 64"),
        ]
        for (value, path, problem) in cases {
            let error = try Self.error { document in
                var apps = document["apps"] as! [[String: Any]]
                apps[0]["msalClientIds"] = value
                document["apps"] = apps
            }
            #expect(error?.path == path, "\(value)")
            #expect(error?.problem.contains(problem) == true, "\(value): \(String(describing: error?.problem))")
        }
    }

    @Test func theSignInFlowsDefaultToDeviceCodeAndBrowserAndThePasswordFlowIsOptIn() throws {
        let kiosk = try DevicePolicy.decode(try JSONSerialization.data(withJSONObject: try Self.kiosk()))
        #expect(kiosk.authority.flows == [.deviceCode, .browser])
        #expect(kiosk.limits.passwordFailuresBeforeBackoff == 3 && kiosk.limits.passwordBackoffSeconds == 30)
        var document = try Self.kiosk()
        var authority = document["authority"] as! [String: Any]
        authority["flows"] = ["password", "deviceCode"]
        authority["clientSecret"] = "s3cret-of-the-client"
        document["authority"] = authority
        document["limits"] = ["passwordFailuresBeforeBackoff": 5, "passwordBackoffSeconds": 60]
        let policy = try DevicePolicy.decode(try JSONSerialization.data(withJSONObject: document))
        #expect(
            policy.authority.flows == [.password, .deviceCode]
                && policy.authority.clientSecret == "s3cret-of-the-client"
        )
        #expect(policy.limits.passwordFailuresBeforeBackoff == 5 && policy.limits.passwordBackoffSeconds == 60)
        // `devicectl policy validate --json` prints the decoded policy: never the client secret.
        let encoded = String(decoding: try JSONEncoder().encode(policy), as: UTF8.self)
        #expect(!encoded.contains("s3cret-of-the-client") && encoded.contains("\"flows\""), "\(encoded)")

        let cases: [(String, Any, String, String)] = [
            ("flows", [], "authority.flows", "at least one sign-in flow"),
            ("flows", ["password", "sms"], "authority.flows[1]", "unknown sign-in flow \"sms\""),
            ("flows", ["browser", "browser"], "authority.flows[1]", "listed twice"),
            ("flows", "password", "authority.flows", "expected an array"),
            ("clientSecret", "", "authority.clientSecret", "1 to 512 printable characters"),
            ("clientSecret", "line\nbreak-secret", "authority.clientSecret", "1 to 512 printable characters"),
        ]
        for (key, value, path, problem) in cases {
            let error = try Self.error { document in
                var authority = document["authority"] as! [String: Any]
                authority[key] = value
                document["authority"] = authority
            }
            #expect(error?.path == path, "\(value)")
            #expect(error?.problem.contains(problem) == true, "\(value): \(String(describing: error?.problem))")
            #expect(error?.problem.contains("break-secret") != true, "the error repeats the secret")
        }
        for (key, value) in [("passwordFailuresBeforeBackoff", 0), ("passwordBackoffSeconds", 3601)] {
            let error = try Self.error { $0["limits"] = [key: value] }
            #expect(error?.path == "limits.\(key)", "\(key)")
        }
    }

    @Test func unknownModeSaysWhatIsExpected() throws {
        let error = try Self.error { $0["device"] = ["name": "k", "mode": "kiosk"] }
        #expect(
            error
                == PolicyError(
                    path: "device.mode",
                    problem: "unknown mode \"kiosk\"; expected \"shared\" or \"private\""
                )
        )
    }

    @Test func missingRequiredKeysUnsupportedVersionAndInsecureIssuerAreRejected() throws {
        #expect(try Self.error { $0.removeValue(forKey: "authority") }?.path == "authority")
        #expect(try Self.error { $0["version"] = 2 }?.path == "version")
        #expect(
            try Self.error { $0["authority"] = ["issuer": "http://idp.example.com", "clientId": "c"] }?.path
                == "authority.issuer"
        )
        #expect(
            try Self.error { $0["session"] = ["idleSignOutSeconds": 60, "warningSeconds": 60] }?.path
                == "session.warningSeconds"
        )
        #expect(
            try Self.error { $0["session"] = ["idleSignOutSeconds": 29, "warningSeconds": 10] }?.path
                == "session.idleSignOutSeconds"
        )
        #expect(try Self.error { $0["session"] = ["idleSignOutSeconds": 30, "warningSeconds": 10] } == nil)
        #expect(try Self.error { $0["session"] = ["idleSignOutSeconds": 0] } == nil)
    }

    @Test func aB2CIssuerMustBeAmongTheKnownAuthorities() throws {
        let b2c = "https://fabrikamb2c.b2clogin.com/tfp/fabrikamb2c.onmicrosoft.com/B2C_1_SUSI"
        let unknown = try Self.error { $0["authority"] = ["issuer": b2c, "clientId": "c"] }
        #expect(unknown?.path == "authority.issuer")
        #expect(unknown?.description.contains("known authorit") == true)
        #expect(
            try Self.error {
                $0["authority"] = [
                    "issuer": b2c, "clientId": "c", "knownAuthorities": ["https://fabrikamb2c.b2clogin.com"],
                ]
            } == nil
        )
    }

    @Test func limitsHaveDefaultsAndEachKeyIsCheckedWithItsPath() throws {
        let defaults = try DevicePolicy.load(contentsOf: Self.policiesDirectory.appendingPathComponent("kiosk.json"))
            .limits
        #expect(defaults == .defaults)
        #expect(
            defaults.connectionsPerApp == 16 && defaults.connectionsPerOtherUser == 2
                && defaults.administratorConnections == 16
        )
        #expect(defaults.pendingSignInsPerApp == 2 && defaults.itemsPerApp == 1000 && defaults.bytesPerApp == 8 << 20)

        var document = try Self.kiosk()
        document["limits"] = ["connectionsPerApp": 4, "bytesPerApp": 65536]
        let set = try DevicePolicy.decode(try JSONSerialization.data(withJSONObject: document)).limits
        #expect(set.connectionsPerApp == 4 && set.bytesPerApp == 65536)
        #expect(set.connectionsPerOtherUser == 2 && set.itemsPerApp == 1000, "keys not given keep their defaults")

        let unknown = try #require(try Self.error { $0["limits"] = ["connectionsPerUser": 4] })
        #expect(unknown.path == "limits.connectionsPerUser" && unknown.problem.contains("unknown key"))
        let tooSmall = try #require(try Self.error { $0["limits"] = ["bytesPerApp": 100] })
        #expect(tooSmall.path == "limits.bytesPerApp" && tooSmall.problem.contains("from 4096"))
        let zero = try #require(try Self.error { $0["limits"] = ["connectionsPerApp": 0] })
        #expect(zero.path == "limits.connectionsPerApp")
        let wrongType = try #require(try Self.error { $0["limits"] = ["pendingSignInsPerApp": "2"] })
        #expect(wrongType.path == "limits.pendingSignInsPerApp" && wrongType.problem.contains("expected an integer"))
    }

    @Test func keyProtectionNamesASealingAndItsPCRsEachCheckedWithItsPath() throws {
        #expect(
            try DevicePolicy.load(contentsOf: Self.policiesDirectory.appendingPathComponent("kiosk.json")).keyProtection
                == nil
        )
        var document = try Self.kiosk()
        document["keyProtection"] = ["seal": "tpm2", "tpm2Pcrs": [16, 7]]
        let tpm = try DevicePolicy.decode(try JSONSerialization.data(withJSONObject: document)).keyProtection
        #expect(
            tpm?.sealing == KeySealing(binding: .tpm2, pcrs: [7, 16]) && tpm?.sealing.description == "tpm2 (PCRs 7+16)"
        )
        document["keyProtection"] = ["seal": "tpm2+host"]
        #expect(
            try DevicePolicy.decode(try JSONSerialization.data(withJSONObject: document)).keyProtection?.sealing
                == KeySealing(binding: .tpm2Host, pcrs: [7]),
            "a TPM2 binding without tpm2Pcrs is bound to PCR 7"
        )
        document["keyProtection"] = ["seal": "host"]
        #expect(
            try DevicePolicy.decode(try JSONSerialization.data(withJSONObject: document)).keyProtection?.sealing
                == KeySealing(binding: .host)
        )

        let unknown = try #require(try Self.error { $0["keyProtection"] = ["seal": "tpm3"] })
        #expect(
            unknown.path == "keyProtection.seal" && unknown.problem.contains("\"tpm2\", \"host\" or \"tpm2+host\""),
            "\(unknown)"
        )
        let hostPCRs = try #require(try Self.error { $0["keyProtection"] = ["seal": "host", "tpm2Pcrs": [7]] })
        #expect(
            hostPCRs.path == "keyProtection.tpm2Pcrs" && hostPCRs.problem.contains("PCRs bind a TPM2"),
            "\(hostPCRs)"
        )
        let empty = try #require(try Self.error { $0["keyProtection"] = ["seal": "tpm2", "tpm2Pcrs": [Int]()] })
        #expect(empty.path == "keyProtection.tpm2Pcrs" && empty.problem.contains("never unseal"), "\(empty)")
        let outOfRange = try #require(try Self.error { $0["keyProtection"] = ["seal": "tpm2", "tpm2Pcrs": [7, 24]] })
        #expect(outOfRange.path == "keyProtection.tpm2Pcrs[1]", "\(outOfRange)")
        let twice = try #require(try Self.error { $0["keyProtection"] = ["seal": "tpm2", "tpm2Pcrs": [7, 7]] })
        #expect(twice.path == "keyProtection.tpm2Pcrs[1]" && twice.problem.contains("listed twice"), "\(twice)")
        let missing = try #require(try Self.error { $0["keyProtection"] = ["tpm2Pcrs": [7]] })
        #expect(missing.path == "keyProtection.seal" && missing.problem.contains("missing"), "\(missing)")
        let stray = try #require(try Self.error { $0["keyProtection"] = ["seal": "tpm2", "pcrs": [7]] })
        #expect(stray.path == "keyProtection.pcrs" && stray.problem.contains("unknown key"), "\(stray)")
    }

    @Test func malformedJSONIsAnErrorOnTheDocument() {
        #expect(throws: PolicyError.self) { try DevicePolicy.decode(Data("{\"version\": 1,".utf8)) }
    }

    /// One uid is one host app plus its Flatpak apps: a desktop user's sandboxed apps are told apart by the
    /// app id their sandbox carries, and a process outside any sandbox is the uid's host app only.
    @Test func aUidHasOneHostAppAndFlatpakAppsEachFoundOnlyByItsOwnSandbox() throws {
        let policy = try DevicePolicy.load(
            contentsOf: Self.policiesDirectory.appendingPathComponent("kiosk-desktop.json")
        )
        let scanner = PeerSandbox.flatpak(FlatpakApp(appID: "com.contoso.Scanner", instanceID: "123"))
        let timeclock = PeerSandbox.flatpak(FlatpakApp(appID: "com.contoso.Timeclock"))
        #expect(policy.app(uid: 1000, sandbox: scanner)?.id == "com.contoso.kiosk.scanner")
        #expect(policy.app(uid: 1000, sandbox: timeclock)?.id == "com.contoso.kiosk.timeclock")
        #expect(policy.app(uid: 1000, sandbox: .host)?.id == "com.contoso.kiosk.launcher")
        // Where the kernel cannot pin a process, every process of the uid is its host app, as before.
        #expect(policy.app(uid: 1000, sandbox: .unpinned)?.id == "com.contoso.kiosk.launcher")
        #expect(policy.app(uid: 1000, sandbox: .unidentified(reason: "gone")) == nil)
        #expect(policy.app(uid: 1000, sandbox: .flatpak(FlatpakApp(appID: "com.contoso.Other"))) == nil)
        // The same sandboxed app run by another user is not this user's app.
        #expect(policy.app(uid: 1001, sandbox: scanner) == nil)
        #expect(policy.appCount(uid: 1000) == 3 && policy.hasFlatpakApps)
        #expect(policy.apps[0].flatpak == "com.contoso.Scanner")

        func flatpakError(_ edit: @escaping (inout [[String: Any]]) -> Void) throws -> PolicyError? {
            try Self.error { document in
                var apps = document["apps"] as! [[String: Any]]
                apps[0]["flatpak"] = "com.contoso.Scanner"
                apps[1]["flatpak"] = "com.contoso.Timeclock"
                apps[1]["uid"] = apps[0]["uid"]
                edit(&apps)
                document["apps"] = apps
            }
        }
        #expect(try flatpakError { _ in } == nil)
        // Each Flatpak app once per uid; the same id under another uid is another app.
        let duplicate = try flatpakError { $0[1]["flatpak"] = "com.contoso.Scanner" }
        #expect(duplicate?.path == "apps[1].flatpak")
        #expect(duplicate?.problem.contains("also apps[0]") == true)
        #expect(
            try flatpakError {
                $0[1]["flatpak"] = "com.contoso.Scanner"
                $0[1]["uid"] = 1002
            } == nil
        )
        // At most one host entry per uid.
        let twoHosts = try flatpakError {
            $0[0]["flatpak"] = nil
            $0[1]["flatpak"] = nil
        }
        #expect(twoHosts?.path == "apps[1].uid")
        for malformed in [
            "Scanner", "com.contoso", "com..contoso.Scanner", "com.contoso.9Scanner", "com.contoso-x.Scanner",
            "com.contoso.Scan ner", "com.contoso.Scanner.", String(repeating: "a.", count: 128) + "b", "",
        ] {
            let error = try flatpakError { $0[0]["flatpak"] = malformed }
            #expect(error?.path == "apps[0].flatpak", "\(malformed)")
            #expect(error?.problem.contains("malformed Flatpak app id") == true, "\(malformed)")
        }
        #expect(try flatpakError { $0[0]["flatpak"] = 7 }?.path == "apps[0].flatpak")
        // Dashes in the last element are Flatpak's too.
        #expect(try flatpakError { $0[0]["flatpak"] = "com.contoso.scanner-beta" } == nil)
    }
}
