import Foundation

/// The plaintext sealed in an item's ciphertext: every attribute, including the access group (re-checked
/// after decryption), and the secret. A compact length-prefixed binary encoding, version 1.
enum ItemPayload {
    static let version: UInt8 = 1

    /// The exact length of `item`'s payload.
    static func encodedByteCount(_ item: KeychainItem) -> Int {
        let metadata = item.metadata
        func field(_ count: Int) -> Int { 4 + count }
        func optionalField(_ count: Int?) -> Int { 1 + (count.map(field) ?? 0) }
        return 1 + field(metadata.accessGroup.utf8.count) + field(metadata.service.utf8.count)
            + field(metadata.account.utf8.count)
            + optionalField(metadata.label?.utf8.count) + 1 + (metadata.type == nil ? 0 : 4) + 1
            + (metadata.creator == nil ? 0 : 4)
            + optionalField(metadata.generic?.count) + 8 + 8 + field(item.secret.count)
    }

    /// Writes `item`'s payload to `output`, which is exactly `encodedByteCount(item)` long.
    static func encode(_ item: KeychainItem, into output: UnsafeMutableRawBufferPointer) {
        var writer = ByteWriter(output)
        writer.byte(version)
        writer.string(item.metadata.accessGroup)
        writer.string(item.metadata.service)
        writer.string(item.metadata.account)
        writer.optional(item.metadata.label) { $0.string($1) }
        writer.optional(item.metadata.type) { $0.uint32($1) }
        writer.optional(item.metadata.creator) { $0.uint32($1) }
        writer.optional(item.metadata.generic) { $0.bytes($1) }
        writer.double(item.metadata.creationDate.timeIntervalSince1970)
        writer.double(item.metadata.modificationDate.timeIntervalSince1970)
        writer.bytes(item.secret)
        precondition(writer.isAtEnd, "ItemPayload.encodedByteCount disagrees with encode")
    }

    /// Strings a decoded payload most likely holds (the group, service and account a point read asked for):
    /// a field with the same bytes becomes that string instead of a new one.
    struct KnownStrings {
        var group: String
        var service: String
        var account: String
    }

    /// Decodes in one pass over `bytes` (the plaintext where it was decrypted): the secret is the only copy
    /// made besides the attribute strings that are not `known`. `nil` when malformed.
    static func decode(_ bytes: UnsafeRawBufferPointer, known: KnownStrings? = nil) -> KeychainItem? {
        var reader = ByteReader(bytes)
        guard reader.byte() == version,
            let group = reader.string(known: known), let service = reader.string(known: known),
            let account = reader.string(known: known),
            let label = reader.optional({ $0.string(known: known) }), let type = reader.optional({ $0.uint32() }),
            let creator = reader.optional({ $0.uint32() }), let generic = reader.optional({ $0.data() }),
            let created = reader.double(), let modified = reader.double(),
            let secret = reader.data(), reader.isAtEnd
        else { return nil }
        let metadata = ItemMetadata(
            accessGroup: group,
            service: service,
            account: account,
            type: type,
            generic: generic,
            label: label,
            creator: creator,
            creationDate: Date(timeIntervalSince1970: created),
            modificationDate: Date(timeIntervalSince1970: modified)
        )
        return KeychainItem(metadata: metadata, secret: secret)
    }
}

/// Writes little-endian fields into a buffer sized beforehand; optionals carry a presence byte.
struct ByteWriter {
    private let output: UnsafeMutableRawBufferPointer
    private var offset = 0

    init(_ output: UnsafeMutableRawBufferPointer) { self.output = output }

    var isAtEnd: Bool { offset == output.count }

    mutating func byte(_ value: UInt8) {
        output[offset] = value
        offset += 1
    }

    mutating func uint32(_ value: UInt32) { raw(of: value.littleEndian) }
    mutating func double(_ value: Double) { raw(of: value.bitPattern.littleEndian) }
    mutating func bytes(_ value: Data) { value.withUnsafeBytes { field($0) } }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { field(UnsafeRawBufferPointer($0)) }
    }

    mutating func optional<T>(_ value: T?, _ write: (inout ByteWriter, T) -> Void) {
        guard let value else { return byte(0) }
        byte(1)
        write(&self, value)
    }

    private mutating func field(_ bytes: UnsafeRawBufferPointer) {
        uint32(UInt32(bytes.count))
        guard !bytes.isEmpty else { return }
        UnsafeMutableRawBufferPointer(rebasing: output[offset..<offset + bytes.count]).copyMemory(from: bytes)
        offset += bytes.count
    }

    private mutating func raw<T>(of value: T) {
        withUnsafeBytes(of: value) { bytes in
            UnsafeMutableRawBufferPointer(rebasing: output[offset..<offset + bytes.count]).copyMemory(from: bytes)
            offset += bytes.count
        }
    }
}

/// Reads what `ByteWriter` wrote, in place; every accessor returns `nil` past the end (never traps).
struct ByteReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func uint32() -> UInt32? { fixed(4).map { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) } }
    mutating func double() -> Double? {
        fixed(8).map { Double(bitPattern: UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self))) }
    }
    /// A length-prefixed field, as a view into the buffer.
    mutating func field() -> UnsafeRawBufferPointer? { uint32().flatMap { fixed(Int($0)) } }
    /// A length-prefixed field copied out.
    mutating func data() -> Data? { field().map { Data($0) } }

    /// A length-prefixed UTF-8 string: one of `known` when it has the same bytes, else a new, validated one.
    mutating func string(known: ItemPayload.KnownStrings? = nil) -> String? {
        guard let field = field() else { return nil }
        if let known {
            if Self.utf8(of: known.group, equals: field) { return known.group }
            if Self.utf8(of: known.service, equals: field) { return known.service }
            if Self.utf8(of: known.account, equals: field) { return known.account }
        }
        return String(validating: field, as: UTF8.self)
    }

    /// `.some(nil)` for an absent value (presence byte 0), `nil` for malformed input.
    mutating func optional<T>(_ read: (inout ByteReader) -> T?) -> T?? {
        switch byte() {
        case 0: return .some(nil)
        case 1: return read(&self).map { .some($0) }
        default: return nil
        }
    }

    private mutating func fixed(_ count: Int) -> UnsafeRawBufferPointer? {
        guard count >= 0, bytes.count - offset >= count else { return nil }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    private static func utf8(of string: String, equals bytes: UnsafeRawBufferPointer) -> Bool {
        var string = string
        return string.withUTF8 { utf8 in
            utf8.count == bytes.count
                && (utf8.isEmpty || memcmp(utf8.baseAddress!, bytes.baseAddress!, utf8.count) == 0)
        }
    }
}
