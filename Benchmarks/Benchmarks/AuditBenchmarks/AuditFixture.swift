// A store with an audit log for the append benchmarks.
import BenchmarkFixtures
import Foundation
import KeychainStore
import SharedDevice

/// A fresh store whose audit log already holds 200 untimed events (the first creates the tables).
/// Its signer never reaches a checkpoint by itself: appends sign only when asked to.
final class AuditFixture {
    /// A checkpoint interval no benchmark log reaches.
    static let noCheckpoint = 1_000_000_000

    let store: KeychainStore
    let signer: AuditLog.Signer
    private let scratch: ScratchDirectory
    private var count = 0

    init(synchronous: StoreOptions.Synchronous) throws {
        scratch = try ScratchDirectory("audit-benchmarks")
        var options = StoreOptions(synchronous: synchronous)
        // No write-ahead-log checkpoint during a series: the store's background checkpoint (about 350 allocations on
        // its own thread) would land in whichever appends it overlaps, more of them the slower the disk's syncs, and
        // move the p90 malloc count the thresholds check (Benchmarks/Thresholds/) by hundreds.
        options.backgroundCheckpointPages = 1_000_000
        options.checkpointLimitPages = 1_000_000
        store = try KeychainStore(directory: scratch.url, options: options)
        signer = AuditLog.Signer(key: try SigningKey.generate(), checkpointInterval: Self.noCheckpoint)
        for _ in 0..<200 {
            let entry = nextEntry()
            let signer = signer
            _ = try store.writeTransaction { tx in try AuditLog.append(entry, in: tx, signer: signer) }
        }
    }

    /// The next entry to append (built outside the timed part).
    func nextEntry() -> AuditEntry {
        count += 1
        return AuditEvents.entry(count)
    }

    /// Removes the files.
    func remove() { scratch.remove() }
}
