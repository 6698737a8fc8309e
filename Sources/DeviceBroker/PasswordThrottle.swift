import Foundation
import SharedDevice
import Synchronization

/// The device-wide brake on password guessing (policy `limits.passwordFailuresBeforeBackoff` and
/// `limits.passwordBackoffSeconds`): after that many failed password sign-ins in a row, every password
/// sign-in is refused for the back-off, which doubles with each further failure up to an hour; a successful
/// one ends it. One password sign-in runs at a time, so parallel attempts cannot slip past the count. Kept
/// in the broker's memory: only root can restart the broker.
final class PasswordThrottle: Sendable {
    /// The longest back-off.
    static let maximumBackoff: TimeInterval = 3600

    /// Why an attempt may not start now.
    enum Refusal: Error {
        /// The back-off runs for `secondsLeft` more seconds after `failures` failures in a row.
        case backoff(secondsLeft: Int, failures: Int)
        /// Another password sign-in is running.
        case inProgress
    }

    private struct State {
        var failures = 0
        var blockedUntil: Date?
        var running = false
    }

    private let state = Mutex(State())
    private let clock: @Sendable () -> Date

    init(clock: @escaping @Sendable () -> Date = Date.init) {
        self.clock = clock
    }

    /// Starts an attempt, or says why it may not start.
    func begin() throws(Refusal) {
        let now = clock()
        try state.withLock { (state: inout State) throws(Refusal) in
            if let until = state.blockedUntil, until > now {
                throw .backoff(secondsLeft: Int(until.timeIntervalSince(now).rounded(.up)), failures: state.failures)
            }
            guard !state.running else { throw .inProgress }
            state.running = true
        }
    }

    /// How an attempt ended.
    enum Outcome {
        /// Signed in: the back-off ends.
        case succeeded
        /// The provider refused the password or code: counts toward the back-off.
        case refused
        /// Anything else (the provider unreachable, a cancellation): changes nothing.
        case failed
    }

    /// Ends the attempt begun last.
    /// - Returns: the back-off that starts now, in seconds, if one does.
    @discardableResult
    func end(_ outcome: Outcome, limits: DevicePolicy.Limits) -> Int? {
        let now = clock()
        return state.withLock { state -> Int? in
            state.running = false
            switch outcome {
            case .succeeded:
                state = State()
                return nil
            case .failed:
                return nil
            case .refused:
                break
            }
            state.failures += 1
            let beyond = state.failures - limits.passwordFailuresBeforeBackoff
            guard beyond >= 0 else { return nil }
            let backoff = min(Double(limits.passwordBackoffSeconds) * pow(2, Double(min(beyond, 20))), Self.maximumBackoff)
            state.blockedUntil = now.addingTimeInterval(backoff)
            return Int(backoff)
        }
    }
}
