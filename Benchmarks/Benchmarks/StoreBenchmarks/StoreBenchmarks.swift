// Point reads of the encrypted store against a plain SQLite table, and adds with synchronous FULL and NORMAL.
// `tools/bench store` runs them and prints `store point-read ratio (encrypted/plain): R`, R being the p50 of
// the encrypted reads over the p50 of the plain reads of the interleaved benchmark.
import Benchmark
import BenchmarkFixtures
import CryptoBaselines
import Foundation
import KeychainStore

/// Custom metrics of the interleaved point read: each iteration reads one random key through the store and
/// through the plain table, in alternating order, and records both durations (nanoseconds).
enum PointReadMetric {
    static let encrypted = BenchmarkMetric.custom(
        "encrypted read (ns)",
        polarity: .prefersSmaller,
        useScalingFactor: false
    )
    static let plain = BenchmarkMetric.custom("plain read (ns)", polarity: .prefersSmaller, useScalingFactor: false)
    static let sqlcipher = BenchmarkMetric.custom(
        "sqlcipher read (ns)",
        polarity: .prefersSmaller,
        useScalingFactor: false
    )
    static let floor = BenchmarkMetric.custom("c floor read (ns)", polarity: .prefersSmaller, useScalingFactor: false)
    /// The crypto of one encrypted read from C, for the breakdown: a keyed BLAKE2b (a read computes two) and the open.
    static let blindIndex = BenchmarkMetric.custom(
        "keyed blake2b (ns)",
        polarity: .prefersSmaller,
        useScalingFactor: false
    )
    static let open = BenchmarkMetric.custom(
        "xchacha20poly1305 open 2 KB (ns)",
        polarity: .prefersSmaller,
        useScalingFactor: false
    )
    static let all = [encrypted, plain, sqlcipher, floor, blindIndex, open]
}

/// Custom metrics of the interleaved add: one new item into the store, SQLCipher and the C floor per iteration.
enum AddMetric {
    static let encrypted = BenchmarkMetric.custom(
        "encrypted add (ns)",
        polarity: .prefersSmaller,
        useScalingFactor: false
    )
    static let sqlcipher = BenchmarkMetric.custom(
        "sqlcipher insert (ns)",
        polarity: .prefersSmaller,
        useScalingFactor: false
    )
    static let floor = BenchmarkMetric.custom("c floor insert (ns)", polarity: .prefersSmaller, useScalingFactor: false)
    static let all = [encrypted, sqlcipher, floor]
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
        // 14 allocations a read: two more fail.
        configuration: .init(maxIterations: 20_000, thresholds: [.mallocCountTotal: .init(absolute: [.p90: 1])]),
        closure: { benchmark in
            let fixture = try encryptedSlot.get()
            let key = fixture.nextKey()
            benchmark.startMeasurement()
            blackHole(try fixture.readEncrypted(key))
        },
        setup: { encryptedSlot.fixture = try ReadFixture() },
        teardown: {
            encryptedSlot.fixture?.remove()
            encryptedSlot.fixture = nil
        }
    )

    let plainSlot = FixtureSlot<ReadFixture>()
    Benchmark(
        "Point read (plain SQLite, GRDB)",
        configuration: .init(maxIterations: 20_000, thresholds: [.mallocCountTotal: .init(absolute: [.p90: 2])]),
        closure: { benchmark in
            let fixture = try plainSlot.get()
            let key = fixture.nextKey()
            benchmark.startMeasurement()
            blackHole(try fixture.readPlain(key))
        },
        setup: { plainSlot.fixture = try ReadFixture() },
        teardown: {
            plainSlot.fixture?.remove()
            plainSlot.fixture = nil
        }
    )

    // The four side by side, with the crypto of one read from C: each iteration reads the same 100 random keys through every path, one path after
    // the other in a rotating order (rounds of 100, so each path runs warm, as it would alone, and all four
    // share the machine's state of the moment). Every read is one sample of its path's metric.
    let interleavedSlot = FixtureSlot<ReadFixture>()
    Benchmark(
        "Point read interleaved (encrypted store, GRDB plain, SQLCipher, SQLite from C; crypto from C)",
        configuration: .init(
            metrics: [.wallClock] + PointReadMetric.all,
            units: Dictionary(uniqueKeysWithValues: PointReadMetric.all.map { ($0, .count) }),
            maxIterations: 200
        ),
        closure: { benchmark in
            let fixture = try interleavedSlot.get()
            let keys = (0..<ReadFixture.roundLength).map { _ in fixture.nextKey() }
            var secret = Data()
            var size = 0
            let rounds: [(BenchmarkMetric, (Int) throws -> Void)] = [
                (PointReadMetric.encrypted, { secret = try fixture.readEncrypted($0) }),
                (PointReadMetric.plain, { secret = try fixture.readPlain($0) }),
                (PointReadMetric.sqlcipher, { size = try fixture.readSQLCipher($0) }),
                (PointReadMetric.floor, { size = try fixture.readFloor($0) }),
                (PointReadMetric.blindIndex, { _ in size = Int(crypto_baseline_blind_index()) }),
                (PointReadMetric.open, { _ in size = Int(crypto_baseline_open()) }),
            ]
            let start = benchmark.currentIteration % rounds.count
            for offset in 0..<rounds.count {
                let (metric, read) = rounds[(start + offset) % rounds.count]
                for key in keys { benchmark.measurement(metric, try nanoseconds { try read(key) }) }
            }
            blackHole(secret)
            blackHole(size)
        },
        setup: {
            guard crypto_baseline_prepare() == 0 else { throw BenchmarkFailure("libsodium did not initialise") }
            interleavedSlot.fixture = try ReadFixture()
        },
        teardown: {
            interleavedSlot.fixture?.remove()
            interleavedSlot.fixture = nil
        }
    )
}

/// Adds into a fresh store, one transaction each, with synchronous FULL (a WAL sync per commit) and NORMAL.
func registerAdds() {
    for (synchronous, iterations) in [(StoreOptions.Synchronous.full, 500), (.normal, 2000)] {
        let slot = FixtureSlot<AddFixture>()
        Benchmark(
            "Add (synchronous \(synchronous.rawValue))",
            // About 27 allocations an add, a few more when SQLite grows the file.
            configuration: .init(
                warmupIterations: 1,
                maxIterations: iterations,
                thresholds: [.mallocCountTotal: .init(absolute: [.p90: 3])]
            ),
            closure: { benchmark in
                let fixture = try slot.get()
                let item = fixture.nextItem()
                benchmark.startMeasurement()
                blackHole(try fixture.add(item))
            },
            setup: { slot.fixture = try AddFixture(synchronous: synchronous) },
            teardown: {
                slot.fixture?.remove()
                slot.fixture = nil
            }
        )
    }

    // The store's add against SQLCipher's and the C floor's insert (synchronous NORMAL, one transaction each),
    // side by side, the order rotating.
    let interleavedSlot = FixtureSlot<AddFixture>()
    Benchmark(
        "Add interleaved (encrypted store, SQLCipher, SQLite from C; synchronous NORMAL)",
        configuration: .init(
            metrics: [.wallClock] + AddMetric.all,
            units: Dictionary(uniqueKeysWithValues: AddMetric.all.map { ($0, .count) }),
            warmupIterations: 1,
            maxIterations: 2000
        ),
        closure: { benchmark in
            let fixture = try interleavedSlot.get()
            let item = fixture.nextItem()
            let adds: [() throws -> Void] = [
                { benchmark.measurement(AddMetric.encrypted, try nanoseconds { blackHole(try fixture.add(item)) }) },
                { benchmark.measurement(AddMetric.sqlcipher, try nanoseconds { try fixture.insertSQLCipher(item) }) },
                { benchmark.measurement(AddMetric.floor, try nanoseconds { try fixture.insertFloor(item) }) },
            ]
            let start = benchmark.currentIteration % adds.count
            for offset in 0..<adds.count { try adds[(start + offset) % adds.count]() }
        },
        setup: { interleavedSlot.fixture = try AddFixture(synchronous: .normal, baselines: true) },
        teardown: {
            interleavedSlot.fixture?.remove()
            interleavedSlot.fixture = nil
        }
    )
}
