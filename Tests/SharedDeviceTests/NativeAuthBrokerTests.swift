import BrokerContract
import DeviceBroker
import Foundation
import IdentityClient
import IdentityTestSupport
import JWTKit
import KeychainStore
import ProcessSandbox
import SharedDevice
import StoreTestSupport
import Testing
import Varlink

/// Native authentication through the broker (StartNativeSignIn, ResendNativeSignInCode, SubmitNativeSignIn)
/// on a kiosk whose policy names a Microsoft Entra External ID tenant (`contoso.ciamlogin.com`). Microsoft is
/// unreachable here: a stand-in transport replays the exchanges of Microsoft's native authentication API
/// reference (V1: initiate, challenge, token with continuation tokens; its documented errors).
@Suite struct NativeAuthBrokerTests {
    static let tenantID = "aaaabbbb-0000-cccc-1111-dddd2222eeee"
    static let host = "https://login.microsoftonline.com"
    static let kid = "contoso-key-1"
    static let scannerUID: UInt32 = 1001, timeclockUID: UInt32 = 1002
    static var initiatePath: String { "/\(tenantID)/oauth2/v2.0/initiate" }
    static var challengePath: String { "/\(tenantID)/oauth2/v2.0/challenge" }
    static var tokenPath: String { "/\(tenantID)/oauth2/v2.0/token" }

    final class Kiosk: @unchecked Sendable {
        let fixture: DeviceFixture
        let transport = ScriptedTransport()
        let broker: Broker

        /// - Parameter flatpakApps: the scanner and the timeclock are Flatpak apps (`com.contoso.Scanner`,
        ///   `com.contoso.Timeclock`) of the scanner's uid instead of host apps of uids of their own.
        init(flows: [String] = ["deviceCode", "browser", "nativeAuth"], flatpakApps: Bool = false) throws {
            fixture = try DeviceFixture()
            try fixture.provision(
                try Policies.edited { document in
                    var authority = document["authority"] as! [String: Any]
                    authority["issuer"] = "https://contoso.ciamlogin.com/\(NativeAuthBrokerTests.tenantID)"
                    authority["flows"] = flows
                    document["authority"] = authority
                    if flatpakApps {
                        var apps = document["apps"] as! [[String: Any]]
                        apps[0]["flatpak"] = "com.contoso.Scanner"
                        apps[1]["flatpak"] = "com.contoso.Timeclock"
                        apps[1]["uid"] = NativeAuthBrokerTests.scannerUID
                        document["apps"] = apps
                    }
                }
            )
            let tenant = NativeAuthBrokerTests.tenantID
            let host = NativeAuthBrokerTests.host
            transport.always(
                "/\(tenant)/v2.0/.well-known/openid-configuration",
                .json(MicrosoftIdentityPlatform.discovery(tenant: tenant, issuer: "\(host)/\(tenant)/v2.0"))
            )
            let primitives = try IDTokenForger.strangerKey.publicKey.getKeyPrimitives()
            transport.always(
                "/\(tenant)/discovery/v2.0/keys",
                .json([
                    "keys": [
                        [
                            "kty": "RSA", "use": "sig", "kid": NativeAuthBrokerTests.kid,
                            "x5t": NativeAuthBrokerTests.kid,
                            "n": Base64URL.encode(primitives.modulus), "e": Base64URL.encode(primitives.publicExponent),
                            "issuer": "\(host)/\(tenant)/v2.0",
                        ]
                    ]
                ])
            )
            broker = Broker(device: fixture.device, transport: transport)
        }

        /// `uid` as the broker takes a caller (one connection); the tests call the broker's typed methods as it.
        func caller(_ uid: UInt32) -> BrokerCaller { BrokerCaller(uid: uid, gid: uid, pid: 1, connectionID: 1) }

        /// A worker of the tenant: their object id, username and display name.
        struct Worker {
            var oid: String, username: String, name: String
            static let ana = Worker(
                oid: "00000000-0000-0000-66f3-3332eca7ea81",
                username: "ana@contoso.com",
                name: "Ana Shift"
            )
            static let ben = Worker(
                oid: "00000000-0000-0000-7b21-9e0d4c5a1f36",
                username: "ben@contoso.com",
                name: "Ben Shift"
            )
        }

        /// The token response of a successful sign-in of `worker` (Ana by default), signed with the tenant's key.
        func tokens(_ worker: Worker = .ana) async throws -> HTTPResponse {
            // The broker's identity client checks ID-token times on the real clock (the store runs on a fake one).
            let seconds = Int(Date().timeIntervalSince1970)
            let tenant = NativeAuthBrokerTests.tenantID
            let claims = TestClaims([
                "aud": .string("kiosk-apps"), "iss": .string("\(NativeAuthBrokerTests.host)/\(tenant)/v2.0"),
                "iat": .int(seconds), "nbf": .int(seconds), "exp": .int(seconds + 3600), "name": .string(worker.name),
                "oid": .string(worker.oid), "preferred_username": .string(worker.username),
                "sub": .string("sub-of-\(worker.oid)"), "tid": .string(tenant), "ver": .string("2.0"),
            ])
            let keys = JWTKeyCollection()
            await keys.add(rsa: IDTokenForger.strangerKey, digestAlgorithm: .sha256)
            let idToken = try await keys.sign(claims, kid: JWKIdentifier(string: NativeAuthBrokerTests.kid))
            let clientInfo = Base64URL.encode(Data("{\"uid\":\"\(worker.oid)\",\"utid\":\"\(tenant)\"}".utf8))
            return .json([
                "token_type": "Bearer", "scope": "User.Read Files.Read openid profile offline_access",
                "expires_in": 4783,
                "access_token": "at-native", "refresh_token": "rt-native", "id_token": idToken,
                "client_info": clientInfo,
            ])
        }
    }

    static func error(_ error: String, codes: [Int], suberror: String? = nil, _ text: String) -> HTTPResponse {
        var body: [String: Any] = [
            "error": error, "error_description": "AADSTS\(codes[0]): \(text)", "error_codes": codes,
            "trace_id": "0000aaaa-11bb-cccc-dd22-eeeeee333333",
            "correlation_id": "aaaa0000-bb11-2222-33cc-444444dddddd",
        ]
        body["suberror"] = suberror
        return .json(body, status: 400)
    }

    static var codeSent: [String: Any] {
        [
            "continuation_token": "ct-2", "challenge_type": "oob", "binding_method": "prompt",
            "challenge_channel": "email", "challenge_target_label": "a***@co**o.com", "code_length": 8,
        ]
    }

    @Test func aCodeSignInTellsWhereTheCodeWentLetsTheWorkerRetypeAndResendAndSignsInForEveryApp() async throws {
        let kiosk = try Kiosk()
        let scanner = kiosk.caller(Self.scannerUID)
        let timeclock = kiosk.caller(Self.timeclockUID)
        kiosk.transport.enqueue(Self.initiatePath, .json(["continuation_token": "ct-1"]))
        kiosk.transport.enqueue(
            Self.challengePath,
            .json(Self.codeSent),
            .json(Self.codeSent.merging(["continuation_token": "ct-3"]) { $1 })
        )
        // The last answer is the other app's silent refresh (the store's fake clock is past the token's expiry).
        kiosk.transport.enqueue(
            Self.tokenPath,
            Self.error("invalid_grant", codes: [50181], suberror: "invalid_oob_value", "Unable to validate the code."),
            try await kiosk.tokens(),
            try await kiosk.tokens()
        )
        let next = try await kiosk.broker.startNativeSignIn(.init(username: "ana@contoso.com"), context: scanner).next
        #expect(
            next.challenge == .code && next.codeLength == 8 && next.sentTo == "a***@co**o.com"
                && next.channel == "email",
            "\(next)"
        )
        let id = next.signInId
        // Another app cannot finish (or even see) this sign-in.
        let stolen = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.submitNativeSignIn(
                .init(signInId: id, scopes: [], code: "12345678"),
                context: timeclock
            )
        }
        #expect(stolen?.accountError?.code == "signInNotFound", "\(String(describing: stolen))")
        let resentByOther = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.resendNativeSignInCode(.init(signInId: id), context: timeclock)
        }
        #expect(resentByOther?.accountError?.code == "signInNotFound", "\(String(describing: resentByOther))")
        #expect(
            kiosk.transport.requests(to: Self.challengePath).count == 1,
            "another app's resend reached the authority"
        )
        // A wrong code: the sign-in stays open; a new code; then the right one.
        let wrong = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.submitNativeSignIn(
                .init(signInId: id, scopes: ["User.Read"], code: "11111111"),
                context: scanner
            )
        }
        #expect(wrong?.accountError?.identityCode == "invalid_code", "\(String(describing: wrong))")
        let resent = try await kiosk.broker.resendNativeSignInCode(.init(signInId: id), context: scanner)
        #expect(resent.next.challenge == .code, "\(resent)")
        let done = try await kiosk.broker.submitNativeSignIn(
            .init(signInId: id, scopes: ["User.Read"], code: "22222222"),
            context: scanner
        )
        #expect(done.result.account.username == "ana@contoso.com", "\(done)")
        #expect(kiosk.transport.requests(to: Self.tokenPath).last?.form["continuation_token"] == "ct-3")
        // The worker is the device's: the other app gets a token silently; the sign-in is closed.
        let silent = try await kiosk.broker.acquireTokenSilent(.init(scopes: ["Files.Read"]), context: timeclock)
        #expect(silent.result.accessToken == "at-native", "\(silent)")
        let again = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.submitNativeSignIn(
                .init(signInId: id, scopes: [], code: "22222222"),
                context: scanner
            )
        }
        #expect(again?.accountError?.code == "signInNotFound")
        let events = try kiosk.fixture.device.auditEvents()
        let signedIn = events.filter { $0.type == .accountSignedIn }
        #expect(signedIn.count == 1 && signedIn.first?.details["flow"] == "nativeAuth", "\(signedIn)")
        #expect(!events.contains { "\($0)".contains("22222222") || "\($0)".contains("ct-3") })
    }

    /// Two Flatpak apps of one uid: a native sign-in is the app's that started it (its sandbox, not its uid),
    /// and each app has its own share of pending sign-ins; a host process of that uid is no app here.
    @Test func aNativeSignInIsTheSandboxedAppsThatStartedItAndEachAppOfAUidHasItsOwnShare() async throws {
        let kiosk = try Kiosk(flatpakApps: true)
        func sandboxed(_ id: String) -> BrokerCaller {
            BrokerCaller(
                uid: Self.scannerUID,
                gid: Self.scannerUID,
                pid: 1,
                sandbox: .flatpak(FlatpakApp(appID: id, instanceID: "1")),
                connectionID: 1
            )
        }
        let scanner = sandboxed("com.contoso.Scanner")
        let timeclock = sandboxed("com.contoso.Timeclock")
        for _ in 0..<3 {
            kiosk.transport.enqueue(Self.initiatePath, .json(["continuation_token": "ct-1"]))
            kiosk.transport.enqueue(Self.challengePath, .json(Self.codeSent))
        }
        let first = try await kiosk.broker.startNativeSignIn(.init(username: "ana@contoso.com"), context: scanner)
        _ = try await kiosk.broker.startNativeSignIn(.init(username: "ben@contoso.com"), context: scanner)
        // The scanner's share (limits.pendingSignInsPerApp, 2) is taken; the timeclock of the same uid has its own.
        let full = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.startNativeSignIn(.init(username: "cy@contoso.com"), context: scanner)
        }
        #expect(full?.name == "org.sharedmode.Broker1.LimitExceeded", "\(String(describing: full))")
        #expect(full?.reply.parameters["message"]?.string?.contains("flatpak com.contoso.Scanner") == true)
        _ = try await kiosk.broker.startNativeSignIn(.init(username: "cy@contoso.com"), context: timeclock)
        // The other app of the same uid cannot continue the scanner's sign-in, nor can a host process of it.
        let stolen = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.submitNativeSignIn(
                .init(signInId: first.next.signInId, scopes: [], code: "12345678"),
                context: timeclock
            )
        }
        #expect(stolen?.accountError?.code == "signInNotFound", "\(String(describing: stolen))")
        let host = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.resendNativeSignInCode(
                .init(signInId: first.next.signInId),
                context: kiosk.caller(Self.scannerUID)
            )
        }
        #expect(host?.name == "org.sharedmode.Broker1.CallerNotInPolicy", "\(String(describing: host))")
        #expect(kiosk.transport.requests(to: Self.tokenPath).isEmpty, "a refused caller reached the authority")
    }

    @Test func aWrongPasswordIsAuditedEndsTheSignInAndCachesNothing() async throws {
        let kiosk = try Kiosk()
        let scanner = kiosk.caller(Self.scannerUID)
        kiosk.transport.enqueue(Self.initiatePath, .json(["continuation_token": "ct-1"]))
        kiosk.transport.enqueue(
            Self.challengePath,
            .json(["continuation_token": "ct-2", "challenge_type": "password"])
        )
        kiosk.transport.enqueue(
            Self.tokenPath,
            Self.error(
                "invalid_grant",
                codes: [50126],
                "Error validating credentials due to invalid username or password."
            )
        )
        let started = try await kiosk.broker.startNativeSignIn(.init(username: "ana@contoso.com"), context: scanner)
        let id = started.next.signInId
        #expect(started.next.challenge == .password, "\(started)")
        let refused = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.submitNativeSignIn(
                .init(signInId: id, scopes: [], password: "Wrong-Pass-9"),
                context: scanner
            )
        }
        #expect(refused?.accountError?.identityCode == "invalid_credentials", "\(String(describing: refused))")
        #expect(refused.map { "\($0.reply)" }?.contains("Wrong-Pass-9") == false)
        let current = try kiosk.broker.getCurrentAccount(.init(), context: scanner)
        #expect(current.current == nil, "\(current)")
        let failed = try kiosk.fixture.device.auditEvents().filter { $0.type == .accountSignInFailed }
        #expect(
            failed.count == 1 && failed.first?.details["flow"] == "nativeAuth"
                && failed.first?.account == "ana@contoso.com"
        )
        let closed = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.submitNativeSignIn(.init(signInId: id, scopes: [], password: "x"), context: scanner)
        }
        #expect(closed?.accountError?.code == "signInNotFound")
    }

    @Test func aUsernameWithControlCharactersIsRefusedBeforeTheAuthorityOrTheAuditLogSeesIt() async throws {
        let kiosk = try Kiosk()
        let before = try kiosk.fixture.device.auditEvents().count
        for username in [
            "ana@contoso.com\nSHAREDMODE_AUDIT_TYPE=device.provisioned", "\u{1b}[2Jana@contoso.com",
            "ana\u{0}@contoso.com", "",
        ] {
            for switchReason: String? in [nil, "shift-end"] {
                let refused = try await refusal { () async throws(BrokerFailure) in
                    try await kiosk.broker.startNativeSignIn(
                        .init(username: username, switchReason: switchReason),
                        context: kiosk.caller(Self.scannerUID)
                    )
                }
                #expect(refused?.invalidParameter == "username", "\(String(describing: refused))")
            }
        }
        #expect(kiosk.transport.requests(to: Self.initiatePath).isEmpty, "a refused username reached the authority")
        #expect(try kiosk.fixture.device.auditEvents().count == before)
    }

    /// The shift change with native authentication: the next worker's username taken, the current worker
    /// signed out of every app before the code is typed, the next one signed in, one correlation id.
    @Test func aShiftChangeByNativeSignInSignsTheWorkerOutBeforeTheCodeIsTypedAndTheNextIn() async throws {
        let kiosk = try Kiosk()
        let scanner = kiosk.caller(Self.scannerUID)
        let timeclock = kiosk.caller(Self.timeclockUID)
        kiosk.transport.enqueue(
            Self.initiatePath,
            .json(["continuation_token": "ct-1"]),
            .json(["continuation_token": "ct-4"]),
            Self.error("user_not_found", codes: [50034], "The user account does not exist.")
        )
        kiosk.transport.enqueue(
            Self.challengePath,
            .json(["continuation_token": "ct-2", "challenge_type": "password"]),
            .json(Self.codeSent)
        )
        kiosk.transport.enqueue(
            Self.tokenPath,
            try await kiosk.tokens(.ana),
            Self.error("invalid_grant", codes: [50181], suberror: "invalid_oob_value", "Unable to validate the code."),
            try await kiosk.tokens(.ben)
        )
        // Ana's shift.
        let anaID = try await kiosk.broker.startNativeSignIn(.init(username: "ana@contoso.com"), context: scanner).next
            .signInId
        _ = try await kiosk.broker.submitNativeSignIn(
            .init(signInId: anaID, scopes: [], password: "Ana-Pass-1"),
            context: scanner
        )
        // Ben takes over at the other app: without a switch he is refused at once (Ana is signed in)...
        let refused = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.startNativeSignIn(.init(username: "ben@contoso.com"), context: timeclock)
        }
        #expect(refused?.accountError?.code == "accountAlreadySignedIn", "\(String(describing: refused))")
        // ...with one, Ana is signed out of every app as soon as the authority sent Ben's code.
        let ben = try await kiosk.broker.startNativeSignIn(
            .init(username: "ben@contoso.com", switchReason: "shift-end"),
            context: timeclock
        )
        let benID = ben.next.signInId
        #expect(ben.signedOut?.account?.username == "ana@contoso.com", "\(ben)")
        let between = try kiosk.broker.getCurrentAccount(.init(), context: scanner)
        #expect(between.current == nil, "\(between)")
        // A mistyped code leaves the switch open; the right one signs Ben in.
        let wrong = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.submitNativeSignIn(
                .init(signInId: benID, scopes: [], code: "11111111"),
                context: timeclock
            )
        }
        #expect(wrong?.accountError?.identityCode == "invalid_code", "\(String(describing: wrong))")
        let result = try await kiosk.broker.submitNativeSignIn(
            .init(signInId: benID, scopes: [], code: "22222222"),
            context: timeclock
        ).result
        #expect(result.account.username == "ben@contoso.com")
        let current = try kiosk.broker.getCurrentAccount(.init(), context: scanner)
        #expect(current.current?.username == "ben@contoso.com", "\(current)")
        // The sign-out, the sign-in and the switch share the result's correlation id.
        let correlation = result.correlationId
        let events = try kiosk.fixture.device.auditEvents().filter { $0.correlationID == correlation }
        #expect(events.map(\.type) == [.accountSignedOut, .accountSignedIn, .accountSwitched], "\(events)")
        #expect(events.first?.account == "ana@contoso.com" && events.dropFirst().first?.details["flow"] == "nativeAuth")
        #expect(events.last?.details["from"] == "ana@contoso.com" && events.last?.details["to"] == "ben@contoso.com")
        // A switch to a username the authority does not know signs nobody out.
        let unknown = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.startNativeSignIn(
                .init(username: "nobody@contoso.com", switchReason: "shift-end"),
                context: scanner
            )
        }
        #expect(unknown?.accountError?.identityCode == "user_not_found", "\(String(describing: unknown))")
        let still = try kiosk.broker.getCurrentAccount(.init(), context: scanner)
        #expect(still.current?.username == "ben@contoso.com")
        let badReason = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.startNativeSignIn(
                .init(username: "ana@contoso.com", switchReason: "admin"),
                context: scanner
            )
        }
        #expect(badReason?.invalidParameter != nil, "\(String(describing: badReason))")
    }

    @Test func aPolicyWithoutNativeAuthRefusesItAndARedirectMeansTheBrowser() async throws {
        let closed = try Kiosk(flows: ["deviceCode", "browser"])
        let refused = try await refusal { () async throws(BrokerFailure) in
            try await closed.broker.startNativeSignIn(
                .init(username: "ana@contoso.com"),
                context: closed.caller(Self.scannerUID)
            )
        }
        #expect(refused?.accountError?.code == "flowNotAllowed", "\(String(describing: refused))")
        #expect(closed.transport.requests(to: Self.initiatePath).isEmpty)

        let open = try Kiosk()
        open.transport.enqueue(Self.initiatePath, .json(["challenge_type": "redirect"]))
        let redirect = try await refusal { () async throws(BrokerFailure) in
            try await open.broker.startNativeSignIn(
                .init(username: "ana@contoso.com"),
                context: open.caller(Self.scannerUID)
            )
        }
        #expect(redirect?.accountError?.identityCode == "browser_required", "\(String(describing: redirect))")
    }
}
