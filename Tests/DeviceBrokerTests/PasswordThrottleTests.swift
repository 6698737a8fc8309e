import Foundation
import Logging
import SharedDevice
import StoreTestSupport
import Synchronization
import Testing

@testable import DeviceBroker

/// The password throttle on a fake clock: counted per target username and per calling app, a success
/// resetting its own username only, failures forgotten one per `forgetInterval`, the counts kept across a
/// restart, root counted per username only.
@Suite struct PasswordThrottleTests {
    /// A clock the test moves by hand.
    final class FakeClock: Sendable {
        private let now = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        func advance(_ seconds: TimeInterval) { now.withLock { $0 += seconds } }
        var date: Date { now.withLock { $0 } }
        var function: @Sendable () -> Date { { self.date } }
    }

    static let limits = DevicePolicy.Limits.defaults
    static let attacker: UInt32 = 1001, victim: UInt32 = 1002

    /// One attempt that ends with `outcome`; the refusal when the throttle holds it back.
    @discardableResult
    static func attempt(
        _ throttle: PasswordThrottle,
        _ username: String,
        uid: UInt32,
        _ outcome: PasswordThrottle.Outcome
    ) -> PasswordThrottle.Refusal? {
        do {
            let attempt = try throttle.begin(
                username: username,
                app: uid == 0 ? nil : PasswordThrottle.App(key: String(uid), uid: uid)
            )
            throttle.end(attempt, outcome, limits: limits)
            return nil
        } catch {
            return error
        }
    }

    static func secondsLeft(_ refusal: PasswordThrottle.Refusal?) -> (PasswordThrottle.Scope, Int)? {
        guard case .backoff(let scope, let seconds, _)? = refusal else { return nil }
        return (scope, seconds)
    }

    @Test func aSuccessOfAnotherWorkerDoesNotResetTheGuessesAtTheTarget() {
        let clock = FakeClock()
        let throttle = PasswordThrottle(clock: clock.function)
        // The attack of the last round: a known worker's sign-in between every two guesses.
        var guesses = 0
        var held = 0
        for _ in 0..<20 {
            Self.attempt(throttle, "worker1", uid: Self.attacker, .succeeded)
            for _ in 0..<2 {
                if Self.attempt(throttle, "worker2", uid: Self.attacker, .refused) == nil {
                    guesses += 1
                } else {
                    held += 1
                }
            }
        }
        #expect(guesses == 3, "\(guesses) guesses reached the provider without a back-off")
        #expect(held == 37)
    }

    @Test func theAppThatFailsBacksOffAndAnotherAppStillSignsOtherWorkersIn() throws {
        let clock = FakeClock()
        let throttle = PasswordThrottle(clock: clock.function)
        for name in ["a", "b", "c"] { Self.attempt(throttle, name, uid: Self.attacker, .refused) }
        // The attacker is held back for any username, and says so …
        let (scope, seconds) = try #require(Self.secondsLeft(Self.attempt(throttle, "d", uid: Self.attacker, .refused)))
        #expect(scope == .app && seconds == 30)
        // … while another app signs a worker in, even one the attacker guessed at once.
        #expect(Self.attempt(throttle, "a", uid: Self.victim, .succeeded) == nil)
        #expect(Self.attempt(throttle, "e", uid: Self.victim, .succeeded) == nil)
    }

    @Test func aUsernamesOwnBackOffIsCappedWellBelowTheAppsAndASuccessResetsIt() throws {
        let clock = FakeClock()
        let throttle = PasswordThrottle(clock: clock.function)
        // Many apps (root's login screen among them: counted per username only) fail at one worker.
        for round in 0..<12 {
            let uid: UInt32 = round.isMultiple(of: 2) ? 0 : 2000 + UInt32(round)
            #expect(Self.attempt(throttle, " Worker9 ", uid: uid, .refused) == nil, "round \(round)")
            clock.advance(PasswordThrottle.usernameMaximumBackoff)
        }
        Self.attempt(throttle, "WORKER9", uid: 0, .refused)
        let refusal = Self.attempt(throttle, "worker9", uid: Self.victim, .succeeded)
        let (scope, seconds) = try #require(Self.secondsLeft(refusal))
        let maximum = Int(PasswordThrottle.usernameMaximumBackoff)
        #expect(scope == .username, "\(scope)")
        #expect(seconds <= maximum, "\(seconds)")
        // Root is never one app: it holds no app count.
        #expect(throttle.counts.apps["0"] == nil)
        clock.advance(PasswordThrottle.usernameMaximumBackoff)
        #expect(Self.attempt(throttle, "worker9", uid: Self.victim, .succeeded) == nil)
        #expect(throttle.counts.usernames.isEmpty, "the success left \(throttle.counts.usernames)")
    }

    @Test func failuresAreForgottenOneEveryForgetInterval() throws {
        let clock = FakeClock()
        let throttle = PasswordThrottle(clock: clock.function)
        for name in ["a", "b"] { Self.attempt(throttle, name, uid: Self.attacker, .refused) }
        clock.advance(PasswordThrottle.forgetInterval * 2)
        // Both forgotten: two more failures start no back-off.
        for name in ["c", "d"] { #expect(Self.attempt(throttle, name, uid: Self.attacker, .refused) == nil) }
        #expect(Self.attempt(throttle, "e", uid: Self.attacker, .refused) == nil)
        #expect(Self.secondsLeft(Self.attempt(throttle, "f", uid: Self.attacker, .refused))?.0 == .app)
    }

    @Test func oneAppGuessesAtMostAboutSixTimesAnHourWhateverItTries() {
        let clock = FakeClock()
        let throttle = PasswordThrottle(clock: clock.function)
        // The attacker tries every second for 24 hours, a new username each time.
        var guesses = 0
        for second in 0..<(24 * 3600) {
            if Self.attempt(throttle, "target\(second)", uid: Self.attacker, .refused) == nil { guesses += 1 }
            clock.advance(1)
        }
        print(
            "PasswordThrottleTests: one app trying every second for 24 h: \(guesses) guesses reached the provider (\(String(format: "%.2f", Double(guesses) / 24)) an hour)"
        )
        #expect(guesses <= 24 * 7, "\(guesses) guesses in 24 h")
        #expect(guesses >= 24 * 4, "the throttle held back more than its stated rate: \(guesses) in 24 h")
    }

    @Test func aUsersAppsTogetherGuessNoFasterThanTheAppsThePolicyGivesIt() {
        // uid 1001 runs four sandboxes that reach the throttle as apps, while the policy lists two apps for it
        // (a host app and one Flatpak app): the uid's count holds all four to two apps' pace.
        let clock = FakeClock()
        let throttle = PasswordThrottle(clock: clock.function)
        let sandboxes = ["1001", "1001/com.contoso.Scanner", "1001/com.contoso.Extra1", "1001/com.contoso.Extra2"].map {
            PasswordThrottle.App(key: $0, uid: Self.attacker, appsOfUID: 2)
        }
        var guesses = 0
        var heldForTheUser = 0
        for second in 0..<(24 * 3600) {
            for (index, app) in sandboxes.enumerated() {
                do {
                    let attempt = try throttle.begin(username: "target\(second)-\(index)", app: app)
                    throttle.end(attempt, .refused, limits: Self.limits)
                    guesses += 1
                } catch {
                    if case .backoff(.user, _, _) = error { heldForTheUser += 1 }
                }
            }
            clock.advance(1)
        }
        print(
            "PasswordThrottleTests: four sandboxes of a uid with two apps, each trying every second for 24 h: \(guesses) guesses reached the provider (\(String(format: "%.2f", Double(guesses) / 24)) an hour)"
        )
        // One app's pace is 4 to 7 an hour (the test above): two apps' at most twice that.
        #expect(guesses <= 2 * 24 * 7, "\(guesses) guesses in 24 h")
        #expect(heldForTheUser > 0, "the uid's own count never held an attempt back")
        // The counts name the uid once, beside its apps.
        #expect(throttle.counts.users.keys.sorted() == ["1001"])
    }

    @Test func aUidWithOneAppKeepsNoCountOfItsOwnAndAnOldFileStillReads() throws {
        let throttle = PasswordThrottle(clock: FakeClock().function)
        Self.attempt(throttle, "worker1", uid: Self.attacker, .refused)
        #expect(throttle.counts.users.isEmpty && throttle.counts.apps.keys.sorted() == ["1001"])
        // A file written before the uid counts existed.
        let old = #"{"usernames":{},"apps":{"1001":{"failures":2,"updatedAt":0}}}"#
        let counts = try JSONDecoder().decode(PasswordThrottle.Counts.self, from: Data(old.utf8))
        #expect(counts.apps["1001"]?.failures == 2 && counts.users.isEmpty)
    }

    @Test func theCountsSurviveARestartAndNameNobodyInClear() throws {
        let directory = TemporaryStateDirectory("password-throttle")
        let clock = FakeClock()
        let logger = Logger(label: "test")
        let first = PasswordThrottle(
            file: try #require(PasswordThrottleFile(directory: directory.url, logger: logger)),
            clock: clock.function
        )
        for _ in 0..<3 {
            Self.attempt(first, "worker2@contoso.com", uid: Self.attacker, .refused)
            clock.advance(1)
        }
        let restarted = PasswordThrottle(
            file: try #require(PasswordThrottleFile(directory: directory.url, logger: logger)),
            clock: clock.function
        )
        #expect(restarted.counts == first.counts)
        #expect(Self.secondsLeft(Self.attempt(restarted, "other", uid: Self.attacker, .refused))?.0 == .app)
        let file = directory.url.appendingPathComponent(PasswordThrottleFile.fileName)
        let text = try String(contentsOf: file, encoding: .utf8)
        #expect(!text.lowercased().contains("worker2") && !text.contains("contoso"), "\(text)")
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
        // A malformed file starts afresh rather than refusing everyone.
        try Data("{not json".utf8).write(to: file)
        let fresh = PasswordThrottle(
            file: try #require(PasswordThrottleFile(directory: directory.url, logger: logger)),
            clock: clock.function
        )
        #expect(fresh.counts == PasswordThrottle.Counts())
    }

    @Test func aSymlinkAtTheCountsFileIsNeverFollowed() throws {
        let directory = TemporaryStateDirectory("password-throttle-link")
        let target = directory.url.appendingPathComponent("root-only")
        try Data("keep".utf8).write(to: target)
        let file = directory.url.appendingPathComponent(PasswordThrottleFile.fileName)
        try FileManager.default.createSymbolicLink(at: file, withDestinationURL: target)
        let throttle = PasswordThrottle(
            file: try #require(PasswordThrottleFile(directory: directory.url, logger: Logger(label: "test")))
        )
        Self.attempt(throttle, "worker1", uid: Self.attacker, .refused)
        #expect(try String(contentsOf: target, encoding: .utf8) == "keep")
        // The link itself was replaced by the counts (renameat replaces the name, not what it points to).
        let type = try FileManager.default.attributesOfItem(atPath: file.path)[.type] as? FileAttributeType
        #expect(type == .typeRegular)
    }
}
