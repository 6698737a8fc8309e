import Foundation
import KeychainStore
import SharedDevice
import StoreTestSupport
import Testing

/// The account change stream of the process that makes the changes (the broker's): its own changes are
/// handed over as they commit, other processes' come through the change signal, and each arrives once,
/// in audit sequence order.
struct AccountChangeStreamTests {
    @Test(.timeLimit(.minutes(1)))
    func ownChangesArriveWithoutTheChangeSignal() async throws {
        let fixture = try AccountFixture()
        let scanner = try fixture.scanner
        let stream = fixture.accounts.changes(fallbackInterval: .seconds(600))
        let before = try fixture.lastSequence
        // The watched signal file moves aside: rings from now on go to a new file nobody watches, and the
        // fallback re-check is far beyond the test's bounds, so only the commit hand-over can deliver.
        let signal = fixture.accounts.signal.url
        try FileManager.default.moveItem(at: signal, to: signal.appendingPathExtension("aside"))

        try fixture.signIn(.ada, app: scanner)
        try fixture.accounts.signOut(app: scanner, reason: .user)

        let changes = await collect(stream, count: 2, timeout: .seconds(30))
        #expect(changes.map(\.kind) == [.signedIn, .signedOutGlobally])
        #expect(changes.map(\.sequence) == (try fixture.accountEvents(after: before).map(\.sequence)))
        #expect(changes.last?.reason == .user)
    }

    @Test(.timeLimit(.minutes(1)))
    func ownAndOtherProcessesChangesInterleavedArriveEachOnceInOrder() async throws {
        let fixture = try AccountFixture()
        let scanner = try fixture.scanner
        let other = try fixture.secondManager()
        let stream = fixture.accounts.changes(fallbackInterval: .seconds(600))
        let before = try fixture.lastSequence

        var expected = 0
        for round in 0..<6 {
            // Own: a sign-in, and an audit event that is no account change (a refusal) between changes.
            try fixture.signIn(.ada, app: scanner)
            _ = caughtError { _ = try fixture.device.appIdentity("com.contoso.not-in-policy", actor: "round \(round)") }
            // Another process signs the worker out and the next one in.
            try other.signOut(app: scanner, reason: .shiftEnd)
            try other.signIn(Person.bob.response(), context: KioskAuthority.context(), app: scanner)
            // Own again: right after the other process's commit, before or after the signal reached the stream.
            try fixture.accounts.signOut(app: scanner, reason: .user)
            expected += 4
        }

        let changes = await collect(stream, count: expected, timeout: .seconds(30))
        let logged = try fixture.accountEvents(after: before)
        #expect(logged.count == expected)
        #expect(changes.map(\.sequence) == logged.map(\.sequence))
        #expect(changes.map(\.account) == logged.map(\.account))
    }
}
