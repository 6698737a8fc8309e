import Foundation
import GRDB

/// Raw SQL access to a store's database file, the way an attacker with file access would edit it.
struct RawDatabase {
    let queue: DatabaseQueue

    init(path: String) throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = false
        configuration.busyMode = .timeout(10)
        queue = try DatabaseQueue(path: path, configuration: configuration)
    }

    struct ItemRow {
        var id: Int64
        var groupIndex: Data
        var nonce: Data
        var ciphertext: Data
    }

    func items() throws -> [ItemRow] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT id, group_index, nonce, ciphertext FROM items ORDER BY id").map {
                ItemRow(id: $0[0], groupIndex: $0[1], nonce: $0[2], ciphertext: $0[3])
            }
        }
    }

    func execute(_ sql: String, _ arguments: StatementArguments = []) throws {
        try queue.write { db in try db.execute(sql: sql, arguments: arguments) }
    }

    /// Moves everything from the WAL into the main file, so file bytes can be compared.
    func checkpoint() throws {
        try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    /// Swaps the sealed secret (nonce and ciphertext) of two rows.
    func swapCiphertexts(_ a: ItemRow, _ b: ItemRow) throws {
        try execute("UPDATE items SET nonce = ?, ciphertext = ? WHERE id = ?", [b.nonce, b.ciphertext, a.id])
        try execute("UPDATE items SET nonce = ?, ciphertext = ? WHERE id = ?", [a.nonce, a.ciphertext, b.id])
    }

    /// Every row of every table, as text: equal dumps mean an unchanged store.
    func dump() throws -> String {
        try queue.read { db in
            var lines: [String] = []
            for table in ["store_meta", "access_groups", "items"] {
                for row in try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY 1") {
                    lines.append("\(table): \(row.databaseValues.map(\.description).joined(separator: "|"))")
                }
            }
            return lines.joined(separator: "\n")
        }
    }
}
