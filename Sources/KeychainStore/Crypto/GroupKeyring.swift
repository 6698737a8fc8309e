import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// Per-access-group data keys: random 32-byte keys wrapped by the master wrapping key, with the group's
/// name sealed beside the key. Deleting a group's row crypto-shreds every item in it.
///
/// Unwrapped keys are cached per process. A cached key is trusted for reads (a read that fails with it
/// re-loads the group once, in case another process replaced the group), and re-validated against the
/// database row before every write, so nothing is ever sealed under a stale key.
final class GroupKeyring: Sendable {
    private struct Entry {
        let wrapped: Data
        let name: String
        let key: SecureKey
    }

    private let wrapping: SecureKey
    private let cache = Mutex<[Data: Entry]>([:])

    init(wrapping: SecureKey) {
        self.wrapping = wrapping
    }

    private static func additionalData(_ groupIndex: Data) -> Data { Data("kcgroup1".utf8) + groupIndex }

    static let wrappedKeySQL = "SELECT wrapped_key FROM access_groups WHERE name_index = ?"

    /// The key to seal items of `group` with, creating the group if it does not exist. Call inside a write.
    func keyForWriting(
        group: String,
        index: Data,
        _ db: Database,
        _ statements: ConnectionStatements
    ) throws -> SecureKey {
        if let key = try cachedKeyIfCurrent(index: index, db, statements) { return key }
        if let key = try loadFromDatabase(index: index, db) { return key }
        let key = try SecureKey.random()
        var plaintext = key.withUnsafeBytes { Data($0) } + Data(group.utf8)
        defer { Sodium.wipe(&plaintext) }
        let box = try AEAD.seal(plaintext, additionalData: Self.additionalData(index), key: wrapping)
        try db.execute(
            sql: "INSERT INTO access_groups (name_index, key_nonce, wrapped_key) VALUES (?, ?, ?)",
            arguments: [index, box.nonce, box.ciphertext]
        )
        cache.withLock { $0[index] = Entry(wrapped: box.ciphertext, name: group, key: key) }
        return key
    }

    /// The cached key of a group if the group's row still holds the very wrapped key it came from (compared
    /// where SQLite holds the column, through the connection's prepared statement); `nil` otherwise.
    private func cachedKeyIfCurrent(
        index: Data,
        _ db: Database,
        _ statements: ConnectionStatements
    ) throws -> SecureKey? {
        guard let entry = cache.withLock({ $0[index] }) else { return nil }
        let statement = try statements.statement(.wrappedGroupKey, db)
        let handle = statement.sqliteStatement
        defer { sqlite3_clear_bindings(handle) }
        return try index.withUnsafeBytes { index in
            sqlite3_bind_blob(handle, 1, index.baseAddress, Int32(index.count), nil)
            return try RawStatements.firstRow(statement, db) { row in
                let count = Int(sqlite3_column_bytes(row, 0))
                guard sqlite3_column_type(row, 0) == SQLITE_BLOB, count == entry.wrapped.count,
                    let bytes = sqlite3_column_blob(row, 0)
                else { return nil }
                return entry.wrapped.withUnsafeBytes { memcmp($0.baseAddress!, bytes, count) == 0 } ? entry.key : nil
            } ?? nil
        }
    }

    /// The cached key of a group, or the one in the database; `nil` if the group has no key row.
    func keyForReading(index: Data, _ db: Database) throws -> SecureKey? {
        if let entry = cache.withLock({ $0[index] }) { return entry.key }
        return try loadFromDatabase(index: index, db)
    }

    /// Re-reads the group's row; returns its key only if it differs from the cached one.
    func reloadIfReplaced(index: Data, _ db: Database) throws -> SecureKey? {
        let cached = cache.withLock { $0[index] }
        guard let key = try loadFromDatabase(index: index, db) else { return nil }
        return key === cached?.key ? nil : key
    }

    /// Unwraps a group row; `nil` when it fails authentication.
    func unwrap(index: Data, nonce: Data, wrapped: Data) throws -> (name: String, key: SecureKey)? {
        guard
            var plaintext = AEAD.open(
                .init(nonce: nonce, ciphertext: wrapped),
                additionalData: Self.additionalData(index),
                key: wrapping
            )
        else { return nil }
        defer { Sodium.wipe(&plaintext) }
        guard plaintext.count > SecureKey.byteCount,
            let name = String(data: plaintext.suffix(from: plaintext.startIndex + SecureKey.byteCount), encoding: .utf8)
        else { return nil }
        return (name, try SecureKey.copying(plaintext.prefix(SecureKey.byteCount)))
    }

    /// A group's key record re-wrapped under `newWrapping` (the same key and name, a fresh nonce); `nil`
    /// when the record fails authentication under the current wrapping key. The cache takes the new record
    /// (the key is the same), so the rest of the rotation's transaction reads the group as before.
    func rewrap(index: Data, nonce: Data, wrapped: Data, under newWrapping: SecureKey) throws -> AEAD.Box? {
        guard let (name, key) = try unwrap(index: index, nonce: nonce, wrapped: wrapped) else { return nil }
        var plaintext = key.withUnsafeBytes { Data($0) } + Data(name.utf8)
        defer { Sodium.wipe(&plaintext) }
        let box = try AEAD.seal(plaintext, additionalData: Self.additionalData(index), key: newWrapping)
        cache.withLock { $0[index] = Entry(wrapped: box.ciphertext, name: name, key: key) }
        return box
    }

    private func loadFromDatabase(index: Data, _ db: Database) throws -> SecureKey? {
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT key_nonce, wrapped_key FROM access_groups WHERE name_index = ?"),
                arguments: [index]
            )
        else { return nil }
        let nonce: Data = row[0]
        let wrapped: Data = row[1]
        if let entry = cache.withLock({ $0[index] }), entry.wrapped == wrapped { return entry.key }
        guard let (name, key) = try unwrap(index: index, nonce: nonce, wrapped: wrapped) else {
            throw KeychainError(
                .integrityFailure,
                "an access group's key record failed its integrity check (tampered or corrupted); run `devicectl keychain verify`"
            )
        }
        cache.withLock { $0[index] = Entry(wrapped: wrapped, name: name, key: key) }
        return key
    }
}
