// Point reads of the encrypted store against a plain SQLite table, and adds with synchronous FULL and NORMAL.
// `tools/bench store` runs them and prints `store point-read ratio (encrypted/plain): R`, R being the p50 of
// the encrypted reads over the p50 of the plain reads of the interleaved benchmark.
import Benchmark
import BenchmarkFixtures
import Foundation
import KeychainStore

/// Custom metrics of the interleaved point read: each iteration reads one random key through the store and
/// through the plain table, in alternating order, and records both durations (nanoseconds).
enum PointReadMetric {
    static let encrypted = BenchmarkMetric.custom("encrypted read (ns)", polarity: .prefersSmaller, useScalingFactor: false)
    static let plain = BenchmarkMetric.custom("plain read (ns)", polarity: .prefersSmaller, useScalingFactor: false)
}

/// Nanoseconds `body` takes (monotonic clock).
@inline(__always)
func nanoseconds(_ body: () throws -> Void) rethrows -> Int {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return Int(DispatchTime.now().uptimeNanoseconds - start)
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal],
        timeUnits: .nanoseconds,
        units: [.mallocCountTotal: .count],
        warmupIterations: 100,
        maxDuration: .seconds(120)
    )

    registerPointReads()
    registerAdds()
}

/// Point reads of 10,000 items: the store alone, the plain table alone, and both interleaved over the same keys.
func registerPointReads() {
    let encryptedSlot = FixtureSlot<ReadFixture>()
    Benchmark(
        "Point read (encrypted store, synchronous NORMAL)",
        configuration: .init(maxIterations: 20_000),
        closure: { benchmark in
            let fixture = try encryptedSlot.get()
            let key = fixture.nextKey()
            benchmark.startMeasurement()
            blackHole(try fixture.readEncrypted(key))
        },
        setup: { encryptedSlot.fixture = try ReadFixture() },
        teardown: { encryptedSlot.fixture?.remove(); encryptedSlot.fixture = nil }
    )

    let plainSlot = FixtureSlot<ReadFixture>()
    Benchmark(
        "Point read (plain SQLite, GRDB)",
        configuration: .init(maxIterations: 20_000),
        closure: { benchmark in
            let fixture = try plainSlot.get()
            let key = fixture.nextKey()
            benchmark.startMeasurement()
            blackHole(try fixture.readPlain(key))
        },
        setup: { plainSlot.fixture = try ReadFixture() },
        teardown: { plainSlot.fixture?.remove(); plainSlot.fixture = nil }
    )

    let interleavedSlot = FixtureSlot<ReadFixture>()
    Benchmark(
        "Point read interleaved (encrypted vs plain)",
        configuration: .init(metrics: [.wallClock, PointReadMetric.encrypted, PointReadMetric.plain],
                             units: [PointReadMetric.encrypted: .count, PointReadMetric.plain: .count], maxIterations: 20_000),
        closure: { benchmark in
            let fixture = try interleavedSlot.get()
            let key = fixture.nextKey()
            var secret = Data()
            func encrypted() throws { benchmark.measurement(PointReadMetric.encrypted, try nanoseconds { secret = try fixture.readEncrypted(key) }) }
            func plain() throws { benchmark.measurement(PointReadMetric.plain, try nanoseconds { secret = try fixture.readPlain(key) }) }
            if benchmark.currentIteration.isMultiple(of: 2) {
                try encrypted()
                try plain()
            } else {
                try plain()
                try encrypted()
            }
            blackHole(secret)
        },
        setup: { interleavedSlot.fixture = try ReadFixture() },
        teardown: { interleavedSlot.fixture?.remove(); interleavedSlot.fixture = nil }
    )
}

/// Adds into a fresh store, one transaction each, with synchronous FULL (a WAL sync per commit) and NORMAL.
func registerAdds() {
    for (synchronous, iterations) in [(StoreOptions.Synchronous.full, 500), (.normal, 2000)] {
        let slot = FixtureSlot<AddFixture>()
        Benchmark(
            "Add (synchronous \(synchronous.rawValue))",
            configuration: .init(warmupIterations: 1, maxIterations: iterations),
            closure: { benchmark in
                let fixture = try slot.get()
                let item = fixture.nextItem()
                benchmark.startMeasurement()
                blackHole(try fixture.add(item))
            },
            setup: { slot.fixture = try AddFixture(synchronous: synchronous) },
            teardown: { slot.fixture?.remove(); slot.fixture = nil }
        )
    }
}
