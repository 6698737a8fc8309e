// The other side of the account change event: a second store object waiting on `changes()`.
import Foundation
import KeychainStore
import SharedDevice
import Synchronization

/// A second `KeychainStore` object on the same directory (its own SQLite connection, as another process would
/// have) whose `AccountManager.changes()` stream is consumed by a task that counts the global sign-outs it sees.
final class ChangeWaiter: Sendable {
    /// Global sign-outs received so far.
    private let received: Counter
    private let listener: Task<Void, Never>

    init(directory: URL) throws {
        let store = try KeychainStore(directory: directory, options: StoreOptions(synchronous: .normal))
        let stream = AccountManager(device: ManagedDevice(store: store)).changes(fallbackInterval: .seconds(60))
        let received = Counter()
        self.received = received
        listener = Task.detached {
            for await change in stream where change.kind == .signedOutGlobally {
                received.increment()
            }
        }
    }

    deinit { listener.cancel() }

    /// The number of global sign-outs received so far.
    var count: Int { received.value }

    /// Waits (polling every 200 µs, as the old driver did) until more than `count` sign-outs were received.
    /// - Returns: false if none arrived within `timeout` seconds.
    func waitUntil(moreThan count: Int, timeout: Double = 5) -> Bool {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(timeout * 1e9)
        while received.value <= count {
            if DispatchTime.now().uptimeNanoseconds > deadline { return false }
            usleep(200)
        }
        return true
    }

    /// A counter shared with the listening task.
    private final class Counter: Sendable {
        private let storage = Mutex(0)
        var value: Int { storage.withLock { $0 } }
        func increment() { storage.withLock { $0 += 1 } }
    }
}
