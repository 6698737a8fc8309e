import Foundation
import KeychainStore
import StoreTestSupport
import Testing

/// `changeStampIfUnchanged`: the change stamp without a transaction while nobody has committed since a read
/// transaction took it, read from SQLite's write-ahead-log index; nil once anyone (this store, another
/// connection) commits, until a read transaction takes the stamp again.
@Suite struct ChangeStampTests {
    /// The stamp a read transaction takes now.
    static func stamp(_ store: KeychainStore) throws -> StoreChangeStamp {
        try store.readTransaction { tx in try tx.changeStamp() }
    }

    @Test func theStampIsKnownWithoutATransactionOnlyUntilSomebodyCommits() throws {
        let directory = TemporaryStateDirectory("change-stamp")
        let store = try openStore(directory)
        let other = try openStore(directory)
        try store.add(NewItem(service: "api", account: "first", secret: Data("one")), as: Apps.scanner)
        // Only a read transaction's stamp is remembered.
        #expect(store.changeStampIfUnchanged() == nil)
        let taken = try Self.stamp(store)
        #expect(store.changeStampIfUnchanged() == taken)
        // Reads change nothing, by this store or another.
        _ = try other.find(ItemQuery(account: "first"), as: Apps.scanner)
        _ = try store.find(ItemQuery(account: "first"), as: Apps.scanner)
        #expect(store.changeStampIfUnchanged() == taken)

        // This store's own commit.
        try store.add(NewItem(service: "api", account: "second", secret: Data("two")), as: Apps.scanner)
        #expect(store.changeStampIfUnchanged() == nil)
        let afterOwn = try Self.stamp(store)
        #expect(afterOwn != taken)
        #expect(store.changeStampIfUnchanged() == afterOwn)

        // Another connection's commit (another process's maps the same index).
        try other.delete(ItemQuery(account: "first"), as: Apps.scanner)
        #expect(store.changeStampIfUnchanged() == nil)
        let afterOther = try Self.stamp(store)
        #expect(afterOther != afterOwn)
        #expect(store.changeStampIfUnchanged() == afterOther)

        // A commit that starts the log over (a checkpoint of the whole log first) is seen too.
        try RawDatabase(path: directory.databasePath).checkpoint()
        let afterCheckpoint = try Self.stamp(store)
        #expect(store.changeStampIfUnchanged() == afterCheckpoint)
        try other.add(NewItem(service: "api", account: "third", secret: Data("three")), as: Apps.scanner)
        #expect(store.changeStampIfUnchanged() == nil)
    }
}
