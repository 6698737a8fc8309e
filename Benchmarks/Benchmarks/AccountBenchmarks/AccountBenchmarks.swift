// The account manager on real stores (synchronous NORMAL): global sign-out for 10×10, 100×10 and 100×100
// apps × tokens, currentAccount, and the latency of the account change event between two store objects.
// Goals (printed by `tools/bench accounts`): sign-out p50 for 100 apps × 10 tokens ≤ 8 ms, currentAccount
// p50 ≤ 50 µs, change event latency p50 ≤ 100 ms.
import AccountFixtures
import Benchmark
import BenchmarkFixtures
import Foundation
import KeychainStore
import SharedDevice

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal],
        timeUnits: .nanoseconds,
        units: [.mallocCountTotal: .count],
        warmupIterations: 1,
        maxDuration: .seconds(300)
    )

    registerGlobalSignOuts()
    registerCurrentAccount()
    registerChangeEvent()
}

/// Global sign-out of a worker who holds `tokens` access tokens in each of `apps` apps' groups: every iteration
/// signs a new worker in and fills the tokens (untimed), then times `signOut` through one of the apps.
/// Malloc tolerances: 100 × 10 and 100 × 100 fail at one allocation more a token (about 5 % of the count). The
/// store's background WAL checkpoint (a short-lived connection on its queue, about 350 allocations) lands in about
/// one 10 × 10 sign-out in ten, so that p90 is about 560 one run and 910 the next: its tolerance spans both.
func registerGlobalSignOuts() {
    for (apps, tokens, iterations, mallocTolerance) in [(10, 10, 30, 400), (100, 10, 40, 150), (100, 100, 5, 500)] {
        let slot = FixtureSlot<BenchmarkDevice>()
        Benchmark(
            "Global sign-out (\(apps) apps × \(tokens) tokens)",
            configuration: .init(
                maxIterations: iterations,
                thresholds: [.mallocCountTotal: .init(absolute: [.p90: mallocTolerance])]
            ),
            closure: { benchmark in
                let device = try slot.get()
                let round = benchmark.currentIteration
                try device.signIn(worker: round, tokensPerApp: tokens)
                benchmark.startMeasurement()
                let outcome = try device.accounts.signOut(app: device.apps[round % apps], reason: .shiftEnd)
                benchmark.stopMeasurement()
                guard outcome.itemsRemoved >= apps * tokens else {
                    throw BenchmarkFailure(
                        "sign-out removed \(outcome.itemsRemoved) items, expected at least \(apps * tokens)"
                    )
                }
            },
            setup: { slot.fixture = try BenchmarkDevice(appCount: apps) },
            teardown: {
                slot.fixture?.remove()
                slot.fixture = nil
            }
        )
    }
}

/// `currentAccount` of an app that has already seen the signed-in worker (the steady state).
func registerCurrentAccount() {
    let slot = FixtureSlot<BenchmarkDevice>()
    Benchmark(
        "currentAccount (signed in, unchanged)",
        configuration: .init(
            warmupIterations: 2000,
            maxIterations: 10_000,
            thresholds: [.mallocCountTotal: .init(absolute: [.p90: 1])]
        ),
        closure: { _ in
            let device = try slot.get()
            blackHole(try device.accounts.currentAccount(for: device.apps[1]))
        },
        setup: {
            let device = try BenchmarkDevice(appCount: 2)
            try device.signIn(worker: 1, tokensPerApp: 3)
            _ = try device.accounts.currentAccount(for: device.apps[1])
            slot.fixture = device
        },
        teardown: {
            slot.fixture?.remove()
            slot.fixture = nil
        }
    )
}

/// From calling `signOut` on one store object to a `changes()` listener on a second store object (its own
/// connection, as another process would have) receiving the global sign-out; the sign-out itself included.
func registerChangeEvent() {
    let slot = FixtureSlot<(device: BenchmarkDevice, waiter: ChangeWaiter)>()
    Benchmark(
        "Account change event (sign-out → listener on another store object)",
        configuration: .init(
            warmupIterations: 1,
            maxIterations: 30,
            // Counts the listener's allocations on its own thread too, which vary: p90 between 670 and 740.
            thresholds: [.mallocCountTotal: .init(absolute: [.p90: 150])]
        ),
        closure: { benchmark in
            let (device, waiter) = try slot.get()
            try device.signIn(worker: 200 + benchmark.currentIteration, tokensPerApp: 1)
            let seen = waiter.count
            benchmark.startMeasurement()
            try device.accounts.signOut(app: device.apps[0], reason: .shiftEnd)
            let arrived = waiter.waitUntil(moreThan: seen)
            benchmark.stopMeasurement()
            guard arrived else { throw BenchmarkFailure("no account change event within 5 s") }
        },
        setup: {
            let device = try BenchmarkDevice(appCount: 2)
            let waiter = try ChangeWaiter(directory: device.directory)
            slot.fixture = (device, waiter)
        },
        teardown: {
            slot.fixture?.device.remove()
            slot.fixture = nil
        }
    )
}
