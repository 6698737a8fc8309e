import Foundation
import KeychainStore
import StoreTestSupport
import Testing

/// What a deletion leaves on disk.
struct DeletionTests {
    @Test func aDeletedItemsCiphertextLeavesTheDatabaseFile() throws {
        let directory = TemporaryStateDirectory("deletion")
        let store = try openStore(directory)
        let app = try AppIdentity(appID: "com.contoso.deletion", accessGroups: ["com.contoso.deletion"])
        try store.add(NewItem(service: "api", account: "kept", secret: Data(repeating: 0x41, count: 100)), as: app)
        try store.add(
            NewItem(
                service: "api",
                account: "worker-1",
                secret: Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
            ),
            as: app
        )
        let raw = try RawDatabase(path: directory.databasePath)
        let sealed = try #require(try raw.items().max { $0.ciphertext.count < $1.ciphertext.count })
        try raw.checkpoint()
        #expect(FileManager.default.contents(atPath: directory.databasePath)?.range(of: sealed.ciphertext) != nil)

        try store.delete(ItemQuery(account: "worker-1"), as: app)
        try raw.checkpoint()  // the log's frames move into the file and the log is emptied
        let file = try #require(FileManager.default.contents(atPath: directory.databasePath))
        #expect(
            file.range(of: sealed.ciphertext.prefix(32)) == nil,
            "the deleted item's ciphertext is still in the database file"
        )
        #expect(try store.find(ItemQuery(account: "kept"), as: app).secret.count == 100)
    }
}
