import Foundation
import Synchronization

/// Keyed BLAKE2b blind indexes for the lookup columns, so the database holds no cleartext group, service,
/// account, label or type. Each value is hashed together with its group name, so equal services in two
/// groups have unrelated indexes.
struct BlindIndexer: Sendable {
    private enum Domain: UInt8 {
        case group = 1, service, account, label, type
    }

    let key: SecureKey
    /// Group indexes by group name, for the indexer's lifetime (a store has a handful of groups).
    private let groups = GroupIndexCache()

    init(key: SecureKey) {
        self.key = key
    }

    func group(_ name: String) throws(KeychainError) -> Data {
        if let index = groups.index(of: name) { return index }
        let index = try KeyedHash.hash(Array(name.utf8), domain: Domain.group.rawValue, key: key)
        groups.keep(index, for: name)
        return index
    }

    func service(_ value: String, group: String) throws(KeychainError) -> Data { try scoped(value.utf8, .service, group) }
    func account(_ value: String, group: String) throws(KeychainError) -> Data { try scoped(value.utf8, .account, group) }
    func label(_ value: String, group: String) throws(KeychainError) -> Data { try scoped(value.utf8, .label, group) }
    func type(_ value: UInt32, group: String) throws(KeychainError) -> Data {
        try scoped(withUnsafeBytes(of: value.littleEndian) { Array($0) }, .type, group)
    }

    private func scoped(_ value: some Sequence<UInt8>, _ domain: Domain, _ group: String) throws(KeychainError) -> Data {
        var input: [UInt8] = []
        input.reserveCapacity(group.utf8.count + 64)
        withUnsafeBytes(of: UInt32(group.utf8.count).littleEndian) { input.append(contentsOf: $0) }
        input.append(contentsOf: group.utf8)
        input.append(contentsOf: value)
        return try KeyedHash.hash(input, domain: domain.rawValue, key: key)
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
            type: type)
    }

    /// `"kcitem" || format || each column length-prefixed (0xFF for NULL)`.
    func additionalData(format: Int) -> [UInt8] {
        var bytes: [UInt8] = Array("kcitem".utf8)
        bytes.reserveCapacity(96)
        bytes.append(UInt8(truncatingIfNeeded: format))
        for column in [group, service, account, label, type] {
            if let column {
                bytes.append(UInt8(column.count))
                bytes.append(contentsOf: column)
            } else {
                bytes.append(0xFF)
            }
        }
        return bytes
    }
}
