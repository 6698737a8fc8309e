import Crypto
import Foundation
import Logging
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Where the password throttle keeps its counts across restarts: `password-throttle.json` in the state
/// directory (mode 0600), written whole to a temporary name and renamed over the old one, both relative to
/// the state directory's descriptor (opened once, `O_NOFOLLOW`), so a crash leaves the old counts or the
/// new ones and no symlink is ever followed. Usernames are kept as SHA-256 digests of their canonical form:
/// the file names nobody in clear.
struct PasswordThrottleFile: Sendable {
    /// The file's name inside the state directory.
    static let fileName = "password-throttle.json"
    private static let temporaryName = fileName + ".new"

    private let directory: FileDescriptor
    private let logger: Logger

    /// The throttle file of the state directory `directory`; nil (counts kept in memory only, logged) when
    /// the directory cannot be opened.
    init?(directory: URL, logger: Logger) {
        let descriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            logger.warning("password throttle: cannot open the state directory; failure counts are kept in memory only",
                           metadata: ["path": "\(directory.path)", "errno": "\(Errno(rawValue: errno))"])
            return nil
        }
        self.directory = FileDescriptor(rawValue: descriptor)
        self.logger = logger
    }

    /// The digest counts are kept under for a canonical username.
    static func digest(_ canonicalUsername: String) -> String {
        SHA256.hash(data: Data(canonicalUsername.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// The counts kept, or none when there is no file (an unreadable or malformed one is logged and ignored:
    /// the throttle starts afresh, never refuses every sign-in).
    func load() -> PasswordThrottle.Counts? {
        let descriptor = openat(directory.rawValue, Self.fileName, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno != ENOENT {
                logger.warning("password throttle: cannot read its counts; starting afresh",
                               metadata: ["file": "\(Self.fileName)", "errno": "\(Errno(rawValue: errno))"])
            }
            return nil
        }
        let file = FileDescriptor(rawValue: descriptor)
        defer { try? file.close() }
        var bytes = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while bytes.count <= 4 << 20 {
            guard let count = try? chunk.withUnsafeMutableBytes({ try file.read(into: $0) }), count > 0 else { break }
            bytes += chunk[..<count]
        }
        guard let counts = try? JSONDecoder.throttle.decode(PasswordThrottle.Counts.self, from: Data(bytes)) else {
            logger.warning("password throttle: its counts file is malformed; starting afresh", metadata: ["file": "\(Self.fileName)"])
            return nil
        }
        return counts
    }

    /// Replaces the kept counts with `counts`. A failure (a full disk) is logged: the counts stay in memory.
    func save(_ counts: PasswordThrottle.Counts) {
        do {
            let data = try JSONEncoder.throttle.encode(counts)
            _ = unlinkat(directory.rawValue, Self.temporaryName, 0)
            let descriptor = openat(directory.rawValue, Self.temporaryName, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw Errno(rawValue: errno) }
            let file = FileDescriptor(rawValue: descriptor)
            do {
                try file.writeAll(data)
                guard fsync(descriptor) == 0 else { throw Errno(rawValue: errno) }
                try file.close()
            } catch {
                try? file.close()
                _ = unlinkat(directory.rawValue, Self.temporaryName, 0)
                throw error
            }
            guard renameat(directory.rawValue, Self.temporaryName, directory.rawValue, Self.fileName) == 0 else {
                let error = Errno(rawValue: errno)
                _ = unlinkat(directory.rawValue, Self.temporaryName, 0)
                throw error
            }
        } catch {
            logger.warning("password throttle: cannot keep its counts on disk; they hold until the daemon stops",
                           metadata: ["file": "\(Self.fileName)", "error": "\(error)"])
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
