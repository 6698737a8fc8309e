import Foundation
import SharedDevice
import Synchronization

/// One watch of the device's account changes (the account manager's change stream: an inotify wake-up
/// after every commit by any process, then the new audit events), fanned out to every subscriber.
final class AccountEventHub: Sendable {
    private let accountManager: AccountManager
    private let subscribers = Mutex<(started: Bool, next: Int, continuations: [Int: AsyncStream<AccountChange>.Continuation])>((false, 0, [:]))

    init(accountManager: AccountManager) {
        self.accountManager = accountManager
    }

    /// The changes committed from now on, until the consumer stops iterating.
    func subscribe() -> AsyncStream<AccountChange> {
        let (stream, continuation) = AsyncStream.makeStream(of: AccountChange.self, bufferingPolicy: .bufferingNewest(256))
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

    /// Subscribers now.
    var subscriberCount: Int { subscribers.withLock { $0.continuations.count } }

    private func startWatching() {
        // The account manager's stream runs its own thread (it blocks on inotify), so this task only
        // hands changes on.
        let changes = accountManager.changes(fallbackInterval: .seconds(2))
        Task.detached { [weak self] in
            for await change in changes {
                guard let self else { return }
                let continuations = self.subscribers.withLock { Array($0.continuations.values) }
                for continuation in continuations { continuation.yield(change) }
            }
        }
    }
}
