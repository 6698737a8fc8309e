import GRDB

/// The store's SQLite schema. Every lookup column is a blind index; every secret and attribute lives
/// only in `items.ciphertext`.
enum Schema {
    /// `PRAGMA user_version` of the layout new stores get.
    ///
    /// 2: the unique key is `(group_index, account_index, service_index)`, so it also serves lookups by
    /// account (a sign-out's deletes) and `items_by_account` is gone: one B-tree less per add and per
    /// deleted row. 1: the unique key is `(group_index, service_index, account_index)` beside
    /// `items_by_account`. Both layouts answer the same SQL (only the query plans differ), so a store created
    /// with layout 1 is used as it is: opening a store never writes to it.
    static let version = 2
    /// The layouts this version reads and writes.
    static let supportedVersions = 1...2
    /// The item ciphertext format (bound in the additional data).
    static let itemFormat = 1

    static let statements = [
        """
        CREATE TABLE store_meta (
            name TEXT PRIMARY KEY NOT NULL,
            value BLOB NOT NULL
        ) WITHOUT ROWID
        """,
        """
        CREATE TABLE access_groups (
            name_index BLOB PRIMARY KEY NOT NULL,
            key_nonce BLOB NOT NULL,
            wrapped_key BLOB NOT NULL
        ) WITHOUT ROWID
        """,
        """
        CREATE TABLE items (
            id INTEGER PRIMARY KEY,
            group_index BLOB NOT NULL REFERENCES access_groups(name_index),
            service_index BLOB NOT NULL,
            account_index BLOB NOT NULL,
            label_index BLOB,
            type_index BLOB,
            format INTEGER NOT NULL,
            nonce BLOB NOT NULL,
            ciphertext BLOB NOT NULL,
            UNIQUE (group_index, account_index, service_index)
        )
        """,
        "CREATE INDEX items_by_type ON items(group_index, type_index)",
        "PRAGMA user_version = \(version)",
    ]

    /// Creates the tables on a new database; leaves an existing one untouched (no write at all).
    static func prepare(_ writer: some DatabaseWriter) throws {
        let current = try writer.read { db in try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0 }
        if current != 0, supportedVersions.contains(current) { return }
        if current > version {
            throw KeychainError(
                .corruptStore,
                "the store was written by a newer version of devicectl (schema \(current)); upgrade devicectl"
            )
        }
        try writer.write { db in
            let inside = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
            guard inside == 0 else { return }
            if try db.tableExists("items") {
                throw KeychainError(
                    .corruptStore,
                    "the database has an items table but no schema version; it is not a keychain store"
                )
            }
            for statement in statements { try db.execute(sql: statement) }
        }
    }
}
