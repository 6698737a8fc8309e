import CSodium
public import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// One SQLite transaction on a `KeychainStore`, opened by `writeTransaction` or `readTransaction`.
///
/// Several keychain operations, a crypto-shred and the audit log's rows (`auditLog`) commit together or
/// not at all. The keychain operations have exactly the semantics of the store's own methods. Do not keep
/// the value beyond the closure it was passed to.
public struct StoreTransaction {
    let core: StoreCore
    /// The SQLite connection inside the transaction. Higher layers reach the database only through this
    /// type's methods and `auditLog`, never with SQL of their own.
    let database: Database
    /// What runs once the transaction has committed (`afterCommit`).
    let commitActions: CommitActions
    /// The write-ahead-log index header read before a read transaction began (`CommitWatch`).
    let markedBefore: CommitWatch.Mark?

    init(
        _ core: StoreCore,
        _ database: Database,
        _ commitActions: CommitActions = CommitActions(),
        markedBefore: CommitWatch.Mark? = nil
    ) {
        self.core = core
        self.database = database
        self.commitActions = commitActions
        self.markedBefore = markedBefore
    }

    /// The transaction's clock reading (the store's injected clock).
    public var now: Date { core.options.clock() }

    /// A value that differs whenever anyone committed a change to the store since it was last taken:
    /// SQLite's `PRAGMA data_version` (other connections and processes) with this connection's
    /// `total_changes()`. Higher layers key caches on it to skip decrypting unchanged records.
    public func changeStamp() throws -> StoreChangeStamp {
        // Stepped through the sqlite3 C API: every silent token call takes a stamp.
        let other = try RawStatements.firstRow(database.cachedStatement(sql: "PRAGMA data_version"), database) {
            sqlite3_column_int64($0, 0)
        }
        let stamp = StoreChangeStamp(otherConnections: other ?? 0, thisConnection: Int64(database.totalChangesCount))
        if let markedBefore { core.commitWatch.record(stamp, markedBefore: markedBefore) }
        return stamp
    }

    /// Runs `action` once this transaction has committed, on the committing thread, after the store has
    /// released its connection (so `action` may use the store); never if it rolls back. Actions run in
    /// the order they were added. Only `writeTransaction` and `essentialWriteTransaction` run them.
    ///
    /// For telling others in the same process what was committed (the audit events a change appended)
    /// without having them read it back.
    public func afterCommit(_ action: @escaping @Sendable () -> Void) {
        commitActions.add(action)
    }

    // MARK: - Keychain operations

    /// `KeychainStore.add` inside this transaction; with a `quota`, the item counts against the caller's
    /// (and the add fails with `quotaExceeded`, -34, when it would go over).
    @discardableResult
    public func add(_ new: NewItem, as caller: AppIdentity, quota: ItemQuota? = nil) throws -> ItemMetadata {
        let group = try AccessControl.groupForAdd(new.accessGroup, caller: caller)
        try AccessControl.checkType(new.type, caller: caller)
        try AccessControl.checkNames(service: new.service, account: new.account, label: new.label)
        let now = core.options.clock()
        let item = KeychainItem(
            metadata: ItemMetadata(
                accessGroup: group,
                service: new.service,
                account: new.account,
                type: new.type,
                generic: new.generic,
                label: new.label,
                creator: new.creator,
                creationDate: now,
                modificationDate: now
            ),
            secret: new.secret
        )
        let groupIndex = try core.indexer.group(group)
        try seal(item, groupIndex: groupIndex, replacing: nil)
        if let quota {
            try QuotaLedger.charge(rowID: database.lastInsertedRowID, to: caller.appID, quota, core, database)
        }
        return item.metadata
    }

    /// `KeychainStore.find` inside this transaction.
    public func find(_ query: ItemQuery, as caller: AppIdentity) throws -> KeychainItem {
        if let key = PointRead.Key(query) {
            for group in try AccessControl.groupsToSearch(query.accessGroup, caller: caller) {
                if let found = try PointRead.find(key, in: group, core, database),
                    !caller.hides(found.item.metadata.type)
                {
                    return found.item
                }
            }
            throw notFound(query, caller)
        }
        guard let item = try matches(query, caller: caller, limit: 1).first?.item else { throw notFound(query, caller) }
        return item
    }

    /// `KeychainStore.findAll` inside this transaction.
    public func findAll(_ query: ItemQuery, as caller: AppIdentity) throws -> [KeychainItem] {
        let found = try matches(query, caller: caller, limit: nil)
        guard !found.isEmpty else { throw notFound(query, caller) }
        return found.map(\.item)
    }

    /// `KeychainStore.metadata(matching:as:)` inside this transaction.
    public func metadata(matching query: ItemQuery = .all, as caller: AppIdentity) throws -> [ItemMetadata] {
        var found = try matches(query, caller: caller, limit: nil)
        for index in found.indices { Sodium.wipe(&found[index].item.secret) }
        return found.map(\.item.metadata)
    }

    /// `KeychainStore.update` inside this transaction; with a `quota`, the caller's items must stay within it.
    @discardableResult
    public func update(
        _ query: ItemQuery,
        with changes: ItemChanges,
        as caller: AppIdentity,
        quota: ItemQuota? = nil
    ) throws -> Int {
        guard !changes.isEmpty else {
            throw KeychainError(.invalidParameter, "the update names no attribute to change")
        }
        try AccessControl.checkType(changes.type, caller: caller)
        try AccessControl.checkNames(service: changes.service, account: changes.account, label: changes.label)
        let now = core.options.clock()
        let found = try matches(query, caller: caller, limit: nil)
        for match in found {
            var item = match.item
            item.metadata.service = changes.service ?? item.metadata.service
            item.metadata.account = changes.account ?? item.metadata.account
            item.metadata.label = changes.label ?? item.metadata.label
            item.metadata.type = changes.type ?? item.metadata.type
            item.metadata.generic = changes.generic ?? item.metadata.generic
            item.metadata.creator = changes.creator ?? item.metadata.creator
            item.secret = changes.secret ?? item.secret
            item.metadata.modificationDate = now
            try seal(item, groupIndex: match.groupIndex, replacing: match.rowID)
        }
        guard !found.isEmpty else { throw notFound(query, caller) }
        if let quota { try QuotaLedger.check(caller.appID, quota, core, database) }
        return found.count
    }

    /// `KeychainStore.delete` inside this transaction.
    @discardableResult
    public func delete(_ query: ItemQuery, as caller: AppIdentity) throws -> Int {
        let ids: [Int64]
        // Hidden item types are known only once decrypted: such a caller's deletes authenticate each candidate.
        if query.generic != nil || query.creator != nil || !caller.hiddenItemTypes.isEmpty {
            ids = try matches(query, caller: caller, limit: nil).map(\.rowID)
        } else {
            // Indexed attributes only: one DELETE per group, nothing decrypted or even read.
            let count = try filters(query, caller: caller).reduce(0) { count, filter in
                try count + ItemTable.delete(filter, core.statements, database)
            }
            guard count > 0 else { throw notFound(query, caller) }
            return count
        }
        try ItemTable.delete(ids: ids, database)
        guard !ids.isEmpty else { throw notFound(query, caller) }
        return ids.count
    }

    // MARK: - Device administration

    /// Crypto-shreds every access group except `keep`: deletes each group's wrapped key and all of its
    /// items. Needs no app identity: it is the device administrator's operation (provisioning a new mode,
    /// deprovisioning). Damaged groups are removed too, since they are not in `keep`.
    /// - Returns: how many groups and items were destroyed.
    @discardableResult
    public func destroyAccessGroups(except keep: Set<String>) throws -> (groups: Int, items: Int) {
        let kept = try keep.map { name throws(KeychainError) in try core.indexer.group(name) }
        let placeholders = Array(repeating: "?", count: kept.count).joined(separator: ", ")
        let condition = kept.isEmpty ? "1" : "group_index NOT IN (\(placeholders))"
        let arguments = StatementArguments(kept)
        try database.execute(sql: "DELETE FROM items WHERE \(condition)", arguments: arguments)
        let items = database.changesCount
        try database.execute(
            sql: "DELETE FROM access_groups WHERE \(kept.isEmpty ? "1" : "name_index NOT IN (\(placeholders))")",
            arguments: arguments
        )
        return (database.changesCount, items)
    }

    /// Names every access group that holds a key (decrypting the group records); damaged records are skipped.
    public func accessGroupNames() throws -> [String] {
        try Row.fetchAll(database, sql: "SELECT name_index, key_nonce, wrapped_key FROM access_groups").compactMap {
            row in
            try core.groupKeys.unwrap(index: row[0], nonce: row[1], wrapped: row[2])?.name
        }.sorted()
    }

    /// A 32-byte keyed BLAKE2b tag of `message` under a key derived from the store's master key, for
    /// records that higher layers keep outside the items table and must detect tampering with (the
    /// audit log's head). Only a holder of the master key can compute or check it.
    /// - Throws: `cryptoUnavailable` if libsodium refuses (it never does for these lengths).
    public func integrityTag(_ message: Data, domain: UInt8) throws(KeychainError) -> Data {
        try KeyedHash.hash(message, domain: domain, key: core.integrityKey, outputByteCount: 32)
    }

    // MARK: - Internals

    struct Match {
        var rowID: Int64
        var groupIndex: Data
        var item: KeychainItem
    }

    /// Seals `item` under its group's key with a fresh nonce, its lookup columns as additional data, and
    /// writes the row (a new one, or `rowID` replaced). The plaintext is encoded into a buffer wiped afterwards.
    private func seal(_ item: KeychainItem, groupIndex: Data, replacing rowID: Int64?) throws {
        let group = item.metadata.accessGroup
        let indexes = try RowIndexes(of: item.metadata, groupIndex: groupIndex, indexer: core.indexer)
        let key = try core.groupKeys.keyForWriting(group: group, index: groupIndex, database, core.statements)
        let additionalData = indexes.additionalData(format: Schema.itemFormat)
        let plaintextCount = ItemPayload.encodedByteCount(item)
        try withUnsafeTemporaryAllocation(
            byteCount: AEAD.nonceByteCount + plaintextCount + AEAD.tagByteCount,
            alignment: 16
        ) { box in
            let nonce = UnsafeMutableRawBufferPointer(rebasing: box[..<AEAD.nonceByteCount])
            let ciphertext = UnsafeMutableRawBufferPointer(rebasing: box[AEAD.nonceByteCount...])
            let status = withUnsafeTemporaryAllocation(byteCount: plaintextCount, alignment: 16) { plaintext in
                defer { sodium_memzero(plaintext.baseAddress, plaintextCount) }
                ItemPayload.encode(item, into: plaintext)
                return additionalData.withUnsafeBytes { additionalData in
                    AEAD.seal(
                        UnsafeRawBufferPointer(plaintext),
                        additionalData: additionalData,
                        key: key,
                        nonce: nonce,
                        ciphertext: ciphertext
                    )
                }
            }
            try Sodium.check(status, "crypto_aead_xchacha20poly1305_ietf_encrypt")
            if let rowID {
                try ItemTable.replace(
                    id: rowID,
                    indexes,
                    box: AEAD.Box(nonce: Data(nonce), ciphertext: Data(ciphertext)),
                    group: group,
                    database
                )
            } else {
                try ItemTable.insert(
                    indexes,
                    nonce: UnsafeRawBufferPointer(nonce),
                    ciphertext: UnsafeRawBufferPointer(ciphertext),
                    group: group,
                    core.statements,
                    database
                )
            }
        }
    }

    /// The lookup conditions of `query` in each group it searches.
    private func filters(_ query: ItemQuery, caller: AppIdentity) throws -> [ItemTable.Filter] {
        try AccessControl.groupsToSearch(query.accessGroup, caller: caller).map { group in
            try ItemTable.Filter(
                group: group,
                groupIndex: try core.indexer.group(group),
                query: query,
                indexer: core.indexer
            )
        }
    }

    /// Decrypts the candidates of every searched group, in the caller's group order, and applies the
    /// attributes that have no index.
    private func matches(_ query: ItemQuery, caller: AppIdentity, limit: Int?) throws -> [Match] {
        let needsPostFilter = query.generic != nil || query.creator != nil || !caller.hiddenItemTypes.isEmpty
        let pointKey = PointRead.Key(indexedAttributesOf: query)
        var found: [Match] = []
        // Keeps `item` unless an attribute without an index rules it out; true once `limit` items are kept.
        func keep(_ rowID: Int64, _ group: String, _ item: KeychainItem) throws -> Bool {
            if caller.hides(item.metadata.type) { return false }
            if let generic = query.generic, item.metadata.generic != generic { return false }
            if let creator = query.creator, item.metadata.creator != creator { return false }
            found.append(Match(rowID: rowID, groupIndex: try core.indexer.group(group), item: item))
            return limit.map { found.count >= $0 } ?? false
        }
        for group in try AccessControl.groupsToSearch(query.accessGroup, caller: caller) {
            if let pointKey {  // the whole key: at most one row per group
                if let point = try PointRead.find(pointKey, in: group, core, database),
                    try keep(point.rowID, group, point.item)
                {
                    return found
                }
                continue
            }
            let filter = try ItemTable.Filter(
                group: group,
                groupIndex: try core.indexer.group(group),
                query: query,
                indexer: core.indexer
            )
            let remaining = limit.map { $0 - found.count }
            for sealed in try ItemTable.rows(filter, limit: needsPostFilter ? nil : remaining, database) {
                if try keep(sealed.id, group, try open(sealed, group: group)) { return found }
            }
        }
        return found
    }

    /// Authenticates and decodes one row, then re-checks that it belongs to `group`.
    func open(_ sealed: ItemTable.SealedRow, group: String) throws -> KeychainItem {
        try ItemOpening.open(sealed, group: group, core, database)
    }

    private func notFound(_ query: ItemQuery, _ caller: AppIdentity) -> KeychainError {
        let scope = query.accessGroup.map { "access group \($0)" } ?? "the access groups of app \(caller.appID)"
        return KeychainError(.itemNotFound, "no matching item in \(scope)")
    }
}

/// The actions of one transaction attempt (`StoreTransaction.afterCommit`): collected while it runs, run
/// by the store once it committed. An attempt that rolls back drops its own.
final class CommitActions: Sendable {
    private let actions = Mutex<[@Sendable () -> Void]>([])

    func add(_ action: @escaping @Sendable () -> Void) {
        actions.withLock { $0.append(action) }
    }

    func run() {
        for action in actions.withLock({ actions in
            defer { actions = [] }
            return actions
        }) { action() }
    }
}

/// See `StoreTransaction.changeStamp()`. Only meaningful for the same `KeychainStore` object.
public struct StoreChangeStamp: Sendable, Hashable {
    let otherConnections: Int64
    let thisConnection: Int64
}
