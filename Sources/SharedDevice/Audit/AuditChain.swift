import Foundation
import KeychainStore

/// How an event is hashed into the chain, and how checkpoints and the head are signed or tagged.
/// The encoding uses the stored column text, so verification never re-formats anything.
enum AuditChain {
    /// The chain value before the first event.
    static let genesis = Data(count: ChainHash.byteCount)

    /// The stored columns of one event, as hashed: the exact bytes SQLite holds (verification reads a
    /// text column as its bytes, so a NUL inside a field is hashed too rather than cutting the field short).
    /// Appends hash the strings' UTF-8 views directly, without copying them.
    struct Columns<Bytes: Collection<UInt8>> {
        var sequence: Int64
        var time: Bytes
        var type: Bytes
        var actor: Bytes
        var account: Bytes?
        var reason: Bytes?
        var correlationID: Bytes
        var details: Bytes
    }

    /// `BLAKE2b-256(previous || sequence (8 bytes BE) || each field as length (4 bytes BE) + bytes, with a
    /// presence byte before the optional ones)`.
    static func next<Bytes>(after previous: Data, _ columns: Columns<Bytes>) throws(KeychainError) -> Data {
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
        return try ChainHash.next(previous: previous, message: bytes)
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
        for shift in stride(from: 56, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }

    private static func field(_ value: some Collection<UInt8>, _ bytes: inout [UInt8]) {
        let count = UInt32(value.count)
        for shift in stride(from: 24, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: count >> UInt32(shift)))
        }
        bytes.append(contentsOf: value)
    }

    private static func optionalField(_ text: (some Collection<UInt8>)?, _ bytes: inout [UInt8]) {
        if let text {
            bytes.append(1)
            field(text, &bytes)
        } else {
            bytes.append(0)
        }
    }
}
