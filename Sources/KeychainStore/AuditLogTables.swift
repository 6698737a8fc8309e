public import Foundation
import GRDB

extension StoreTransaction {
    /// The audit log's tables, inside this transaction: an event commits with the change it records.
    public var auditLog: AuditLogTables { AuditLogTables(database: database) }
}

/// The rows of the device's tamper-evident audit log, kept in the store's database (see `AuditTables`
/// for the schema). The store only stores and reads them; SharedDevice's `AuditLog` computes what they
/// hold (the hash chain, the checkpoint signatures, the head's tag with `StoreTransaction.integrityTag`)
/// and checks it. Obtained from `StoreTransaction.auditLog`; do not keep it beyond the transaction.
///
/// A store that never logged has none of the tables (the first `head(creatingTables: true)` creates
/// them). Some of them missing means someone deleted part of the log: the methods then throw
/// `MissingTables` rather than SQLite's error.
public struct AuditLogTables {
    let database: Database

    /// An event row to append. Text columns are stored as SQLite text, exactly these strings.
    public struct NewEvent: Sendable {
        /// The event's position in the log, from 1, without gaps.
        public var sequence: Int64
        /// The recorded time, as the log formats it.
        public var time: String
        /// The event's kind (`account.signed_out`, …).
        public var type: String
        /// Who acted.
        public var actor: String
        /// The account concerned, if any (never a token).
        public var account: String?
        /// Why, if given.
        public var reason: String?
        /// Ties the events of one operation together.
        public var correlationID: String
        /// The event's further facts, as the log encodes them (JSON).
        public var details: String
        /// The chain value after this event.
        public var chain: Data

        /// An event row with every column given.
        public init(
            sequence: Int64,
            time: String,
            type: String,
            actor: String,
            account: String?,
            reason: String?,
            correlationID: String,
            details: String,
            chain: Data
        ) {
            self.sequence = sequence
            self.time = time
            self.type = type
            self.actor = actor
            self.account = account
            self.reason = reason
            self.correlationID = correlationID
            self.details = details
            self.chain = chain
        }
    }

    /// An event row as stored, each text column as its exact bytes (a NUL inside a field included), so
    /// that a verifier hashes what the file holds.
    public struct StoredEvent: Sendable {
        /// The event's position in the log.
        public let sequence: Int64
        /// The columns of `NewEvent`, as stored.
        public let time: Data
        public let type: Data
        public let actor: Data
        public let account: Data?
        public let reason: Data?
        public let correlationID: Data
        public let details: Data
        /// The chain value stored with the event.
        public let chain: Data
    }

    /// The head record: the newest sequence number and chain value, and their integrity tag.
    public struct Head: Sendable, Equatable {
        /// The newest event's sequence number.
        public var sequence: Int64
        /// The chain value after it.
        public var chain: Data
        /// The integrity tag over both (`StoreTransaction.integrityTag`).
        public var tag: Data

        /// A head record with every column given.
        public init(sequence: Int64, chain: Data, tag: Data) {
            self.sequence = sequence
            self.chain = chain
            self.tag = tag
        }
    }

    /// A signed checkpoint: the device key's signature over a sequence number and its chain value.
    public struct Checkpoint: Sendable, Equatable {
        /// The event signed at.
        public var sequence: Int64
        /// The chain value after it.
        public var chain: Data
        /// The device key that signed (Ed25519).
        public var publicKey: Data
        /// The signature over the sequence number and chain value.
        public var signature: Data

        /// A checkpoint with every column given.
        public init(sequence: Int64, chain: Data, publicKey: Data, signature: Data) {
            self.sequence = sequence
            self.chain = chain
            self.publicKey = publicKey
            self.signature = signature
        }
    }

    /// Some of the log's tables exist and some do not: part of the log was deleted.
    public struct MissingTables: Error, Sendable, CustomStringConvertible {
        /// The missing tables' names.
        public let names: [String]
        public var description: String { "the audit log's table(s) \(names.joined(separator: ", ")) are missing" }
    }

    /// Every table of the log, by name.
    public static let tableNames = AuditTables.names

    /// The log's tables that do not exist: all of them for a store that never logged, none for a whole log.
    public func missingTables() throws -> [String] {
        try AuditTables.missing(database)
    }

    /// The head record, `nil` when there is none. A store without any of the tables has no head; with
    /// `creatingTables`, the tables are then created (inside the transaction) for a first append.
    /// - Throws: `MissingTables` when only some of the tables exist.
    public func head(creatingTables: Bool) throws -> Head? {
        do {
            return try Row.fetchOne(database.cachedStatement(sql: AuditTables.head)).map {
                Head(sequence: $0[0], chain: $0[1], tag: $0[2])
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_ERROR {
            let missing = try missingTables()
            guard missing.count == AuditTables.names.count else {
                if !missing.isEmpty { throw MissingTables(names: missing) }
                throw error
            }
            if creatingTables {
                for statement in AuditTables.create { try database.execute(sql: statement) }
            }
            return nil
        }
    }

    /// How many events are stored.
    /// - Throws: `MissingTables` when the events' table is missing.
    public func eventCount() throws -> Int64 {
        try guarded { try Int64.fetchOne(database.cachedStatement(sql: AuditTables.eventCount)) ?? 0 }
    }

    /// The newest event's sequence number, 0 when there is none (or no log at all).
    public func lastSequence() throws -> Int64 {
        do {
            return try Int64.fetchOne(database.cachedStatement(sql: AuditTables.lastSequence)) ?? 0
        } catch let error as DatabaseError where error.resultCode == .SQLITE_ERROR {
            guard try missingTables().contains("audit_events") else { throw error }
            return 0
        }
    }

    /// Appends one event, replaces the head record with `head`, and stores `checkpoint` if there is one.
    /// - Throws: `MissingTables` when part of the log was deleted.
    public func append(_ event: NewEvent, head: Head, checkpoint: Checkpoint? = nil) throws {
        try guarded {
            try database.cachedStatement(sql: AuditTables.insertEvent).execute(arguments: [
                event.sequence, event.time, event.type, event.actor, event.account, event.reason, event.correlationID,
                event.details, event.chain,
            ])
            try database.cachedStatement(sql: AuditTables.setHead).execute(arguments: [
                head.sequence, head.chain, head.tag,
            ])
            if let checkpoint { try store(checkpoint) }
        }
    }

    /// Stores a checkpoint, replacing one at the same sequence number.
    /// - Throws: `MissingTables` when part of the log was deleted.
    public func setCheckpoint(_ checkpoint: Checkpoint) throws {
        try guarded { try store(checkpoint) }
    }

    /// Every checkpoint, oldest first.
    /// - Throws: `MissingTables` when the checkpoints' table is missing.
    public func checkpoints() throws -> [Checkpoint] {
        try guarded {
            try Row.fetchAll(database.cachedStatement(sql: AuditTables.checkpoints)).map { row in
                Checkpoint(sequence: row[0], chain: row[1], publicKey: row[2], signature: row[3])
            }
        }
    }

    /// Hands `body` each event after sequence number `after`, oldest first, optionally only those of the
    /// given `types` and `account`. Nothing when the events' table does not exist (nothing was logged).
    public func forEachEvent(
        after: Int64 = 0,
        types: [String] = [],
        account: String? = nil,
        _ body: (StoredEvent) throws -> Void
    ) throws {
        var arguments: [any DatabaseValueConvertible] = [after]
        arguments.append(contentsOf: types)
        if let account { arguments.append(account) }
        let statement: Statement
        do {
            statement = try database.makeStatement(sql: AuditTables.events(types: types.count, account: account != nil))
        } catch let error as DatabaseError where error.resultCode == .SQLITE_ERROR {
            guard try missingTables().contains("audit_events") else { throw error }
            return
        }
        let rows = try Row.fetchCursor(statement, arguments: StatementArguments(arguments))
        while let row = try rows.next() {
            try body(
                StoredEvent(
                    sequence: row[0],
                    time: row[1],
                    type: row[2],
                    actor: row[3],
                    account: row[4],
                    reason: row[5],
                    correlationID: row[6],
                    details: row[7],
                    chain: row[8]
                )
            )
        }
    }

    private func store(_ checkpoint: Checkpoint) throws {
        try database.cachedStatement(sql: AuditTables.setCheckpoint)
            .execute(arguments: [checkpoint.sequence, checkpoint.chain, checkpoint.publicKey, checkpoint.signature])
    }

    /// `body`, with SQLite's "no such table" turned into `MissingTables` when part of the log is gone.
    private func guarded<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as DatabaseError where error.resultCode == .SQLITE_ERROR {
            let missing = try missingTables()
            if !missing.isEmpty { throw MissingTables(names: missing) }
            throw error
        }
    }
}
