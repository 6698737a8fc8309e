import Foundation
import Logging
import PathSafety
import SharedDevice
import SystemPackage

/// The shift's login session as the broker recorded it at OpenLoginSession: the logind session, its user,
/// the worker, when and where it opened, and what a sign-out does to it. Never a secret.
struct ShiftSessionRecord: Codable, Equatable, Sendable {
    /// logind's session id.
    var sessionId: String
    /// The local account the session runs as, and its uid.
    var user: String
    var uid: UInt32
    /// The worker whose shift it is.
    var account: DeviceAccount
    /// The correlation id of the worker's sign-in.
    var correlationID: String
    var openedAt: Date
    var place: LoginScreenPlace
    var onSignOut: DevicePolicy.SessionEndAction
    /// Seconds between TerminateSession and KillSession with SIGKILL.
    var terminateGraceSeconds: Int
    /// The audit sequence of the `session.opened` event: only sign-outs after it end this session.
    var openedSequence: Int64
}

/// Where the shift's session is kept across restarts: a file of the state directory (mode 0600;
/// `shift-session.json` for the recorded session, `login-pending.json` for the workers whose session has
/// not opened yet), reached through the state directory held once (`SafeDirectory`: every component
/// checked, files opened with `O_NOFOLLOW`) and written whole to a new file renamed over the old one, so a
/// crash leaves the old value or the new one and no symlink is ever followed.
struct ShiftSessionFile<Value: Codable & Sendable>: Sendable {
    static var maximumBytes: Int { 64 << 10 }

    /// The file's name in the state directory.
    let fileName: String
    private let directory: SafeDirectory
    private let logger: Logger

    /// The file `fileName` of the state directory `directory`; nil (kept in memory only, logged) when the
    /// directory cannot be reached safely.
    init?(directory: URL, fileName: String, logger: Logger) {
        self.fileName = fileName
        do {
            self.directory = try SafeDirectory.open(
                directory.path,
                purpose: "the state directory",
                alternative: "choose another with --state-dir"
            )
        } catch {
            logger.warning(
                "shift session: cannot reach the state directory; the session's record is kept in memory only",
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
            bytes = try directory.contents(of: fileName, limit: Self.maximumBytes)
        } catch {
            logger.warning(
                "shift session: cannot read its record",
                metadata: ["file": "\(fileName)", "errno": "\(error)"]
            )
            return nil
        }
        guard let bytes else { return nil }
        guard let value = try? Self.decoder.decode(Value.self, from: Data(bytes)) else {
            logger.warning("shift session: its record is malformed; ignored", metadata: ["file": "\(fileName)"])
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
                "shift session: cannot keep its record on disk; it holds until the daemon stops",
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
