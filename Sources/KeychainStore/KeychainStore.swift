public import Foundation
import GRDB
public import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A keychain-like encrypted item store over SQLite and libsodium.
///
/// Semantics mirror the Apple keychain's generic-password class: items are keyed by (access group,
/// service, account); every operation takes the caller's `AppIdentity` and only ever touches the
/// access groups that identity is entitled to. Each group has its own data key; each item is sealed
/// with XChaCha20-Poly1305 under a fresh nonce, with its lookup columns as additional data, and its
/// group is checked again after decryption. Lookup columns are keyed BLAKE2b blind indexes, so the
/// database file holds no cleartext service, account, label or secret.
///
/// Every operation is one SQLite transaction in WAL mode with a busy timeout, so several processes can
/// share one store. The type is thread-safe.
///
/// ```swift
/// let store = try KeychainStore(directory: stateDirectory)
/// let app = try AppIdentity(appID: "com.contoso.scanner", accessGroups: ["com.microsoft.adalcache"])
/// try store.add(NewItem(service: "api", account: "worker-1", secret: Data("s3cret".utf8)), as: app)
/// let item = try store.find(ItemQuery(service: "api", account: "worker-1"), as: app)
/// ```
public final class KeychainStore: Sendable {
    /// The database file name inside the state directory.
    public static let databaseFileName = "keychain.sqlite"
    /// The default key file name inside the state directory.
    public static let keyFileName = "master.key"

    /// The SQLite database file.
    public let databaseURL: URL
    /// One serialized connection per store object. (GRDB's `DatabasePool` would write a dummy table at
    /// every open and force `synchronous=NORMAL`; a queue with WAL set here keeps both under our control.)
    private let database: DatabaseQueue
    private let indexer: BlindIndexer
    private let groupKeys: GroupKeyring
    private let options: StoreOptions
    private let logger: Logger

    /// Opens (creating if needed) the store in `directory`.
    ///
    /// - Parameters:
    ///   - directory: the state directory; created with mode 0700 if missing.
    ///   - key: the master key source; by default the key file `master.key` in `directory`,
    ///     generated when the store is created.
    /// - Throws: `wrongKey` if the key does not open an existing store (nothing is modified),
    ///   `corruptStore` if the file is not a store, `insecureKeyFile`, `ioError`.
    public init(directory: URL, key: MasterKeySource? = nil, options: StoreOptions = StoreOptions(),
                logger: Logger = Logger(label: "keychain-store", factory: { _ in SwiftLogNoOpLogHandler() })) throws(KeychainError) {
        try StateDirectory.prepare(directory)
        let databaseURL = directory.appendingPathComponent(Self.databaseFileName)
        let source = key ?? .keyFile(directory.appendingPathComponent(Self.keyFileName))
        var configuration = Configuration()
        configuration.busyMode = .timeout(options.busyTimeout)
        configuration.label = "keychain-store"
        let synchronous = options.synchronous.rawValue
        configuration.prepareDatabase { db in
            // Switching an existing WAL database to WAL writes nothing, so a failed open changes no byte.
            guard try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") == "wal" else {
                throw KeychainError(.ioError, "cannot switch \(databaseURL.path) to WAL mode; is the file system read-only?")
            }
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
        }
        try Self.createPrivately(databaseURL)
        let opened = try Self.mapErrors(path: databaseURL.path, busyTimeout: options.busyTimeout) {
            let database = try DatabaseQueue(path: databaseURL.path, configuration: configuration)
            try Schema.prepare(database)
            return (database, try MasterKeyring.unlock(database, source: source))
        }
        self.databaseURL = databaseURL
        self.database = opened.0
        self.indexer = opened.1.indexer
        self.groupKeys = GroupKeyring(wrapping: opened.1.wrapping)
        self.options = options
        self.logger = logger
    }

    // MARK: - SecItemAdd

    /// Adds an item (`SecItemAdd`). Without an explicit group it goes to the caller's first group.
    /// - Returns: the stored attributes, with creation and modification dates.
    /// - Throws: `duplicateItem` (-25299) if the group already has that service and account;
    ///   `missingEntitlement` (-34018) for a group the caller is not entitled to.
    @discardableResult
    public func add(_ new: NewItem, as caller: AppIdentity) throws(KeychainError) -> ItemMetadata {
        let group = try AccessControl.groupForAdd(new.accessGroup, caller: caller)
        let now = options.clock()
        let item = KeychainItem(
            metadata: ItemMetadata(accessGroup: group, service: new.service, account: new.account, type: new.type,
                                   generic: new.generic, label: new.label, creator: new.creator,
                                   creationDate: now, modificationDate: now),
            secret: new.secret)
        let groupIndex = indexer.group(group)
        let indexes = RowIndexes(of: item.metadata, groupIndex: groupIndex, indexer: indexer)
        var plaintext = ItemPayload.encode(item)
        defer { Sodium.wipe(&plaintext) }
        try write { db in
            let key = try self.groupKeys.keyForWriting(group: group, index: groupIndex, db)
            let box = AEAD.seal(plaintext, additionalData: indexes.additionalData(format: Schema.itemFormat), key: key)
            try ItemTable.insert(indexes, box: box, group: group, db)
        }
        logger.debug("keychain item added", metadata: ["app": "\(caller.appID)", "group": "\(group)"])
        return item.metadata
    }

    // MARK: - SecItemCopyMatching

    /// The first item matching `query` in the caller's groups (`SecItemCopyMatching`, `kSecMatchLimitOne`),
    /// searching groups in the caller's order.
    /// - Throws: `itemNotFound` (-25300), also when only other apps' groups hold a match;
    ///   `missingEntitlement`; `integrityFailure` if the matching item was tampered with.
    public func find(_ query: ItemQuery, as caller: AppIdentity) throws(KeychainError) -> KeychainItem {
        guard let item = try read({ db in try self.matches(query, caller: caller, limit: 1, db) }).first?.item else {
            throw notFound(query, caller)
        }
        return item
    }

    /// Every item matching `query` in the caller's groups (`kSecMatchLimitAll`).
    /// - Throws: `itemNotFound` when nothing matches.
    public func findAll(_ query: ItemQuery, as caller: AppIdentity) throws(KeychainError) -> [KeychainItem] {
        let found = try read { db in try self.matches(query, caller: caller, limit: nil, db) }
        guard !found.isEmpty else { throw notFound(query, caller) }
        return found.map(\.item)
    }

    /// The attributes of every item matching `query` (the secret is decrypted to authenticate the item,
    /// then wiped). Returns an empty list rather than `itemNotFound`.
    public func metadata(matching query: ItemQuery = .all, as caller: AppIdentity) throws(KeychainError) -> [ItemMetadata] {
        var found = try read { db in try self.matches(query, caller: caller, limit: nil, db) }
        for index in found.indices { Sodium.wipe(&found[index].item.secret) }
        return found.map(\.item.metadata)
    }

    // MARK: - SecItemUpdate

    /// Applies `changes` to every matching item (`SecItemUpdate`) in one transaction.
    /// - Returns: how many items changed.
    /// - Throws: `itemNotFound`; `duplicateItem` if a new service/account clashes (nothing changes).
    @discardableResult
    public func update(_ query: ItemQuery, with changes: ItemChanges, as caller: AppIdentity) throws(KeychainError) -> Int {
        guard !changes.isEmpty else { throw KeychainError(.invalidParameter, "the update names no attribute to change") }
        let now = options.clock()
        let count = try write { db -> Int in
            let found = try self.matches(query, caller: caller, limit: nil, db)
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
                let group = item.metadata.accessGroup
                let indexes = RowIndexes(of: item.metadata, groupIndex: match.groupIndex, indexer: self.indexer)
                var plaintext = ItemPayload.encode(item)
                defer { Sodium.wipe(&plaintext) }
                let key = try self.groupKeys.keyForWriting(group: group, index: match.groupIndex, db)
                let box = AEAD.seal(plaintext, additionalData: indexes.additionalData(format: Schema.itemFormat), key: key)
                try ItemTable.replace(id: match.rowID, indexes, box: box, group: group, db)
            }
            return found.count
        }
        guard count > 0 else { throw notFound(query, caller) }
        logger.debug("keychain items updated", metadata: ["app": "\(caller.appID)", "count": "\(count)"])
        return count
    }

    // MARK: - SecItemDelete

    /// Deletes every matching item (`SecItemDelete`) in one transaction.
    ///
    /// A query on indexed attributes only (group, service, account, label, type) deletes without
    /// decrypting, so a damaged item can still be removed; one on `generic` or `creator` authenticates
    /// each candidate first.
    /// - Returns: how many items were deleted.
    /// - Throws: `itemNotFound` when nothing matches.
    @discardableResult
    public func delete(_ query: ItemQuery, as caller: AppIdentity) throws(KeychainError) -> Int {
        let count = try write { db -> Int in
            let ids: [Int64]
            if query.generic != nil || query.creator != nil {
                ids = try self.matches(query, caller: caller, limit: nil, db).map(\.rowID)
            } else {
                ids = try self.filters(query, caller: caller).flatMap { try ItemTable.rows($0.filter, limit: nil, db).map(\.id) }
            }
            try ItemTable.delete(ids: ids, db)
            return ids.count
        }
        guard count > 0 else { throw notFound(query, caller) }
        logger.debug("keychain items deleted", metadata: ["app": "\(caller.appID)", "count": "\(count)"])
        return count
    }

    // MARK: - Integrity

    /// Authenticates every group key and every item, and runs SQLite's `quick_check`.
    /// Needs only the master key, not an app identity: it is an administrator's check.
    public func verify() throws(KeychainError) -> IntegrityReport {
        try read { db in
            let problems = try String.fetchAll(db, sql: "PRAGMA quick_check").filter { $0 != "ok" }
            var groups: [Data: String] = [:]
            var damagedGroups = 0
            for row in try Row.fetchAll(db, sql: "SELECT name_index, key_nonce, wrapped_key FROM access_groups") {
                let index: Data = row[0]
                if let (name, _) = try self.groupKeys.unwrap(index: index, nonce: row[1], wrapped: row[2]),
                   self.indexer.group(name) == index {
                    groups[index] = name
                } else {
                    damagedGroups += 1
                }
            }
            var damaged: [DamagedItem] = []
            var checked = 0
            let cursor = try ItemTable.allRows(db)
            while let row = try cursor.next() {
                checked += 1
                let sealed = ItemTable.sealedRow(row)
                guard let group = groups[sealed.indexes.group] else {
                    damaged.append(DamagedItem(rowID: sealed.id, accessGroup: nil, reason: "its access group's key is missing or damaged"))
                    continue
                }
                do {
                    var item = try self.open(sealed, group: group, db)
                    defer { Sodium.wipe(&item.secret) }
                    if RowIndexes(of: item.metadata, groupIndex: sealed.indexes.group, indexer: self.indexer) != sealed.indexes {
                        damaged.append(DamagedItem(rowID: sealed.id, accessGroup: group, reason: "its lookup columns do not match its attributes"))
                    }
                } catch let error as KeychainError where error.code == .integrityFailure {
                    damaged.append(contentsOf: error.damagedItems)
                }
            }
            return IntegrityReport(checkedItems: checked, checkedGroups: groups.count + damagedGroups,
                                   damagedItems: damaged, damagedGroups: damagedGroups, databaseProblems: problems)
        }
    }

    // MARK: - Internals

    private struct Match {
        var rowID: Int64
        var groupIndex: Data
        var item: KeychainItem
    }

    private struct GroupFilter {
        var group: String
        var filter: ItemTable.Filter
    }

    private func filters(_ query: ItemQuery, caller: AppIdentity) throws -> [GroupFilter] {
        try AccessControl.groupsToSearch(query.accessGroup, caller: caller).map { group in
            GroupFilter(group: group, filter: ItemTable.Filter(group: group, groupIndex: indexer.group(group), query: query, indexer: indexer))
        }
    }

    /// Decrypts the candidates of every searched group, in the caller's group order, and applies the
    /// attributes that have no index.
    private func matches(_ query: ItemQuery, caller: AppIdentity, limit: Int?, _ db: Database) throws -> [Match] {
        let needsPostFilter = query.generic != nil || query.creator != nil
        var found: [Match] = []
        for groupFilter in try filters(query, caller: caller) {
            let remaining = limit.map { $0 - found.count }
            let candidates = if let exact = groupFilter.filter.exactKey {
                try ItemTable.row(exactly: exact, db).map { [$0] } ?? []
            } else {
                try ItemTable.rows(groupFilter.filter, limit: needsPostFilter ? nil : remaining, db)
            }
            for sealed in candidates {
                let item = try open(sealed, group: groupFilter.group, db)
                if let generic = query.generic, item.metadata.generic != generic { continue }
                if let creator = query.creator, item.metadata.creator != creator { continue }
                found.append(Match(rowID: sealed.id, groupIndex: sealed.indexes.group, item: item))
                if let limit, found.count >= limit { return found }
            }
        }
        return found
    }

    /// Authenticates and decodes one row, then re-checks that it belongs to `group`.
    private func open(_ sealed: ItemTable.SealedRow, group: String, _ db: Database) throws -> KeychainItem {
        func damaged(_ reason: String) -> KeychainError {
            let item = DamagedItem(rowID: sealed.id, accessGroup: group, reason: reason)
            return KeychainError(.integrityFailure,
                "\(item) (tampered or corrupted); run `devicectl keychain verify`, then delete the item or restore the store from backup",
                damagedItems: [item])
        }
        guard sealed.format == Schema.itemFormat else { throw damaged("unknown item format \(sealed.format)") }
        let additionalData = sealed.indexes.additionalData(format: sealed.format)
        guard let key = try groupKeys.keyForReading(index: sealed.indexes.group, db) else {
            throw damaged("its access group has no key")
        }
        var opened = AEAD.open(sealed.box, additionalData: additionalData, key: key)
        if opened == nil, let replaced = try groupKeys.reloadIfReplaced(index: sealed.indexes.group, db) {
            opened = AEAD.open(sealed.box, additionalData: additionalData, key: replaced)
        }
        guard var plaintext = opened else { throw damaged("it failed authentication") }
        defer { Sodium.wipe(&plaintext) }
        guard let item = ItemPayload.decode(plaintext) else { throw damaged("its sealed payload is malformed") }
        guard item.metadata.accessGroup == group else { throw damaged("it belongs to another access group") }
        return item
    }

    private func notFound(_ query: ItemQuery, _ caller: AppIdentity) -> KeychainError {
        let scope = query.accessGroup.map { "access group \($0)" } ?? "the access groups of app \(caller.appID)"
        return KeychainError(.itemNotFound, "no matching item in \(scope)")
    }

    /// A read in one deferred transaction. (Not `DatabaseQueue.read`: it toggles `PRAGMA query_only`
    /// around every read, which expires every prepared statement and recompiles the SELECT each time.)
    private func read<T>(_ body: @escaping (Database) throws -> T) throws(KeychainError) -> T {
        try Self.mapErrors(path: databaseURL.path, busyTimeout: options.busyTimeout) {
            try database.unsafeRead { db in
                var result: T?
                try db.inTransaction(.deferred) {
                    result = try body(db)
                    return .commit
                }
                return result!
            }
        }
    }

    private func write<T>(_ body: @escaping (Database) throws -> T) throws(KeychainError) -> T {
        try Self.mapErrors(path: databaseURL.path, busyTimeout: options.busyTimeout) { try database.write(body) }
    }

    /// Creates the database file with mode 0600 so SQLite's WAL and shared-memory files inherit it.
    private static func createPrivately(_ url: URL) throws(KeychainError) {
        let fd = Glibc.open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw KeychainError(.ioError, "cannot create \(url.path): \(String(cString: strerror(errno))); check the state directory's permissions")
        }
        close(fd)
    }

    private static func mapErrors<T>(path: String, busyTimeout: Double, _ body: () throws -> T) throws(KeychainError) -> T {
        do {
            return try body()
        } catch let error as KeychainError {
            throw error
        } catch let error as DatabaseError {
            throw DatabaseErrors.map(error, path: path, busyTimeout: busyTimeout)
        } catch {
            throw KeychainError(.ioError, "the store at \(path) failed: \(type(of: error))")
        }
    }
}
