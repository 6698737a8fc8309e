public import Foundation
public import GRDB
import KeychainStore
import Synchronization

// What the store's and the device's test suites share: a scratch state directory, a clock moved by hand,
// and raw SQL access to a store's database file.

/// A fresh state directory under /tmp, removed when the value is deinitialised.
/// With `create: false` only the path is chosen, so a test can see whether anything creates it.
public final class TemporaryStateDirectory: Sendable {
    public let url: URL

    public init(_ name: String = "store-test", create: Bool = true) {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(name)-\(UUID().uuidString)", isDirectory: true)
        if create { try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) }
    }

    public var databasePath: String { url.appendingPathComponent(KeychainStore.databaseFileName).path }
    public var keyFile: URL { url.appendingPathComponent(KeychainStore.keyFileName) }
    public var exists: Bool { FileManager.default.fileExists(atPath: url.path) }

    /// The bytes of the database and its WAL and shared-memory files, by suffix ("db", "-wal", "-shm").
    public func databaseFiles() -> [String: Data] {
        var files: [String: Data] = [:]
        for suffix in ["", "-wal", "-shm"] {
            if let data = FileManager.default.contents(atPath: databasePath + suffix) {
                files[suffix.isEmpty ? "db" : suffix] = data
            }
        }
        return files
    }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// A clock that tests move by hand.
public final class FakeClock: Sendable {
    public static let start = Date(timeIntervalSince1970: 1_800_000_000)
    private let now = Mutex(FakeClock.start)

    public init() {}

    public var date: Date { now.withLock { $0 } }
    public func advance(by seconds: TimeInterval) { now.withLock { $0 += seconds } }
    public var function: @Sendable () -> Date { { [self] in date } }
}

/// Raw SQL access to a store's database file, the way an attacker with file access would edit it.
public struct RawDatabase {
    public let queue: DatabaseQueue

    public init(path: String) throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = false
        configuration.busyMode = .timeout(10)
        queue = try DatabaseQueue(path: path, configuration: configuration)
    }

    public func execute(_ sql: String, _ arguments: StatementArguments = []) throws {
        try queue.write { db in try db.execute(sql: sql, arguments: arguments) }
    }

    public func count(_ table: String) throws -> Int {
        try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)") ?? 0 }
    }

    /// Moves everything from the WAL into the main file, so file bytes can be compared.
    public func checkpoint() throws {
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    /// Every row of every table, as text: equal dumps mean an unchanged store.
    public func dump() throws -> String {
        try queue.read { db in
            var lines: [String] = []
            let tables = try String.fetchAll(
                db,
                sql: """
                    SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name
                    """
            )
            for table in tables {
                lines.append("table \(table)")
                for row in try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY 1") {
                    lines.append("\(table): \(row.databaseValues.map(\.description).joined(separator: "|"))")
                }
            }
            return lines.joined(separator: "\n")
        }
    }

    /// An item's row: its group's blind index and its sealed secret.
    public struct ItemRow: Sendable {
        public var id: Int64
        public var groupIndex: Data
        public var nonce: Data
        public var ciphertext: Data
    }

    public func items() throws -> [ItemRow] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT id, group_index, nonce, ciphertext FROM items ORDER BY id").map {
                ItemRow(id: $0[0], groupIndex: $0[1], nonce: $0[2], ciphertext: $0[3])
            }
        }
    }

    /// Swaps the sealed secret (nonce and ciphertext) of two rows.
    public func swapCiphertexts(_ a: ItemRow, _ b: ItemRow) throws {
        try execute("UPDATE items SET nonce = ?, ciphertext = ? WHERE id = ?", [b.nonce, b.ciphertext, a.id])
        try execute("UPDATE items SET nonce = ?, ciphertext = ? WHERE id = ?", [a.nonce, a.ciphertext, b.id])
    }
}
