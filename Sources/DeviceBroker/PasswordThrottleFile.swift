import Crypto
import Foundation
import Logging

/// Where the password throttle keeps its counts across restarts: `password-throttle.json` in the state
/// directory (mode 0600), reached through the state directory held once (`SafeDirectory`: every component
/// checked, files opened with `O_NOFOLLOW`) and written whole to a new file that is renamed over the old one,
/// so a crash leaves the old counts or the new ones and no symlink is ever followed. Usernames are kept as
/// SHA-256 digests of their canonical form: the file names nobody in clear.
struct PasswordThrottleFile: Sendable {
    /// The file's name inside the state directory.
    static let fileName = "password-throttle.json"

    private let file: StateFile<PasswordThrottle.Counts>

    /// The throttle file of the state directory `directory`; nil (counts kept in memory only, logged) when
    /// the directory cannot be reached safely.
    init?(directory: URL, logger: Logger) {
        // The largest file read back: a file of every username ever tried would still be far below it.
        guard
            let file = StateFile<PasswordThrottle.Counts>(
                directory: directory,
                fileName: Self.fileName,
                subject: "the password throttle's failure counts",
                maximumBytes: 4 << 20,
                logger: logger
            )
        else { return nil }
        self.file = file
    }

    /// The digest counts are kept under for a canonical username.
    static func digest(_ canonicalUsername: String) -> String {
        SHA256.hash(data: Data(canonicalUsername.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// The counts kept, or none when there is no file (an unreadable or malformed one is logged and ignored:
    /// the throttle starts afresh, never refuses every sign-in).
    func load() -> PasswordThrottle.Counts? { file.load() }

    /// Replaces the kept counts with `counts`. A failure (a full disk) is logged: the counts stay in memory.
    func save(_ counts: PasswordThrottle.Counts) { file.save(counts) }
}
