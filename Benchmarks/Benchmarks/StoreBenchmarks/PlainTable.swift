// The plain baseline of the store's point read: the same three lookup attributes in one UNIQUE index, the
// secret in clear, on a GRDB connection opened as KeychainStore opens its own.
import BenchmarkFixtures
import Foundation
import GRDB
import KeychainStore

/// A plain SQLite table of secrets keyed by (access group, service, account), read the way the store reads.
final class PlainTable {
    static let schema = """
        CREATE TABLE plain_items (
            id INTEGER PRIMARY KEY,
            group_name TEXT NOT NULL,
            service TEXT NOT NULL,
            account TEXT NOT NULL,
            secret BLOB NOT NULL,
            UNIQUE (group_name, service, account)
        )
        """
    static let insert = "INSERT INTO plain_items (group_name, service, account, secret) VALUES (?, ?, ?, ?)"
    static let select = "SELECT id, secret FROM plain_items WHERE group_name = ? AND service = ? AND account = ?"

    private let queue: DatabaseQueue

    /// Creates the table in a new database file `path` (WAL, `synchronous`, 30 s busy timeout: the store's settings).
    init(path: String, synchronous: StoreOptions.Synchronous) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(30)
        configuration.label = "plain"
        let pragma = synchronous.rawValue
        configuration.prepareDatabase { db in
            guard try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") == "wal" else {
                throw BenchmarkFailure("cannot switch \(db.description) to WAL mode")
            }
            try db.execute(sql: "PRAGMA synchronous = \(pragma)")
            try db.execute(sql: "PRAGMA mmap_size = 268435456")  // as the store sets it
        }
        queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.write { db in try db.execute(sql: Self.schema) }
    }

    /// Inserts one row in its own transaction.
    func insert(group: String, service: String, account: String, secret: Data) throws {
        try queue.write { db in
            try db.cachedStatement(sql: Self.insert).execute(arguments: [group, service, account, secret])
        }
    }

    /// Reads one secret as `KeychainStore.find` reads its row: `unsafeRead` and a deferred transaction
    /// (no `PRAGMA query_only` toggling), a cached statement, the row copied out.
    func secret(group: String, service: String, account: String) throws -> Data {
        var secret: Data?
        try queue.unsafeRead { db in
            try db.inTransaction(.deferred) {
                if let row = try Row.fetchOne(
                    db.cachedStatement(sql: Self.select),
                    arguments: [group, service, account]
                ) {
                    secret = row[1]
                }
                return .commit
            }
        }
        guard let secret else { throw BenchmarkFailure("plain row \(service)/\(account) is missing") }
        return secret
    }
}
