import Foundation
import KeychainStore

/// How an event is hashed into the chain, and how checkpoints and the head are signed or tagged.
/// The encoding uses the stored column text, so verification never re-formats anything.
enum AuditChain {
    /// The chain value before the first event.
    static let genesis = Data(count: ChainHash.byteCount)

    /// The stored columns of one event, as hashed: the exact bytes SQLite holds (a text column is read
    /// as its bytes, so a NUL inside a field is hashed too rather than cutting the field short).
    struct Columns {
        var sequence: Int64
        var time: Data
        var type: Data
        var actor: Data
        var account: Data?
        var reason: Data?
        var correlationID: Data
        var details: Data

        init(sequence: Int64, time: Data, type: Data, actor: Data, account: Data?, reason: Data?, correlationID: Data, details: Data) {
            self.sequence = sequence
            self.time = time
            self.type = type
            self.actor = actor
            self.account = account
            self.reason = reason
            self.correlationID = correlationID
            self.details = details
        }

        init(sequence: Int64, time: String, type: String, actor: String, account: String?, reason: String?,
             correlationID: String, details: String) {
            self.init(sequence: sequence, time: Data(time.utf8), type: Data(type.utf8), actor: Data(actor.utf8),
                      account: account.map { Data($0.utf8) }, reason: reason.map { Data($0.utf8) },
                      correlationID: Data(correlationID.utf8), details: Data(details.utf8))
        }
    }

    /// `BLAKE2b-256(previous || sequence (8 bytes BE) || each field as length (4 bytes BE) + bytes, with a
    /// presence byte before the optional ones)`.
    static func next(after previous: Data, _ columns: Columns) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        append(UInt64(bitPattern: columns.sequence), to: &bytes)
        field(columns.time, &bytes)
        field(columns.type, &bytes)
        field(columns.actor, &bytes)
        optionalField(columns.account, &bytes)
        optionalField(columns.reason, &bytes)
        field(columns.correlationID, &bytes)
        field(columns.details, &bytes)
        return ChainHash.next(previous: previous, message: bytes)
    }

    /// What a checkpoint signs: a domain label, the sequence number and the chain value.
    static func checkpointMessage(sequence: Int64, chain: Data) -> Data {
        var bytes = Array("devicectl audit checkpoint v1".utf8)
        append(UInt64(bitPattern: sequence), to: &bytes)
        return Data(bytes) + chain
    }

    /// What the head's integrity tag covers.
    static func headMessage(sequence: Int64, chain: Data) -> Data {
        var bytes = Array("devicectl audit head v1".utf8)
        append(UInt64(bitPattern: sequence), to: &bytes)
        return Data(bytes) + chain
    }

    /// Domain byte of the head tag within the store's integrity key.
    static let headTagDomain: UInt8 = 1

    private static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    private static func field(_ value: Data, _ bytes: inout [UInt8]) {
        let count = UInt32(value.count)
        for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: count >> UInt32(shift))) }
        bytes.append(contentsOf: value)
    }

    private static func optionalField(_ text: Data?, _ bytes: inout [UInt8]) {
        if let text {
            bytes.append(1)
            field(text, &bytes)
        } else {
            bytes.append(0)
        }
    }
}
