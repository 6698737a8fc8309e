import Foundation
import SharedDevice
import Synchronization

/// The brake on password guessing (policy `limits.passwordFailuresBeforeBackoff` and
/// `limits.passwordBackoffSeconds`), counted twice: per **target username** (in canonical form: trimmed,
/// compatibility-normalized, case-folded) and per **calling app** (its uid, and its Flatpak app id for a
/// sandboxed app: `BrokerCaller.appKey`; root, the login screen, is counted per username only, never as one
/// app). Only apps the policy lists sign in, so a user's share is what the policy gives its apps, however
/// many sandboxes it starts.
///
/// After that many failures of a username, or of an app, its password sign-ins are refused for the
/// back-off, which doubles with each further failure: up to an hour for the app (the one that fails backs
/// off longest), up to `usernameMaximumBackoff` for a username (so that no app can lock a chosen worker
/// out for long). A successful sign-in resets its own username's count only; every count forgets one
/// failure each `forgetInterval`. One password sign-in per app and per username runs at a time, so
/// parallel attempts cannot slip past a count.
///
/// The counts are kept in `PasswordThrottleFile` after every change, so a restart of the daemon (which an
/// app might force by exhausting its memory) forgets nothing.
final class PasswordThrottle: Sendable {
    /// The longest back-off of an app.
    static let appMaximumBackoff: TimeInterval = 3600
    /// The longest back-off of a username: well below the app's.
    static let usernameMaximumBackoff: TimeInterval = 300
    /// Each count forgets one failure this often.
    static let forgetInterval: TimeInterval = 600

    /// Whose count holds an attempt back.
    enum Scope: String, Sendable {
        /// The calling app's.
        case app
        /// The target username's.
        case username
    }

    /// Why an attempt may not start now.
    enum Refusal: Error {
        /// The back-off of `scope` runs for `secondsLeft` more seconds after `failures` recent failures.
        case backoff(scope: Scope, secondsLeft: Int, failures: Int)
        /// Another password sign-in of the same app or for the same username is running.
        case inProgress(scope: Scope)
    }

    /// How an attempt ended.
    enum Outcome {
        /// Signed in: the username's count ends.
        case succeeded
        /// The provider refused the password or code: counts toward both back-offs.
        case refused
        /// Anything else (the provider unreachable, a cancellation): changes nothing.
        case failed
    }

    /// An attempt under way, from `begin` to `end`.
    struct Attempt: Sendable {
        let username: String
        let app: String?
    }

    /// Recent failures of one username or app.
    struct Count: Codable, Equatable, Sendable {
        /// Failures not yet forgotten.
        var failures: Int
        /// Since when the next failure is being forgotten.
        var updatedAt: Date
        /// The end of the back-off, if one runs.
        var blockedUntil: Date?

        /// The count at `now`: one failure forgotten for each whole `forgetInterval` since `updatedAt`.
        func decayed(to now: Date) -> Count {
            let intervals = max(0, now.timeIntervalSince(updatedAt)) / PasswordThrottle.forgetInterval
            let forgotten = Int(min(intervals.rounded(.down), Double(Int32.max)))
            guard forgotten < failures else { return Count(failures: 0, updatedAt: now, blockedUntil: blockedUntil) }
            return Count(
                failures: failures - forgotten,
                updatedAt: updatedAt.addingTimeInterval(Double(forgotten) * PasswordThrottle.forgetInterval),
                blockedUntil: blockedUntil
            )
        }

        /// Whether nothing is left to remember at `now`.
        func isSpent(at now: Date) -> Bool {
            decayed(to: now).failures == 0 && (blockedUntil.map { $0 <= now } ?? true)
        }
    }

    /// What is kept across restarts: the counts by username digest and by app (`uid`, or `uid/FLATPAK-ID`).
    struct Counts: Codable, Equatable, Sendable {
        var usernames: [String: Count] = [:]
        var apps: [String: Count] = [:]
    }

    private struct State {
        var counts = Counts()
        var runningUsernames = Set<String>()
        var runningApps = Set<String>()
    }

    private let state: Mutex<State>
    private let file: PasswordThrottleFile?
    private let clock: @Sendable () -> Date

    /// A throttle that keeps its counts in `file` (nil: in memory only), on `clock`.
    init(file: PasswordThrottleFile? = nil, clock: @escaping @Sendable () -> Date = Date.init) {
        self.file = file
        self.clock = clock
        state = Mutex(State(counts: file?.load() ?? Counts()))
    }

    /// The canonical form of a username that counts are kept under: surrounding white space trimmed,
    /// compatibility-normalized (NFKC) and case-folded, so `Worker1`, ` worker1 ` and `ｗｏｒｋｅｒ1` are one.
    static func canonical(_ username: String) -> String {
        username.trimmingCharacters(in: .whitespacesAndNewlines).precomposedStringWithCompatibilityMapping
            .folding(options: [.caseInsensitive], locale: nil)
    }

    /// Starts an attempt of the app `app` (`BrokerCaller.appKey`; nil: root, counted per username only) for
    /// `username`, or says why it may not start.
    func begin(username: String, app: String?) throws(Refusal) -> Attempt {
        let now = clock()
        let key = PasswordThrottleFile.digest(Self.canonical(username))
        return try state.withLock { (state: inout State) throws(Refusal) -> Attempt in
            var refusals: [Refusal] = []
            if let app, let count = state.counts.apps[app], let until = count.blockedUntil, until > now {
                refusals.append(
                    .backoff(
                        scope: .app,
                        secondsLeft: Self.seconds(until.timeIntervalSince(now)),
                        failures: count.decayed(to: now).failures
                    )
                )
            }
            if let count = state.counts.usernames[key], let until = count.blockedUntil, until > now {
                refusals.append(
                    .backoff(
                        scope: .username,
                        secondsLeft: Self.seconds(until.timeIntervalSince(now)),
                        failures: count.decayed(to: now).failures
                    )
                )
            }
            // The longer wait is the one to name.
            if let longest = refusals.max(by: { Self.secondsLeft($0) < Self.secondsLeft($1) }) { throw longest }
            if let app, state.runningApps.contains(app) { throw .inProgress(scope: .app) }
            guard !state.runningUsernames.contains(key) else { throw .inProgress(scope: .username) }
            if let app { state.runningApps.insert(app) }
            state.runningUsernames.insert(key)
            return Attempt(username: key, app: app)
        }
    }

    /// Ends `attempt`.
    /// - Returns: the longer back-off that starts now, in seconds, if one does.
    @discardableResult
    func end(_ attempt: Attempt, _ outcome: Outcome, limits: DevicePolicy.Limits) -> Int? {
        let now = clock()
        let (backoff, counts) = state.withLock { state -> (Int?, Counts?) in
            state.runningUsernames.remove(attempt.username)
            if let app = attempt.app { state.runningApps.remove(app) }
            switch outcome {
            case .failed:
                return (nil, nil)
            case .succeeded:
                guard state.counts.usernames.removeValue(forKey: attempt.username) != nil else { return (nil, nil) }
                Self.forgetSpent(&state.counts, at: now)
                return (nil, state.counts)
            case .refused:
                var longest: TimeInterval = 0
                longest = max(
                    longest,
                    Self.fail(
                        &state.counts.usernames[attempt.username],
                        at: now,
                        limits: limits,
                        maximum: Self.usernameMaximumBackoff
                    )
                )
                if let app = attempt.app {
                    longest = max(
                        longest,
                        Self.fail(
                            &state.counts.apps[app],
                            at: now,
                            limits: limits,
                            maximum: Self.appMaximumBackoff
                        )
                    )
                }
                Self.forgetSpent(&state.counts, at: now)
                return (longest > 0 ? Int(longest) : nil, state.counts)
            }
        }
        if let counts { file?.save(counts) }
        return backoff
    }

    /// The counts now (for tests and status).
    var counts: Counts { state.withLock { $0.counts } }

    /// Counts one more failure in `count`; returns the back-off that starts (0: none).
    private static func fail(
        _ count: inout Count?,
        at now: Date,
        limits: DevicePolicy.Limits,
        maximum: TimeInterval
    ) -> TimeInterval {
        var updated = count?.decayed(to: now) ?? Count(failures: 0, updatedAt: now)
        updated.failures += 1
        let beyond = updated.failures - limits.passwordFailuresBeforeBackoff
        var backoff: TimeInterval = 0
        if beyond >= 0 {
            backoff = min(Double(limits.passwordBackoffSeconds) * pow(2, Double(min(beyond, 20))), maximum)
            updated.blockedUntil = max(updated.blockedUntil ?? now, now.addingTimeInterval(backoff))
        }
        count = updated
        return backoff
    }

    /// Drops the counts that have nothing left to remember, so the file does not grow with every name tried.
    private static func forgetSpent(_ counts: inout Counts, at now: Date) {
        counts.usernames = counts.usernames.filter { !$0.value.isSpent(at: now) }
        counts.apps = counts.apps.filter { !$0.value.isSpent(at: now) }
    }

    private static func seconds(_ interval: TimeInterval) -> Int { max(1, Int(interval.rounded(.up))) }

    private static func secondsLeft(_ refusal: Refusal) -> Int {
        if case .backoff(_, let secondsLeft, _) = refusal { return secondsLeft }
        return 0
    }
}
