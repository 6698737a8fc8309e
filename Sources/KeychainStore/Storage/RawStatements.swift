import GRDB
import GRDBSQLite

/// The store's hot statements stepped through the sqlite3 C API on GRDB's cached statements: GRDB's
/// `execute` and `Row` cost a point read more than SQLite's own work (its `inTransaction` even compiles
/// BEGIN and COMMIT on every call).
enum RawStatements {
    /// How a transaction begins: deferred for reads; immediate for writes (the write lock taken at BEGIN,
    /// so two writers never deadlock on an upgrade).
    enum TransactionKind: String {
        case deferred = "BEGIN DEFERRED TRANSACTION"
        case immediate = "BEGIN IMMEDIATE TRANSACTION"
    }

    /// `body` in one transaction; rolled back if `body` or the commit fails.
    static func inTransaction<T>(_ kind: TransactionKind, _ db: Database, _ body: () throws -> T) throws -> T {
        try stepToDone(db.cachedStatement(sql: kind.rawValue), db)
        do {
            let result = try body()
            try stepToDone(db.cachedStatement(sql: "COMMIT TRANSACTION"), db)
            return result
        } catch {
            if db.isInsideTransaction { try? db.rollback() }
            throw error
        }
    }

    /// Runs a statement that returns no row.
    static func stepToDone(_ statement: Statement, _ db: Database) throws {
        let handle = statement.sqliteStatement
        let code = sqlite3_step(handle)
        sqlite3_reset(handle)
        guard code == SQLITE_DONE else { throw error(code, statement, db) }
    }

    /// Steps `statement` once: `body` reads the row's columns from the handle (nil when there is no row).
    /// The statement is reset afterwards, so the columns must not outlive `body`.
    static func firstRow<T>(_ statement: Statement, _ db: Database, _ body: (OpaquePointer) throws -> T) throws -> T? {
        let handle = statement.sqliteStatement
        defer { sqlite3_reset(handle) }
        switch sqlite3_step(handle) {
        case SQLITE_DONE: return nil
        case SQLITE_ROW: return try body(handle)
        case let code: throw error(code, statement, db)
        }
    }

    /// SQLite's failure as GRDB reports it (the store's error mapping then names busy, corrupt, …).
    private static func error(_ code: Int32, _ statement: Statement, _ db: Database) -> DatabaseError {
        DatabaseError(
            resultCode: ResultCode(rawValue: code),
            message: String(cString: sqlite3_errmsg(db.sqliteConnection)),
            sql: statement.sql
        )
    }
}

/// Statements prepared once on a store's connection and kept for its life, for the hot paths (no lookup in
/// GRDB's statement cache, no recompiling). Only ever used on the connection's serialized queue, inside
/// `DatabaseQueue` closures: that is what makes `@unchecked Sendable` sound. A store has one connection.
final class ConnectionStatements: @unchecked Sendable {
    enum Hot: Int, CaseIterable {
        /// `PointRead.sql`
        case pointRead
        /// `ItemTable.insertSQL`
        case insertItem
        /// `GroupKeyring.wrappedKeySQL`
        case wrappedGroupKey

        var sql: String {
            switch self {
            case .pointRead: PointRead.sql
            case .insertItem: ItemTable.insertSQL
            case .wrappedGroupKey: GroupKeyring.wrappedKeySQL
            }
        }
    }

    private var prepared = [Statement?](repeating: nil, count: Hot.allCases.count)
    /// `DELETE FROM items WHERE …` by `ItemTable.Filter.shape`.
    private var deletes: [Int: Statement] = [:]

    /// The DELETE for filters of `shape`, prepared on first use from `sql()`.
    func delete(shape: Int, _ db: Database, sql: () -> String) throws -> Statement {
        if let statement = deletes[shape] { return statement }
        let statement = try db.makeStatement(sql: sql())
        deletes[shape] = statement
        return statement
    }

    /// The statement, prepared on first use.
    func statement(_ hot: Hot, _ db: Database) throws -> Statement {
        if let statement = prepared[hot.rawValue] { return statement }
        let statement = try db.makeStatement(sql: hot.sql)
        prepared[hot.rawValue] = statement
        return statement
    }
}
