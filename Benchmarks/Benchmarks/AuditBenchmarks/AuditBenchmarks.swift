// The tamper-evident audit log: AuditLog.append in its own transaction (synchronous NORMAL, the goal, and
// FULL for reference), with a signed checkpoint, inside a transaction that is open anyway, and
// AuditLog.verify over 100,000 events. Goals (printed by `tools/bench audit`): append p50 ≤ 100 µs
// (no checkpoint, synchronous NORMAL), verify ≥ 100,000 events/s.
import Benchmark
import BenchmarkFixtures
import Foundation
import KeychainStore
import SharedDevice

/// Custom metrics the wall clock of an iteration cannot express.
enum AuditMetric {
    /// One append inside a transaction of `appendsPerTransaction` appends (nanoseconds, each append timed).
    static let appendInTransaction = BenchmarkMetric.custom(
        "append in a transaction (ns)",
        polarity: .prefersSmaller,
        useScalingFactor: false
    )
    /// Events verified per second by one `AuditLog.verify` of the whole log.
    static let verifyThroughput = BenchmarkMetric.custom(
        "verify throughput (events per second)",
        polarity: .prefersLarger,
        useScalingFactor: false
    )
    /// Appends per transaction in the in-transaction benchmark.
    static let appendsPerTransaction = 100
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal],
        timeUnits: .nanoseconds,
        units: [.mallocCountTotal: .count],
        warmupIterations: 10,
        maxDuration: .seconds(120)
    )

    registerOwnTransactionAppends()
    registerAppendsInsideATransaction()
    registerVerify()
}

/// Appends in their own write transaction: no checkpoint (NORMAL, FULL), and a signed checkpoint (NORMAL).
/// About 75 allocations an append; the malloc tolerance is 4 (5 %).
func registerOwnTransactionAppends() {
    let series: [(name: String, synchronous: StoreOptions.Synchronous, checkpoint: Bool, iterations: Int)] = [
        ("Append (no checkpoint, synchronous NORMAL)", .normal, false, 5000),
        ("Append (no checkpoint, synchronous FULL)", .full, false, 500),
        ("Append (signed checkpoint, synchronous NORMAL)", .normal, true, 1000),
    ]
    for (name, synchronous, checkpoint, iterations) in series {
        let slot = FixtureSlot<AuditFixture>()
        Benchmark(
            name,
            configuration: .init(
                maxIterations: iterations,
                thresholds: [.mallocCountTotal: .init(absolute: [.p90: 4])]
            ),
            closure: { benchmark in
                let fixture = try slot.get()
                let entry = fixture.nextEntry()
                benchmark.startMeasurement()
                let event = try fixture.store.writeTransaction { tx in
                    try AuditLog.append(entry, in: tx, signer: fixture.signer, checkpoint: checkpoint)
                }
                benchmark.stopMeasurement()
                blackHole(event)
            },
            setup: { slot.fixture = try AuditFixture(synchronous: synchronous) },
            teardown: {
                slot.fixture?.remove()
                slot.fixture = nil
            }
        )
    }
}

/// What one append adds inside a transaction that is open anyway (a sign-out logs with its change):
/// each iteration is one transaction of 100 appends; every append is timed on its own.
func registerAppendsInsideATransaction() {
    let slot = FixtureSlot<AuditFixture>()
    Benchmark(
        "Append inside a transaction (100 per transaction, synchronous NORMAL)",
        configuration: .init(
            metrics: [.wallClock, .mallocCountTotal, AuditMetric.appendInTransaction],
            units: [.mallocCountTotal: .count, AuditMetric.appendInTransaction: .count],
            warmupIterations: 2,
            maxIterations: 50,
            // About 6,700 allocations a transaction of 100 appends: one more an append (+100) fails.
            thresholds: [.mallocCountTotal: .init(absolute: [.p90: 50])]
        ),
        closure: { benchmark in
            let fixture = try slot.get()
            let entries = (0..<AuditMetric.appendsPerTransaction).map { _ in fixture.nextEntry() }
            benchmark.startMeasurement()
            let durations = try fixture.store.writeTransaction { tx in
                try entries.map { entry in
                    let start = DispatchTime.now().uptimeNanoseconds
                    try AuditLog.append(entry, in: tx, signer: fixture.signer)
                    return Int(DispatchTime.now().uptimeNanoseconds - start)
                }
            }
            benchmark.stopMeasurement()
            for duration in durations { benchmark.measurement(AuditMetric.appendInTransaction, duration) }
        },
        setup: { slot.fixture = try AuditFixture(synchronous: .normal) },
        teardown: {
            slot.fixture?.remove()
            slot.fixture = nil
        }
    )
}

/// `AuditLog.verify` of a 100,000-event log in a read transaction (the warm-up run fills the page cache).
func registerVerify() {
    let slot = FixtureSlot<VerifyFixture>()
    Benchmark(
        "Verify (100,000 events, checkpoint every 100)",
        configuration: .init(
            metrics: [.wallClock, .mallocCountTotal, AuditMetric.verifyThroughput],
            units: [.mallocCountTotal: .count, AuditMetric.verifyThroughput: .count],
            warmupIterations: 1,
            maxIterations: 5,
            // About 1.9 million allocations a verify (19 an event): one more an event (+100,000) fails.
            thresholds: [.mallocCountTotal: .init(absolute: [.p90: 10_000])]
        ),
        closure: { benchmark in
            let fixture = try slot.get()
            let start = DispatchTime.now().uptimeNanoseconds
            let verification = try fixture.verify()
            let elapsed = DispatchTime.now().uptimeNanoseconds - start
            benchmark.stopMeasurement()
            benchmark.measurement(
                AuditMetric.verifyThroughput,
                Int(Double(verification.eventCount) * 1e9 / Double(elapsed))
            )
        },
        setup: { slot.fixture = try VerifyFixture() },
        teardown: {
            slot.fixture?.remove()
            slot.fixture = nil
        }
    )
}
