import BrokerContract
import DeviceBroker
import Foundation
import SharedDevice
import TestTags
import Testing
import Varlink

/// The login screen's sign-in (StartLoginScreenSignIn, SubmitLoginScreenSignIn) through the broker in the
/// test's process, with the password flow against the real local provider (glewlwyd's workers).
@Suite(.tags(.integration, .needsIdentityProvider)) struct LoginScreenSignInTests {
    typealias Kiosk = LoginScreenKiosk

    @Test func rootSignsAWorkerInAtTheLoginScreenAndTheAuditSaysWhereWithNoSecret() async throws {
        let kiosk = try await Kiosk()
        let challenge = try await kiosk.start("worker1")
        #expect(challenge.challenge == .password)
        let signIn = try await kiosk.broker.submitLoginScreenSignIn(
            .init(signInId: challenge.signInId, password: Kiosk.password1),
            context: Kiosk.root
        ).signIn
        #expect(signIn.account.username == "worker1")
        #expect(signIn.sessionUser == Kiosk.sessionUser)
        #expect(signIn.signedOut == nil)
        #expect(try kiosk.currentWorker() == "worker1")
        let event = try #require(try kiosk.events().last { $0.type.rawValue == "account.signed_in" })
        #expect(event.correlationID == signIn.correlationId)
        #expect(event.details["via"] == "login-screen")
        #expect(event.details["flow"] == "password")
        #expect(event.details["service"] == "login")
        #expect(event.details["tty"] == "tty1")
        #expect(event.details["seat"] == "seat0")
        #expect(event.details["remoteHost"] == nil)
        let everything = try kiosk.events().map { "\($0)" }.joined()
        #expect(!everything.contains(Kiosk.password1))
        // The sign-in is over: its id is not usable again.
        await #expect(throws: BrokerFailure.self) {
            try await kiosk.broker.submitLoginScreenSignIn(
                .init(signInId: challenge.signInId, password: Kiosk.password1),
                context: Kiosk.root
            )
        }
    }

    @Test func anAppIsRefusedTheLoginScreenAndTheRefusalIsAudited() async throws {
        let kiosk = try await Kiosk()
        do {
            _ = try await kiosk.start("worker1", as: Kiosk.scanner)
            Issue.record("an app started a login-screen sign-in")
        } catch {
            #expect(error.reply.error == "org.varlink.service.PermissionDenied")
        }
        let refusal = try #require(try kiosk.events().last { $0.type == .keychainAccessDenied })
        #expect(refusal.details["method"] == "StartLoginScreenSignIn")
        #expect(refusal.actor == "uid 1001")
        do {
            _ = try await kiosk.broker.submitLoginScreenSignIn(
                .init(signInId: "x", password: "p"),
                context: Kiosk.scanner
            )
            Issue.record("an app submitted a login-screen sign-in")
        } catch {
            #expect(error.reply.error == "org.varlink.service.PermissionDenied")
        }
        #expect(try kiosk.currentWorker() == nil)
    }

    @Test func aLocalAccountsNameIsRefusedBeforeTheProviderIsAsked() async throws {
        let kiosk = try await Kiosk()
        for name in ["root", "nobody", " Root "] {
            do {
                _ = try await kiosk.start(name)
                Issue.record("\(name) was taken for a worker")
            } catch {
                #expect(accountErrorCode(error) == "localAccount", "\(error.reply)")
            }
        }
        for name in ["", String(repeating: "w", count: 257), "worker\u{1}1"] {
            do {
                _ = try await kiosk.start(name)
                Issue.record("a malformed username was taken")
            } catch {
                #expect(error.reply.error == "org.varlink.service.InvalidParameter", "\(error.reply)")
            }
        }
    }

    @Test func aPolicyWithoutSessionUserRefusesTheLoginScreenSayingWhatToSet() async throws {
        let kiosk = try await Kiosk(configured: false)
        do {
            _ = try await kiosk.start("worker1")
            Issue.record("the login screen ran without session.user")
        } catch {
            #expect(accountErrorCode(error) == "loginScreenNotConfigured")
            #expect(error.reply.parameters["message"]?.string?.contains("session.user") == true)
        }
    }

    @Test func aFlowThePolicyDoesNotListIsRefused() async throws {
        let kiosk = try await Kiosk()
        do {
            _ = try await kiosk.start("worker1", flow: .nativeAuth)
            Issue.record("a flow the policy does not list started")
        } catch {
            #expect(accountErrorCode(error) == "flowNotAllowed")
        }
    }

    @Test func aWrongPasswordIsInvalidCredentialsSignsNobodyOutAndCountsByUsername() async throws {
        let kiosk = try await Kiosk()
        _ = try await kiosk.signIn("worker1", password: Kiosk.password1)
        let before = try kiosk.fixture.device.lastAuditSequence()
        let challenge = try await kiosk.start("worker2")
        do {
            _ = try await kiosk.broker.submitLoginScreenSignIn(
                .init(signInId: challenge.signInId, password: "not-the-password"),
                context: Kiosk.root
            )
            Issue.record("a wrong password signed in")
        } catch {
            #expect(accountErrorCode(error) == "identity")
            #expect(error.reply.parameters["identityCode"]?.string == "invalid_credentials")
        }
        #expect(try kiosk.currentWorker() == "worker1")
        let events = try kiosk.events(after: before)
        #expect(!events.contains { $0.type.rawValue == "account.signed_out" })
        #expect(events.contains { $0.type.rawValue == "account.sign_in_failed" && $0.account == "worker2" })
        // The same sign-in takes the right password next (it stayed open), and the switch happens then.
        let signIn = try await kiosk.broker.submitLoginScreenSignIn(
            .init(signInId: challenge.signInId, password: Kiosk.password2),
            context: Kiosk.root
        ).signIn
        #expect(signIn.account.username == "worker2")
    }

    @Test func anotherWorkerSignedInIsSwitchedOutUnderOneCorrelationId() async throws {
        let kiosk = try await Kiosk()
        _ = try await kiosk.signIn("worker1", password: Kiosk.password1)
        let before = try kiosk.fixture.device.lastAuditSequence()
        let signIn = try await kiosk.signIn("worker2", password: Kiosk.password2)
        #expect(signIn.account.username == "worker2")
        #expect(signIn.signedOut?.account?.username == "worker1")
        let events = try kiosk.events(after: before)
        let kinds = events.filter { $0.correlationID == signIn.correlationId }.map(\.type.rawValue)
        #expect(kinds == ["account.signed_out", "account.signed_in", "account.switched"], "\(events)")
        #expect(events.first { $0.type.rawValue == "account.signed_in" }?.details["via"] == "login-screen")
        #expect(try kiosk.currentWorker() == "worker2")
    }

    @Test func theSameWorkerAgainIsNoSwitch() async throws {
        let kiosk = try await Kiosk()
        _ = try await kiosk.signIn("worker1", password: Kiosk.password1)
        let before = try kiosk.fixture.device.lastAuditSequence()
        let again = try await kiosk.signIn("worker1", password: Kiosk.password1)
        #expect(again.signedOut == nil)
        #expect(!(try kiosk.events(after: before)).contains { $0.type.rawValue == "account.signed_out" })
        #expect(try kiosk.currentWorker() == "worker1")
    }

    @Test func refuseKeepsTheWorkerSignedInAndSaysAccountAlreadySignedIn() async throws {
        let kiosk = try await Kiosk(session: ["workerSignedIn": "refuse"])
        _ = try await kiosk.signIn("worker1", password: Kiosk.password1)
        do {
            _ = try await kiosk.signIn("worker2", password: Kiosk.password2)
            Issue.record("worker2 signed in over worker1")
        } catch {
            #expect(accountErrorCode(error) == "accountAlreadySignedIn")
        }
        #expect(try kiosk.currentWorker() == "worker1")
    }

    @Test func failuresAreCountedByTheUsernameNotAgainstRootAsAnApp() async throws {
        let kiosk = try await Kiosk()
        // The policy's limits: 3 failures, then a back-off of 30 s for that username.
        for _ in 0..<3 {
            let challenge = try await kiosk.start("worker2")
            await #expect(throws: BrokerFailure.self) {
                try await kiosk.broker.submitLoginScreenSignIn(
                    .init(signInId: challenge.signInId, password: "wrong"),
                    context: Kiosk.root
                )
            }
        }
        let held = try await kiosk.start("worker2")
        do {
            _ = try await kiosk.broker.submitLoginScreenSignIn(
                .init(signInId: held.signInId, password: Kiosk.password2),
                context: Kiosk.root
            )
            Issue.record("a username past its back-off was tried")
        } catch {
            #expect(error.reply.error == Broker1.LimitExceeded.qualifiedName)
            #expect(error.reply.parameters["message"]?.string?.contains("for this username") == true, "\(error.reply)")
        }
        // Root is no app that backs off: another worker signs in at once.
        let other = try await kiosk.signIn("worker1", password: Kiosk.password1)
        #expect(other.account.username == "worker1")
    }

    @Test func aDeviceCodeSignInAtTheLoginScreenShowsTheCodeThenSignsTheWorkerIn() async throws {
        let kiosk = try await Kiosk()
        let challenge = try await kiosk.start("worker1", flow: .deviceCode)
        #expect(challenge.challenge == .deviceCode)
        do {
            _ = try await kiosk.broker.submitLoginScreenSignIn(
                .init(signInId: challenge.signInId, password: Kiosk.password1),
                context: Kiosk.root
            )
            Issue.record("a device-code sign-in took a password")
        } catch {
            #expect(accountErrorCode(error) == "flowNotAllowed")
        }
        let (replies, continuation) = AsyncStream.makeStream(of: VarlinkReply.self)
        let broker = kiosk.broker
        let call = Task {
            try await broker.awaitLoginScreenDeviceCode(
                .init(signInId: challenge.signInId),
                context: Kiosk.root,
                replies: VarlinkReplyStream { reply in
                    continuation.yield(reply)
                    return true
                }
            )
        }
        var iterator = replies.makeAsyncIterator()
        let first = try #require(await iterator.next())
        let code = try #require(first.parameters["verification"]?.object?["userCode"]?.string, "\(first)")
        try await LocalIdentityProvider.shared().approve(code: code, user: "worker1")
        let last = try #require(await iterator.next())
        let signIn = try #require(last.parameters["signIn"]?.object, "\(last)")
        #expect(signIn["account"]?.object?["username"]?.string == "worker1")
        #expect(signIn["sessionUser"]?.string == Kiosk.sessionUser)
        #expect(last.parameters["accessToken"] == nil)
        try await call.value
        continuation.finish()
        #expect(try kiosk.events().last { $0.type.rawValue == "account.signed_in" }?.details["flow"] == "deviceCode")
    }
}
