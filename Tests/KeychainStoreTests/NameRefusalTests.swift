import Foundation
import KeychainStore
import StoreTestSupport
import Testing

/// Names no item may have, refused on every path with -50 and nothing stored; a store emptied behind the
/// key's back is refused as damaged, not taken for a new one.
struct NameRefusalTests {
    @Test func emptyServiceOrAccountAndNULCharactersAreInvalidParameters() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        let cases: [NewItem] = [
            NewItem(service: "", account: "a", secret: Data("s".utf8)),
            NewItem(service: "svc", account: "", secret: Data("s".utf8)),
            NewItem(service: "svc\u{0}hidden", account: "a", secret: Data("s".utf8)),
            NewItem(service: "svc", account: "a\u{0}", secret: Data("s".utf8)),
            NewItem(service: "svc", account: "a", secret: Data("s".utf8), label: "label\u{0}more"),
        ]
        for item in cases {
            let error = caughtError { try store.add(item, as: Apps.scanner) }
            #expect(
                error?.code == .invalidParameter,
                "\(item.service.debugDescription)/\(item.account.debugDescription)"
            )
        }
        #expect(try store.metadata(as: Apps.scanner).isEmpty, "a refused item was stored")
        try store.add(NewItem(service: "svc", account: "a", secret: Data("s".utf8)), as: Apps.scanner)
        expectError(.invalidParameter) {
            try store.update(ItemQuery(service: "svc"), with: ItemChanges(account: ""), as: Apps.scanner)
        }
        expectError(.invalidParameter) {
            try store.update(ItemQuery(service: "svc"), with: ItemChanges(service: "x\u{0}y"), as: Apps.scanner)
        }
        #expect(try store.find(ItemQuery(service: "svc", account: "a"), as: Apps.scanner).metadata.account == "a")
    }

    @Test func anEmptiedDatabaseBesideItsKeyIsDamagedNotNew() throws {
        let directory = TemporaryStateDirectory()
        do {
            let store = try openStore(directory)
            try store.add(NewItem(service: "svc", account: "a", secret: Data("s".utf8)), as: Apps.scanner)
        }
        let database = directory.url.appendingPathComponent(KeychainStore.databaseFileName)
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database.path + suffix) }
        try Data().write(to: database)
        let error = caughtError { try openStore(directory) }
        #expect(error?.code == .corruptStore, "\(String(describing: error))")
        #expect(error?.message.contains("restore it from backup") == true)
        let size = try FileManager.default.attributesOfItem(atPath: database.path)[.size] as? Int
        #expect(size == 0, "the emptied file was written to")
        // A directory without a key file still becomes a new store.
        let fresh = TemporaryStateDirectory()
        #expect(try openStore(fresh).metadata(as: Apps.scanner).isEmpty)
    }
}
