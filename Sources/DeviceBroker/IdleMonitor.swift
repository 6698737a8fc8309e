import Foundation
import Logging
import SharedDevice
import Synchronization

/// The policy's idle sign-out (`session.idleSignOutSeconds`, `session.warningSeconds`) on a shared
/// device, as Intune's Managed Home Screen and Shared iPad do it: the broker keeps the worker's last
/// activity (any app call on the worker's behalf, and `ReportActivity` from a kiosk shell or launcher);
/// when `warningSeconds` remain it pushes `idleWarning` to every subscribed app; activity after that
/// pushes `idleWarningCanceled`; at `idleSignOutSeconds` it signs the worker out of every app with reason
/// `idle` (audited, actor `deviced`). A policy without a session (0 s), a private device, or nobody
/// signed in: nothing happens.
///
/// The last activity is persisted (`IdleActivityFile`) at most every tenth of the timeout and when the
/// monitor stops, so a restart keeps an idle worker's clock and does not sign out an active one.
final class IdleMonitor: Sendable {
    private struct State {
        /// The worker the clock runs for (home account id), once the monitor has looked.
        var worker: String?
        var lastActivity: Date
        var warned = false
        /// The last activity as written to the file, and when (clock time) it was written.
        var persisted: (activity: Date, at: Date)?
        var wake: AsyncStream<Void>.Continuation?
    }

    /// The actor of an idle sign-out in the audit log.
    static let actor = "deviced"
    /// How long the monitor sleeps at most (clock seconds), so a changed policy takes effect.
    static let longestSleep: TimeInterval = 60

    private let clock: any IdleClock
    private let accounts: AccountManager
    private let events: AccountEventHub
    private let policy: @Sendable () -> DevicePolicy?
    private let file: IdleActivityFile
    private let logger: Logger
    private let state: Mutex<State>

    init(
        clock: any IdleClock,
        accounts: AccountManager,
        events: AccountEventHub,
        file: IdleActivityFile,
        logger: Logger,
        policy: @escaping @Sendable () -> DevicePolicy?
    ) {
        self.clock = clock
        self.accounts = accounts
        self.events = events
        self.file = file
        self.logger = logger
        self.policy = policy
        state = Mutex(State(lastActivity: clock.now()))
    }

    /// The idle timeout and warning when idle sign-out applies (a shared device whose policy sets one).
    private func session() -> DevicePolicy.Session? {
        guard let policy = policy(), policy.device.mode == .shared, policy.session.idleSignOutSeconds > 0 else {
            return nil
        }
        return policy.session
    }

    // MARK: - Activity

    /// The worker did something: the idle clock starts again, and a warning that was out is canceled
    /// (pushed to every subscriber). Cheap: called on every app call.
    func recordActivity() {
        let now = clock.now()
        state.withLock { state in
            if now > state.lastActivity { state.lastActivity = now }
            guard state.warned else { return }
            state.warned = false
            // Under the lock, so a warning and its cancellation reach apps in the order they happened.
            events.publish(.idleWarningCanceled)
            state.wake?.yield()
        }
    }

    /// A worker signed in (or a switch brought the next one): their clock starts now.
    private func workerSignedIn() {
        let now = clock.now()
        state.withLock { state in
            state.lastActivity = now
            state.worker = nil  // looked up again at the next evaluation
            state.warned = false
        }
    }

    /// The idle clock now (as `GetStatus` and `ReportActivity` report it), or `nil` when idle sign-out does
    /// not apply.
    func snapshot() -> IdleState? {
        guard let session = session() else { return nil }
        let now = clock.now()
        return state.withLock { state -> IdleState in
            var snapshot = IdleState(
                idleSignOutSeconds: session.idleSignOutSeconds,
                warningSeconds: session.warningSeconds,
                warning: state.warned
            )
            if state.worker != nil {
                let idle = max(0, now.timeIntervalSince(state.lastActivity))
                snapshot.idleSeconds = idle
                snapshot.signOutIn = max(0, Double(session.idleSignOutSeconds) - idle)
            }
            return snapshot
        }
    }

    // MARK: - The clock

    /// Runs until the task is cancelled: restores the persisted activity, then warns and signs out on time.
    func run() async {
        let (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        state.withLock { $0.wake = wake }
        restore()
        // Sign-ins start the clock; every account change is looked at at once.
        let changes = events.subscribe()
        let forwarder = Task { [weak self] in
            for await event in changes {
                guard let self else { return }
                if case .account(let change) = event, change.kind == .signedIn || change.kind == .switched {
                    self.workerSignedIn()
                }
                wake.yield()
            }
        }
        var timer: Task<Void, Never>?
        defer {
            forwarder.cancel()
            timer?.cancel()
            persist(force: true)
            state.withLock { $0.wake = nil }
        }
        var iterator = wakes.makeAsyncIterator()
        while !Task.isCancelled {
            let next = evaluate()
            timer?.cancel()
            timer = Task { [clock] in
                do {
                    try await clock.sleep(until: next)
                    wake.yield()
                } catch {}  // replaced by a newer timer
            }
            guard await iterator.next() != nil else { break }
        }
    }

    /// At start: the persisted activity of the worker still signed in, so a restart does not reset the clock.
    private func restore() {
        let lookup = currentWorker()
        let worker = (try? lookup.get()) ?? nil
        let now = clock.now()
        let record = file.read(logger: logger)
        let restored = state.withLock { state -> Date? in
            state.worker = worker
            guard let worker, let record, record.account == worker else {
                state.lastActivity = now
                return nil
            }
            state.lastActivity = min(now, Date(timeIntervalSince1970: record.lastActivity))
            state.persisted = (state.lastActivity, now)
            return state.lastActivity
        }
        if let restored {
            logger.debug("idle clock restored", metadata: ["idle.seconds": "\(Int(now.timeIntervalSince(restored)))"])
        } else if record != nil, case .success = lookup {
            file.remove()  // another worker's, or nobody is signed in
        }
    }

    /// Warns or signs out when it is time; returns when to look again.
    private func evaluate() -> Date {
        let now = clock.now()
        let session = session()
        let lookup = session == nil ? .success(nil) : currentWorker()
        // the store failed: look again soon
        guard case .success(let found) = lookup else { return now.addingTimeInterval(1) }
        guard let session, let worker = found else {
            let hadWorker = state.withLock { state -> Bool in
                defer {
                    state.worker = nil
                    state.warned = false
                    state.persisted = nil
                }
                return state.persisted != nil
            }
            if hadWorker { file.remove() }
            return now.addingTimeInterval(Self.longestSleep)
        }
        let timeout = TimeInterval(session.idleSignOutSeconds)
        let warning = TimeInterval(session.warningSeconds)
        let persistInterval = max(1, timeout / 10)
        enum Action { case none, signOut }
        let (action, next) = state.withLock { state -> (Action, Date) in
            if state.worker != worker {
                // A worker the monitor has not timed yet (signed in while it was not looking): from now.
                state.worker = worker
                state.lastActivity = max(state.lastActivity, now)
                state.warned = false
            }
            let deadline = state.lastActivity.addingTimeInterval(timeout)
            if now >= deadline { return (.signOut, now) }
            let warnAt = deadline.addingTimeInterval(-warning)
            if warning > 0, !state.warned, now >= warnAt {
                state.warned = true
                events.publish(.idleWarning(secondsLeft: Int(deadline.timeIntervalSince(now).rounded(.up))))
            }
            let due = state.warned || warning <= 0 ? deadline : warnAt
            return (.none, min(due, now.addingTimeInterval(min(persistInterval, Self.longestSleep))))
        }
        persist(force: false, interval: persistInterval)
        if case .signOut = action { return signOutIdleWorker(now: now) }
        return next
    }

    /// The idle sign-out: globally, reason `idle`, audited with actor `deviced`.
    private func signOutIdleWorker(now: Date) -> Date {
        do {
            let outcome = try accounts.signOut(app: nil, reason: .idle, actor: Self.actor)
            logger.debug("idle sign-out", metadata: ["items": "\(outcome.itemsRemoved)"])
        } catch  where error.code == .noCurrentAccount {
            // Signed out meanwhile by someone else.
        } catch {
            logger.debug("idle sign-out failed; trying again", metadata: ["error.code": "\(error.code)"])
            return now.addingTimeInterval(1)
        }
        state.withLock { state in
            state.worker = nil
            state.warned = false
            state.persisted = nil
        }
        file.remove()
        return now.addingTimeInterval(Self.longestSleep)
    }

    /// The signed-in worker's home account id (`nil`: nobody is signed in), or the store's failure.
    private func currentWorker() -> Result<String?, SharedDeviceError> {
        do throws(SharedDeviceError) {
            return .success(try accounts.accounts().first { $0.signedIn }?.account.homeAccountID)
        } catch {
            logger.debug(
                "idle clock: the store could not say who is signed in",
                metadata: ["error.code": "\(error.code)"]
            )
            return .failure(error)
        }
    }

    /// Writes the last activity when it changed and `interval` passed since the last write (always with `force`).
    private func persist(force: Bool, interval: TimeInterval = 0) {
        let now = clock.now()
        let record = state.withLock { state -> IdleActivityFile.Record? in
            guard let worker = state.worker else { return nil }
            if let persisted = state.persisted {
                guard persisted.activity != state.lastActivity else { return nil }
                guard force || now.timeIntervalSince(persisted.at) >= interval else { return nil }
            }
            state.persisted = (state.lastActivity, now)
            return IdleActivityFile.Record(account: worker, lastActivity: state.lastActivity.timeIntervalSince1970)
        }
        if let record { file.write(record, logger: logger) }
    }
}
