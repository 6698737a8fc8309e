import Foundation
import IdentityClient
import IdentityTestSupport
import KeychainStore
import SharedDevice
import StoreTestSupport
import Synchronization
import TestTags
import Testing

/// A kiosk provisioned against the tests' real identity provider, and its apps.
final class ProviderKiosk {
    static let scanner = "com.contoso.kiosk.scanner"
    static let timeclock = "com.contoso.kiosk.timeclock"

    let provider: LocalIdentityProvider
    let fixture: DeviceFixture

    init(issuer: String? = nil, provider: LocalIdentityProvider? = nil) async throws {
        if let provider { self.provider = provider } else { self.provider = try await LocalIdentityProvider.shared() }
        fixture = try DeviceFixture()
        _ = try fixture.provision(try self.provider.kioskPolicy(issuer: issuer))
    }

    func app(
        _ id: String = ProviderKiosk.scanner,
        transport: any HTTPTransport = CurlTransport(),
        now: @escaping @Sendable () -> Date = Date.init,
        sleep: @escaping @Sendable (TimeInterval) async throws -> Void = { try await Task.sleep(for: .seconds($0)) }
    ) throws -> ApplicationEngine {
        let policy = try #require(try fixture.device.policy())
        return try ApplicationEngine(
            configuration: ApplicationEngineConfiguration(appID: id, policy: policy),
            device: fixture.device,
            transport: transport,
            now: now,
            sleep: sleep
        )
    }

    /// A device-code sign-in that `user` approves through the provider's API as soon as the code shows.
    func deviceCodeParameters(
        user: String,
        plugin: String = "oidc",
        scopes: [String] = ["User.Read"]
    ) -> InteractiveTokenParameters {
        let provider = self.provider
        return InteractiveTokenParameters(
            scopes: scopes,
            flow: .deviceCode(showCode: { session in
                Thread.detachNewThread { try? provider.approve(code: session.userCode, user: user, plugin: plugin) }
            })
        )
    }

    /// A browser sign-in in which `user` signs in (the test browser runs beside the app's loopback listener).
    func browserParameters(
        user: String,
        scopes: [String] = ["User.Read"],
        prompt: Prompt? = nil,
        loginHint: String? = nil
    ) -> InteractiveTokenParameters {
        let provider = self.provider
        return InteractiveTokenParameters(
            scopes: scopes,
            flow: .browser(openBrowser: { url in
                Thread.detachNewThread { try? provider.browse(url, user: user) }
            }),
            prompt: prompt,
            loginHint: loginHint,
            browserTimeout: 60
        )
    }

    func signInEvents() throws -> [AuditEvent] {
        try fixture.device.auditEvents().filter { $0.type == .accountSignedIn }
    }
}

/// The error a throwing async body threw, as a `SharedDeviceError`.
func sharedDeviceError<T>(_ body: () async throws(SharedDeviceError) -> T) async -> SharedDeviceError? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}

/// `ApplicationEngine` against a real OpenID Connect provider (glewlwyd on loopback, `tools/idp`):
/// the seed tutorial's flow, silent tokens, shared-mode SSO and global sign-out, and the failures.
///
/// Serialized: glewlwyd opens its SQLite database without a busy timeout, so concurrent sign-ins make
/// it answer `server_error` now and then.
@Suite(.serialized, .tags(.integration, .needsIdentityProvider)) struct ApplicationEngineTests {
    @Test func deviceCodeSignInThenSilentTokensForTwoAPIsAndTheUserinfoCall() async throws {
        let kiosk = try await ProviderKiosk()
        let scanner = try kiosk.app()
        #expect(scanner.deviceInformation().information.mode == .shared)
        #expect(try scanner.currentAccount().current == nil)

        let signedIn = try await scanner.acquireToken(kiosk.deviceCodeParameters(user: "worker1"))
        #expect(signedIn.source == .interactive)
        #expect(signedIn.account.username == "worker1")
        #expect(signedIn.account.name == "Ana Worker")
        #expect(Set(signedIn.scopes).isSuperset(of: ["User.Read", "Files.Read", "openid", "offline_access"]))
        #expect(!signedIn.description.contains(signedIn.accessToken))
        #expect(try scanner.currentAccount().current?.isSameAccount(as: signedIn.account) == true)

        // The first API from the cache, the second silently too (consented at sign-in): no second sign-in.
        let me = try await scanner.acquireTokenSilent(scopes: ["User.Read"])
        #expect(me.source == .cache && me.accessToken == signedIn.accessToken)
        let files = try await scanner.acquireTokenSilent(scopes: ["Files.Read"])
        #expect(files.source == .cache)

        // Forced refresh: a new access token from the refresh token, cached for the next call.
        let refreshed = try await scanner.acquireTokenSilent(scopes: ["User.Read"], forceRefresh: true)
        #expect(refreshed.source == .refresh)
        #expect(refreshed.accessToken != signedIn.accessToken)
        #expect(try await scanner.acquireTokenSilent(scopes: ["User.Read"]).accessToken == refreshed.accessToken)

        // Graph `/me` stand-in: the provider's userinfo endpoint with `Authorization: Bearer`.
        let userinfo = try await scanner.identity.get(
            try await scanner.identity.userInfoEndpoint(),
            accessToken: refreshed.accessToken
        )
        #expect(userinfo.status == 200)
        let claims = try #require(try JSONSerialization.jsonObject(with: userinfo.body) as? [String: Any])
        #expect(claims["name"] as? String == "Ana Worker")
        #expect(claims["preferred_username"] as? String == "worker1")

        #expect(try kiosk.signInEvents().map(\.account) == ["worker1"])
    }

    @Test func anES256ProviderSignsInWithAVerifiedES256IDToken() async throws {
        let provider = try await LocalIdentityProvider.shared()
        let kiosk = try await ProviderKiosk(issuer: provider.issuerES256)
        let result = try await kiosk.app().acquireToken(
            kiosk.deviceCodeParameters(user: "worker2", plugin: "oidc-es256")
        )
        let header = try #require(result.idToken?.split(separator: ".").first)
        let headerJSON = try #require(Base64URL.decode(header))
        let alg = try #require(try JSONSerialization.jsonObject(with: headerJSON) as? [String: Any])["alg"]
        #expect(alg as? String == "ES256")
        #expect(result.account.username == "worker2")
    }

    @Test func browserSignInWithPKCEPromptAndLoginHint() async throws {
        let kiosk = try await ProviderKiosk()
        let result = try await kiosk.app(ProviderKiosk.timeclock)
            .acquireToken(kiosk.browserParameters(user: "worker2", prompt: .login, loginHint: "worker2"))
        #expect(result.source == .interactive)
        #expect(result.account.username == "worker2")
        #expect(result.idToken != nil)
        #expect(try kiosk.signInEvents().map(\.actor) == [ProviderKiosk.timeclock])
    }

    @Test func slowDownMakesTheClientWaitLongerBetweenPolls() async throws {
        let kiosk = try await ProviderKiosk()
        let provider = kiosk.provider
        let requested = Mutex<[TimeInterval]>([])
        let userCode = Mutex<String?>(nil)
        // The client polls at once, far too early, until the server answers `slow_down` (the interval it asks
        // for grows; however slow this machine, some poll comes within the server's 5 s); then the worker
        // approves, and the client waits longer than the server's interval before the next poll.
        let approved = Mutex(false)
        let app = try kiosk.app(sleep: { interval in
            let count = requested.withLock {
                $0.append(interval)
                return $0.count
            }
            if interval <= 5 && count < 50 { return }
            if !approved.withLock({ $0 }), let code = userCode.withLock({ $0 }) {
                try provider.approve(code: code, user: "worker1")
                approved.withLock { $0 = true }
            }
            try await Task.sleep(for: .seconds(6))
        })
        let result = try await app.acquireToken(
            InteractiveTokenParameters(
                scopes: ["User.Read"],
                flow: .deviceCode(showCode: { session in
                    userCode.withLock { $0 = session.userCode }
                })
            )
        )
        #expect(result.account.username == "worker1")
        let intervals = requested.withLock { $0 }
        #expect(intervals.first == 5)  // the server's interval
        // +5 s after slow_down (RFC 8628 §3.5), and never back down.
        let slowed = try #require(intervals.firstIndex { $0 > 5 }, "the server never said slow_down: \(intervals)")
        #expect(intervals[slowed] == 10, "\(intervals)")
        #expect(zip(intervals, intervals.dropFirst()).allSatisfy { $1 == $0 || $1 == $0 + 5 }, "\(intervals)")
    }

    enum Forgery: String, CaseIterable, Sendable {
        case wrongIssuer, wrongAudience, expired, wrongNonce, foreignSignature
    }

    @Test(arguments: Forgery.allCases)
    func aForgedIDTokenIsRejectedAndNothingIsCached(_ forgery: Forgery) async throws {
        let kiosk = try await ProviderKiosk()
        let forger = try IDTokenForger(provider: kiosk.provider)
        let now = Int(Date().timeIntervalSince1970)
        let transport = IDTokenRewritingTransport { jwt in
            switch forgery {
            case .wrongIssuer: try await forger.forge(jwt, ["iss": .string("http://127.0.0.1:4599/api/evil")])
            case .wrongAudience:
                try await forger.forge(jwt, ["aud": .string("some-other-app"), "azp": .string("some-other-app")])
            case .expired: try await forger.forge(jwt, ["exp": .int(now - 3600), "iat": .int(now - 7200)])
            case .wrongNonce: try await forger.forge(jwt, ["nonce": .string("replayed-nonce")])
            case .foreignSignature: try await forger.forge(jwt, [:], key: .stranger)
            }
        }
        let scanner = try kiosk.app(transport: transport)
        let error = await sharedDeviceError { () async throws(SharedDeviceError) in
            try await scanner.acquireToken(kiosk.browserParameters(user: "worker1"))
        }
        #expect(error?.identityError?.code == .invalidIDToken, "\(forgery): \(String(describing: error))")
        #expect(try scanner.currentAccount().current == nil)
        #expect(try scanner.accounts().isEmpty)
        let credentials = caughtError {
            try kiosk.fixture.device.store.readTransaction { tx in
                try tx.findAll(ItemQuery(accessGroup: "com.microsoft.adalcache"), as: scanner.app)
            }
        }
        #expect((credentials as? KeychainError)?.code == .itemNotFound, "no credential was cached")
        #expect(try kiosk.signInEvents().isEmpty)
    }

    @Test func aRevokedRefreshTokenNeedsInteractionAndTheFailedCallChangesNothing() async throws {
        let kiosk = try await ProviderKiosk()
        let scanner = try kiosk.app()
        let signedIn = try await scanner.acquireToken(kiosk.browserParameters(user: "worker4"))
        try kiosk.provider.revoke(user: "worker4")
        let before = try kiosk.fixture.device.store.readTransaction { tx in try tx.changeStamp() }

        let error = await sharedDeviceError { () async throws(SharedDeviceError) in
            try await scanner.acquireTokenSilent(scopes: ["User.Read"], forceRefresh: true)
        }
        #expect(error?.isInteractionRequired == true)
        #expect(error?.identityError?.msalErrorCode == -50002)
        #expect(try kiosk.fixture.device.store.readTransaction { tx in try tx.changeStamp() } == before)
        // The cached access token still serves until it expires; the worker is still signed in.
        let cached = try await scanner.acquireTokenSilent(scopes: ["User.Read"])
        #expect(cached.source == .cache && cached.accessToken == signedIn.accessToken)
        #expect(try scanner.currentAccount().current?.username == "worker4")
    }

    @Test func anUnreachableProviderIsAClearErrorAndSignsNobodyIn() async throws {
        let kiosk = try await ProviderKiosk(issuer: "http://127.0.0.1:1/api/oidc")
        let scanner = try kiosk.app()
        let error = await sharedDeviceError { () async throws(SharedDeviceError) in
            try await scanner.acquireToken(kiosk.deviceCodeParameters(user: "worker1"))
        }
        #expect(error?.identityError?.code == .authorityUnreachable)
        #expect(error?.description.contains("127.0.0.1:1") == true)
        #expect(try kiosk.app().currentAccount().current == nil)
        #expect(try kiosk.signInEvents().isEmpty)
    }

    @Test func aProviderThatGoesDownMidShiftFailsTheRefreshButKeepsTheCache() async throws {
        let provider = try await LocalIdentityProvider.started(port: 4598)
        defer { provider.stop() }
        let kiosk = try await ProviderKiosk(provider: provider)
        let scanner = try kiosk.app()
        let signedIn = try await scanner.acquireToken(kiosk.browserParameters(user: "worker1"))
        provider.stop()

        let error = await sharedDeviceError { () async throws(SharedDeviceError) in
            try await scanner.acquireTokenSilent(scopes: ["User.Read"], forceRefresh: true)
        }
        #expect(error?.identityError?.code == .authorityUnreachable)
        #expect(error?.description.contains("127.0.0.1:4598") == true)
        #expect(try await scanner.acquireTokenSilent(scopes: ["User.Read"]).accessToken == signedIn.accessToken)
    }

    @Test func twoAppsShareTheWorkerAndOneGlobalSignOutEndsTheShiftForBoth() async throws {
        let kiosk = try await ProviderKiosk()
        let scanner = try kiosk.app(ProviderKiosk.scanner)
        let timeclock = try kiosk.app(ProviderKiosk.timeclock)
        let worker = try await scanner.acquireToken(kiosk.browserParameters(user: "worker1")).account

        // Single sign-on: the timeclock sees the worker and gets its own token without signing in.
        #expect(try timeclock.currentAccount().current?.isSameAccount(as: worker) == true)
        let own = try await timeclock.acquireTokenSilent(scopes: ["Files.Read"], forceRefresh: true)
        #expect(own.source == .refresh && own.account.isSameAccount(as: worker))

        // Shared mode refuses a second worker while the first is signed in.
        // An interactive call in shared mode is for the signed-in worker (their username is the login hint);
        // another worker signing in at the provider anyway is refused when the tokens arrive.
        let provider = kiosk.provider
        let authorizationURL = Mutex<URL?>(nil)
        let refused = await sharedDeviceError { () async throws(SharedDeviceError) in
            try await timeclock.acquireToken(
                InteractiveTokenParameters(
                    scopes: ["User.Read"],
                    flow: .browser(openBrowser: { url in
                        authorizationURL.withLock { $0 = url }
                        Thread.detachNewThread { try? provider.browse(url, user: "worker2") }
                    }),
                    browserTimeout: 60
                )
            )
        }
        #expect(refused?.code == .accountAlreadySignedIn)
        let hint = authorizationURL.withLock { $0 }.flatMap {
            URLComponents(url: $0, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "login_hint" }?.value
        }
        #expect(hint == "worker1")
        // Named by login hint, the other worker is refused before any browser opens.
        let opened = Mutex(false)
        let early = await sharedDeviceError { () async throws(SharedDeviceError) in
            try await timeclock.acquireToken(
                InteractiveTokenParameters(
                    scopes: ["User.Read"],
                    flow: .browser(openBrowser: { _ in
                        opened.withLock { $0 = true }
                    }),
                    loginHint: "worker2"
                )
            )
        }
        #expect(early?.code == .accountAlreadySignedIn)
        #expect(!opened.withLock { $0 })

        // The timeclock ends the shift: global sign-out.
        let outcome = try await timeclock.signOut(parameters: SignOutParameters(reason: .shiftEnd))
        #expect(outcome.global)
        let afterSignOut = await sharedDeviceError { () async throws(SharedDeviceError) in
            try await scanner.acquireTokenSilent(scopes: ["User.Read"])
        }
        #expect(afterSignOut?.code == .noCurrentAccount)
        let (current, previous) = try scanner.currentAccount().pair
        #expect(current == nil)
        #expect(previous?.isSameAccount(as: worker) == true)

        // The next worker signs in on the timeclock.
        #expect(
            try await timeclock.acquireToken(kiosk.browserParameters(user: "worker2")).account.username == "worker2"
        )
        #expect(try kiosk.signInEvents().map(\.account) == ["worker1", "worker2"])
    }

    @Test func anInteractiveSwitchSignsTheWorkerOutFirstAndAFailedSignInLeavesNobody() async throws {
        let kiosk = try await ProviderKiosk()
        let scanner = try kiosk.app(ProviderKiosk.scanner)
        let timeclock = try kiosk.app(ProviderKiosk.timeclock)
        _ = try await scanner.acquireToken(kiosk.deviceCodeParameters(user: "worker1"))

        // The switch: worker1 out of every app (committed before the code is even asked for), worker2 in.
        let seenWhenSignedOut = Mutex<(String?, Bool)?>(nil)
        let next = try await timeclock.switchWorker(kiosk.deviceCodeParameters(user: "worker2")) { signedOut in
            let nobody = (try? scanner.currentAccount().current) == nil
            seenWhenSignedOut.withLock { $0 = (signedOut?.account?.username, nobody) }
        }
        #expect(seenWhenSignedOut.withLock { $0 }?.0 == "worker1" && seenWhenSignedOut.withLock { $0 }?.1 == true)
        #expect(next.account.username == "worker2" && next.source == .interactive)
        #expect(try scanner.currentAccount().current?.username == "worker2")
        let events = try kiosk.fixture.device.auditEvents(matching: AuditFilter()).filter {
            $0.correlationID == next.correlationID
        }
        #expect(events.map(\.type) == [.accountSignedOut, .accountSignedIn, .accountSwitched])
        #expect(events.first?.reason == "shift-end" && events.first?.account == "worker1")

        // A switch whose sign-in fails (the code expires): worker2 is out, nobody is in, and the error says so.
        let clock = Mutex<TimeInterval>(0)
        let expiring = try kiosk.app(
            now: { Date().addingTimeInterval(clock.withLock { $0 }) },
            sleep: { _ in clock.withLock { $0 += 601 } }
        )
        let failed = await sharedDeviceError { () async throws(SharedDeviceError) in
            try await expiring.switchWorker(
                InteractiveTokenParameters(scopes: ["User.Read"], flow: .deviceCode(showCode: { _ in }))
            )
        }
        #expect(failed?.identityError?.code == .deviceCodeExpired)
        #expect(
            failed?.message.contains("worker2 was signed out") == true
                && failed?.message.contains("nobody is signed in now") == true,
            "\(failed?.message ?? "")"
        )
        #expect(try scanner.currentAccount().current == nil)
        #expect(try kiosk.fixture.device.auditEvents(matching: AuditFilter(types: [.accountSwitched])).count == 1)
    }

    @Test func aDeviceCodeThatExpiresSignsNobodyIn() async throws {
        let kiosk = try await ProviderKiosk()
        let clock = Mutex<TimeInterval>(0)
        // Time is faked: each wait between polls jumps 10 minutes, past the code's lifetime (600 s).
        let scanner = try kiosk.app(
            now: { Date().addingTimeInterval(clock.withLock { $0 }) },
            sleep: { _ in clock.withLock { $0 += 601 } }
        )
        let error = await sharedDeviceError { () async throws(SharedDeviceError) in
            try await scanner.acquireToken(
                InteractiveTokenParameters(scopes: ["User.Read"], flow: .deviceCode(showCode: { _ in }))
            )
        }
        #expect(error?.identityError?.code == .deviceCodeExpired)
        #expect(try scanner.currentAccount().current == nil)
    }

    @Test func cancelingTheWaitIsUserCanceledAndSignsNobodyIn() async throws {
        let kiosk = try await ProviderKiosk()
        let scanner = try kiosk.app()
        let shown = AsyncStream<Void>.makeStream()
        let signIn = Task { () async throws(SharedDeviceError) -> AuthenticationResult in
            try await scanner.acquireToken(
                InteractiveTokenParameters(
                    scopes: ["User.Read"],
                    flow: .deviceCode(showCode: { _ in
                        shown.continuation.yield()
                    })
                )
            )
        }
        for await _ in shown.stream { break }
        signIn.cancel()
        guard case .failure(let error) = await signIn.result else {
            Issue.record("a canceled sign-in succeeded")
            return
        }
        let identityError = (error as? SharedDeviceError)?.identityError
        #expect(identityError?.code == .userCanceled)
        #expect(identityError?.msalErrorCode == -50005)
        #expect(try scanner.currentAccount().current == nil)
    }
}
