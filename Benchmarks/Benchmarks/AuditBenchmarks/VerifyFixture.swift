// A log of 100,000 events for the verify benchmark.
import BenchmarkFixtures
import Foundation
import KeychainStore
import SharedDevice

/// A store whose audit log holds `eventCount` events, signed checkpoints every 100 events (as
/// policies/kiosk.json), built in transactions of 5,000 appends.
final class VerifyFixture {
    static let eventCount = 100_000
    static let checkpointInterval = 100

    let store: KeychainStore
    let trustedKeys: Set<Data>
    private let scratch: ScratchDirectory

    init() throws {
        scratch = try ScratchDirectory("audit-benchmarks-verify")
        store = try KeychainStore(directory: scratch.url, options: StoreOptions(synchronous: .normal))
        let key = try SigningKey.generate()
        trustedKeys = [key.publicKey]
        let signer = AuditLog.Signer(key: key, checkpointInterval: Self.checkpointInterval)
        var built = 0
        while built < Self.eventCount {
            let entries = (built..<min(built + 5000, Self.eventCount)).map(AuditEvents.entry)
            try store.writeTransaction { tx in
                for entry in entries { try AuditLog.append(entry, in: tx, signer: signer) }
            }
            built += entries.count
        }
    }

    /// `AuditLog.verify` over the whole log in one read transaction; fails unless the log is intact.
    func verify() throws -> AuditVerification {
        let trustedKeys = trustedKeys
        let verification = try store.readTransaction { tx in
            try AuditLog.verify(in: tx, trustedKeys: trustedKeys, expectsEvents: true)
        }
        guard verification.isIntact, verification.eventCount == Self.eventCount else {
            throw BenchmarkFailure(
                "the verified log is not intact: \(verification.eventCount) events, problems \(verification.problems.prefix(3))"
            )
        }
        return verification
    }

    /// Removes the files.
    func remove() { scratch.remove() }
}
