import Foundation
import SharedDevice
import Testing

/// The login screen's policy keys under `session`, decoded as strictly as the rest.
struct SessionPolicyTests {
    /// policies/kiosk.json with `keys` merged into its `session`.
    static func decode(_ keys: [String: Any]) throws -> DevicePolicy {
        var document = try PolicyDecodingTests.kiosk()
        var session = document["session"] as? [String: Any] ?? [:]
        session.merge(keys) { _, new in new }
        document["session"] = session
        return try DevicePolicy.decode(try JSONSerialization.data(withJSONObject: document))
    }

    static func error(_ keys: [String: Any]) -> PolicyError? {
        do {
            _ = try decode(keys)
            return nil
        } catch {
            return error as? PolicyError
        }
    }

    @Test func withoutTheKeysTheLoginScreenIsOffAndTheDefaultsHold() throws {
        let session = try Self.decode([:]).session
        #expect(session.user == nil)
        #expect(session.userUID == nil)
        #expect(session.app == nil)
        #expect(session.onSignOut == .terminate)
        #expect(session.workerSignedIn == .switch)
        #expect(session.resetHome == false)
        #expect(session.openGraceSeconds == 60)
        #expect(session.terminateGraceSeconds == 5)
    }

    @Test func everyKeyIsRead() throws {
        let policy = try Self.decode([
            "user": "nobody", "app": "com.contoso.kiosk.timeclock", "onSignOut": "lock", "workerSignedIn": "refuse",
            "resetHome": true, "openGraceSeconds": 5, "terminateGraceSeconds": 300,
        ])
        #expect(policy.session.user == "nobody")
        #expect(policy.session.userUID == UserDatabase.uid(ofUser: "nobody"))
        #expect(policy.loginScreenApp?.id == "com.contoso.kiosk.timeclock")
        #expect(policy.session.onSignOut == .lock)
        #expect(policy.session.workerSignedIn == .refuse)
        #expect(policy.session.resetHome)
        #expect(policy.session.openGraceSeconds == 5)
        #expect(policy.session.terminateGraceSeconds == 300)
        #expect(try Self.decode(["onSignOut": "none"]).session.onSignOut == DevicePolicy.SessionEndAction.none)
        // Without session.app, the first app.
        #expect(try Self.decode(["user": "nobody"]).loginScreenApp?.id == "com.contoso.kiosk.scanner")
    }

    @Test func badValuesNameTheKeyAndWhatToDo() throws {
        let cases: [([String: Any], String, String)] = [
            (["user": "root"], "session.user", "is root"),
            (["user": "no-such-kiosk-user-4f2a"], "session.user", "useradd"),
            (["user": "Bad User!"], "session.user", "malformed user name"),
            (["user": 1000], "session.user", "expected a string"),
            (["app": "com.contoso.nowhere"], "session.app", "name one of: com.contoso.kiosk.scanner"),
            (["onSignOut": "reboot"], "session.onSignOut", "expected one of \"terminate\", \"lock\", \"none\""),
            (["workerSignedIn": "queue"], "session.workerSignedIn", "expected one of \"switch\", \"refuse\""),
            (["resetHome": "yes"], "session.resetHome", "expected true or false"),
            (["openGraceSeconds": 4], "session.openGraceSeconds", "from 5 to 3600"),
            (["openGraceSeconds": 3601], "session.openGraceSeconds", "from 5 to 3600"),
            (["terminateGraceSeconds": 0], "session.terminateGraceSeconds", "from 1 to 300"),
            (["terminateGraceSeconds": 2.5], "session.terminateGraceSeconds", "from 1 to 300"),
            (["kioskUser": "nobody"], "session.kioskUser", "unknown key"),
        ]
        for (keys, path, problem) in cases {
            let error = try #require(Self.error(keys), "\(keys) decoded")
            #expect(error.path == path, "\(keys): \(error)")
            #expect(error.problem.contains(problem), "\(keys): \(error.problem)")
        }
    }

    @Test func theSessionUserMayNotBeAnAppsUser() throws {
        var document = try PolicyDecodingTests.kiosk()
        var apps = document["apps"] as! [[String: Any]]
        apps[1]["uid"] = Int(try #require(UserDatabase.uid(ofUser: "nobody")))
        document["apps"] = apps
        document["session"] = ["user": "nobody"]
        do {
            _ = try DevicePolicy.decode(try JSONSerialization.data(withJSONObject: document))
            Issue.record("an app's user was taken for the kiosk's sessions")
        } catch let error as PolicyError {
            #expect(error.path == "session.user")
            #expect(error.problem.contains("com.contoso.kiosk.timeclock"))
        }
    }

    @Test func theShippedLoginScreenExampleDecodesWhereItsUserExists() throws {
        let data = try Data(
            contentsOf: PolicyDecodingTests.policiesDirectory.appendingPathComponent("kiosk-login.json")
        )
        guard UserDatabase.uid(ofUser: "kiosk") != nil else {
            // Without the kiosk's local account the policy names the key and the fix.
            #expect(throws: PolicyError.self) { try DevicePolicy.decode(data) }
            let document = String(decoding: data, as: UTF8.self).replacingOccurrences(
                of: "\"user\": \"kiosk\"",
                with: "\"user\": \"nobody\""
            )
            let policy = try DevicePolicy.decode(Data(document.utf8))
            #expect(policy.session.user == "nobody")
            #expect(policy.authority.flows.contains(.password))
            return
        }
        #expect(try DevicePolicy.decode(data).session.user == "kiosk")
    }
}
