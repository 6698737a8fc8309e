import DeviceBroker
import Foundation
import KeychainStore
import SharedDevice
import StoreTestSupport
import Synchronization
import Testing
import Varlink

/// The broker's service logic without a socket: a call decoded from the contract, dispatched to its typed
/// handler for the caller the kernel named, answered with the contract's reply or error. (The daemon
/// around it is tested through its socket in DevicectlTests.)
@Suite struct BrokerDispatchTests {
    static let scannerUID: UInt32 = 1001, strangerUID: UInt32 = 1003

    /// A broker on a fresh store provisioned from policies/kiosk.json.
    final class Fixture: Sendable {
        let directory = TemporaryStateDirectory("broker-dispatch")
        let broker: Broker

        init() throws {
            var options = StoreOptions(synchronous: .normal)
            options.clock = FakeClock().function
            let store = try KeychainStore(directory: directory.url, options: options)
            let device = ManagedDevice(store: store)
            let policy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
                .appendingPathComponent("policies/kiosk.json")
            _ = try device.provision(policyDocument: try Data(contentsOf: policy), actor: "test")
            broker = Broker(device: device)
        }

        /// The replies to `member` with `parameters` from `uid`; with `atOnce`, as the daemon's server asks: the
        /// broker's answer at once first, `handle` when there is none.
        func call(
            _ member: String,
            _ parameters: [String: VarlinkValue] = [:],
            as uid: UInt32,
            more: Bool = false,
            atOnce: Bool = false
        ) async -> [VarlinkReply] {
            let replies = Mutex<[VarlinkReply]>([])
            if atOnce, let answered = await answerAtOnce(member, parameters, as: uid) { return answered }
            await broker.handle(
                VarlinkCall(method: "org.sharedmode.Broker1.\(member)", parameters: parameters, more: more),
                caller: BrokerCaller(uid: uid, gid: uid, pid: 1, connectionID: 1)
            ) { reply in
                replies.withLock { $0.append(reply) }
                return true
            }
            return replies.withLock { $0 }
        }

        /// Signs a worker in through the scanner's app (`signInResponse`, straight to the store); returns the policy.
        @discardableResult
        func signWorkerIn() throws -> DevicePolicy {
            let device = broker.device
            let policy = try #require(try device.record()?.policy())
            let scanner = try #require(try device.appIdentity(policy.apps[0].id, actor: "test"))
            try AccountManager(device: device).signIn(
                try BrokerDispatchTests.signInResponse(),
                context: TokenRequestContext(authority: policy.authority),
                app: scanner
            )
            return policy
        }

        /// The broker's reply to `member` from `uid` at once, or nil when it did not answer at once.
        func answerAtOnce(
            _ member: String,
            _ parameters: [String: VarlinkValue] = [:],
            as uid: UInt32
        ) async -> [VarlinkReply]? {
            broker.replyAtOnce(
                to: VarlinkCall(method: "org.sharedmode.Broker1.\(member)", parameters: parameters),
                caller: BrokerCaller(uid: uid, gid: uid, pid: 1, connectionID: 1)
            ).map { [$0] }
        }
    }

    @Test func anAppsKeychainCallsAreAnsweredWithTheContractsReplies() async throws {
        let fixture = try Fixture()
        let secret = Data("s3cret".utf8).base64EncodedString()
        let added = await fixture.call(
            "AddGenericPassword",
            ["service": .string("svc"), "account": .string("acct"), "secret": .string(secret)],
            as: Self.scannerUID
        )
        #expect(added.count == 1 && added[0].error == nil, "\(added)")
        let found = await fixture.call("FindGenericPassword", ["service": .string("svc")], as: Self.scannerUID)
        #expect(found.first?.parameters["item"]?.object?["secret"]?.string == secret, "\(found)")
        let missing = await fixture.call("FindGenericPassword", ["service": .string("other")], as: Self.scannerUID)
        #expect(
            missing.first?.error == "org.sharedmode.Broker1.KeychainError"
                && missing.first?.parameters["status"]?.int == -25300,
            "\(missing)"
        )
    }

    /// The policy file with the scanner's uid changed to `uid`.
    static func kioskPolicy(scannerUID uid: Int? = nil) throws -> Data {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("policies/kiosk.json")
        guard let uid else { return try Data(contentsOf: url) }
        var policy = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        var apps = try #require(policy["apps"] as? [[String: Any]])
        apps[0]["uid"] = uid
        policy["apps"] = apps
        return try JSONSerialization.data(withJSONObject: policy)
    }

    /// A token response for a worker of the policy's authority (built locally: no identity provider).
    static func signInResponse() throws -> TokenResponse {
        func part(_ object: [String: Any]) throws -> String {
            try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let idToken =
            try part(["alg": "none"]) + "."
            + part([
                "iss": "http://127.0.0.1:4593/api/oidc", "sub": "worker", "oid": "worker", "tid": "contoso",
                "aud": "kiosk-apps", "preferred_username": "worker@contoso.com", "name": "Worker",
            ]) + ".sig"
        let body: [String: Any] = [
            "access_token": "at-dispatch", "refresh_token": "rt-dispatch", "id_token": idToken,
            "client_info": try part(["uid": "worker", "utid": "contoso"]),
            "scope": "openid profile offline_access User.Read",
            "token_type": "Bearer", "expires_in": 86_400,
        ]
        return try TokenResponse.decode(JSONSerialization.data(withJSONObject: body))
    }

    @Test(arguments: [false, true])
    func theBrokersAnswersFollowWhatAnotherProcessCommitsBetweenCalls(atOnce: Bool) async throws {
        let fixture = try Fixture()
        let policy = try fixture.signWorkerIn()
        let silent: [String: VarlinkValue] = ["scopes": .array([.string("User.Read")])]
        let first = await fixture.call("AcquireTokenSilent", silent, as: Self.scannerUID, atOnce: atOnce)
        #expect(first.first?.parameters["result"]?.object?["accessToken"]?.string == "at-dispatch", "\(first)")
        // Another process (a connection of its own to the same store) commits something unrelated: still served.
        let other = ManagedDevice(store: try KeychainStore(directory: fixture.directory.url))
        _ = try other.store.add(
            NewItem(service: "unrelated", account: "a", secret: Data("x".utf8)),
            as: try #require(try other.appIdentity(policy.apps[1].id, actor: "test"))
        )
        let again = await fixture.call("AcquireTokenSilent", silent, as: Self.scannerUID, atOnce: atOnce)
        #expect(again.first?.parameters["result"]?.object?["accessToken"]?.string == "at-dispatch", "\(again)")
        let current = await fixture.call("GetCurrentAccount", as: Self.scannerUID, atOnce: atOnce)
        #expect(current.first?.parameters["current"]?.object?["username"]?.string == "worker@contoso.com", "\(current)")
        // It provisions a policy that gives the scanner's app another uid, the worker still signed in: the old uid's
        // next call is refused at once, though the broker answered it a moment ago from the policy it knew (a silent
        // token first here, the current account first after the next provisioning: each call the first after one).
        _ = try other.provision(policyDocument: try Self.kioskPolicy(scannerUID: 1005), actor: "test")
        let refusedToken = await fixture.call("AcquireTokenSilent", silent, as: Self.scannerUID, atOnce: atOnce)
        #expect(refusedToken.first?.error == "org.sharedmode.Broker1.CallerNotInPolicy", "\(refusedToken)")
        let moved = await fixture.call("AcquireTokenSilent", silent, as: 1005, atOnce: atOnce)
        #expect(moved.first?.parameters["result"]?.object?["accessToken"]?.string == "at-dispatch", "\(moved)")
        _ = try other.provision(policyDocument: try Self.kioskPolicy(scannerUID: 1006), actor: "test")
        let refused = await fixture.call("GetCurrentAccount", as: 1005, atOnce: atOnce)
        #expect(refused.first?.error == "org.sharedmode.Broker1.CallerNotInPolicy", "\(refused)")
        // It signs the worker out (root's sign-out, straight to the store): the broker's next answers say so.
        try AccountManager(device: other).signOut(app: nil, reason: .admin)
        let signedOut = await fixture.call("GetCurrentAccount", as: 1006, atOnce: atOnce)
        #expect(signedOut.first?.error == nil && signedOut.first?.parameters["current"]?.object == nil, "\(signedOut)")
        #expect(signedOut.first?.parameters["previous"]?.object?["username"]?.string == "worker@contoso.com")
        let noToken = await fixture.call("AcquireTokenSilent", silent, as: 1006, atOnce: atOnce)
        #expect(noToken.first?.error == "org.sharedmode.Broker1.AccountError", "\(noToken)")
        #expect(noToken.first?.parameters["code"]?.string == "noCurrentAccount", "\(noToken)")
    }

    @Test func onlyAnswersFromTheCacheThatNeedNoWriteComeAtOnce() async throws {
        let fixture = try Fixture()
        try fixture.signWorkerIn()
        let silent: [String: VarlinkValue] = ["scopes": .array([.string("User.Read")])]
        // Nothing read yet (no policy, no engine): nothing at once; the app's first call goes the whole way.
        #expect(await fixture.answerAtOnce("AcquireTokenSilent", silent, as: Self.scannerUID) == nil)
        _ = await fixture.call("AcquireTokenSilent", silent, as: Self.scannerUID)
        // Then a cached token and the current account come at once, as the contract's replies.
        let token = await fixture.answerAtOnce("AcquireTokenSilent", silent, as: Self.scannerUID)
        #expect(token?.first?.parameters["result"]?.object?["accessToken"]?.string == "at-dispatch", "\(token ?? [])")
        let current = await fixture.answerAtOnce("GetCurrentAccount", as: Self.scannerUID)
        #expect(current?.first?.parameters["current"]?.object?["username"]?.string == "worker@contoso.com")
        // Never a refresh, a scope the cache does not hold (a refresh), an MSAL client id (audited when refused),
        // a write, or a caller the policy does not list (refused and audited).
        var forced = silent
        forced["forceRefresh"] = .bool(true)
        #expect(await fixture.answerAtOnce("AcquireTokenSilent", forced, as: Self.scannerUID) == nil)
        let other: [String: VarlinkValue] = ["scopes": .array([.string("Files.Read")])]
        #expect(await fixture.answerAtOnce("AcquireTokenSilent", other, as: Self.scannerUID) == nil)
        var msal = silent
        msal["msalClientId"] = .string("kiosk-apps")
        #expect(await fixture.answerAtOnce("AcquireTokenSilent", msal, as: Self.scannerUID) == nil)
        let add: [String: VarlinkValue] = [
            "service": .string("svc"), "account": .string("a"), "secret": .string(Data("s".utf8).base64EncodedString()),
        ]
        #expect(await fixture.answerAtOnce("AddGenericPassword", add, as: Self.scannerUID) == nil)
        #expect(await fixture.answerAtOnce("GetCurrentAccount", as: Self.strangerUID) == nil)
        // The timeclock never saw the worker: its first current account records them as its previous account (a
        // write), so it goes the whole way, and the next comes at once.
        let timeclockUID: UInt32 = 1002
        _ = await fixture.call("GetDeviceInformation", as: timeclockUID)
        _ = await fixture.call("AcquireTokenSilent", silent, as: timeclockUID)  // its engine is made
        #expect(await fixture.answerAtOnce("GetCurrentAccount", as: timeclockUID) == nil)
        let first = await fixture.call("GetCurrentAccount", as: timeclockUID)
        #expect(first.first?.parameters["current"]?.object?["username"]?.string == "worker@contoso.com", "\(first)")
        let next = await fixture.answerAtOnce("GetCurrentAccount", as: timeclockUID)
        #expect(next?.first?.parameters["previous"]?.object?["username"]?.string == "worker@contoso.com")
        #expect(await fixture.answerAtOnce("AcquireTokenSilent", silent, as: Self.strangerUID) == nil)
        // The device's information comes at once to anyone (as `handle` answers it: any caller may ask).
        let information = await fixture.answerAtOnce("GetDeviceInformation", as: Self.strangerUID)
        let mode = information?.first?.parameters["information"]?.object?["mode"]?.string
        #expect(mode == "shared", "\(information ?? [])")
        #expect(information == (await fixture.call("GetDeviceInformation", as: Self.strangerUID)))
    }

    @Test func aUidThePolicyDoesNotListIsRefusedByName() async throws {
        let fixture = try Fixture()
        let replies = await fixture.call("GetCurrentAccount", as: Self.strangerUID)
        #expect(replies.first?.error == "org.sharedmode.Broker1.CallerNotInPolicy", "\(replies)")
        #expect(replies.first?.parameters["uid"]?.int == Int64(Self.strangerUID))
    }

    @Test func aMistypedOrMissingParameterIsNamedAndAnUnknownMethodIsNotFound() async throws {
        let fixture = try Fixture()
        let mistyped = await fixture.call("AcquireTokenSilent", ["scopes": .int(1)], as: Self.scannerUID)
        #expect(
            mistyped.first?.error == "org.varlink.service.InvalidParameter"
                && mistyped.first?.parameters["parameter"]?.string == "scopes",
            "\(mistyped)"
        )
        let missing = await fixture.call("AddGenericPassword", ["service": .string("svc")], as: Self.scannerUID)
        #expect(
            missing.first?.error == "org.varlink.service.InvalidParameter"
                && missing.first?.parameters["parameter"]?.string == "account",
            "\(missing)"
        )
        let unknown = await fixture.call("SellTheDevice", as: Self.scannerUID)
        #expect(unknown.first?.error == "org.varlink.service.MethodNotFound", "\(unknown)")
    }

    @Test func aValueAnEnumDoesNotDeclareIsRefusedNamingTheParameter() async throws {
        let fixture = try Fixture()
        let replies = await fixture.call(
            "SwitchWorker",
            ["scopes": .array([]), "flow": .string("telepathy")],
            as: Self.scannerUID,
            more: true
        )
        #expect(replies == [.invalidParameter("flow")], "\(replies)")
        // The browser's prompt is a closed set too (SignInPrompt): OpenID Connect's four, nothing else.
        let prompted = await fixture.call(
            "SignInWithBrowser",
            ["scopes": .array([]), "redirectUri": .string("http://127.0.0.1/"), "prompt": .string("always")],
            as: Self.scannerUID,
            more: true
        )
        #expect(prompted == [.invalidParameter("prompt")], "\(prompted)")
    }

    @Test func aMethodThatStreamsCalledWithoutMoreIsRefusedBeforeItTakesASignInSlot() async throws {
        let fixture = try Fixture()
        let calls: [(String, [String: VarlinkValue])] = [
            ("SignInWithDeviceCode", ["scopes": .array([])]),
            ("SignInWithBrowser", ["scopes": .array([]), "redirectUri": .string("http://127.0.0.1/")]),
            ("SwitchWorker", ["scopes": .array([])]),
            ("SubscribeAccountChanges", [:]),
        ]
        // More calls than the kiosk policy's pendingSignInsPerApp: each is refused alike, none holds a slot.
        for _ in 0..<3 {
            for (member, parameters) in calls {
                let replies = await fixture.call(member, parameters, as: Self.scannerUID)
                #expect(replies == [.expectedMore], "\(member): \(replies)")
            }
        }
    }

    @Test func enumValuesTravelAsTheirStrings() async throws {
        let fixture = try Fixture()
        let information = await fixture.call("GetDeviceInformation", as: Self.strangerUID)
        #expect(information.first?.parameters["information"]?.object?["mode"] == .string("shared"), "\(information)")
        let status = await fixture.call("GetStatus", as: 0)
        #expect(status.first?.parameters["status"]?.object?["mode"] == .string("shared"), "\(status)")
    }

    @Test func theStatusIsForAdministratorsOnly() async throws {
        let fixture = try Fixture()
        let app = await fixture.call("GetStatus", as: Self.scannerUID)
        #expect(app.first?.error == "org.varlink.service.PermissionDenied", "\(app)")
        let root = await fixture.call("GetStatus", as: 0)
        #expect(
            root.first?.error == nil && root.first?.parameters["status"]?.object?["provisioned"]?.bool == true,
            "\(root)"
        )
    }
}
