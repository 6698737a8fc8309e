public import Foundation
public import KeychainStore

/// The outcome of `AuditLog.verify`: what was checked and every problem found, first bad event first.
public struct AuditVerification: Sendable, Encodable {
    /// One finding. `sequence` is the first event it concerns (`nil` for the head or the log as a whole).
    public struct Problem: Sendable, Encodable, Equatable, CustomStringConvertible {
        public let sequence: Int64?
        public let message: String
        public var description: String { sequence.map { "event \($0): \(message)" } ?? message }
    }

    /// Events read.
    public var eventCount = 0
    /// Signed checkpoints whose signature and chain value were checked.
    public var checkpointCount = 0
    /// The head's sequence number (the newest event the log vouches for).
    public var headSequence: Int64 = 0
    /// The head's chain value in hex: a fingerprint of the whole log to compare with an exported copy.
    public var headChain = ""
    /// Everything wrong, in log order.
    public var problems: [Problem] = []

    /// Whether nothing was found.
    public var isIntact: Bool { problems.isEmpty }
    /// The first event that is missing, altered or out of place.
    public var firstBadSequence: Int64? { problems.compactMap(\.sequence).min() }

    mutating func report(_ sequence: Int64?, _ message: String) {
        problems.append(Problem(sequence: sequence, message: message))
    }
}

extension AuditLog {
    /// Checks the whole log: sequence numbers without gaps, every event's chain value, every checkpoint's
    /// signature (by one of `trustedKeys`, when given) and chain value, and the head's tag, sequence and chain.
    ///
    /// - Parameters:
    ///   - trustedKeys: the device's audit public keys as recorded in the store; `nil` accepts any key
    ///     whose signature verifies (then compare `headChain` with a copy kept elsewhere).
    ///   - expectsEvents: whether the device records say a log exists, so that an empty log or a missing
    ///     head is itself tampering.
    public static func verify(
        in transaction: StoreTransaction,
        trustedKeys: Set<Data>?,
        expectsEvents: Bool
    ) throws -> AuditVerification {
        var result = AuditVerification()
        let tables = transaction.auditLog
        let missingTables = try tables.missingTables()
        if missingTables.count == AuditLogTables.tableNames.count {
            if expectsEvents { result.report(nil, "the audit log's tables are missing (deleted)") }
            return result
        }
        if !missingTables.isEmpty {
            result.report(
                nil,
                "the audit log's table(s) \(missingTables.joined(separator: ", ")) are missing (deleted)"
            )
            return result
        }
        // The head.
        var head: Head?
        var headRecordExists = false
        if let record = try tables.head(creatingTables: false) {
            headRecordExists = true
            let candidate = Head(sequence: record.sequence, chain: record.chain)
            let expected = try transaction.integrityTag(
                AuditChain.headMessage(sequence: candidate.sequence, chain: candidate.chain),
                domain: AuditChain.headTagDomain
            )
            if expected == record.tag {
                head = candidate
                result.headSequence = candidate.sequence
                result.headChain = Hex.encode(candidate.chain)
            } else {
                result.report(nil, "the head record fails its integrity check (edited)")
            }
        }
        // Checkpoints.
        var checkpoints: [Int64: Data] = [:]
        for checkpoint in try tables.checkpoints() {
            let sequence = checkpoint.sequence
            let chain = checkpoint.chain
            if let trustedKeys, !trustedKeys.contains(checkpoint.publicKey) {
                result.report(sequence, "the checkpoint is signed by a key this device never had")
            } else if !SigningKey.isValidSignature(
                checkpoint.signature,
                of: AuditChain.checkpointMessage(sequence: sequence, chain: chain),
                publicKey: checkpoint.publicKey
            ) {
                result.report(sequence, "the checkpoint's signature is invalid (edited)")
            } else {
                checkpoints[sequence] = chain
            }
        }
        // Events, in order.
        var expectedSequence: Int64 = 1
        var previousChain = AuditChain.genesis
        var lastVouched: Int64 = 0
        var lastChain = AuditChain.genesis
        var brokenSinceVouched = false
        try tables.forEachEvent { row in
            result.eventCount += 1
            let sequence = row.sequence
            if sequence != expectedSequence {
                let missing =
                    sequence - 1 == expectedSequence
                    ? "event \(expectedSequence) is" : "events \(expectedSequence)-\(sequence - 1) are"
                result.report(expectedSequence, "\(missing) missing (deleted)")
                brokenSinceVouched = true
                previousChain = Data()  // nothing can chain across the gap
            }
            let columns = AuditChain.Columns(
                sequence: sequence,
                time: row.time,
                type: row.type,
                actor: row.actor,
                account: row.account,
                reason: row.reason,
                correlationID: row.correlationID,
                details: row.details
            )
            let computed = try AuditChain.next(after: previousChain, columns)
            if computed != row.chain, sequence == expectedSequence {
                result.report(sequence, "its content or position does not match its chain value (edited or reordered)")
                brokenSinceVouched = true
            }
            if let signed = checkpoints[sequence] {
                result.checkpointCount += 1
                if signed != computed && !brokenSinceVouched {
                    result.report(
                        lastVouched + 1,
                        "events \(lastVouched + 1)-\(sequence) do not match the checkpoint signed at event \(sequence) (edited and re-chained)"
                    )
                }
                lastVouched = sequence
                brokenSinceVouched = false
            }
            previousChain = row.chain
            lastChain = computed
            expectedSequence = sequence + 1
        }
        let lastSequence = expectedSequence - 1
        for sequence in checkpoints.keys.sorted() where sequence > lastSequence {
            result.report(
                lastSequence + 1,
                "a checkpoint was signed at event \(sequence), which is missing (truncated)"
            )
            break
        }
        // The head against the newest event.
        if let head {
            if head.sequence > lastSequence {
                let missing =
                    head.sequence == lastSequence + 1
                    ? "event \(head.sequence) is" : "events \(lastSequence + 1)-\(head.sequence) are"
                result.report(lastSequence + 1, "\(missing) missing: the log was truncated")
            } else if head.sequence < lastSequence {
                result.report(
                    head.sequence + 1,
                    "events \(head.sequence + 1)-\(lastSequence) were added outside devicectl (not covered by the head)"
                )
            } else if head.chain != lastChain && !brokenSinceVouched {
                result.report(
                    lastVouched + 1,
                    "events \(lastVouched + 1)-\(lastSequence) do not match the head's chain value (edited and re-chained)"
                )
            }
        } else if !headRecordExists && (lastSequence > 0 || expectsEvents) {
            result.report(nil, "the head record is missing (deleted)")
        }
        result.problems.sort { ($0.sequence ?? .max) < ($1.sequence ?? .max) }
        return result
    }
}
