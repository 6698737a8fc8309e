import Foundation
import Synchronization

/// Keyed BLAKE2b blind indexes for the lookup columns, so the database holds no cleartext group, service,
/// account, label or type. Each value is hashed together with its group name, so equal services in two
/// groups have unrelated indexes.
struct BlindIndexer: Sendable {
    private enum Domain: UInt8 {
        case group = 1
        case service, account, label, type, owner
    }

    let key: SecureKey
    /// Group indexes by group name, for the indexer's lifetime (a store has a handful of groups).
    private let groups = GroupIndexCache()

    init(key: SecureKey) {
        self.key = key
    }

    /// The blind index of the app that added an item (for its quota): not scoped to a group.
    func owner(_ appID: String) throws(KeychainError) -> Data {
        try KeyedHash.hash(Array(appID.utf8), domain: Domain.owner.rawValue, key: key)
    }

    func group(_ name: String) throws(KeychainError) -> Data {
        if let index = groups.index(of: name) { return index }
        let index = try KeyedHash.hash(Array(name.utf8), domain: Domain.group.rawValue, key: key)
        groups.keep(index, for: name)
        return index
    }

    func service(_ value: String, group: String) throws(KeychainError) -> Data { try scoped(value, .service, group) }
    func account(_ value: String, group: String) throws(KeychainError) -> Data { try scoped(value, .account, group) }
    func label(_ value: String, group: String) throws(KeychainError) -> Data { try scoped(value, .label, group) }
    func type(_ value: UInt32, group: String) throws(KeychainError) -> Data {
        try scoped(withUnsafeBytes(of: value.littleEndian) { Array($0) }, .type, group)
    }

    /// The service index of `value` in `group` written to `output` (16 bytes), without allocating.
    func service(_ value: String, group: String, into output: UnsafeMutableRawBufferPointer) throws(KeychainError) {
        try scoped(value, .service, group, into: output)
    }

    /// The account index of `value` in `group` written to `output` (16 bytes), without allocating.
    func account(_ value: String, group: String, into output: UnsafeMutableRawBufferPointer) throws(KeychainError) {
        try scoped(value, .account, group, into: output)
    }

    private func scoped(_ value: String, _ domain: Domain, _ group: String) throws(KeychainError) -> Data {
        var index = Data(count: KeyedHash.indexByteCount)
        let status = index.withUnsafeMutableBytes { output in scopedStatus(value.utf8, domain, group, into: output) }
        try Sodium.check(status, "crypto_generichash")
        return index
    }

    private func scoped(_ value: [UInt8], _ domain: Domain, _ group: String) throws(KeychainError) -> Data {
        var index = Data(count: KeyedHash.indexByteCount)
        let status = index.withUnsafeMutableBytes { output in scopedStatus(value, domain, group, into: output) }
        try Sodium.check(status, "crypto_generichash")
        return index
    }

    private func scoped(
        _ value: String,
        _ domain: Domain,
        _ group: String,
        into output: UnsafeMutableRawBufferPointer
    ) throws(KeychainError) {
        try Sodium.check(scopedStatus(value.utf8, domain, group, into: output), "crypto_generichash")
    }

    /// `BLAKE2b(key, domain || u32le(len(group)) || group || value)`: the value scoped to its group.
    private func scopedStatus(
        _ value: some Collection<UInt8>,
        _ domain: Domain,
        _ group: String,
        into output: UnsafeMutableRawBufferPointer
    ) -> Int32 {
        let groupBytes = group.utf8
        return KeyedHash.hash(
            domain: domain.rawValue,
            key: key,
            into: output,
            messageByteCount: 4 + groupBytes.count + value.count
        ) { message in
            withUnsafeBytes(of: UInt32(groupBytes.count).littleEndian) { message.copyMemory(from: $0) }
            let valueStart = Self.copy(groupBytes, to: message, at: 4)
            _ = Self.copy(value, to: message, at: valueStart)
        }
    }

    /// Copies `bytes` into `buffer` at `offset` (one memcpy for contiguous storage, as native strings have);
    /// returns the offset after them.
    private static func copy(
        _ bytes: some Collection<UInt8>,
        to buffer: UnsafeMutableRawBufferPointer,
        at offset: Int
    ) -> Int {
        let target = UnsafeMutableRawBufferPointer(rebasing: buffer[offset..<offset + bytes.count])
        if bytes.withContiguousStorageIfAvailable({ target.copyMemory(from: UnsafeRawBufferPointer($0)) }) == nil {
            target.copyBytes(from: bytes)
        }
        return offset + bytes.count
    }
}

/// Group name → group blind index, computed once per name (bounded: cleared past 1,024 names).
private final class GroupIndexCache: Sendable {
    private let indexes = Mutex<[String: Data]>([:])

    func index(of name: String) -> Data? { indexes.withLock { $0[name] } }

    func keep(_ index: Data, for name: String) {
        indexes.withLock { indexes in
            if indexes.count >= 1024 { indexes.removeAll() }
            indexes[name] = index
        }
    }
}

/// The lookup columns of one item row. They are also the additional data of the row's ciphertext,
/// so editing any of them, or moving the ciphertext to another row, fails authentication.
struct RowIndexes: Equatable {
    var group: Data
    var service: Data
    var account: Data
    var label: Data?
    var type: Data?

    init(group: Data, service: Data, account: Data, label: Data?, type: Data?) {
        self.group = group
        self.service = service
        self.account = account
        self.label = label
        self.type = type
    }

    init(of metadata: ItemMetadata, groupIndex: Data, indexer: BlindIndexer) throws(KeychainError) {
        let group = metadata.accessGroup
        let label: Data? = if let value = metadata.label { try indexer.label(value, group: group) } else { nil }
        let type: Data? = if let value = metadata.type { try indexer.type(value, group: group) } else { nil }
        self.init(
            group: groupIndex,
            service: try indexer.service(metadata.service, group: group),
            account: try indexer.account(metadata.account, group: group),
            label: label,
            type: type
        )
    }

    /// `"kcitem" || format || each column length-prefixed (0xFF for NULL)`.
    func additionalData(format: Int) -> [UInt8] {
        group.withUnsafeBytes { group in
            service.withUnsafeBytes { service in
                account.withUnsafeBytes { account in
                    Self.withOptionalBytes(label) { label in
                        Self.withOptionalBytes(type) { type in
                            [UInt8](unsafeUninitializedCapacity: Self.maximumAdditionalDataByteCount) { buffer, count in
                                count = Self.writeAdditionalData(
                                    format: format,
                                    group: group,
                                    service: service,
                                    account: account,
                                    label: label,
                                    type: type,
                                    into: UnsafeMutableRawBufferPointer(buffer)
                                )
                            }
                        }
                    }
                }
            }
        }
    }

    /// The most bytes `writeAdditionalData` writes (every column present and 255 bytes long).
    static let maximumAdditionalDataByteCount = 7 + 5 * 256

    /// Writes the additional data of a row whose columns are the given bytes (`nil` for NULL) to `output`,
    /// which holds at least `maximumAdditionalDataByteCount` bytes; returns how many it wrote. Columns
    /// longer than 255 bytes (only a tampered row has them) are cut to 255: that row then fails authentication.
    static func writeAdditionalData(
        format: Int,
        group: UnsafeRawBufferPointer,
        service: UnsafeRawBufferPointer,
        account: UnsafeRawBufferPointer,
        label: UnsafeRawBufferPointer?,
        type: UnsafeRawBufferPointer?,
        into output: UnsafeMutableRawBufferPointer
    ) -> Int {
        var offset = 0
        func append(_ column: UnsafeRawBufferPointer?) {
            guard let column else {
                output[offset] = 0xFF
                offset += 1
                return
            }
            let count = min(column.count, 255)
            output[offset] = UInt8(count)
            offset += 1
            if count > 0 {
                UnsafeMutableRawBufferPointer(rebasing: output[offset..<offset + count])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: column[..<count]))
            }
            offset += count
        }
        for byte in "kcitem".utf8 {
            output[offset] = byte
            offset += 1
        }
        output[offset] = UInt8(truncatingIfNeeded: format)
        offset += 1
        append(group)
        append(service)
        append(account)
        append(label)
        append(type)
        return offset
    }

    private static func withOptionalBytes<R>(_ data: Data?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
        guard let data else { return body(nil) }
        return data.withUnsafeBytes { body($0) }
    }
}
