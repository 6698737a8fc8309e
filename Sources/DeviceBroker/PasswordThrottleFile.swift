import Crypto
import Foundation
import Logging
import PathSafety
import SystemPackage

/// Where the password throttle keeps its counts across restarts: `password-throttle.json` in the state
/// directory (mode 0600), reached through the state directory held once (`SafeDirectory`: every component
/// checked, files opened with `O_NOFOLLOW`) and written whole to a new file that is renamed over the old one,
/// so a crash leaves the old counts or the new ones and no symlink is ever followed. Usernames are kept as
/// SHA-256 digests of their canonical form: the file names nobody in clear.
struct PasswordThrottleFile: Sendable {
    /// The file's name inside the state directory.
    static let fileName = "password-throttle.json"
    /// The largest file read back (a file of every username ever tried would still be far below it).
    static let maximumBytes = 4 << 20

    private let directory: SafeDirectory
    private let logger: Logger

    /// The throttle file of the state directory `directory`; nil (counts kept in memory only, logged) when
    /// the directory cannot be reached safely.
    init?(directory: URL, logger: Logger) {
        do {
            self.directory = try SafeDirectory.open(
                directory.path,
                purpose: "the state directory",
                alternative: "choose another with --state-dir"
            )
        } catch {
            logger.warning(
                "password throttle: cannot reach the state directory; failure counts are kept in memory only",
                metadata: ["path": "\(directory.path)", "error": "\(error)"]
            )
            return nil
        }
        self.logger = logger
    }

    /// The digest counts are kept under for a canonical username.
    static func digest(_ canonicalUsername: String) -> String {
        SHA256.hash(data: Data(canonicalUsername.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// The counts kept, or none when there is no file (an unreadable or malformed one is logged and ignored:
    /// the throttle starts afresh, never refuses every sign-in).
    func load() -> PasswordThrottle.Counts? {
        let bytes: [UInt8]?
        do throws(Errno) {
            bytes = try directory.contents(of: Self.fileName, limit: Self.maximumBytes)
        } catch {
            logger.warning(
                "password throttle: cannot read its counts; starting afresh",
                metadata: ["file": "\(Self.fileName)", "errno": "\(error)"]
            )
            return nil
        }
        guard let bytes else { return nil }
        guard let counts = try? JSONDecoder.throttle.decode(PasswordThrottle.Counts.self, from: Data(bytes)) else {
            logger.warning(
                "password throttle: its counts file is malformed; starting afresh",
                metadata: ["file": "\(Self.fileName)"]
            )
            return nil
        }
        return counts
    }

    /// Replaces the kept counts with `counts`. A failure (a full disk) is logged: the counts stay in memory.
    func save(_ counts: PasswordThrottle.Counts) {
        do {
            try directory.replace(Self.fileName, with: Array(try JSONEncoder.throttle.encode(counts)))
        } catch {
            logger.warning(
                "password throttle: cannot keep its counts on disk; they hold until the daemon stops",
                metadata: ["file": "\(Self.fileName)", "error": "\(error)"]
            )
        }
    }
}

extension JSONEncoder {
    fileprivate static var throttle: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}

extension JSONDecoder {
    fileprivate static var throttle: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }
}
