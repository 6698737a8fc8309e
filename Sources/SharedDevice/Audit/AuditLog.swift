import Foundation
public import KeychainStore

/// The tamper-evident audit log, kept in the store's database (its rows: `KeychainStore.AuditLogTables`).
///
/// Appends happen inside the caller's store transaction, so an event commits with the change it
/// records (a provisioning, a sign-out) or not at all. Each event is chained to the previous one with
/// BLAKE2b; every `checkpointInterval` events, and whenever the caller asks (sign-out, deprovision), the
/// chain value is signed with the device's Ed25519 key; the head (newest sequence and chain) is tagged
/// with a key derived from the store's master key at every append. `verify` detects edited, deleted,
/// reordered and truncated events, the newest included.
public enum AuditLog {
    /// The key that signs checkpoints and how often.
    public struct Signer: Sendable {
        public let key: SigningKey
        public let checkpointInterval: Int

        public init(key: SigningKey, checkpointInterval: Int) {
            self.key = key
            self.checkpointInterval = max(1, checkpointInterval)
        }
    }

    /// Appends `entry` inside `transaction`; with a `signer`, writes a signed checkpoint when the
    /// sequence number reaches a multiple of its interval or when `checkpoint` is true.
    ///
    /// - Throws: `auditLogTampered` if the head is missing or fails its tag while events exist: the log
    ///   refuses to grow on top of evidence of tampering (verify it, then restore the store from backup).
    @discardableResult
    public static func append(
        _ entry: AuditEntry,
        in transaction: StoreTransaction,
        signer: Signer?,
        checkpoint: Bool = false
    ) throws -> AuditEvent {
        do {
            return try appendUnchecked(entry, in: transaction, signer: signer, checkpoint: checkpoint)
        } catch is AuditLogTables.MissingTables {
            throw tablesMissing
        }
    }

    private static let tablesMissing = SharedDeviceError(
        .auditLogTampered,
        "part of the audit log's tables is missing (deleted); run `devicectl audit verify` and restore the store from backup"
    )

    private static func appendUnchecked(
        _ entry: AuditEntry,
        in transaction: StoreTransaction,
        signer: Signer?,
        checkpoint: Bool
    ) throws -> AuditEvent {
        let previous = try head(in: transaction, creatingTables: true)
        let sequence = (previous?.sequence ?? 0) + 1
        let time = transaction.now
        let entry = entry.withoutNULs
        let timeText = AuditTime.format(time)
        let details = encodeDetails(entry.details)
        let columns = AuditChain.Columns(
            sequence: sequence,
            time: timeText.utf8,
            type: entry.type.rawValue.utf8,
            actor: entry.actor.utf8,
            account: entry.account?.utf8,
            reason: entry.reason?.utf8,
            correlationID: entry.correlationID.utf8,
            details: details.utf8
        )
        let chain = try AuditChain.next(after: previous?.chain ?? AuditChain.genesis, columns)
        let tag = try transaction.integrityTag(
            AuditChain.headMessage(sequence: sequence, chain: chain),
            domain: AuditChain.headTagDomain
        )
        var signed: AuditLogTables.Checkpoint?
        if let signer, checkpoint || sequence % Int64(signer.checkpointInterval) == 0 {
            signed = try signedCheckpoint(sequence: sequence, chain: chain, signer: signer)
        }
        try transaction.auditLog.append(
            AuditLogTables.NewEvent(
                sequence: sequence,
                time: timeText,
                type: entry.type.rawValue,
                actor: entry.actor,
                account: entry.account,
                reason: entry.reason,
                correlationID: entry.correlationID,
                details: details,
                chain: chain
            ),
            head: AuditLogTables.Head(sequence: sequence, chain: chain, tag: tag),
            checkpoint: signed
        )
        return AuditEvent(
            sequence: sequence,
            time: AuditTime.parse(timeText) ?? time,
            recordedTime: timeText,
            type: entry.type,
            actor: entry.actor,
            account: entry.account,
            reason: entry.reason,
            correlationID: entry.correlationID,
            details: entry.details
        )
    }

    private static func signedCheckpoint(
        sequence: Int64,
        chain: Data,
        signer: Signer
    ) throws -> AuditLogTables.Checkpoint {
        let signature = try signer.key.signature(for: AuditChain.checkpointMessage(sequence: sequence, chain: chain))
        return AuditLogTables.Checkpoint(
            sequence: sequence,
            chain: chain,
            publicKey: signer.key.publicKey,
            signature: signature
        )
    }

    /// Signs a checkpoint at the current head (if it has none yet), e.g. before deprovisioning.
    public static func checkpoint(in transaction: StoreTransaction, signer: Signer) throws {
        do {
            guard let head = try head(in: transaction, creatingTables: false) else { return }
            try transaction.auditLog.setCheckpoint(
                signedCheckpoint(sequence: head.sequence, chain: head.chain, signer: signer)
            )
        } catch is AuditLogTables.MissingTables {
            throw tablesMissing
        }
    }

    /// The events matching `filter`, oldest first. An empty list when nothing was ever logged.
    public static func events(
        matching filter: AuditFilter = AuditFilter(),
        in transaction: StoreTransaction
    ) throws -> [AuditEvent] {
        var events: [AuditEvent] = []
        try transaction.auditLog.forEachEvent(
            after: filter.afterSequence,
            types: filter.types.map(\.rawValue).sorted(),
            account: filter.account
        ) { row in
            let timeText = String(decoding: row.time, as: UTF8.self)
            guard let time = AuditTime.parse(timeText) else {
                throw SharedDeviceError(
                    .auditLogTampered,
                    "audit event \(row.sequence) has an unreadable time; run `devicectl audit verify`"
                )
            }
            func text(_ bytes: Data) -> String { String(decoding: bytes, as: UTF8.self) }
            let event = AuditEvent(
                sequence: row.sequence,
                time: time,
                recordedTime: timeText,
                type: AuditEventType(text(row.type)),
                actor: text(row.actor),
                account: row.account.map(text),
                reason: row.reason.map(text),
                correlationID: text(row.correlationID),
                details: decodeDetails(text(row.details))
            )
            if filter.matches(event) { events.append(event) }
        }
        return events
    }

    /// The newest sequence number, 0 for an empty log.
    public static func lastSequence(in transaction: StoreTransaction) throws -> Int64 {
        try transaction.auditLog.lastSequence()
    }

    // MARK: - Internals

    struct Head {
        var sequence: Int64
        var chain: Data
    }

    /// The authenticated head, `nil` for a log with no events.
    static func head(in transaction: StoreTransaction, creatingTables: Bool) throws -> Head? {
        let tables = transaction.auditLog
        guard let record = try tables.head(creatingTables: creatingTables) else {
            if try tables.missingTables().isEmpty, try tables.eventCount() > 0 {
                throw SharedDeviceError(
                    .auditLogTampered,
                    "the audit log has events but no head record (tampered); run `devicectl audit verify` and restore the store from backup"
                )
            }
            return nil
        }
        let head = Head(sequence: record.sequence, chain: record.chain)
        let expected = try transaction.integrityTag(
            AuditChain.headMessage(sequence: head.sequence, chain: head.chain),
            domain: AuditChain.headTagDomain
        )
        guard expected == record.tag else {
            throw SharedDeviceError(
                .auditLogTampered,
                "the audit log's head record fails its integrity check (tampered); run `devicectl audit verify` and restore the store from backup"
            )
        }
        return head
    }

    static func encodeDetails(_ details: [String: String]) -> String {
        guard !details.isEmpty else { return "{}" }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(details)) ?? Data("{}".utf8), as: UTF8.self)
    }

    static func decodeDetails(_ text: String) -> [String: String] {
        guard text != "{}" else { return [:] }
        return (try? JSONDecoder().decode([String: String].self, from: Data(text.utf8))) ?? ["unreadable": text]
    }
}

extension AuditEntry {
    /// The entry with every NUL character replaced by U+FFFD: SQLite text bound from Swift stops at a
    /// NUL, so a NUL would make the stored event differ from the one hashed into the chain.
    var withoutNULs: AuditEntry {
        func hasNUL(_ text: String) -> Bool { text.utf8.contains(0) }
        guard
            hasNUL(actor) || account.map(hasNUL) == true || reason.map(hasNUL) == true || hasNUL(correlationID)
                || details.contains(where: { hasNUL($0.key) || hasNUL($0.value) })
        else { return self }
        func clean(_ text: String) -> String {
            hasNUL(text) ? text.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") : text
        }
        var copy = self
        copy.actor = clean(actor)
        copy.account = account.map(clean)
        copy.reason = reason.map(clean)
        copy.correlationID = clean(correlationID)
        copy.details = Dictionary(
            details.map { (clean($0.key), clean($0.value)) },
            uniquingKeysWith: { first, _ in first }
        )
        return copy
    }
}
