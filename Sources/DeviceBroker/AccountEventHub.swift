import Foundation
import SharedDevice
import Synchronization

/// What the broker pushes to subscribed apps: the device's account changes (from the audit log, whoever
/// committed them) and the idle monitor's warnings (the broker's own).
enum BrokerEvent: Sendable, Equatable {
    case account(AccountChange)
    /// The worker will be signed out for inactivity in `secondsLeft` seconds unless there is activity.
    case idleWarning(secondsLeft: Int)
    /// Activity came after a warning: the idle sign-out is off until the next warning.
    case idleWarningCanceled
}

/// One watch of the device's account changes, fanned out to every subscriber, together with the idle
/// events the broker publishes itself. The account manager's change stream hands over the broker's own
/// changes (sign-ins, sign-outs, switches through its one `AccountManager`) as they commit; other
/// processes' (provisioning, key rotation, a sign-out while the broker was down) arrive through the
/// state directory's signal file, an inotify wake-up and a read of the audit log. Each change once, by
/// its audit sequence number.
final class AccountEventHub: Sendable {
    private let accountManager: AccountManager
    private let subscribers = Mutex<
        (started: Bool, next: Int, continuations: [Int: AsyncStream<BrokerEvent>.Continuation])
    >((false, 0, [:]))

    init(accountManager: AccountManager) {
        self.accountManager = accountManager
    }

    /// The events from now on, until the consumer stops iterating.
    func subscribe() -> AsyncStream<BrokerEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: BrokerEvent.self,
            bufferingPolicy: .bufferingNewest(256)
        )
        let (id, start) = subscribers.withLock { state -> (Int, Bool) in
            let id = state.next
            state.next += 1
            state.continuations[id] = continuation
            defer { state.started = true }
            return (id, !state.started)
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.continuations.removeValue(forKey: id) }
        }
        if start { startWatching() }
        return stream
    }

    /// Hands `event` to every subscriber.
    func publish(_ event: BrokerEvent) {
        let continuations = subscribers.withLock { Array($0.continuations.values) }
        for continuation in continuations { continuation.yield(event) }
    }

    /// Subscribers now.
    var subscriberCount: Int { subscribers.withLock { $0.continuations.count } }

    private func startWatching() {
        // The account manager's stream yields the broker's own changes on the committing thread and the
        // others' on a thread of its own (it blocks on inotify), so this task only hands changes on.
        let changes = accountManager.changes(fallbackInterval: .seconds(2))
        Task.detached { [weak self] in
            for await change in changes {
                guard let self else { return }
                self.publish(.account(change))
            }
        }
    }
}
