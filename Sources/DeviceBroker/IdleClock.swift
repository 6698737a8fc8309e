public import Foundation
import Synchronization

/// The time the idle sign-out runs on. The daemon uses the system's; tests inject one they move by
/// hand, or a `FileClock` that a process test moves by rewriting a file.
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

/// Time that stands still until a test moves it: the Unix time in seconds, as decimal text, in a file the
/// test rewrites (`deviced --clock-file`, atomically, with a rename). Nothing a test checks then depends on
/// how fast the machine is: a warning is due exactly when the test has moved the clock past it, and never
/// before. Not for a device: whoever can write the file sets the broker's idle and password clocks.
public final class FileClock: IdleClock {
    /// The file holding the time.
    public let path: String
    /// The last time read, kept when a read finds no number (a file mid-replacement).
    private let lastRead: Mutex<Date>

    /// A clock reading `path`; throws when it holds no Unix time now.
    public init(path: String) throws(FileClockError) {
        self.path = path
        guard let time = Self.read(path) else { throw FileClockError(path: path) }
        lastRead = Mutex(time)
    }

    public func now() -> Date {
        lastRead.withLock { last in
            if let time = Self.read(path) { last = time }
            return last
        }
    }

    /// Looks at the file every 10 ms until it says `deadline` has come.
    public func sleep(until deadline: Date) async throws {
        while now() < deadline { try await Task.sleep(for: .milliseconds(10)) }
    }

    private static func read(_ path: String) -> Date? {
        guard let data = FileManager.default.contents(atPath: path),
            let seconds = Double(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)),
            seconds.isFinite
        else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }
}

/// A clock file that holds no Unix time.
public struct FileClockError: Error, CustomStringConvertible {
    /// The file.
    public var path: String
    public var description: String {
        "the clock file \(path) holds no Unix time in seconds (write one, e.g. `date +%s > \(path)`)"
    }
}
