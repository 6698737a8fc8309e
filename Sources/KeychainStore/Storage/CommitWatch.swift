import CSQLiteControl
import Synchronization

/// Whether anyone committed to the store since a read transaction took its change stamp, answered without a
/// transaction, a lock or a system call.
///
/// Every commit, by any connection in any process, rewrites the header of SQLite's write-ahead-log index (its
/// change counter, last frame and checksums; salts when the log starts over). The watch reads that header where
/// SQLite maps it for the store's own connection (the `-shm` file's first page), as SQLite's readers do: both
/// copies, a barrier between, a torn read taken for a change. A read transaction reads the header before it
/// starts and records it with the stamp it takes (`record`); while the header is still the same, nothing was
/// committed since, so the stamp still describes the store (`stampIfUnchanged`). A header read before the
/// transaction's snapshot can only be older than the snapshot, never newer: a commit in between shows as a
/// change, which costs a transaction, never a stale answer.
final class CommitWatch: @unchecked Sendable {
    // @unchecked: `region` is SQLite's mapping of the index, valid while the connection is open (the store
    // closes it only in its deinit), and only read; `last` is behind a mutex.

    /// The index header as read (48 bytes).
    struct Mark: Equatable, Sendable {
        fileprivate var words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)

        static func == (left: Mark, right: Mark) -> Bool { left.words == right.words }
    }

    private let region: UnsafeRawPointer?
    private let last = Mutex<(mark: Mark, stamp: StoreChangeStamp)?>(nil)

    /// A watch over `connection`'s index (a `sqlite3 *`; its database in WAL mode): one that never answers
    /// when SQLite keeps no shared index for it.
    init(connection: OpaquePointer?) {
        region = connection.flatMap { sqlite_control_wal_index(UnsafeMutableRawPointer($0)) }
    }

    /// The header now; nil while a writer is rewriting it, or without an index.
    func mark() -> Mark? {
        guard let region else { return nil }
        var mark = Mark()
        let whole = withUnsafeMutableBytes(of: &mark.words) { bytes in
            sqlite_control_wal_index_header(region, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return whole == 1 ? mark : nil
    }

    /// Records `stamp`, taken in a read transaction that started after `mark` was read.
    func record(_ stamp: StoreChangeStamp, markedBefore mark: Mark) {
        last.withLock { $0 = (mark, stamp) }
    }

    /// The stamp last recorded, if nothing was committed since its header was read; otherwise nil.
    func stampIfUnchanged() -> StoreChangeStamp? {
        guard let known = last.withLock({ $0 }), let now = mark(), now == known.mark else { return nil }
        return known.stamp
    }
}
