public import Foundation

/// The time the idle sign-out runs on. The daemon uses the system's; tests inject one they move by
/// hand, or a scaled one so a 30-second policy runs in 3 seconds.
public protocol IdleClock: Sendable {
    /// The time now.
    func now() -> Date
    /// Returns at `deadline` (or at once if it passed); throws `CancellationError` when the task is cancelled.
    func sleep(until deadline: Date) async throws
}

/// Wall-clock time: what persisted activity times mean across daemon restarts.
public struct SystemIdleClock: IdleClock {
    public init() {}

    public func now() -> Date { Date() }

    public func sleep(until deadline: Date) async throws {
        let interval = deadline.timeIntervalSinceNow
        if interval > 0 { try await Task.sleep(for: .milliseconds(Int64((interval * 1000).rounded(.up)))) }
    }
}

/// Wall-clock time run `scale` times faster (Unix time × scale), for process tests of the idle sign-out:
/// with scale 10 a policy's 30 s pass in 3 real seconds. Being a fixed function of the wall clock, it
/// stays consistent across daemon restarts, so persisted activity times keep their meaning.
public struct ScaledIdleClock: IdleClock {
    public let scale: Double

    public init(scale: Double) {
        precondition(scale > 0, "a clock scale must be positive")
        self.scale = scale
    }

    public func now() -> Date { Date(timeIntervalSince1970: Date().timeIntervalSince1970 * scale) }

    public func sleep(until deadline: Date) async throws {
        let interval = deadline.timeIntervalSince(now()) / scale
        if interval > 0 { try await Task.sleep(for: .milliseconds(Int64((interval * 1000).rounded(.up)))) }
    }
}
