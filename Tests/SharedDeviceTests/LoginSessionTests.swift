import BrokerContract
@_spi(Testing) import DeviceBroker
import Foundation
import SharedDevice
import StoreTestSupport
import TestTags
import Testing
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// The shift's login session (OpenLoginSession, CloseLoginSession, the end of the session at a sign-out)
/// through the broker in the test's process: a worker signs in at the login screen by password against
/// the real local provider; logind is a recording stand-in (there is none outside a booted systemd), and
/// the graces run on a clock the test moves.
@Suite(.tags(.integration, .needsIdentityProvider)) struct LoginSessionTests {
    typealias Kiosk = LoginScreenKiosk

    @Test func openingRecordsTheSessionAuditsItAndStatusShowsIt() async throws {
        let kiosk = try await Kiosk(session: ["resetHome": true])
        let (signIn, opened) = try await kiosk.signInAndOpen(session: "c1")
        #expect(opened.session.sessionId == "c1")
        #expect(opened.session.user == Kiosk.sessionUser)
        #expect(opened.session.account?.username == "worker1")
        #expect(opened.session.onSignOut == .terminate)
        #expect(opened.session.loginScreen.tty == "tty1")
        #expect(opened.resetHome)
        #expect(try kiosk.shiftSession()?.sessionId == "c1")
        let event = try #require(try kiosk.events().last { $0.type.rawValue == "session.opened" })
        #expect(event.correlationID == signIn.correlationId)
        #expect(event.details["sessionId"] == "c1")
        #expect(event.details["service"] == "login")
        #expect(event.account == "worker1")
    }

    @Test func aSessionLogindDoesNotHaveOrOfAnotherUserIsRefused() async throws {
        let kiosk = try await Kiosk()
        let signIn = try await kiosk.signIn("worker1", password: Kiosk.password1)
        do {
            _ = try await kiosk.open("c9", signIn.correlationId)
            Issue.record("a session logind does not have was recorded")
        } catch {
            #expect(accountErrorCode(error) == "sessionNotFound")
        }
        kiosk.sessions.add("c2", uid: 0)
        do {
            _ = try await kiosk.open("c2", signIn.correlationId)
            Issue.record("root's session was recorded as the shift's")
        } catch {
            #expect(accountErrorCode(error) == "sessionUserMismatch")
        }
        do {
            _ = try await kiosk.open("c2", "not-a-sign-in")
            Issue.record("a session was recorded for no sign-in")
        } catch {
            #expect(accountErrorCode(error) == "noCurrentAccount")
        }
        do {
            _ = try await kiosk.broker.openLoginSession(
                .init(sessionId: "c2", correlationId: signIn.correlationId, loginScreen: Kiosk.place),
                context: Kiosk.scanner
            )
            Issue.record("an app recorded a session")
        } catch {
            #expect(error.reply.error == "org.varlink.service.PermissionDenied")
        }
        #expect(try kiosk.shiftSession() == nil)
    }

    @Test func aGlobalSignOutTerminatesTheSessionThenKillsWhatLingersAfterTheGrace() async throws {
        let kiosk = try await Kiosk(session: ["terminateGraceSeconds": 7])
        let watch = kiosk.broker.startLoginSessionWatch()
        defer { watch.cancel() }
        try await kiosk.signInAndOpen(session: "c1", lingering: true)
        let before = try kiosk.fixture.device.lastAuditSequence()
        _ = try await kiosk.broker.signOut(.init(), context: Kiosk.root)
        #expect(await kiosk.eventually { kiosk.sessions.calls == [.terminate("c1")] })
        #expect(try kiosk.shiftSession() == nil)
        // The grace runs on the test's clock: no SIGKILL until it has passed.
        kiosk.clock.advance(by: 6)
        #expect(kiosk.sessions.calls == [.terminate("c1")])
        kiosk.clock.advance(by: 1)
        let ended = try #require(try await kiosk.event("session.terminated", after: before))
        #expect(kiosk.sessions.calls == [.terminate("c1"), .kill("c1", SIGKILL)])
        #expect(kiosk.sessions.liveSessions.isEmpty)
        #expect(ended.details["sessionId"] == "c1")
        #expect(ended.details["action"] == "terminate")
        #expect(ended.details["sigkill"] == "true")
        let signedOut = try #require(try kiosk.events(after: before).first { $0.type.rawValue == "account.signed_out" })
        #expect(ended.correlationID == signedOut.correlationID)
        // Sign-out → session end → close → sign-out: the close that follows changes nothing.
        let closed = try await kiosk.close("c1")
        #expect(closed.account == nil)
        #expect(try kiosk.events(after: before).filter { $0.type.rawValue == "account.signed_out" }.count == 1)
    }

    @Test func rootsSignOutOnTheStoreWhileTheBrokerRunsEndsTheSessionToo() async throws {
        let kiosk = try await Kiosk(session: ["onSignOut": "lock"])
        let watch = kiosk.broker.startLoginSessionWatch()
        defer { watch.cancel() }
        try await kiosk.signInAndOpen(session: "c3")
        // Another process (root's `devicectl signout` on the store): the broker hears it through the state
        // directory's change signal, not through its own account manager.
        let other = try kiosk.fixture.secondDevice()
        let outcome = try AccountManager(device: other).signOut(app: nil, reason: .admin)
        #expect(outcome.account?.username == "worker1")
        let ended = try #require(try await kiosk.event("session.terminated"))
        #expect(kiosk.sessions.calls == [.lock("c3")])
        let signedOut = try #require(try kiosk.events().last { $0.type.rawValue == "account.signed_out" })
        #expect(ended.correlationID == signedOut.correlationID)
    }

    @Test func theIdleSignOutEndsTheSessionAsTheDaemonRunsIt() async throws {
        let kiosk = try await Kiosk(session: ["idleSignOutSeconds": 30, "warningSeconds": 10, "onSignOut": "lock"])
        // What deviced runs beside its server: the idle sign-out and the session's watch.
        let background = Task { await kiosk.broker.runIdleMonitor() }
        defer { background.cancel() }
        try await kiosk.signInAndOpen(session: "c14")
        // The idle clock runs from the sign-in once the monitor has heard of it.
        #expect(
            await kiosk.eventually {
                (try? kiosk.broker.getStatus(.init(), context: Kiosk.root))?.status.idle?.signOutIn == 30
            }
        )
        kiosk.clock.advance(by: 30)
        let ended = try #require(try await kiosk.event("session.terminated"))
        let signedOut = try #require(try kiosk.events().last { $0.type.rawValue == "account.signed_out" })
        #expect(signedOut.reason == "idle")
        #expect(ended.correlationID == signedOut.correlationID)
        #expect(kiosk.sessions.calls == [.lock("c14")])
    }

    @Test func aSessionThatEndsAtSIGTERMIsNotKilled() async throws {
        let kiosk = try await Kiosk()
        let watch = kiosk.broker.startLoginSessionWatch()
        defer { watch.cancel() }
        try await kiosk.signInAndOpen(session: "c1")
        let before = try kiosk.fixture.device.lastAuditSequence()
        _ = try await kiosk.broker.signOut(.init(), context: Kiosk.root)
        #expect(await kiosk.eventually { kiosk.sessions.calls == [.terminate("c1")] })
        kiosk.clock.advance(by: 5)
        let ended = try #require(try await kiosk.event("session.terminated", after: before))
        #expect(ended.details["sigkill"] == "false")
        #expect(kiosk.sessions.calls == [.terminate("c1")])
    }

    @Test(arguments: ["lock", "none"]) func lockAndNoneEndTheSessionAsThePolicySays(_ action: String) async throws {
        let kiosk = try await Kiosk(session: ["onSignOut": action])
        let watch = kiosk.broker.startLoginSessionWatch()
        defer { watch.cancel() }
        let (_, opened) = try await kiosk.signInAndOpen(session: "c4")
        #expect(opened.session.onSignOut.rawValue == action)
        let before = try kiosk.fixture.device.lastAuditSequence()
        _ = try await kiosk.broker.signOut(.init(), context: Kiosk.root)
        let ended = try #require(try await kiosk.event("session.terminated", after: before))
        #expect(ended.details["action"] == action)
        #expect(kiosk.sessions.calls == (action == "lock" ? [.lock("c4")] : []))
        #expect(kiosk.sessions.liveSessions == ["c4"])
        #expect(try kiosk.shiftSession() == nil)
    }

    @Test func closingTheSessionSignsTheWorkerOutOnceAndTerminatesNothing() async throws {
        let kiosk = try await Kiosk()
        let watch = kiosk.broker.startLoginSessionWatch()
        defer { watch.cancel() }
        try await kiosk.signInAndOpen(session: "c5")
        let before = try kiosk.fixture.device.lastAuditSequence()
        let closed = try await kiosk.close("c5")
        #expect(closed.account?.username == "worker1")
        #expect(try kiosk.currentWorker() == nil)
        let signedOut = try #require(try kiosk.events(after: before).first { $0.type.rawValue == "account.signed_out" })
        #expect(signedOut.reason == "session-end")
        // Again, and a session that never was the shift's: nothing changes.
        #expect(try await kiosk.close("c5").account == nil)
        #expect(try await kiosk.close("c77").account == nil)
        #expect(try kiosk.events(after: before).filter { $0.type.rawValue == "account.signed_out" }.count == 1)
        // The watch hears that sign-out and ends nothing: the next shift's sign-out is the first it ends.
        try await kiosk.signInAndOpen(session: "c6")
        _ = try await kiosk.broker.signOut(.init(), context: Kiosk.root)
        #expect(await kiosk.eventually { !kiosk.sessions.calls.isEmpty })
        #expect(kiosk.sessions.calls == [.terminate("c6")])
        #expect(try kiosk.events(after: before).filter { $0.type.rawValue == "session.terminated" }.isEmpty)
    }

    @Test func aWorkerWhoseSessionNeverOpensIsSignedOutAfterTheGrace() async throws {
        let kiosk = try await Kiosk(session: ["openGraceSeconds": 30])
        let signIn = try await kiosk.signIn("worker1", password: Kiosk.password1)
        kiosk.clock.advance(by: 29)
        #expect(try kiosk.currentWorker() == "worker1")
        kiosk.clock.advance(by: 1)
        await kiosk.broker.settleLoginSessionGraces()
        #expect(try kiosk.currentWorker() == nil)
        let signedOut = try #require(try kiosk.events().last { $0.type.rawValue == "account.signed_out" })
        #expect(signedOut.reason == "session-end")
        // The session can no longer open for that sign-in.
        kiosk.sessions.add("c6", uid: Kiosk.sessionUID)
        do {
            _ = try await kiosk.open("c6", signIn.correlationId)
            Issue.record("a session opened for a worker signed out")
        } catch {
            #expect(accountErrorCode(error) == "noCurrentAccount")
        }
    }

    @Test func aWorkersGraceOutlivesARestartOfTheDaemon() async throws {
        let kiosk = try await Kiosk(session: ["openGraceSeconds": 30])
        _ = try await kiosk.signIn("worker1", password: Kiosk.password1)
        let pending = kiosk.fixture.directory.url.appendingPathComponent("login-pending.json").path
        #expect(FileManager.default.fileExists(atPath: pending))
        #expect(!(try String(contentsOfFile: pending, encoding: .utf8)).contains(Kiosk.password1))
        // The daemon stops (its waits end with it) and starts again before the worker's session opens.
        kiosk.broker.stopLoginSessionGraces()
        kiosk.restartBroker()
        await kiosk.broker.reconcileLoginSession()
        kiosk.clock.advance(by: 29)
        #expect(try kiosk.currentWorker() == "worker1")
        kiosk.clock.advance(by: 1)
        await kiosk.broker.settleLoginSessionGraces()
        #expect(try kiosk.currentWorker() == nil)
        #expect(try kiosk.events().last { $0.type.rawValue == "account.signed_out" }?.reason == "session-end")
        #expect(!FileManager.default.fileExists(atPath: pending))
    }

    @Test func aSessionOpenedWithinTheGraceKeepsTheWorkerSignedIn() async throws {
        let kiosk = try await Kiosk(session: ["openGraceSeconds": 30])
        try await kiosk.signInAndOpen(session: "c7")
        kiosk.clock.advance(by: 30)
        await kiosk.broker.settleLoginSessionGraces()
        #expect(try kiosk.currentWorker() == "worker1")
        #expect(try kiosk.shiftSession()?.sessionId == "c7")
    }

    @Test func logindRemovingTheSessionSignsItsWorkerOut() async throws {
        let kiosk = try await Kiosk()
        let watch = kiosk.broker.startLoginSessionWatch()
        defer { watch.cancel() }
        try await kiosk.signInAndOpen(session: "c8")
        kiosk.sessions.remove("c8")
        #expect(await kiosk.eventually { (try? kiosk.currentWorker()) == nil })
        let signedOut = try #require(try kiosk.events().last { $0.type.rawValue == "account.signed_out" })
        #expect(signedOut.reason == "session-end")
        #expect(try kiosk.shiftSession() == nil)
        #expect(kiosk.sessions.calls.isEmpty)
    }

    @Test func theRecordSurvivesARestartAndASessionGoneMeanwhileSignsItsWorkerOutAtStart() async throws {
        let kiosk = try await Kiosk()
        try await kiosk.signInAndOpen(session: "c10")
        // Kept in the state directory, the owner's alone, naming no secret.
        let file = kiosk.fixture.directory.url.appendingPathComponent("shift-session.json").path
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let kept = try String(contentsOfFile: file, encoding: .utf8)
        #expect(kept.contains("\"sessionId\":\"c10\""))
        #expect(!kept.contains(Kiosk.password1))
        kiosk.restartBroker()
        #expect(try kiosk.shiftSession()?.sessionId == "c10")
        // Still there at start: nothing changes.
        await kiosk.broker.reconcileLoginSession()
        #expect(try kiosk.shiftSession()?.sessionId == "c10")
        #expect(try kiosk.currentWorker() == "worker1")
        // The greeter crashed while the broker was down: no close_session, the session is gone.
        kiosk.sessions.remove("c10")
        kiosk.restartBroker()
        await kiosk.broker.reconcileLoginSession()
        #expect(try kiosk.currentWorker() == nil)
        #expect(try kiosk.shiftSession() == nil)
        #expect(try kiosk.events().last { $0.type.rawValue == "account.signed_out" }?.reason == "session-end")
        kiosk.restartBroker()
        #expect(try kiosk.shiftSession() == nil)
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    @Test func aSignOutWhileTheBrokerWasDownEndsTheSessionAtStart() async throws {
        let kiosk = try await Kiosk(session: ["onSignOut": "lock"])
        try await kiosk.signInAndOpen(session: "c11")
        // Root's `devicectl signout` on the store, with no broker watching.
        _ = try AccountManager(device: kiosk.fixture.device).signOut(app: nil, reason: .admin)
        kiosk.restartBroker()
        await kiosk.broker.reconcileLoginSession()
        #expect(kiosk.sessions.calls == [.lock("c11")])
        #expect(try kiosk.shiftSession() == nil)
        #expect(try kiosk.events().last?.type.rawValue == "session.terminated")
    }

    @Test func aLoginScreenSwitchEndsThePreviousWorkersSession() async throws {
        let kiosk = try await Kiosk(session: ["onSignOut": "lock"])
        let watch = kiosk.broker.startLoginSessionWatch()
        defer { watch.cancel() }
        try await kiosk.signInAndOpen(session: "c12")
        let (switched, _) = try await kiosk.signInAndOpen("worker2", password: Kiosk.password2, session: "c13")
        #expect(switched.signedOut?.account?.username == "worker1")
        let ended = try #require(try await kiosk.event("session.terminated"))
        #expect(ended.details["sessionId"] == "c12")
        #expect(ended.correlationID == switched.correlationId)
        // The new worker's session stays the shift's.
        #expect(await kiosk.eventually { kiosk.sessions.calls == [.lock("c12")] })
        #expect(try kiosk.shiftSession()?.sessionId == "c13")
    }
}
