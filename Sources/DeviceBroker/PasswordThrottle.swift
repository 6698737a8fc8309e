import Foundation
import SharedDevice
import Synchronization

/// The brake on password guessing (policy `limits.passwordFailuresBeforeBackoff` and
/// `limits.passwordBackoffSeconds`), counted twice: per **target username** (in canonical form: trimmed,
/// compatibility-normalized, case-folded) and per **calling app** (its uid, and its Flatpak app id for a
/// sandboxed app: `BrokerCaller.appKey`; root, the login screen, is counted per username only, never as one
/// app), and, for a uid the policy lists several apps for (a host app and its Flatpak apps), per **uid** as
/// well: that count's share is the apps' together (the threshold and the failures forgotten per interval
/// times the number of apps), so a user's apps together guess no faster than that many apps, however many
/// sandboxes it starts.
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
        /// The calling user's, over every app the policy lists for its uid.
        case user
    }

    /// The calling app as the throttle counts it.
    struct App: Sendable {
        /// The app's key (`BrokerCaller.appKey`: `uid`, or `uid/FLATPAK-ID`).
        let key: String
        /// The uid that runs it.
        let uid: UInt32
        /// How many apps the policy lists for that uid (at least one).
        let appsOfUID: Int

        init(key: String, uid: UInt32, appsOfUID: Int = 1) {
            self.key = key
            self.uid = uid
            self.appsOfUID = max(1, appsOfUID)
        }

        /// The key of the uid's count, kept only when the uid has several apps (else the app's count is it).
        var userKey: String? { appsOfUID > 1 ? String(uid) : nil }
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
        let app: App?
    }

    /// Recent failures of one username or app.
    struct Count: Codable, Equatable, Sendable {
        /// Failures not yet forgotten.
        var failures: Int
        /// Since when the next failure is being forgotten.
        var updatedAt: Date
        /// The end of the back-off, if one runs.
        var blockedUntil: Date?

        /// The count at `now`: `share` failures forgotten for each whole `forgetInterval` since `updatedAt`.
        func decayed(to now: Date, share: Int = 1) -> Count {
            let intervals = max(0, now.timeIntervalSince(updatedAt)) / PasswordThrottle.forgetInterval
            let elapsed = Int(min(intervals.rounded(.down), Double(Int32.max)))
            let forgotten = elapsed.multipliedReportingOverflow(by: share)
            guard !forgotten.overflow, forgotten.partialValue < failures else {
                return Count(failures: 0, updatedAt: now, blockedUntil: blockedUntil)
            }
            return Count(
                failures: failures - forgotten.partialValue,
                updatedAt: updatedAt.addingTimeInterval(Double(elapsed) * PasswordThrottle.forgetInterval),
                blockedUntil: blockedUntil
            )
        }

        /// Whether nothing is left to remember at `now`.
        func isSpent(at now: Date) -> Bool {
            decayed(to: now).failures == 0 && (blockedUntil.map { $0 <= now } ?? true)
        }
    }

    /// What is kept across restarts: the counts by username digest, by app (`uid`, or `uid/FLATPAK-ID`) and by
    /// uid (only for a uid with several apps).
    struct Counts: Codable, Equatable, Sendable {
        var usernames: [String: Count] = [:]
        var apps: [String: Count] = [:]
        var users: [String: Count] = [:]

        init() {}

        /// Reads a file written before the uid counts existed as well (no `users`).
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            usernames = try container.decode([String: Count].self, forKey: .usernames)
            apps = try container.decode([String: Count].self, forKey: .apps)
            users = try container.decodeIfPresent([String: Count].self, forKey: .users) ?? [:]
        }
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

    /// Starts an attempt of the app `app` (nil: root, counted per username only) for `username`, or says why
    /// it may not start.
    func begin(username: String, app: App?) throws(Refusal) -> Attempt {
        let now = clock()
        let key = PasswordThrottleFile.digest(Self.canonical(username))
        return try state.withLock { (state: inout State) throws(Refusal) -> Attempt in
            let held: [(Scope, Count?, Int)] = [
                (.app, app.flatMap { state.counts.apps[$0.key] }, 1),
                (.user, app?.userKey.flatMap { state.counts.users[$0] }, app?.appsOfUID ?? 1),
                (.username, state.counts.usernames[key], 1),
            ]
            let refusals = held.compactMap { scope, count, share -> Refusal? in
                guard let count, let until = count.blockedUntil, until > now else { return nil }
                return .backoff(
                    scope: scope,
                    secondsLeft: Self.seconds(until.timeIntervalSince(now)),
                    failures: count.decayed(to: now, share: share).failures
                )
            }
            // The longer wait is the one to name.
            if let longest = refusals.max(by: { Self.secondsLeft($0) < Self.secondsLeft($1) }) { throw longest }
            if let app, state.runningApps.contains(app.key) { throw .inProgress(scope: .app) }
            guard !state.runningUsernames.contains(key) else { throw .inProgress(scope: .username) }
            if let app { state.runningApps.insert(app.key) }
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
            if let app = attempt.app { state.runningApps.remove(app.key) }
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
                            &state.counts.apps[app.key],
                            at: now,
                            limits: limits,
                            maximum: Self.appMaximumBackoff
                        )
                    )
                    if let user = app.userKey {
                        longest = max(
                            longest,
                            Self.fail(
                                &state.counts.users[user],
                                at: now,
                                limits: limits,
                                maximum: Self.appMaximumBackoff,
                                share: app.appsOfUID
                            )
                        )
                    }
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

    /// Counts one more failure in `count`, of `share` apps' worth (the threshold and the forgetting scaled by
    /// it); returns the back-off that starts (0: none).
    private static func fail(
        _ count: inout Count?,
        at now: Date,
        limits: DevicePolicy.Limits,
        maximum: TimeInterval,
        share: Int = 1
    ) -> TimeInterval {
        var updated = count?.decayed(to: now, share: share) ?? Count(failures: 0, updatedAt: now)
        updated.failures += 1
        let beyond = updated.failures - limits.passwordFailuresBeforeBackoff * share
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
        counts.users = counts.users.filter { !$0.value.isSpent(at: now) }
    }

    private static func seconds(_ interval: TimeInterval) -> Int { max(1, Int(interval.rounded(.up))) }

    private static func secondsLeft(_ refusal: Refusal) -> Int {
        if case .backoff(_, let secondsLeft, _) = refusal { return secondsLeft }
        return 0
    }
}
