import Foundation
import GRDB

/// What one app's items may take of the store (a broker's per-app quota: the device policy's
/// `limits.itemsPerApp` and `limits.bytesPerApp`), counted over the items it added, in every group.
public struct ItemQuota: Sendable, Hashable {
    /// The most items.
    public var items: Int
    /// The most bytes of sealed items (ciphertext and nonce: the secret and every attribute).
    public var bytes: Int

    /// A quota as given.
    public init(items: Int, bytes: Int) {
        self.items = items
        self.bytes = bytes
    }
}

/// The quota's bookkeeping in the items table: `owner_index`, the blind index of the app that added an
/// item, added to the table the first time an add is charged to a quota (opening a store never writes).
/// Items added without a quota (the broker's own token cache, the administrator) belong to nobody.
enum QuotaLedger {
    /// Marks the item just inserted as `owner`'s and checks `owner`'s usage; over the quota it throws,
    /// and the caller's transaction (with the insert) rolls back.
    static func charge(rowID: Int64, to owner: String, _ quota: ItemQuota, _ core: StoreCore, _ db: Database) throws {
        try ensureColumn(db)
        let index = try core.indexer.owner(owner)
        try db.execute(sql: "UPDATE items SET owner_index = ? WHERE id = ?", arguments: [index, rowID])
        try check(owner, index: index, quota, db)
    }

    /// Checks `owner`'s usage after a change to its items (an update that grew one).
    static func check(_ owner: String, _ quota: ItemQuota, _ core: StoreCore, _ db: Database) throws {
        guard try hasColumn(db) else { return }
        try check(owner, index: try core.indexer.owner(owner), quota, db)
    }

    private static func check(_ owner: String, index: Data, _ quota: ItemQuota, _ db: Database) throws {
        guard
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT count(*), coalesce(sum(length(nonce) + length(ciphertext)), 0) FROM items WHERE owner_index = ?
                    """,
                arguments: [index]
            )
        else { return }
        let items: Int = row[0]
        let bytes: Int = row[1]
        if items > quota.items {
            throw KeychainError(
                .quotaExceeded,
                """
                app \(owner) has \(quota.items) items already, its quota (the policy's limits.itemsPerApp); \
                delete items it no longer needs, or raise the quota in the device policy
                """
            )
        }
        if bytes > quota.bytes {
            throw KeychainError(
                .quotaExceeded,
                """
                app \(owner)'s items would take \(bytes) bytes, over its quota of \(quota.bytes) (the policy's limits.bytesPerApp); \
                delete items it no longer needs, or raise the quota in the device policy
                """
            )
        }
    }

    private static func hasColumn(_ db: Database) throws -> Bool {
        try db.columns(in: "items").contains { $0.name == "owner_index" }
    }

    private static func ensureColumn(_ db: Database) throws {
        guard try !hasColumn(db) else { return }
        try db.execute(sql: "ALTER TABLE items ADD COLUMN owner_index BLOB")
        try db.execute(
            sql: "CREATE INDEX IF NOT EXISTS items_by_owner ON items(owner_index) WHERE owner_index IS NOT NULL"
        )
    }
}
