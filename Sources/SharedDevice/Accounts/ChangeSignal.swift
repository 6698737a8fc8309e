public import Foundation
import PathSafety
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A cross-process "something changed" signal through one file in the state directory, so that apps
/// can wait for account changes without polling the database.
///
/// A writer, after committing, rewrites the file's one byte; every waiter has an inotify watch on it
/// and wakes on `IN_CLOSE_WRITE`. The signal carries no data: waiters then read what changed from the
/// store. A waiter that registers before reading the store's state never misses a change.
public struct ChangeSignal: Sendable {
    /// The signal file's name inside the state directory.
    public static let fileName = "account-changes.signal"

    /// The signal file.
    public let url: URL
    /// The state directory it is in.
    public let directory: URL

    /// The signal of the state directory `directory`.
    public init(directory: URL) {
        self.directory = directory
        url = directory.appendingPathComponent(Self.fileName)
    }

    /// Wakes every waiter. Failures are ignored: waiters also re-check on their own timeout.
    ///
    /// The byte is rewritten in place, never truncated: ext4 starts writing back a file that was
    /// truncated and rewritten when it is closed (its guard for replace-by-truncate), which put a disk
    /// submission on every sign-out. The file is opened relative to the state directory, reached safely,
    /// with `O_NOFOLLOW`: a symbolic link planted in its place is not followed (and nothing is written).
    public func notify() {
        guard let descriptor = try? Self.openFile(in: directory) else { return }
        _ = try? descriptor.writeAll(toAbsoluteOffset: 0, [UInt8(1)])
        try? descriptor.close()
    }

    /// Starts watching. Create the watcher **before** reading the state it guards.
    /// - Throws: `SharedDeviceError` when the file cannot be created or watched (a symbolic link or
    ///   anything but a regular file at its name included).
    public func watch() throws -> Watcher {
        do {
            try Self.openFile(in: directory).close()
        } catch let error as SharedDeviceError {
            throw error
        } catch Errno.tooManySymbolicLinkLevels {
            throw SharedDeviceError(
                .store,
                "\(url.path) is a symbolic link, which is never followed; nothing was written: remove it (account change notifications need the file)"
            )
        } catch {
            throw Watcher.failure("cannot create \(url.path)", error)
        }
        return try Watcher(path: FilePath(url.path), events: UInt32(IN_CLOSE_WRITE) | UInt32(IN_DONT_FOLLOW))
    }

    /// The signal file of `directory` for writing (created 0600 if missing): opened relative to the
    /// directory reached by `SafeDirectory.open`, never through a symbolic link, and only if it is a
    /// regular file (non-blocking, so that a FIFO planted there cannot hang the writer).
    static func openFile(in directory: URL) throws -> FileDescriptor {
        let held = try SafeDirectory.open(
            directory.path,
            purpose: "the state directory",
            alternative: "choose another with --state-dir"
        )
        let descriptor = try held.openFile(
            fileName,
            .writeOnly,
            options: [.create, .nonBlocking],
            permissions: [.ownerReadWrite]
        )
        do {
            guard try descriptor.stat().type == .regular else {
                throw SharedDeviceError(
                    .store,
                    "\(held.path)/\(fileName) is not a regular file; nothing was written: remove it (account change notifications need the file)"
                )
            }
        } catch {
            try? descriptor.close()
            throw error
        }
        return descriptor
    }

    /// Watches every write to a file in the store's `directory` (the database and its write-ahead log
    /// included): a wake-up after any commit by any process, whatever it changed (e.g. an audit event that
    /// is no account change). SQLite makes a commit visible to readers just after its last write, so a
    /// reader that finds nothing new on a wake-up should look once more shortly after.
    public static func watchWrites(in directory: URL) throws -> Watcher {
        try Watcher(
            path: FilePath(directory.path),
            events: UInt32(IN_MODIFY) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_MOVED_TO)
        )
    }

    /// An inotify watch on the signal file.
    public final class Watcher: @unchecked Sendable {
        private let inotify: FileDescriptor
        private let wake: (readEnd: FileDescriptor, writeEnd: FileDescriptor)
        private let cancelled = Mutex(false)

        /// Whether `cancel()` was called.
        public var isCancelled: Bool { cancelled.withLock { $0 } }

        /// Watches `path` (which must exist: inotify watches an inode) for `events`.
        init(path: FilePath, events: UInt32) throws(SharedDeviceError) {
            let inotify: FileDescriptor
            do throws(Errno) {
                inotify = try SignalSyscalls.inotifyInit()
            } catch {
                throw Self.failure("inotify is unavailable", error)
            }
            do throws(Errno) {
                try SignalSyscalls.inotifyAddWatch(inotify, path, events: events)
            } catch {
                try? inotify.close()
                throw Self.failure("cannot watch \(path)", error)
            }
            do {
                wake = try FileDescriptor.pipe()
                for end in [wake.readEnd, wake.writeEnd] { try SignalSyscalls.setCloseOnExec(end) }
            } catch {
                try? inotify.close()
                throw Self.failure("cannot create a pipe", error)
            }
            self.inotify = inotify
        }

        /// Blocks until the file is rewritten, `timeout` passes, or `cancel()` is called.
        /// - Returns: `true` when a change was signalled.
        public func wait(timeout: Duration) -> Bool {
            let milliseconds = Int32(
                clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
            )
            guard let ready = try? SignalSyscalls.poll([inotify, wake.readEnd], timeoutMilliseconds: milliseconds),
                ready.first == true
            else {
                return false
            }
            var buffer = [UInt8](repeating: 0, count: 4096)
            _ = try? buffer.withUnsafeMutableBytes { try inotify.read(into: $0) }
            return true
        }

        /// Wakes a blocked `wait` for good (it returns `false` from then on).
        public func cancel() {
            cancelled.withLock { $0 = true }
            _ = try? wake.writeEnd.writeAll([UInt8(1)])
        }

        deinit {
            try? inotify.close()
            try? wake.readEnd.close()
            try? wake.writeEnd.close()
        }

        static func failure(_ what: String, _ error: any Error) -> SharedDeviceError {
            SharedDeviceError(.store, "\(what): \(error); account change notifications need a writable state directory")
        }
    }
}

/// The Linux calls swift-system does not wrap that the change signal needs, one wrapper each: the C call
/// runs, `errno` is captured at once, `EINTR` is retried, and a failure is thrown as `Errno`.
enum SignalSyscalls {
    /// `inotify_init1(IN_CLOEXEC)`.
    static func inotifyInit() throws(Errno) -> FileDescriptor {
        FileDescriptor(rawValue: try retrying { inotify_init1(Int32(IN_CLOEXEC)) })
    }

    /// `inotify_add_watch(2)` for `events` on `path`.
    static func inotifyAddWatch(_ inotify: FileDescriptor, _ path: FilePath, events: UInt32) throws(Errno) {
        _ = try retrying { path.withPlatformString { inotify_add_watch(inotify.rawValue, $0, events) } }
    }

    /// `fcntl(F_SETFD, FD_CLOEXEC)`.
    static func setCloseOnExec(_ descriptor: FileDescriptor) throws(Errno) {
        _ = try retrying { fcntl(descriptor.rawValue, F_SETFD, FD_CLOEXEC) }
    }

    /// `poll(2)` for input on `descriptors`; for each, whether it is readable. Empty on a timeout.
    static func poll(_ descriptors: [FileDescriptor], timeoutMilliseconds: Int32) throws(Errno) -> [Bool] {
        var fds = descriptors.map { pollfd(fd: $0.rawValue, events: Int16(POLLIN), revents: 0) }
        let ready = try retrying { Glibc.poll(&fds, nfds_t(fds.count), timeoutMilliseconds) }
        return ready == 0 ? [] : fds.map { $0.revents & Int16(POLLIN) != 0 }
    }

    private static func retrying(_ call: () -> Int32) throws(Errno) -> Int32 {
        try retryingOnInterrupt(call)
    }
}
