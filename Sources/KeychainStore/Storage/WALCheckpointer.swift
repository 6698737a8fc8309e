import Dispatch
import GRDB
import GRDBSQLite
import Logging
import Synchronization

/// Keeps SQLite's write-ahead-log checkpoints out of the call that commits.
///
/// SQLite checkpoints automatically inside the commit that grows the log past 1,000 pages: copying the
/// pages back into the database file and syncing both files lands on whichever operation commits then (a
/// global sign-out, say), and a sync on a busy disk takes tens to hundreds of milliseconds. The
/// checkpointer replaces SQLite's hook on the store's connection. Past `threshold` pages it runs a
/// passive checkpoint on a background queue over a short-lived connection of its own: passive means it
/// takes no lock a writer or reader waits for, and stops where a reader still needs the log. Past `limit`
/// pages (the background could not keep up, or short-lived processes exited before theirs ran) the
/// committing connection checkpoints at once and starts the log over.
///
/// A checkpoint moves committed pages only: durability and atomicity are the commit's, whenever (or
/// whether) the checkpoint runs. A failed background checkpoint is logged (debug) and retried after a later
/// commit; the log only grows meanwhile.
final class WALCheckpointer: Sendable {
    /// The database file, reached through the state directory held (which this keeps open while a
    /// background checkpoint may still run).
    let file: HeldDatabaseFile
    /// Log size (pages) from which a commit schedules a background checkpoint.
    let threshold: Int32
    /// Log size (pages) from which the committing connection checkpoints itself.
    let limit: Int32
    private let scheduled = Atomic<Bool>(false)
    /// Held while this process checkpoints (in the background or at the limit).
    private let running = Mutex<Void>(())
    /// Set while a committing connection waits for `running`.
    private let committerWaiting = Atomic<Bool>(false)
    private let logger: Logger
    /// One queue for every store in the process: checkpoints are disk work, one at a time is enough.
    private static let queue = DispatchQueue(label: "keychain-store.checkpoint", qos: .utility)

    init(file: HeldDatabaseFile, threshold: Int, limit: Int, logger: Logger) {
        self.file = file
        self.threshold = Int32(clamping: max(1, threshold))
        self.limit = max(self.threshold, Int32(clamping: limit))
        self.logger = logger
    }

    /// Installs the checkpointer as `connection`'s WAL hook, which also turns SQLite's automatic
    /// checkpoint off for it. The hook holds a reference to the checkpointer until `uninstall`.
    func install(on connection: OpaquePointer) {
        sqlite3_wal_hook(
            connection,
            { context, connection, _, pages in
                guard let context, let connection else { return SQLITE_OK }
                Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue().committed(
                    pages: pages,
                    on: connection
                )
                return SQLITE_OK
            },
            Unmanaged.passRetained(self).toOpaque()
        )
    }

    /// Removes the hook from `connection` and drops its reference.
    func uninstall(from connection: OpaquePointer) {
        if let previous = sqlite3_wal_hook(connection, nil, nil) {
            Unmanaged<WALCheckpointer>.fromOpaque(previous).release()
        }
    }

    /// Called by SQLite after each commit with the log's size in pages.
    private func committed(pages: Int32, on connection: OpaquePointer) {
        if pages >= limit {
            // RESTART copies all of the log back, waiting (busy timeout) for readers still in it, and has the next
            // commit start it over; it fails at once while another checkpoint runs, so first wait for this
            // process's background one. A passive checkpoint would give up, and the log would go on growing
            // under back-to-back commits.
            committerWaiting.store(true, ordering: .releasing)  // the background run stops after its current pass
            let code = running.withLock { _ in
                committerWaiting.store(false, ordering: .releasing)
                return sqlite3_wal_checkpoint_v2(connection, nil, SQLITE_CHECKPOINT_RESTART, nil, nil)
            }
            logger.debug(
                "keychain store checkpointed while committing",
                metadata: ["wal.pages": "\(pages)", "sqlite.code": "\(code)"]
            )
        } else if pages >= threshold, !scheduled.exchange(true, ordering: .acquiringAndReleasing) {
            Self.queue.async { [self] in
                running.withLock { _ in checkpointInBackground() }
                scheduled.store(false, ordering: .releasing)
            }
        }
    }

    /// Passive checkpoints over a connection opened for them (the store's own stays free for the caller),
    /// repeated while commits keep adding to the log: the log restarts from its beginning only when a
    /// writer finds it wholly copied back, so a checkpoint that always trails the last commit would let it
    /// grow to `limit`.
    private func checkpointInBackground() {
        var connection: OpaquePointer?
        defer { sqlite3_close_v2(connection) }
        var code = sqlite3_open_v2(file.descriptorPath, &connection, SQLITE_OPEN_READWRITE, file.vfs)
        // A connection learns that the file is in WAL mode when it first reads it; until then a checkpoint
        // is a no-op that reports success.
        if code == SQLITE_OK { code = sqlite3_exec(connection, "SELECT count(*) FROM sqlite_master", nil, nil, nil) }
        var previousLogPages: Int32 = -1
        for _ in 0..<Self.maximumPasses where code == SQLITE_OK && !committerWaiting.load(ordering: .acquiring) {
            var logPages: Int32 = 0
            var checkpointed: Int32 = 0
            code = sqlite3_wal_checkpoint_v2(connection, nil, SQLITE_CHECKPOINT_PASSIVE, &logPages, &checkpointed)
            if code == SQLITE_OK, logPages == previousLogPages {
                logger.trace(
                    "keychain store checkpointed",
                    metadata: ["wal.pages": "\(logPages)", "checkpointed": "\(checkpointed)"]
                )
                return
            }
            previousLogPages = logPages
        }
        if code != SQLITE_OK {
            logger.debug(
                "keychain store checkpoint did not run; a later commit retries",
                metadata: ["sqlite.code": "\(code)"]
            )
        }
    }

    /// Checkpoint passes one background run makes at most (a pass that finds nothing new ends it).
    private static let maximumPasses = 16
}
