import Foundation
import Logging
import PathSafety
import SystemPackage

/// A value the broker keeps across restarts as JSON in a file of the state directory (mode 0600): the
/// shift's session (`shift-session.json`), the workers whose session has not opened (`login-pending.json`),
/// the password throttle's counts (`password-throttle.json`). The state directory is held once
/// (`SafeDirectory`: every component checked, files opened with `O_NOFOLLOW`) and the value written whole to
/// a new file renamed over the old one, so a crash leaves the old value or the new one and no symlink is
/// ever followed. Every failure is logged and leaves the value in memory only; never a secret in the file.
struct StateFile<Value: Codable & Sendable>: Sendable {
    /// The file's name in the state directory.
    let fileName: String
    /// What the file keeps, for log messages (`the shift's session`).
    private let subject: String
    /// The largest file read back.
    private let maximumBytes: Int
    private let directory: SafeDirectory
    private let logger: Logger

    /// The file `fileName` of the state directory `directory`; nil (kept in memory only, logged) when the
    /// directory cannot be reached safely.
    init?(directory: URL, fileName: String, subject: String, maximumBytes: Int = 64 << 10, logger: Logger) {
        self.fileName = fileName
        self.subject = subject
        self.maximumBytes = maximumBytes
        do {
            self.directory = try SafeDirectory.open(
                directory.path,
                purpose: "the state directory",
                alternative: "choose another with --state-dir"
            )
        } catch {
            logger.warning(
                "cannot reach the state directory; \(subject) is kept in memory only",
                metadata: ["path": "\(directory.path)", "error": "\(error)"]
            )
            return nil
        }
        self.logger = logger
    }

    /// The value kept, nil when there is none (an unreadable or malformed file is logged and ignored).
    func load() -> Value? {
        let bytes: [UInt8]?
        do throws(Errno) {
            bytes = try directory.contents(of: fileName, limit: maximumBytes)
        } catch {
            logger.warning("cannot read \(subject); ignored", metadata: ["file": "\(fileName)", "errno": "\(error)"])
            return nil
        }
        guard let bytes else { return nil }
        guard let value = try? Self.decoder.decode(Value.self, from: Data(bytes)) else {
            logger.warning("\(subject) on disk is malformed; ignored", metadata: ["file": "\(fileName)"])
            return nil
        }
        return value
    }

    /// Replaces the value with `value`, or removes it (nil). A failure is logged: the value holds in memory.
    func save(_ value: Value?) {
        do {
            if let value {
                try directory.replace(fileName, with: Array(try Self.encoder.encode(value)))
            } else if (try? directory.status(of: fileName)) != nil {
                try directory.remove(fileName)
            }
        } catch {
            logger.warning(
                "cannot keep \(subject) on disk; it holds until the daemon stops",
                metadata: ["file": "\(fileName)", "error": "\(error)"]
            )
        }
    }

    private static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    private static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }
}
