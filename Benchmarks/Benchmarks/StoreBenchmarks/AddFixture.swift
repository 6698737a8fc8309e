// The data of the add benchmarks: a fresh store and a supply of new items.
import BenchmarkFixtures
import Foundation
import KeychainStore

/// A fresh encrypted store with the given `synchronous` setting; its access group's key is made by an
/// untimed first add, so the timed adds only write items (2,048-byte random secrets, new keys each time).
final class AddFixture {
    private let scratch: ScratchDirectory
    private let store: KeychainStore
    private let app: AppIdentity
    private let secrets: [Data]
    private var count = 0
    /// SQLCipher and the C floor, for the interleaved add (synchronous NORMAL).
    private let sqlcipher: CTable?
    private let floor: CTable?

    init(synchronous: StoreOptions.Synchronous, baselines: Bool = false) throws {
        scratch = try ScratchDirectory("store-benchmarks-adds")
        app = try AppIdentity(appID: "com.contoso.store-benchmarks", accessGroups: [AccessGroup.adalCache])
        var generator = SplitMix64(seed: 0xADD5)
        secrets = (0..<64).map { _ in generator.bytes(ReadFixture.secretBytes) }
        store = try KeychainStore(directory: scratch.url, options: StoreOptions(synchronous: synchronous))
        _ = try store.add(
            NewItem(accessGroup: AccessGroup.adalCache, service: "warm-up", account: "warm-up", secret: secrets[0]),
            as: app
        )
        sqlcipher =
            baselines ? try CTable(.sqlcipher, path: scratch.url.appendingPathComponent("sqlcipher.sqlite").path) : nil
        floor = baselines ? try CTable(.plain, path: scratch.url.appendingPathComponent("floor.sqlite").path) : nil
    }

    /// SQLCipher's insert of `item` in its own transaction.
    func insertSQLCipher(_ item: NewItem) throws {
        try sqlcipher?.insert(
            group: item.accessGroup ?? AccessGroup.adalCache,
            service: item.service,
            account: item.account,
            secret: item.secret
        )
    }

    /// The C floor's insert of `item` in its own transaction.
    func insertFloor(_ item: NewItem) throws {
        try floor?.insert(
            group: item.accessGroup ?? AccessGroup.adalCache,
            service: item.service,
            account: item.account,
            secret: item.secret
        )
    }

    /// An item with a key not used before.
    func nextItem() -> NewItem {
        count += 1
        return NewItem(
            accessGroup: AccessGroup.adalCache,
            service: "svc-\(count)",
            account: "acct-\(count)",
            secret: secrets[count % secrets.count]
        )
    }

    /// Adds `item` in its own transaction.
    func add(_ item: NewItem) throws -> ItemMetadata { try store.add(item, as: app) }

    /// Removes the files.
    func remove() { scratch.remove() }
}
