import Foundation
import GRDB
import KeychainStore
import StoreTestSupport
import Testing

/// Stores created with the first layout (unique key `(group, service, account)` beside `items_by_account`)
/// open unchanged and serve every operation; new stores get layout 2.
struct SchemaLayoutTests {
    private let app = try! AppIdentity(
        appID: "com.contoso.layout",
        accessGroups: ["com.contoso.layout", "com.contoso.shared"]
    )

    /// Rebuilds the items table of a closed store in layout 1, rows and ids unchanged, as the first release
    /// created it.
    private func rewriteAsLayoutOne(_ path: String) throws {
        try RawDatabase(path: path).queue.writeWithoutTransaction { db in
            try db.inTransaction {
                try db.execute(
                    sql: """
                        CREATE TABLE items_layout1 (
                            id INTEGER PRIMARY KEY,
                            group_index BLOB NOT NULL REFERENCES access_groups(name_index),
                            service_index BLOB NOT NULL,
                            account_index BLOB NOT NULL,
                            label_index BLOB,
                            type_index BLOB,
                            format INTEGER NOT NULL,
                            nonce BLOB NOT NULL,
                            ciphertext BLOB NOT NULL,
                            UNIQUE (group_index, service_index, account_index)
                        );
                        INSERT INTO items_layout1 SELECT * FROM items;
                        DROP TABLE items;
                        ALTER TABLE items_layout1 RENAME TO items;
                        CREATE INDEX items_by_account ON items(group_index, account_index);
                        CREATE INDEX items_by_type ON items(group_index, type_index);
                        PRAGMA user_version = 1;
                        """
                )
                return .commit
            }
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }

    private func userVersion(_ path: String) throws -> Int {
        try RawDatabase(path: path).queue.read { db in try Int.fetchOne(db, sql: "PRAGMA user_version") ?? -1 }
    }

    @Test func aNewStoreGetsLayoutTwo() throws {
        let directory = TemporaryStateDirectory("layout")
        _ = try openStore(directory)
        #expect(try userVersion(directory.databasePath) == 2)
        let indexes = try RawDatabase(path: directory.databasePath).queue.read { db in
            try String.fetchAll(
                db,
                sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'items' AND sql IS NOT NULL"
            )
        }
        #expect(indexes == ["items_by_type"])
    }

    @Test func aLayoutOneStoreOpensUnchangedAndServesEveryOperation() throws {
        let directory = TemporaryStateDirectory("layout")
        do {
            let store = try openStore(directory)
            for index in 0..<20 {
                try store.add(
                    NewItem(
                        accessGroup: "com.contoso.shared",
                        service: "svc-\(index % 4)",
                        account: "worker-\(index % 5)",
                        secret: Data("secret-\(index)"),
                        type: 7
                    ),
                    as: app
                )
            }
        }
        try rewriteAsLayoutOne(directory.databasePath)
        let before = try RawDatabase(path: directory.databasePath).dump()

        let store = try openStore(directory)
        #expect(try RawDatabase(path: directory.databasePath).dump() == before)
        #expect(try userVersion(directory.databasePath) == 1)

        #expect(try store.find(ItemQuery(service: "svc-3", account: "worker-3"), as: app).secret == Data("secret-3"))
        #expect(
            try store.findAll(ItemQuery(account: "worker-2"), as: app).map(\.secret).sorted {
                $0.lexicographicallyPrecedes($1)
            }
                == [Data("secret-12"), Data("secret-17"), Data("secret-2"), Data("secret-7")]
        )
        #expect(try store.findAll(ItemQuery(service: "svc-1"), as: app).count == 5)
        try store.update(
            ItemQuery(service: "svc-0", account: "worker-0"),
            with: ItemChanges(secret: Data("changed")),
            as: app
        )
        #expect(try store.find(ItemQuery(service: "svc-0", account: "worker-0"), as: app).secret == Data("changed"))
        expectError(.duplicateItem) {
            try store.add(
                NewItem(
                    accessGroup: "com.contoso.shared",
                    service: "svc-1",
                    account: "worker-1",
                    secret: Data("again")
                ),
                as: app
            )
        }
        #expect(try store.delete(ItemQuery(account: "worker-4"), as: app) == 4)
        expectError(.itemNotFound) { try store.find(ItemQuery(account: "worker-4"), as: app) }
        #expect(try store.findAll(ItemQuery(type: 7), as: app).count == 16)
        #expect(try store.verify().isIntact)
    }
}
