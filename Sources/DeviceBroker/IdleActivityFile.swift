import Foundation
import Logging
import PathSafety

/// The signed-in worker's last activity, kept in the state directory (`idle-activity.json`) so that a
/// daemon restart neither resets an idle worker's clock to zero nor signs out a worker who was active.
/// It holds a time and the worker's home account id, no secret. Written atomically (a new file renamed
/// over the old), at a bounded rate by the idle monitor; read and written relative to the state directory,
/// held by a descriptor opened once (every component checked), never through a symbolic link.
struct IdleActivityFile: Sendable {
    /// What the file holds.
    struct Record: Codable, Equatable {
        /// The worker the activity belongs to (home account id).
        var account: String
        /// The last activity, in the idle clock's Unix seconds.
        var lastActivity: Double
    }

    static let fileName = "idle-activity.json"

    let url: URL
    let stateDirectory: URL
    /// The state directory, reached safely once (`SafeDirectory.open`); nil when it could not be (then the
    /// activity is kept in memory only, and the error is the one every use reports).
    private let held: Result<SafeDirectory, any Error>

    init(stateDirectory: URL) {
        self.stateDirectory = stateDirectory
        url = stateDirectory.appendingPathComponent(Self.fileName)
        held = Result {
            try SafeDirectory.open(
                stateDirectory.path,
                purpose: "the state directory",
                alternative: "choose another with --state-dir"
            )
        }
    }

    /// The state directory held since the start.
    private func directory() throws -> SafeDirectory { try held.get() }

    /// The record, or `nil` when there is none or it cannot be read (the clock then starts now).
    func read(logger: Logger) -> Record? {
        guard let bytes = try? directory().contents(of: Self.fileName, limit: 4096) else { return nil }
        guard let record = try? JSONDecoder().decode(Record.self, from: Data(bytes)) else {
            logger.debug("idle activity file unreadable; the idle clock starts now", metadata: ["file": "\(url.path)"])
            return nil
        }
        return record
    }

    /// Replaces the record; a failure is logged and costs only precision after a restart.
    func write(_ record: Record, logger: Logger) {
        do {
            try directory().replace(Self.fileName, with: Array(try JSONEncoder().encode(record)))
        } catch {
            logger.debug("idle activity not persisted", metadata: ["file": "\(url.path)", "error": "\(error)"])
        }
    }

    /// Removes the record (nobody is signed in).
    func remove() {
        try? directory().remove(Self.fileName)
    }
}
