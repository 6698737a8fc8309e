// The data of the point-read benchmarks: an encrypted store and a plain table holding the same items.
import BenchmarkFixtures
import Foundation
import KeychainStore

/// 10,000 items with 2,048-byte random secrets, in an encrypted `KeychainStore` (synchronous NORMAL), in a
/// `PlainTable` (GRDB), and in two C baselines (`CTable`: SQLCipher, and the system SQLite from C), each
/// populated one transaction per item; every item is read back once through all four before any timing (warm
/// cache, checked contents). Keys come from a seeded generator, so runs read the same keys.
final class ReadFixture {
    static let itemCount = 10_000
    static let secretBytes = 2048
    /// Reads per path in a round of the interleaved benchmark.
    static let roundLength = 100

    let group = AccessGroup.adalCache
    let app: AppIdentity
    private let scratch: ScratchDirectory
    private let store: KeychainStore
    private let plain: PlainTable
    private let sqlcipher: CTable
    private let floor: CTable
    private let services: [String]
    private let accounts: [String]
    private var keys = SplitMix64(seed: 0x5EED_CAFE)

    init() throws {
        scratch = try ScratchDirectory("store-benchmarks")
        app = try AppIdentity(appID: "com.contoso.store-benchmarks", accessGroups: [group])
        services = (0..<Self.itemCount).map { "svc-\($0)" }
        accounts = (0..<Self.itemCount).map { "acct-\($0)" }
        var generator = SplitMix64(seed: 0xC0FF_EE00)
        let secrets = (0..<Self.itemCount).map { _ in generator.bytes(Self.secretBytes) }

        store = try KeychainStore(
            directory: scratch.url.appendingPathComponent("encrypted"),
            options: StoreOptions(synchronous: .normal)
        )
        plain = try PlainTable(path: scratch.url.appendingPathComponent("plain.sqlite").path, synchronous: .normal)
        sqlcipher = try CTable(.sqlcipher, path: scratch.url.appendingPathComponent("sqlcipher.sqlite").path)
        floor = try CTable(.plain, path: scratch.url.appendingPathComponent("floor.sqlite").path)
        for index in 0..<Self.itemCount {
            _ = try store.add(
                NewItem(accessGroup: group, service: services[index], account: accounts[index], secret: secrets[index]),
                as: app
            )
            try plain.insert(group: group, service: services[index], account: accounts[index], secret: secrets[index])
            try sqlcipher.insert(
                group: group,
                service: services[index],
                account: accounts[index],
                secret: secrets[index]
            )
            try floor.insert(group: group, service: services[index], account: accounts[index], secret: secrets[index])
        }
        for index in 0..<Self.itemCount {
            guard try readEncrypted(index) == secrets[index], try readPlain(index) == secrets[index],
                sqlcipher.lastSecret(size: try readSQLCipher(index)) == secrets[index],
                floor.lastSecret(size: try readFloor(index)) == secrets[index]
            else {
                throw BenchmarkFailure("item \(index) came back different")
            }
        }
    }

    /// The next key of the seeded random sequence.
    func nextKey() -> Int { Int.random(in: 0..<Self.itemCount, using: &keys) }

    /// `KeychainStore.find` of item `index` by group, service and account: blind indexes, SELECT, AEAD open.
    func readEncrypted(_ index: Int) throws -> Data {
        try store.find(ItemQuery(accessGroup: group, service: services[index], account: accounts[index]), as: app)
            .secret
    }

    /// The plain table's SELECT of item `index`, on the store's access path.
    func readPlain(_ index: Int) throws -> Data {
        try plain.secret(group: group, service: services[index], account: accounts[index])
    }

    /// SQLCipher's read of item `index` (page decryption in C), into a reused buffer.
    @discardableResult
    func readSQLCipher(_ index: Int) throws -> Int {
        try sqlcipher.read(group: group, service: services[index], account: accounts[index])
    }

    /// The floor: the same SELECT through the sqlite3 C API on the system SQLite, into a reused buffer.
    @discardableResult
    func readFloor(_ index: Int) throws -> Int {
        try floor.read(group: group, service: services[index], account: accounts[index])
    }

    /// Removes the files.
    func remove() { scratch.remove() }
}
