import KeychainStore
import Synchronization

/// The audit events this process appended through one `ManagedDevice`, handed to listeners in the same
/// process as soon as their transaction commits (`StoreTransaction.afterCommit`), so that they learn of the
/// process's own changes without the change signal's round trip and a read of the log. Changes made by
/// other processes never come this way: those listeners also follow the change signal.
///
/// A listener sees each committed event once, in commit order within a transaction; events of concurrent
/// transactions may reach it out of sequence order (it orders them itself, by sequence number).
final class CommittedAuditEvents: Sendable {
    typealias Listener = @Sendable (AuditEvent) -> Void

    private let listeners = Mutex<(next: Int, byID: [Int: Listener])>((0, [:]))

    /// Calls `listener` with every event committed from now on, until `stopListening` with the returned id.
    func listen(_ listener: @escaping Listener) -> Int {
        listeners.withLock { state in
            defer { state.next += 1 }
            state.byID[state.next] = listener
            return state.next
        }
    }

    func stopListening(_ id: Int) {
        _ = listeners.withLock { $0.byID.removeValue(forKey: id) }
    }

    /// Hands `event`, just appended in `transaction`, to the listeners once the transaction commits.
    /// Nothing is arranged when nobody listens: a listener that starts later reads the log first.
    func announce(_ event: AuditEvent, after transaction: StoreTransaction) {
        guard listeners.withLock({ !$0.byID.isEmpty }) else { return }
        transaction.afterCommit { [self] in
            for listener in listeners.withLock({ Array($0.byID.values) }) { listener(event) }
        }
    }
}
