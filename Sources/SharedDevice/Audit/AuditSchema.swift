import GRDB

/// The audit log's tables, in the store's database beside the keychain tables.
///
/// - `audit_events`: one row per event, append-only; `chain` is `BLAKE2b-256(previous chain || event)`.
/// - `audit_checkpoints`: Ed25519 signatures over (sequence, chain) every N events and at sign-outs.
/// - `audit_head`: the newest (sequence, chain), tagged with a key derived from the store's master key
///   at every append, so that deleting the newest events is detected even between checkpoints.
enum AuditSchema {
    static let statements = [
        """
        CREATE TABLE IF NOT EXISTS audit_events (
            sequence INTEGER PRIMARY KEY,
            time TEXT NOT NULL,
            type TEXT NOT NULL,
            actor TEXT NOT NULL,
            account TEXT,
            reason TEXT,
            correlation_id TEXT NOT NULL,
            details TEXT NOT NULL,
            chain BLOB NOT NULL
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS audit_checkpoints (
            sequence INTEGER PRIMARY KEY,
            chain BLOB NOT NULL,
            public_key BLOB NOT NULL,
            signature BLOB NOT NULL
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS audit_head (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            sequence INTEGER NOT NULL,
            chain BLOB NOT NULL,
            tag BLOB NOT NULL
        )
        """,
    ]

    /// The log's tables.
    static let tables = ["audit_events", "audit_checkpoints", "audit_head"]

    /// Whether every table exists.
    static func complete(_ db: Database) throws -> Bool {
        try tables.allSatisfy { try db.tableExists($0) }
    }

    static func create(_ db: Database) throws {
        for statement in statements { try db.execute(sql: statement) }
    }

    /// Whether any of the tables exists.
    static func exists(_ db: Database) throws -> Bool {
        try tables.contains { try db.tableExists($0) }
    }
}
