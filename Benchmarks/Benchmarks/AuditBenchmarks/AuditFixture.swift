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
        store = try KeychainStore(directory: scratch.url, options: StoreOptions(synchronous: synchronous))
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
