public import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A cross-process "something changed" signal through one file in the state directory, so that apps
/// can wait for account changes without polling the database.
///
/// A writer, after committing, rewrites the file (`touch`); every waiter has an inotify watch on it
/// and wakes on `IN_CLOSE_WRITE`. The signal carries no data: waiters then read what changed from the
/// store. A waiter that registers before reading the store's state never misses a change.
public struct ChangeSignal: Sendable {
    /// The signal file's name inside the state directory.
    public static let fileName = "account-changes.signal"

    /// The signal file.
    public let url: URL

    /// The signal of the state directory `directory`.
    public init(directory: URL) {
        url = directory.appendingPathComponent(Self.fileName)
    }

    /// Wakes every waiter. Failures are ignored: waiters also re-check on their own timeout.
    public func notify() {
        let fd = open(url.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        var byte: UInt8 = 1
        _ = write(fd, &byte, 1)
        close(fd)
    }

    /// Starts watching. Create the watcher **before** reading the state it guards.
    public func watch() throws -> Watcher {
        try Watcher(url: url)
    }

    /// An inotify watch on the signal file.
    public final class Watcher: @unchecked Sendable {
        private let inotify: Int32
        private let wake: [Int32]
        private let cancelled = Mutex(false)

        /// Whether `cancel()` was called.
        public var isCancelled: Bool { cancelled.withLock { $0 } }

        init(url: URL) throws {
            // Make sure the file exists (inotify watches an inode), with owner-only permissions.
            let fd = open(url.path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw Self.failure("cannot create \(url.path)") }
            close(fd)
            inotify = inotify_init1(Int32(IN_CLOEXEC))
            guard inotify >= 0 else { throw Self.failure("inotify is unavailable") }
            guard inotify_add_watch(inotify, url.path, UInt32(IN_CLOSE_WRITE)) >= 0 else {
                close(inotify)
                throw Self.failure("cannot watch \(url.path)")
            }
            var pipeEnds: [Int32] = [0, 0]
            guard pipe(&pipeEnds) == 0 else {
                close(inotify)
                throw Self.failure("cannot create a pipe")
            }
            for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            wake = pipeEnds
        }

        /// Blocks until the file is rewritten, `timeout` passes, or `cancel()` is called.
        /// - Returns: `true` when a change was signalled.
        public func wait(timeout: Duration) -> Bool {
            var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0)]
            let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
            guard poll(&fds, 2, milliseconds) > 0, fds[0].revents & Int16(POLLIN) != 0 else { return false }
            var buffer = [UInt8](repeating: 0, count: 4096)
            _ = read(inotify, &buffer, buffer.count)
            return true
        }

        /// Wakes a blocked `wait` for good (it returns `false` from then on).
        public func cancel() {
            cancelled.withLock { $0 = true }
            var byte: UInt8 = 1
            _ = write(wake[1], &byte, 1)
        }

        deinit {
            close(inotify)
            close(wake[0])
            close(wake[1])
        }

        private static func failure(_ what: String) -> SharedDeviceError {
            SharedDeviceError(.store, "\(what): \(String(cString: strerror(errno))); account change notifications need a writable state directory")
        }
    }
}
