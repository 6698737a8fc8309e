import Foundation

/// The plaintext sealed in an item's ciphertext: every attribute, including the access group (re-checked
/// after decryption), and the secret. A compact length-prefixed binary encoding, version 1.
enum ItemPayload {
    static let version: UInt8 = 1

    static func encode(_ item: KeychainItem) -> Data {
        var writer = ByteWriter(capacity: 96 + item.secret.count + item.service.utf8.count + item.account.utf8.count)
        writer.byte(version)
        writer.string(item.metadata.accessGroup)
        writer.string(item.metadata.service)
        writer.string(item.metadata.account)
        writer.optionalString(item.metadata.label)
        writer.optionalUInt32(item.metadata.type)
        writer.optionalUInt32(item.metadata.creator)
        writer.optionalBytes(item.metadata.generic)
        writer.double(item.metadata.creationDate.timeIntervalSince1970)
        writer.double(item.metadata.modificationDate.timeIntervalSince1970)
        writer.bytes(item.secret)
        return writer.data
    }

    /// `nil` when the bytes are not a well-formed payload.
    static func decode(_ data: Data) -> KeychainItem? {
        var reader = ByteReader(data)
        guard reader.byte() == version,
              let group = reader.string(), let service = reader.string(), let account = reader.string(),
              let label = reader.optionalString(), let type = reader.optionalUInt32(),
              let creator = reader.optionalUInt32(), let generic = reader.optionalBytes(),
              let created = reader.double(), let modified = reader.double(),
              let secret = reader.bytes(), reader.isAtEnd
        else { return nil }
        let metadata = ItemMetadata(
            accessGroup: group, service: service, account: account, type: type, generic: generic, label: label,
            creator: creator, creationDate: Date(timeIntervalSince1970: created),
            modificationDate: Date(timeIntervalSince1970: modified))
        return KeychainItem(metadata: metadata, secret: secret)
    }
}

/// Appends little-endian fields; optionals carry a presence byte.
struct ByteWriter {
    private(set) var data: Data

    init(capacity: Int) { data = Data(capacity: capacity) }

    mutating func byte(_ value: UInt8) { data.append(value) }
    mutating func uint32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) } }
    mutating func double(_ value: Double) { withUnsafeBytes(of: value.bitPattern.littleEndian) { data.append(contentsOf: $0) } }
    mutating func bytes(_ value: Data) { uint32(UInt32(value.count)); data.append(value) }
    mutating func string(_ value: String) { bytes(Data(value.utf8)) }
    mutating func optionalString(_ value: String?) { optional(value) { $0.string($1) } }
    mutating func optionalBytes(_ value: Data?) { optional(value) { $0.bytes($1) } }
    mutating func optionalUInt32(_ value: UInt32?) { optional(value) { $0.uint32($1) } }

    private mutating func optional<T>(_ value: T?, _ write: (inout ByteWriter, T) -> Void) {
        guard let value else { return byte(0) }
        byte(1)
        write(&self, value)
    }
}

/// Reads what `ByteWriter` wrote; every accessor returns `nil` past the end (never traps).
struct ByteReader {
    private let data: Data
    private var offset: Int

    init(_ data: Data) {
        self.data = data
        offset = data.startIndex
    }

    var isAtEnd: Bool { offset == data.endIndex }

    mutating func byte() -> UInt8? {
        guard offset < data.endIndex else { return nil }
        defer { offset += 1 }
        return data[offset]
    }

    mutating func uint32() -> UInt32? { fixed(4).map { UInt32(littleEndian: $0.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }) } }
    mutating func double() -> Double? {
        fixed(8).map { Double(bitPattern: UInt64(littleEndian: $0.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) })) }
    }
    mutating func bytes() -> Data? { uint32().flatMap { fixed(Int($0)) } }
    mutating func string() -> String? { bytes().flatMap { String(data: $0, encoding: .utf8) } }
    /// `.some(nil)` for an absent value, `nil` for malformed input.
    mutating func optionalString() -> String?? { optional { $0.string() } }
    mutating func optionalBytes() -> Data?? { optional { $0.bytes() } }
    mutating func optionalUInt32() -> UInt32?? { optional { $0.uint32() } }

    private mutating func optional<T>(_ read: (inout ByteReader) -> T?) -> T?? {
        switch byte() {
        case 0: return .some(nil)
        case 1: return read(&self).map { .some($0) }
        default: return nil
        }
    }

    private mutating func fixed(_ count: Int) -> Data? {
        guard count >= 0, data.endIndex - offset >= count else { return nil }
        defer { offset += count }
        return data.subdata(in: offset..<offset + count)
    }
}
