import Foundation
import GRDB
import GRDBSQLite

/// The SQL of the `items` table. Everything here works on blind indexes and ciphertext only.
enum ItemTable {
    /// One stored row, before decryption.
    struct SealedRow {
        var id: Int64
        var indexes: RowIndexes
        var format: Int
        var box: AEAD.Box
    }

    /// Lookup conditions for one group, built from a query's indexed attributes.
    struct Filter {
        /// The indexed columns a query can name, in the order a filter lists them.
        enum Column: Int {
            case group, service, account, label, type

            var name: String {
                switch self {
                case .group: "group_index"
                case .service: "service_index"
                case .account: "account_index"
                case .label: "label_index"
                case .type: "type_index"
                }
            }
        }

        var indexes: [(column: Column, value: Data)]

        init(group: String, groupIndex: Data, query: ItemQuery, indexer: BlindIndexer) throws(KeychainError) {
            indexes = [(.group, groupIndex)]
            if let service = query.service { indexes.append((.service, try indexer.service(service, group: group))) }
            if let account = query.account { indexes.append((.account, try indexer.account(account, group: group))) }
            if let label = query.label { indexes.append((.label, try indexer.label(label, group: group))) }
            if let type = query.type { indexes.append((.type, try indexer.type(type, group: group))) }
        }

        /// Which columns the filter names (one bit per `Column`): filters of one shape share their SQL.
        var shape: Int { indexes.reduce(0) { shape, index in shape | 1 << index.column.rawValue } }
        var whereClause: String { indexes.map { "\($0.column.name) = ?" }.joined(separator: " AND ") }
        var arguments: StatementArguments { StatementArguments(indexes.map { $0.value }) }

        /// Binds the blind indexes to parameters 1… of `handle`, in `whereClause`'s order.
        func bind(to handle: OpaquePointer) {
            for (position, index) in indexes.enumerated() {
                index.value.withUnsafeBytes { bytes in
                    _ = sqlite3_bind_blob(handle, Int32(position + 1), bytes.baseAddress, Int32(bytes.count), transient)
                }
            }
        }
    }

    private static let columns =
        "id, group_index, service_index, account_index, label_index, type_index, format, nonce, ciphertext"

    static func rows(_ filter: Filter, limit: Int?, _ db: Database) throws -> [SealedRow] {
        var sql = "SELECT \(columns) FROM items WHERE \(filter.whereClause) ORDER BY id"
        if let limit { sql += " LIMIT \(limit)" }
        return try Row.fetchAll(db.cachedStatement(sql: sql), arguments: filter.arguments).map(sealedRow)
    }

    static func allRows(_ db: Database) throws -> RowCursor {
        try Row.fetchCursor(db, sql: "SELECT \(columns) FROM items ORDER BY id")
    }

    static func sealedRow(_ row: Row) -> SealedRow {
        SealedRow(
            id: row[0],
            indexes: RowIndexes(group: row[1], service: row[2], account: row[3], label: row[4], type: row[5]),
            format: row[6],
            box: AEAD.Box(nonce: row[7], ciphertext: row[8])
        )
    }

    static let insertSQL = """
        INSERT INTO items (group_index, service_index, account_index, label_index, type_index, format, nonce, ciphertext)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// Inserts a row, stepping the connection's prepared INSERT; a primary-key clash surfaces as `duplicateItem`.
    /// The nonce and ciphertext are bound where they lie (they must outlive the call, which they do).
    static func insert(
        _ indexes: RowIndexes,
        nonce: UnsafeRawBufferPointer,
        ciphertext: UnsafeRawBufferPointer,
        group: String,
        _ statements: ConnectionStatements,
        _ db: Database
    ) throws {
        let statement = try statements.statement(.insertItem, db)
        let handle = statement.sqliteStatement
        defer { sqlite3_clear_bindings(handle) }
        func bind(_ position: Int32, _ index: Data?) {
            guard let index else { return }  // cleared bindings are NULL
            index.withUnsafeBytes { bytes in
                _ = sqlite3_bind_blob(handle, position, bytes.baseAddress, Int32(bytes.count), transient)
            }
        }
        bind(1, indexes.group)
        bind(2, indexes.service)
        bind(3, indexes.account)
        bind(4, indexes.label)
        bind(5, indexes.type)
        sqlite3_bind_int64(handle, 6, Int64(Schema.itemFormat))
        sqlite3_bind_blob(handle, 7, nonce.baseAddress, Int32(nonce.count), nil)
        sqlite3_bind_blob(handle, 8, ciphertext.baseAddress, Int32(ciphertext.count), nil)
        try mapDuplicate(group) { try RawStatements.stepToDone(statement, db) }
    }

    /// `SQLITE_TRANSIENT`: SQLite copies the bound bytes.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    static func replace(id: Int64, _ indexes: RowIndexes, box: AEAD.Box, group: String, _ db: Database) throws {
        try mapDuplicate(group) {
            try db.cachedStatement(
                sql: """
                    UPDATE items SET service_index = ?, account_index = ?, label_index = ?, type_index = ?, format = ?,
                    nonce = ?, ciphertext = ? WHERE id = ?
                    """
            ).execute(arguments: [
                indexes.service, indexes.account, indexes.label, indexes.type, Schema.itemFormat,
                box.nonce, box.ciphertext, id,
            ])
        }
    }

    /// Deletes every row matching `filter` and returns how many, stepping the connection's DELETE prepared for
    /// the filter's shape.
    static func delete(_ filter: Filter, _ statements: ConnectionStatements, _ db: Database) throws -> Int {
        let statement = try statements.delete(shape: filter.shape, db) {
            "DELETE FROM items WHERE \(filter.whereClause)"
        }
        filter.bind(to: statement.sqliteStatement)
        try RawStatements.stepToDone(statement, db)
        return Int(sqlite3_changes(db.sqliteConnection))
    }

    static func delete(ids: [Int64], _ db: Database) throws {
        for id in ids {
            try db.cachedStatement(sql: "DELETE FROM items WHERE id = ?").execute(arguments: [id])
        }
    }

    private static func mapDuplicate(_ group: String, _ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as DatabaseError
            where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE
            || error.extendedResultCode == .SQLITE_CONSTRAINT_PRIMARYKEY
        {
            throw KeychainError(
                .duplicateItem,
                "an item with this service and account already exists in access group \(group); update it or delete it first"
            )
        }
    }
}
