import Foundation
import GRDB
import GRDBSQLite

/// The store's hottest path: one item by its whole primary key (`SecItemCopyMatching` naming service and
/// account, nothing else). The SELECT is prepared once for the connection's life (`ConnectionStatements`),
/// bound to blind indexes computed on the stack and stepped through the sqlite3 C API; the ciphertext is
/// decrypted straight from SQLite's column into a buffer that is wiped afterwards, and decoded in one pass.
///
/// Everything happens while the SELECT holds its row, so inside the statement's read transaction (the
/// explicit one around it, or SQLite's implicit one): the group key, if it has to be loaded, comes from
/// the same snapshot as the item.
enum PointRead {
    /// A query that names exactly the primary key within its groups.
    struct Key {
        var service: String
        var account: String

        /// The key of a query that names it and nothing else.
        init?(_ query: ItemQuery) {
            guard query.generic == nil, query.creator == nil else { return nil }
            self.init(indexedAttributesOf: query)
        }

        /// The key of a query whose indexed attributes are exactly the key (`generic` and `creator`, which
        /// have no index, may still filter what it finds).
        init?(indexedAttributesOf query: ItemQuery) {
            guard let service = query.service, let account = query.account, query.label == nil, query.type == nil else {
                return nil
            }
            self.service = service
            self.account = account
        }
    }

    static let sql = """
        SELECT id, label_index, type_index, format, nonce, ciphertext FROM items
        WHERE group_index = ? AND service_index = ? AND account_index = ?
        """

    /// The item with `key` in `group` and its row id, authenticated and re-checked like every other read; `nil` if none.
    static func find(
        _ key: Key,
        in group: String,
        _ core: StoreCore,
        _ db: Database
    ) throws -> (rowID: Int64, item: KeychainItem)? {
        let groupIndex = try core.indexer.group(group)
        let statement = try core.statements.statement(.pointRead, db)
        let handle = statement.sqliteStatement
        var service = BlindIndexBytes()
        var account = BlindIndexBytes()
        try service.withUnsafeMutableBytes { bytes throws(KeychainError) in
            try core.indexer.service(key.service, group: group, into: bytes)
        }
        try account.withUnsafeMutableBytes { bytes throws(KeychainError) in
            try core.indexer.account(key.account, group: group, into: bytes)
        }
        return try groupIndex.withUnsafeBytes { groupIndexBytes in
            try service.withUnsafeBytes { serviceBytes in
                try account.withUnsafeBytes { accountBytes in
                    // Bound without a copy (SQLITE_STATIC): the bindings are cleared before the buffers go away.
                    sqlite3_bind_blob(handle, 1, groupIndexBytes.baseAddress, Int32(groupIndexBytes.count), nil)
                    sqlite3_bind_blob(handle, 2, serviceBytes.baseAddress, Int32(serviceBytes.count), nil)
                    sqlite3_bind_blob(handle, 3, accountBytes.baseAddress, Int32(accountBytes.count), nil)
                    defer { sqlite3_clear_bindings(handle) }
                    return try RawStatements.firstRow(statement, db) { row in
                        let label = column(row, 1)
                        let type = column(row, 2)
                        let rowID = sqlite3_column_int64(row, 0)
                        let format = Int(sqlite3_column_int64(row, 3))
                        let nonce = column(row, 4) ?? UnsafeRawBufferPointer(start: nil, count: 0)
                        let ciphertext = column(row, 5) ?? UnsafeRawBufferPointer(start: nil, count: 0)
                        return try withUnsafeTemporaryAllocation(
                            byteCount: RowIndexes.maximumAdditionalDataByteCount,
                            alignment: 1
                        ) { buffer in
                            let count = RowIndexes.writeAdditionalData(
                                format: format,
                                group: groupIndexBytes,
                                service: serviceBytes,
                                account: accountBytes,
                                label: label,
                                type: type,
                                into: buffer
                            )
                            return (
                                rowID,
                                try ItemOpening.open(
                                    rowID: rowID,
                                    format: format,
                                    groupIndex: groupIndex,
                                    group: group,
                                    nonce: nonce,
                                    ciphertext: ciphertext,
                                    additionalData: UnsafeRawBufferPointer(rebasing: buffer[..<count]),
                                    known: ItemPayload.KnownStrings(
                                        group: group,
                                        service: key.service,
                                        account: key.account
                                    ),
                                    core,
                                    db
                                )
                            )
                        }
                    }
                }
            }
        }
    }

    /// Column `index` of the current row where SQLite holds it (`nil` for NULL), valid until the statement
    /// steps or resets. A tampered non-blob value comes as its bytes, which then fail authentication.
    private static func column(_ handle: OpaquePointer, _ index: Int32) -> UnsafeRawBufferPointer? {
        guard sqlite3_column_type(handle, index) != SQLITE_NULL else { return nil }
        let bytes = sqlite3_column_blob(handle, index)  // before sqlite3_column_bytes, as SQLite advises
        return UnsafeRawBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(handle, index)))
    }
}

/// A 16-byte blind index held inline, for lookups that should not allocate.
struct BlindIndexBytes {
    private var storage: (UInt64, UInt64) = (0, 0)

    mutating func withUnsafeMutableBytes<R, E: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        try Swift.withUnsafeMutableBytes(of: &storage) { bytes throws(E) in try body(bytes) }
    }

    func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try Swift.withUnsafeBytes(of: storage) { bytes throws(E) in try body(bytes) }
    }
}
