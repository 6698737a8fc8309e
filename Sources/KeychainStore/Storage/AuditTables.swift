import GRDB

/// The SQL of the audit log's tables, kept in the store's database beside the keychain tables so that an
/// event commits with the change it records. The store stores and reads the rows; SharedDevice's
/// `AuditLog` gives them their meaning (the hash chain, the signatures, the head's tag).
///
/// - `audit_events`: one row per event, append-only; `chain` is `BLAKE2b-256(previous chain || event)`.
/// - `audit_checkpoints`: Ed25519 signatures over (sequence, chain) every N events and at sign-outs.
/// - `audit_head`: the newest (sequence, chain), tagged with a key derived from the store's master key
///   at every append, so that deleting the newest events is detected even between checkpoints.
///
/// The tables are created by the first append, not with the store: a store that never logged has none.
enum AuditTables {
    static let create = [
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
    static let names = ["audit_events", "audit_checkpoints", "audit_head"]

    static let insertEvent = """
        INSERT INTO audit_events (sequence, time, type, actor, account, reason, correlation_id, details, chain)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
    static let setHead = "INSERT OR REPLACE INTO audit_head (id, sequence, chain, tag) VALUES (1, ?, ?, ?)"
    static let setCheckpoint =
        "INSERT OR REPLACE INTO audit_checkpoints (sequence, chain, public_key, signature) VALUES (?, ?, ?, ?)"
    static let head = "SELECT sequence, chain, tag FROM audit_head WHERE id = 1"
    static let eventCount = "SELECT count(*) FROM audit_events"
    static let lastSequence = "SELECT max(sequence) FROM audit_events"
    static let checkpoints = "SELECT sequence, chain, public_key, signature FROM audit_checkpoints ORDER BY sequence"

    /// The events after a sequence number, oldest first, narrowed by type and account when asked.
    static func events(types: Int, account: Bool) -> String {
        var conditions = ["sequence > ?"]
        if types > 0 { conditions.append("type IN (\(Array(repeating: "?", count: types).joined(separator: ", ")))") }
        if account { conditions.append("account = ?") }
        return """
            SELECT sequence, time, type, actor, account, reason, correlation_id, details, chain FROM audit_events
            WHERE \(conditions.joined(separator: " AND ")) ORDER BY sequence
            """
    }

    /// The tables that are missing, in `names` order. Read from `sqlite_master` every time, not from GRDB's
    /// schema cache: another connection (someone editing the file) may have dropped one since.
    static func missing(_ db: Database) throws -> [String] {
        let present = Set(try String.fetchAll(db.cachedStatement(sql: present)))
        return names.filter { !present.contains($0) }
    }

    private static let present = """
        SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('audit_events', 'audit_checkpoints', 'audit_head')
        """
}
