import BrokerContract
import DeviceBroker
import Foundation
import KeychainStore
import SharedDevice
import StoreTestSupport
import Synchronization
import Testing
import Varlink

/// The broker's idle sign-out on a real store, with the idle clock moved by hand: the warning when
/// `warningSeconds` remain, its cancellation by activity, the global sign-out with reason `idle` at
/// `idleSignOutSeconds`, the clock kept across a restart, and nothing at all without a session.
/// (BrokerDaemonTests runs the same through the daemon with a scaled clock and with the real one.)
@Suite(.serialized)
struct IdleSignOutTests {
    /// A kiosk whose policy signs out after 30 s idle with a 10 s warning.
    static func idlePolicy(timeout: Int = 30, warning: Int = 10) throws -> Data {
        try Policies.edited { $0["session"] = ["idleSignOutSeconds": timeout, "warningSeconds": warning] }
    }

    @Test func warnsWhenTheWarningTimeRemainsThenSignsTheWorkerOutOfEveryApp() async throws {
        let kiosk = try await IdleKiosk(policy: try Self.idlePolicy())
        try await kiosk.signInAda()
        kiosk.clock.advance(by: 19)
        try await kiosk.expectNoEvent()
        kiosk.clock.advance(by: 1)
        let warning = try await kiosk.nextEvent()
        #expect(warning.kind == .idleWarning && warning.secondsLeft == 10, "\(warning)")
        #expect(warning.current?.username == Person.ada.username)
        let status = try await kiosk.idleState()
        #expect(status?.warning == true && status?.signOutIn == 10)

        kiosk.clock.advance(by: 10)
        let signedOut = try await kiosk.nextEvent()
        #expect(signedOut.kind == .signedOut && signedOut.reason == "idle", "\(signedOut)")
        #expect(try kiosk.fixture.accounts.currentAccount(for: try kiosk.fixture.scanner).current == nil)
        #expect(try kiosk.fixture.count(of: .ada, in: AccessGroup.adalCache) == 0)
        let audited = try #require(
            try kiosk.fixture.device.auditEvents(matching: AuditFilter(types: [.accountSignedOut])).last
        )
        #expect(audited.reason == "idle" && audited.actor == "deviced" && audited.details["scope"] == "global")
        // Nobody signed in: the clock stops (no second sign-out, no warning).
        kiosk.clock.advance(by: 120)
        try await kiosk.expectNoEvent()
        await kiosk.stop()
    }

    @Test func activityCancelsTheWarningAndStartsTheClockAgain() async throws {
        let kiosk = try await IdleKiosk(policy: try Self.idlePolicy())
        try await kiosk.signInAda()
        kiosk.clock.advance(by: 22)
        #expect(try await kiosk.nextEvent().kind == .idleWarning)

        // The launcher reports input: the apps hear the warning is off, and the worker has 30 s again.
        let reply = try await kiosk.call(Broker1.ReportActivity.self, .init(), as: IdleKiosk.scanner).get()
        #expect(reply.idle?.signOutIn == 30, "\(reply)")
        #expect(try await kiosk.nextEvent().kind == .idleWarningCanceled)
        kiosk.clock.advance(by: 15)
        try await kiosk.expectNoEvent()
        // An app's call on the worker's behalf is activity too (here a keychain lookup that finds nothing).
        let lookup = try await kiosk.call(
            Broker1.FindGenericPassword.self,
            .init(service: "none"),
            as: IdleKiosk.timeclock
        )
        #expect(lookup.refusal?.keychainError != nil, "\(lookup)")
        kiosk.clock.advance(by: 19)
        try await kiosk.expectNoEvent()
        kiosk.clock.advance(by: 1)
        #expect(try await kiosk.nextEvent().secondsLeft == 10)
        // A caller the policy does not list is no activity: the sign-out comes on time.
        _ = try await kiosk.call(Broker1.ReportActivity.self, .init(), as: IdleKiosk.stranger)
        kiosk.clock.advance(by: 10)
        #expect(try await kiosk.nextEvent().reason == "idle")
        await kiosk.stop()
    }

    @Test func aRestartKeepsTheIdleClockOfTheWorker() async throws {
        let kiosk = try await IdleKiosk(policy: try Self.idlePolicy())
        try await kiosk.signInAda()
        kiosk.clock.advance(by: 12)
        await kiosk.stop()  // the monitor writes the last activity as it stops

        // The broker starts again on the same store: 12 s of the worker's 30 are gone.
        let restarted = try await IdleKiosk(fixture: kiosk.fixture, clock: kiosk.clock)
        let idle = try #require(try await restarted.idleState(waitingForWorker: true))
        #expect(idle.idleSeconds == 12 && idle.signOutIn == 18, "\(idle)")
        restarted.clock.advance(by: 8)
        #expect(try await restarted.nextEvent().secondsLeft == 10)
        restarted.clock.advance(by: 10)
        #expect(try await restarted.nextEvent().reason == "idle")
        await restarted.stop()
    }

    @Test func aBrokerThatWasDownPastTheDeadlineSignsTheIdleWorkerOutAtStart() async throws {
        let kiosk = try await IdleKiosk(policy: try Self.idlePolicy())
        try await kiosk.signInAda()
        kiosk.clock.advance(by: 5)
        await kiosk.stop()
        kiosk.clock.advance(by: 3600)
        let restarted = try await IdleKiosk(fixture: kiosk.fixture, clock: kiosk.clock)
        #expect(try await restarted.nextEvent().reason == "idle")
        await restarted.stop()
    }

    @Test func withoutASessionNobodyIsSignedOutForBeingIdle() async throws {
        let kiosk = try await IdleKiosk(policy: try Policies.edited { $0.removeValue(forKey: "session") })
        try await kiosk.signInAda(waitForClock: false)
        kiosk.clock.advance(by: 86_400)
        try await kiosk.expectNoEvent()
        #expect(try kiosk.fixture.accounts.currentAccount(for: try kiosk.fixture.scanner).current == Person.ada.account)
        #expect(try await kiosk.idleState() == nil)
        let reply = try await kiosk.call(Broker1.ReportActivity.self, .init(), as: IdleKiosk.scanner).get()
        #expect(reply.idle == nil, "\(reply)")
        await kiosk.stop()
    }
}

/// A provisioned kiosk with a broker whose idle monitor runs on a hand-moved clock, and the timeclock
/// app's account-change subscription.
final class IdleKiosk {
    static let scanner: UInt32 = 1001, timeclock: UInt32 = 1002, stranger: UInt32 = 1003, root: UInt32 = 0

    let fixture: AccountFixture
    let clock: ManualIdleClock
    let broker: Broker
    private let monitor: Task<Void, Never>
    private let subscription: Task<Void, Never>
    /// Events received and not yet taken.
    private let received = EventBuffer()

    convenience init(policy: Data) async throws {
        try await self.init(fixture: try AccountFixture(policy: policy), clock: ManualIdleClock())
    }

    init(fixture: AccountFixture, clock: ManualIdleClock) async throws {
        self.fixture = fixture
        self.clock = clock
        let broker = Broker(device: fixture.device, idleClock: clock)
        self.broker = broker
        let caller = BrokerCaller(uid: Self.timeclock, gid: Self.timeclock, pid: 1, connectionID: 1)
        let received = self.received
        subscription = Task {
            let call = VarlinkCall(Broker1.SubscribeAccountChanges.self, .init(), more: true)
            await broker.handle(call, caller: caller) { reply in
                // A refusal carries no event; an event the contract cannot decode fails the test that takes it.
                if reply.error == nil {
                    received.append(
                        Result { try Broker1.SubscribeAccountChanges.Reply(varlinkFields: reply.parameters).event }
                    )
                }
                return !Task.isCancelled
            }
        }
        // The subscription is live before the monitor starts: a monitor that signs the worker out at once
        // (a broker down past the deadline) would otherwise do it before the app listens.
        let first = try await Self.next(from: received, timeout: Self.eventBound)
        try #require(first?.kind == .subscribed, "\(String(describing: first))")
        monitor = Task { await broker.runIdleMonitor() }
    }

    /// Stops the monitor (which then writes the last activity, as the daemon does on SIGTERM) and the subscription.
    func stop() async {
        monitor.cancel()
        await monitor.value
        subscription.cancel()
    }

    /// Signs Ada in (as root's devicectl would, straight to the store) and waits until the monitor times her.
    func signInAda(waitForClock: Bool = true) async throws {
        try fixture.signIn(.ada, app: try fixture.scanner)
        #expect(try await nextEvent().kind == .signedIn)
        if waitForClock { try #require(try await idleState(waitingForWorker: true) != nil) }
    }

    /// The broker's `GetStatus` idle clock (as root); with `waitingForWorker`, once the monitor times a worker.
    func idleState(waitingForWorker: Bool = false) async throws -> Broker1.IdleState? {
        let deadline = Date().addingTimeInterval(60)
        while true {
            let idle = try await call(Broker1.GetStatus.self, .init(), as: Self.root).get().status.idle
            if !waitingForWorker || idle?.signOutIn != nil { return idle }
            guard Date() < deadline else { throw IdleKioskError.timedOut("the monitor never timed the worker") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// One call of `method` as `uid`, its single reply decoded, or the refusal. It goes through the broker's
    /// `handle`, as the daemon's calls do, not straight to the typed method: `handle` is what counts an app's
    /// call (answered or refused by the keychain) as the worker's activity, which these tests watch.
    /// - Throws: `VarlinkFieldError` when the reply does not match the contract; `IdleKioskError` without one.
    func call<Method: VarlinkMethod>(
        _ method: Method.Type,
        _ parameters: Method.Parameters,
        as uid: UInt32
    ) async throws
        -> Result<Method.Reply, BrokerRefusal>
    {
        let replies = Mutex<[VarlinkReply]>([])
        await broker.handle(
            VarlinkCall(method, parameters),
            caller: BrokerCaller(uid: uid, gid: uid, pid: 2, connectionID: UInt64(100 + uid))
        ) { reply in
            replies.withLock { $0.append(reply) }
            return true
        }
        guard let reply = replies.withLock({ $0.first }) else { throw IdleKioskError.noReply(Method.qualifiedName) }
        if reply.error != nil { return .failure(try BrokerRefusal(BrokerFailure(reply: reply))) }
        return .success(try Method.Reply(varlinkFields: reply.parameters))
    }

    /// The subscription's next event (within `timeout` of real time: generous, because other suites in the
    /// same process may hold the cooperative threads for seconds).
    func nextEvent(timeout: TimeInterval = eventBound) async throws -> Broker1.AccountEvent {
        guard let event = try await next(timeout: timeout) else {
            throw IdleKioskError.timedOut("no event within \(timeout) s")
        }
        return event
    }

    /// How long an event that is due may take to arrive: a bound for a hang, not a speed (a loaded machine
    /// took 106 s for the first).
    static let eventBound: TimeInterval = 300

    /// No event within half a second of real time.
    func expectNoEvent(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let event = try await next(timeout: 0.5)
        #expect(event == nil, "unexpected event \(String(describing: event))", sourceLocation: sourceLocation)
    }

    private func next(timeout: TimeInterval) async throws -> Broker1.AccountEvent? {
        try await Self.next(from: received, timeout: timeout)
    }

    private static func next(from received: EventBuffer, timeout: TimeInterval) async throws -> Broker1.AccountEvent? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let event = received.take() { return try event.get() }
            try await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }
}

/// The events a subscription delivered, oldest first, each decoded (or why it could not be).
final class EventBuffer: Sendable {
    private let events = Mutex<[Result<Broker1.AccountEvent, any Error>]>([])
    func append(_ event: Result<Broker1.AccountEvent, any Error>) { events.withLock { $0.append(event) } }
    func take() -> Result<Broker1.AccountEvent, any Error>? { events.withLock { $0.isEmpty ? nil : $0.removeFirst() } }
}

enum IdleKioskError: Error {
    case timedOut(String)
    /// The broker ended the call without a reply.
    case noReply(String)
}

/// An idle clock moved by hand: `sleep(until:)` returns when `advance(by:)` reaches the deadline.
final class ManualIdleClock: IdleClock {
    private struct Sleeper {
        let deadline: Date
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let state = Mutex<(now: Date, next: Int, sleepers: [Int: Sleeper], canceled: Set<Int>)>(
        (Date(timeIntervalSince1970: 1_800_000_000), 0, [:], [])
    )

    func now() -> Date { state.withLock { $0.now } }

    func advance(by seconds: TimeInterval) {
        let due = state.withLock { state -> [Sleeper] in
            state.now = state.now.addingTimeInterval(seconds)
            let due = state.sleepers.filter { $0.value.deadline <= state.now }
            for id in due.keys { state.sleepers.removeValue(forKey: id) }
            return Array(due.values)
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    func sleep(until deadline: Date) async throws {
        let id = state.withLock { state -> Int in
            defer { state.next += 1 }
            return state.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { state -> Result<Void, any Error>? in
                    if state.canceled.remove(id) != nil { return .failure(CancellationError()) }
                    if state.now >= deadline { return .success(()) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                if let sleeper = state.sleepers.removeValue(forKey: id) { return sleeper }
                state.canceled.insert(id)
                return nil
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }
}

extension Result where Failure == BrokerRefusal {
    /// The refusal; nil when the broker answered.
    var refusal: BrokerRefusal? {
        if case .failure(let refusal) = self { refusal } else { nil }
    }
}
