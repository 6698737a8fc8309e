import CSQLiteControl
public import Foundation
import GRDB
public import Logging
import PathSafety
import SystemPackage

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

    /// The most of the database file SQLite reads through a memory map (256 MiB of address space).
    static let memoryMapSize = 256 << 20

    /// The SQLite database file.
    public let databaseURL: URL
    /// The state directory, held since it was checked: every file of the store is reached relative to it.
    let stateDirectory: SafeDirectory
    /// Space kept beside the database for sign-outs on a full disk (`keepDiskReserve`).
    private let diskReserve: DiskReserve
    /// One serialized connection per store object. (GRDB's `DatabasePool` would write a dummy table at
    /// every open and force `synchronous=NORMAL`; a queue with WAL set here keeps both under our control.)
    private let database: DatabaseQueue
    /// The connection's WAL hook (installed when it opens, removed in `deinit`).
    private let checkpointer: WALCheckpointer
    let core: StoreCore
    private var options: StoreOptions { core.options }
    private let logger: Logger

    /// Opens (creating if needed) the store in `directory`.
    ///
    /// - Parameters:
    ///   - directory: the state directory; created with mode 0700 if missing.
    ///   - key: the master key source; by default `MasterKeySource.forStore(in:)`: the key systemd
    ///     decrypted for the service, else the sealed key `master.key.cred`, else the key file `master.key`
    ///     in `directory`, generated when the store is created.
    ///   - options: durability, busy timeout and clock.
    ///   - logger: where the store reports what it does (debug: each change; warning: integrity
    ///     failures) — never a secret, key or cleartext attribute. By default the task-local `Logger.current`.
    /// - Throws: `wrongKey` if the key does not open an existing store (nothing is modified),
    ///   `corruptStore` if the file is not a store, `insecureKeyFile`, `ioError`.
    public init(
        directory: URL,
        key: MasterKeySource? = nil,
        options: StoreOptions = StoreOptions(),
        logger: Logger = Logger.current
    ) throws(KeychainError) {
        let held = try StateDirectory.open(directory)
        let databaseURL = directory.appendingPathComponent(Self.databaseFileName)
        let source = try HeldKeySource.resolving(key, stateDirectory: directory, held: held)
        let file = try HeldDatabaseFile(directory: held, name: Self.databaseFileName)
        var configuration = Configuration()
        configuration.busyMode = .timeout(options.busyTimeout)
        configuration.label = "keychain-store"
        let synchronous = options.synchronous.rawValue
        let checkpointer = WALCheckpointer(
            file: file,
            threshold: options.backgroundCheckpointPages,
            limit: options.checkpointLimitPages,
            logger: logger
        )
        configuration.prepareDatabase { db in
            // Switching an existing WAL database to WAL writes nothing, so a failed open changes no byte.
            guard try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") == "wal" else {
                throw KeychainError(
                    .ioError,
                    "cannot switch \(databaseURL.path) to WAL mode; is the file system read-only?"
                )
            }
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
            // Deleted items (a signed-out worker's tokens) are overwritten with zeros, freed pages included,
            // whatever the SQLite build's default.
            try db.execute(sql: "PRAGMA secure_delete = ON")
            // Reads through a memory map of the file (as the page cache holds it) instead of a pread(2) and a
            // copy per page missed in SQLite's own cache. The pages hold ciphertext and blind indexes only.
            try db.execute(sql: "PRAGMA mmap_size = \(Self.memoryMapSize)")
        }
        let opened: (DatabaseQueue, MasterKeyring)
        do {
            try Self.refuseEmptiedStore(file, source: source)
            try Self.createPrivately(file)
            opened = try Self.mapErrors(path: databaseURL.path, busyTimeout: options.busyTimeout) {
                let database = try DatabaseQueue(path: file.uri, configuration: configuration)
                do {
                    try database.writeWithoutTransaction { db in
                        guard let connection = db.sqliteConnection else {
                            throw KeychainError(.ioError, "the store \(file.path) has no connection")
                        }
                        try file.verify(connection)
                    }
                    try Schema.prepare(database)
                    // A rotation interrupted between its commit and putting the new key in place is finished here.
                    let keyring: MasterKeyring
                    do {
                        keyring = try MasterKeyRotation.unlock(database, source: source, directory: held)
                    } catch {
                        // A store this key does not open is left byte for byte: closing must not fold a write-ahead
                        // log (a copied disk image of a running device has one) into the database file.
                        database.writeWithoutTransaction { db in
                            if let connection = db.sqliteConnection {
                                _ = sqlite_control_keep_wal_on_close(UnsafeMutableRawPointer(connection))
                            }
                        }
                        throw error
                    }
                    // From here on checkpoints run on a background queue, not inside the commit that grows the log.
                    database.writeWithoutTransaction { db in
                        if let connection = db.sqliteConnection { checkpointer.install(on: connection) }
                    }
                    return (database, keyring)
                } catch {
                    // Closed here, while the held directory is open (see deinit).
                    try? database.close()
                    throw error
                }
            }
        } catch {
            logger.debug(
                "keychain store did not open",
                metadata: ["path": "\(databaseURL.path)", "error.code": "\(error.code)"]
            )
            throw error
        }
        logger.debug(
            "keychain store opened",
            metadata: ["path": "\(databaseURL.path)", "synchronous": "\(synchronous)"]
        )
        self.databaseURL = databaseURL
        stateDirectory = held
        diskReserve = DiskReserve(directory: held)
        self.database = opened.0
        self.checkpointer = checkpointer
        // After the opening reads, which mapped the write-ahead-log index.
        let commitWatch = opened.0.writeWithoutTransaction { db in CommitWatch(connection: db.sqliteConnection) }
        self.core = StoreCore(keyring: opened.1, options: options, commitWatch: commitWatch)
        self.logger = logger
    }

    deinit {
        // The connection's WAL hook holds the checkpointer: take it back before GRDB closes the connection.
        let checkpointer = checkpointer
        database.writeWithoutTransaction { db in
            if let connection = db.sqliteConnection { checkpointer.uninstall(from: connection) }
        }
        // The connection reaches its files through the held directory's descriptor up to its close, which may fold
        // the write-ahead log into the database and remove it: it closes here, while the directory is held. Were it
        // left open (a statement not finalized), the descriptor is kept for the rest of the process rather than
        // closed under it, where its number could come to name another directory.
        do {
            try database.close()
        } catch {
            _ = Unmanaged.passRetained(stateDirectory)
        }
    }

    // MARK: - Keychain operations (each one transaction)

    /// Adds an item (`SecItemAdd`). Without an explicit group it goes to the caller's first group.
    /// - Returns: the stored attributes, with creation and modification dates.
    /// - Throws: `duplicateItem` (-25299) if the group already has that service and account;
    ///   `missingEntitlement` (-34018) for a group the caller is not entitled to.
    /// - Parameter quota: what the caller's items may take in all (a broker's per-app quota); over it the
    ///   add fails with `quotaExceeded` (-34) and nothing is added.
    @discardableResult
    public func add(
        _ new: NewItem,
        as caller: AppIdentity,
        quota: ItemQuota? = nil
    ) throws(KeychainError) -> ItemMetadata {
        let metadata = try write { db in try StoreTransaction(self.core, db).add(new, as: caller, quota: quota) }
        logger.debug("keychain item added", metadata: ["app": "\(caller.appID)", "group": "\(metadata.accessGroup)"])
        return metadata
    }

    /// The first item matching `query` in the caller's groups (`SecItemCopyMatching`, `kSecMatchLimitOne`),
    /// searching groups in the caller's order.
    /// - Throws: `itemNotFound` (-25300), also when only other apps' groups hold a match;
    ///   `missingEntitlement`; `integrityFailure` if the matching item was tampered with.
    public func find(_ query: ItemQuery, as caller: AppIdentity) throws(KeychainError) -> KeychainItem {
        // A point read in one group is one SELECT: its implicit read transaction is all it needs.
        let oneStatement = PointRead.Key(query) != nil && (query.accessGroup != nil || caller.accessGroups.count == 1)
        return try read(inTransaction: !oneStatement) { db in
            try StoreTransaction(self.core, db).find(query, as: caller)
        }
    }

    /// Every item matching `query` in the caller's groups (`kSecMatchLimitAll`).
    /// - Throws: `itemNotFound` when nothing matches.
    public func findAll(_ query: ItemQuery, as caller: AppIdentity) throws(KeychainError) -> [KeychainItem] {
        try read { db in try StoreTransaction(self.core, db).findAll(query, as: caller) }
    }

    /// The attributes of every item matching `query` (the secret is decrypted to authenticate the item,
    /// then wiped). Returns an empty list rather than `itemNotFound`.
    public func metadata(
        matching query: ItemQuery = .all,
        as caller: AppIdentity
    ) throws(KeychainError) -> [ItemMetadata] {
        try read { db in try StoreTransaction(self.core, db).metadata(matching: query, as: caller) }
    }

    /// Applies `changes` to every matching item (`SecItemUpdate`) in one transaction.
    /// - Returns: how many items changed.
    /// - Throws: `itemNotFound`; `duplicateItem` if a new service/account clashes (nothing changes).
    @discardableResult
    public func update(
        _ query: ItemQuery,
        with changes: ItemChanges,
        as caller: AppIdentity,
        quota: ItemQuota? = nil
    ) throws(KeychainError) -> Int {
        let count = try write { db in
            try StoreTransaction(self.core, db).update(query, with: changes, as: caller, quota: quota)
        }
        logger.debug("keychain items updated", metadata: ["app": "\(caller.appID)", "count": "\(count)"])
        return count
    }

    /// Deletes every matching item (`SecItemDelete`) in one transaction.
    ///
    /// A query on indexed attributes only (group, service, account, label, type) deletes without
    /// decrypting, so a damaged item can still be removed; one on `generic` or `creator` authenticates
    /// each candidate first.
    /// - Returns: how many items were deleted.
    /// - Throws: `itemNotFound` when nothing matches.
    @discardableResult
    public func delete(_ query: ItemQuery, as caller: AppIdentity) throws(KeychainError) -> Int {
        let count = try write { db in try StoreTransaction(self.core, db).delete(query, as: caller) }
        logger.debug("keychain items deleted", metadata: ["app": "\(caller.appID)", "count": "\(count)"])
        return count
    }

    // MARK: - Transactions spanning several operations

    /// Runs `body` in one write transaction (`BEGIN IMMEDIATE`): every keychain operation, crypto-shred
    /// and companion-table statement in it commits together or not at all, even if the process is killed.
    ///
    /// Errors thrown by `body` roll the transaction back and are rethrown unchanged; SQLite errors become
    /// `KeychainError`s.
    public func writeTransaction<T>(_ body: @escaping (StoreTransaction) throws -> T) throws -> T {
        let commitActions = CommitActions()
        let result = try Self.mapDatabaseErrors(path: databaseURL.path, busyTimeout: options.busyTimeout) {
            try database.writeWithoutTransaction { db in
                try RawStatements.inTransaction(.immediate, db) {
                    try body(StoreTransaction(self.core, db, commitActions))
                }
            }
        }
        commitActions.run()
        return result
    }

    /// `writeTransaction` for the writes that must succeed even on a full disk (a global sign-out, a shift
    /// switch, deprovisioning: they mostly delete). If the disk is full, the disk reserve
    /// (`keepDiskReserve`) is released, the transaction runs again with `secure_delete` at `FAST` (the
    /// deleted items' ciphertext is no longer overwritten page by page, which would need as much room
    /// again in the WAL; it stays encrypted), and the reserve is made again when there is room.
    ///
    /// The release and the retry hold the store's one connection throughout, as `keepDiskReserve` does while
    /// it makes the reserve: a keeper on another thread cannot take the released space back in between.
    public func essentialWriteTransaction<T>(_ body: @escaping (StoreTransaction) throws -> T) throws -> T {
        do {
            return try writeTransaction(body)
        } catch let error as KeychainError where error.code == .diskFull {
            let commitActions = CommitActions()
            let result = try Self.mapDatabaseErrors(path: databaseURL.path, busyTimeout: options.busyTimeout) {
                try database.writeWithoutTransaction { db in
                    logger.warning(
                        "keychain store: the disk is full; releasing the disk reserve for an essential write",
                        metadata: ["path": "\(databaseURL.path)", "reserve.released": "\(diskReserve.release())"]
                    )
                    try db.execute(sql: "PRAGMA secure_delete = FAST")
                    defer { try? db.execute(sql: "PRAGMA secure_delete = ON") }
                    return try RawStatements.inTransaction(.immediate, db) {
                        try body(StoreTransaction(self.core, db, commitActions))
                    }
                }
            }
            commitActions.run()
            do {
                try keepDiskReserve()
            } catch {
                logger.warning(
                    "keychain store: the disk reserve could not be made again; free space on the disk",
                    metadata: ["path": "\(diskReserve.path)"]
                )
            }
            return result
        }
    }

    /// Keeps the disk reserve in place (a daemon calls this when it starts, and on a timer): space released
    /// for `essentialWriteTransaction` when the disk is full, so that sign-outs still work. Returns at once
    /// when the reserve is in place; otherwise makes it while holding the store's connection, never between
    /// an essential write's release of the reserve and its retry.
    /// - Throws: `diskFull` or `ioError` when it cannot be allocated.
    public func keepDiskReserve() throws(KeychainError) {
        guard !diskReserve.isInPlace else { return }
        let reserve = diskReserve
        do {
            try database.writeWithoutTransaction { _ in try reserve.make() }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(.ioError, "cannot make the disk reserve \(reserve.path): \(error)")
        }
    }

    /// Whether the disk reserve is in place, whole.
    public var hasDiskReserve: Bool { diskReserve.isInPlace }

    /// Runs `body` in one read transaction: a consistent snapshot of the store.
    public func readTransaction<T>(_ body: @escaping (StoreTransaction) throws -> T) throws -> T {
        // Read before the transaction's snapshot, for `changeStampIfUnchanged` (see `CommitWatch`).
        let mark = core.commitWatch.mark()
        return try Self.mapDatabaseErrors(path: databaseURL.path, busyTimeout: options.busyTimeout) {
            try database.unsafeRead { db in
                try RawStatements.inTransaction(.deferred, db) {
                    try body(StoreTransaction(self.core, db, markedBefore: mark))
                }
            }
        }
    }

    /// The change stamp a read transaction would take now (`StoreTransaction.changeStamp()`), when nobody
    /// (this process or another) has committed anything since a read transaction last took one; otherwise nil.
    /// Takes no transaction, lock or system call: it reads the header of SQLite's write-ahead-log index in
    /// shared memory, which every commit rewrites (see `CommitWatch`). For caches keyed on the stamp, to answer
    /// without waiting for the store's connection.
    public func changeStampIfUnchanged() -> StoreChangeStamp? {
        core.commitWatch.stampIfUnchanged()
    }

    /// The store's clock reading (`StoreOptions.clock`), as a transaction's `now`.
    public var now: Date { options.clock() }

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
                if let (name, _) = try self.core.groupKeys.unwrap(index: index, nonce: row[1], wrapped: row[2]),
                    try self.core.indexer.group(name) == index
                {
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
                    damaged.append(
                        DamagedItem(
                            rowID: sealed.id,
                            accessGroup: nil,
                            reason: "its access group's key is missing or damaged"
                        )
                    )
                    continue
                }
                do {
                    var item = try StoreTransaction(self.core, db).open(sealed, group: group)
                    defer { Sodium.wipe(&item.secret) }
                    if try RowIndexes(of: item.metadata, groupIndex: sealed.indexes.group, indexer: self.core.indexer)
                        != sealed.indexes
                    {
                        damaged.append(
                            DamagedItem(
                                rowID: sealed.id,
                                accessGroup: group,
                                reason: "its lookup columns do not match its attributes"
                            )
                        )
                    }
                } catch let error as KeychainError where error.code == .integrityFailure {
                    damaged.append(contentsOf: error.damagedItems)
                }
            }
            return IntegrityReport(
                checkedItems: checked,
                checkedGroups: groups.count + damagedGroups,
                damagedItems: damaged,
                damagedGroups: damagedGroups,
                databaseProblems: problems
            )
        }
    }

    // MARK: - Internals

    /// A read in one deferred transaction, or, for a body that runs a single statement, in that statement's
    /// implicit one. (Not `DatabaseQueue.read`: it toggles `PRAGMA query_only` around every read, which
    /// expires every prepared statement and recompiles the SELECT each time.)
    private func read<T>(
        inTransaction: Bool = true,
        _ body: @escaping (Database) throws -> T
    ) throws(KeychainError) -> T {
        do {
            return try Self.mapErrors(path: databaseURL.path, busyTimeout: options.busyTimeout) {
                try database.unsafeRead { db in
                    inTransaction ? try RawStatements.inTransaction(.deferred, db) { try body(db) } : try body(db)
                }
            }
        } catch {
            logIfDamage(error)
            throw error
        }
    }

    private func write<T>(_ body: @escaping (Database) throws -> T) throws(KeychainError) -> T {
        do {
            return try Self.mapErrors(path: databaseURL.path, busyTimeout: options.busyTimeout) {
                try database.writeWithoutTransaction { db in
                    try RawStatements.inTransaction(.immediate, db) { try body(db) }
                }
            }
        } catch {
            logIfDamage(error)
            throw error
        }
    }

    /// Failures are thrown to the caller, who reports them; the log keeps the detail for whoever debugs
    /// (integrity failures name the damaged items by row id and group only).
    private func logIfDamage(_ error: KeychainError) {
        switch error.code {
        case .integrityFailure:
            logger.debug(
                "keychain integrity failure",
                metadata: [
                    "path": "\(databaseURL.path)", "damaged.items": "\(error.damagedItems.map(\.description))",
                ]
            )
        case .corruptStore, .storeBusy:
            logger.debug(
                "keychain store failed",
                metadata: ["path": "\(databaseURL.path)", "error.code": "\(error.code)"]
            )
        case .diskFull:
            logger.warning("keychain store: the disk is full", metadata: ["path": "\(databaseURL.path)"])
        default:
            logger.trace("keychain operation failed", metadata: ["error.code": "\(error.code)"])
        }
    }

    /// An empty database file beside its key file is a store that was truncated or replaced, not a new one:
    /// the key file is only written once the store's tables are committed, so a first open that was
    /// interrupted leaves no key file behind. (Without the check, SQLite would take the empty file for a new
    /// database, and the device would silently come back unprovisioned with an empty, "intact" audit log.)
    private static func refuseEmptiedStore(_ file: HeldDatabaseFile, source: HeldKeySource) throws(KeychainError) {
        guard let key = source.location, key.exists else { return }
        guard let info = try? file.directory.status(of: file.name), info.type == .regular, info.size == 0 else {
            return
        }
        let journal = (try? file.directory.status(of: file.name + "-wal"))?.size ?? 0
        guard journal == 0 else { return }  // SQLite recovers the store from its write-ahead log
        throw KeychainError(
            .corruptStore,
            """
            the database \(file.path) is empty although its key file \(key.path) exists: the store was truncated or replaced; \
            restore it from backup (nothing was changed)
            """
        )
    }

    /// Creates the database file with mode 0600 so SQLite's WAL and shared-memory files inherit it
    /// (or opens the existing one, to find out early whether this user may use it at all).
    ///
    /// SQLite opens the database and its `-wal` and `-shm` files through the held directory and with
    /// `O_NOFOLLOW` (`HeldDatabaseFile`); here each of the three names must be a regular file or absent,
    /// never a symbolic link (`fstatat` without following, in the held directory), for a message that says so.
    private static func createPrivately(_ file: HeldDatabaseFile) throws(KeychainError) {
        let directory = file.directory
        let name = file.name
        for file in [name, name + "-wal", name + "-shm"] {
            guard let info = try? directory.status(of: file) else { continue }
            guard info.type == .regular else {
                throw KeychainError(
                    .insecureStateDirectory,
                    """
                    \(directory.path)/\(file) is \(info.type == .symbolicLink ? "a symbolic link" : "not a regular file"): \
                    the store's files are never reached through one; nothing was changed: remove it, or restore the state directory from backup
                    """
                )
            }
        }
        do throws(Errno) {
            let descriptor = try directory.openFile(
                name,
                .readWrite,
                options: [.create],
                permissions: [.ownerReadWrite]
            )
            try? descriptor.close()  // nothing written: nothing to lose
        } catch let error where AccessDiagnosis.isPermissionFailure(error) {
            throw KeychainError(
                .ioError,
                AccessDiagnosis.permissionDenied("open the store", path: FilePath(file.path), error: error)
            )
        } catch {
            throw KeychainError(
                .ioError,
                "cannot create \(file.path): \(error); check the state directory's permissions"
            )
        }
    }

    // `path` is an autoclosure: building the URL's path string on every call cost a point read about 1 µs.
    private static func mapDatabaseErrors<T>(
        path: @autoclosure () -> String,
        busyTimeout: Double,
        _ body: () throws -> T
    ) throws -> T {
        do {
            return try body()
        } catch let error as DatabaseError {
            throw DatabaseErrors.map(error, path: path(), busyTimeout: busyTimeout)
        }
    }

    private static func mapErrors<T>(
        path: @autoclosure () -> String,
        busyTimeout: Double,
        _ body: () throws -> T
    ) throws(KeychainError) -> T {
        do {
            return try body()
        } catch let error as KeychainError {
            throw error
        } catch let error as DatabaseError {
            throw DatabaseErrors.map(error, path: path(), busyTimeout: busyTimeout)
        } catch {
            throw KeychainError(.ioError, "the store at \(path()) failed: \(type(of: error))")
        }
    }
}
