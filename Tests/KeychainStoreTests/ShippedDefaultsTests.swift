import Foundation
import GRDB
import StoreTestSupport
import Synchronization
import Testing

@testable import KeychainStore

/// The store as it ships: `StoreOptions()` commits with `synchronous = FULL` (a commit survives power loss)
/// and waits 30 s for another process's write lock before giving up with `storeBusy`. Every other test
/// opens its stores with `synchronous = NORMAL` for speed, so these are the only tests of the defaults.
///
/// The pragmas are per connection, so they are read on the store's own connection, inside its own
/// transaction (`StoreTransaction.database`, internal, so reached with `@testable`). The lock is held by a
/// second connection to the same file, as another process holding the store would.
struct ShippedDefaultsTests {
    @Test func aStoreOpenedWithDefaultOptionsCommitsWithSynchronousFull() throws {
        let directory = TemporaryStateDirectory("defaults-synchronous")
        let store = try KeychainStore(directory: directory.url)
        // SQLite reports synchronous as a number: 1 NORMAL, 2 FULL.
        let synchronous = try store.readTransaction { tx in try Int.fetchOne(tx.database, sql: "PRAGMA synchronous") }
        #expect(
            synchronous == 2,
            "a store opened with StoreOptions() runs synchronous = \(synchronous.map(String.init) ?? "-"), not FULL (2)"
        )
        let journal = try store.readTransaction { tx in try String.fetchOne(tx.database, sql: "PRAGMA journal_mode") }
        #expect(journal == "wal")

        // The same read sees the option when it is not the default, so it reads this store's connection.
        let fast = try openStore(TemporaryStateDirectory("defaults-synchronous-normal"), synchronous: .normal)
        #expect(try fast.readTransaction { tx in try Int.fetchOne(tx.database, sql: "PRAGMA synchronous") } == 1)
    }

    @Test func aStoreOpenedWithDefaultOptionsWaitsThirtySecondsForALock() throws {
        #expect(StoreOptions().busyTimeout == 30)
        let directory = TemporaryStateDirectory("defaults-busy-timeout")
        let store = try KeychainStore(directory: directory.url)
        let milliseconds = try store.readTransaction { tx in try Int.fetchOne(tx.database, sql: "PRAGMA busy_timeout") }
        #expect(
            milliseconds == 30_000,
            "the store's connection waits \(milliseconds.map(String.init) ?? "-") ms for a lock, not 30 s"
        )
    }

    @Test(.timeLimit(.minutes(1)))
    func aWriteWithDefaultOptionsWaitsForALockHeldTwoSecondsAndSucceeds() async throws {
        let directory = TemporaryStateDirectory("defaults-busy-wait")
        let store = try KeychainStore(directory: directory.url)
        let lock = try WriteLockHolder(databasePath: directory.databasePath)
        lock.hold(releasingAfter: .seconds(2))

        let secret = Data("written after the lock".utf8)
        let returned = try await onOwnThread {
            try store.add(NewItem(service: "busy", account: "waiter", secret: secret), as: Apps.scanner)
            return ContinuousClock.now
        }

        // The add returned after the other connection let go of the lock: it waited, and it did not fail.
        let released = try #require(
            lock.waitUntilReleased(),
            "the lock holder never released its lock: \(lock.failure ?? "-")"
        )
        #expect(released < returned, "the write returned while another connection held the write lock")
        #expect(try store.find(ItemQuery(service: "busy", account: "waiter"), as: Apps.scanner).secret == secret)
    }

    @Test(.timeLimit(.minutes(1)))
    func aLockHeldPastTheBusyTimeoutFailsAWriteWithStoreBusyAndChangesNothing() throws {
        let directory = TemporaryStateDirectory("defaults-busy-timeout-exceeded")
        let store = try KeychainStore(directory: directory.url, options: StoreOptions(busyTimeout: 0.5))
        try store.add(NewItem(service: "busy", account: "before", secret: Data("kept".utf8)), as: Apps.scanner)
        let raw = try RawDatabase(path: directory.databasePath)
        let before = try raw.dump()

        // Held until the write has failed (or for 20 s, far past the 0.5 s timeout, should it hang).
        let lock = try WriteLockHolder(databasePath: directory.databasePath)
        lock.hold(releasingAfter: .seconds(20))
        let error = caughtError {
            try store.add(NewItem(service: "busy", account: "refused", secret: Data("lost".utf8)), as: Apps.scanner)
        }
        let failedWhileLocked = lock.isHolding
        lock.release()
        #expect(lock.waitUntilReleased() != nil, "the lock holder failed: \(lock.failure ?? "-")")

        let code = try #require(error?.code, "a write blocked past the busy timeout did not fail")
        #expect(code == .storeBusy, "\(error.map(String.init(describing:)) ?? "-")")
        #expect(code.osStatus == -25291)
        #expect(failedWhileLocked, "the write failed only after the lock was released")
        #expect(try raw.dump() == before, "the refused write changed the store")
        expectError(.itemNotFound) { try store.find(ItemQuery(service: "busy", account: "refused"), as: Apps.scanner) }
        // Once the lock is gone the same write goes through.
        try store.add(NewItem(service: "busy", account: "refused", secret: Data("later".utf8)), as: Apps.scanner)
        #expect(try store.metadata(matching: ItemQuery(service: "busy"), as: Apps.scanner).count == 2)
    }
}

/// Holds the write lock of a store's database on a connection of its own, on a thread of its own, the
/// way another process in the middle of a long write transaction does (`BEGIN IMMEDIATE`, then nothing).
/// The lock is released by rolling back, so the store's data never changes.
final class WriteLockHolder: Sendable {
    private struct State {
        var holding = false
        var releaseRequested = false
        var released: ContinuousClock.Instant?
        var failure: String?
    }

    private let queue: DatabaseQueue
    private let state = Mutex(State())
    private let acquired = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    init(databasePath: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        queue = try DatabaseQueue(path: databasePath, configuration: configuration)
    }

    /// Takes the write lock on a new thread and returns once it is held; the lock is released after
    /// `duration` or at `release()`, whichever comes first.
    func hold(releasingAfter duration: Duration) {
        let queue = self.queue
        Thread.detachNewThread { [self] in
            do {
                try queue.writeWithoutTransaction { db in
                    try db.execute(sql: "BEGIN IMMEDIATE")
                    state.withLock { $0.holding = true }
                    acquired.signal()
                    let deadline = ContinuousClock.now + duration
                    while ContinuousClock.now < deadline, !state.withLock({ $0.releaseRequested }) {
                        Thread.sleep(forTimeInterval: 0.01)
                    }
                    // Stamped before the rollback: nobody else can have written before this instant.
                    state.withLock { $0.released = ContinuousClock.now }
                    try db.execute(sql: "ROLLBACK")
                    state.withLock { $0.holding = false }
                }
            } catch {
                state.withLock { $0.failure = "\(error)" }
                acquired.signal()
            }
            finished.signal()
        }
        acquired.wait()
    }

    /// Whether the lock is held right now.
    var isHolding: Bool { state.withLock { $0.holding } }

    /// Why taking or releasing the lock failed, if it did.
    var failure: String? { state.withLock { $0.failure } }

    /// Asks the holder to release the lock now.
    func release() { state.withLock { $0.releaseRequested = true } }

    /// Waits (up to 60 s) until the lock is released; returns the instant just before the release, `nil` if
    /// it never was held or released.
    func waitUntilReleased() -> ContinuousClock.Instant? {
        guard finished.wait(timeout: .now() + 60) == .success else { return nil }
        finished.signal()
        return state.withLock { $0.released }
    }
}
