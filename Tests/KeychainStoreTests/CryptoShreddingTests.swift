import Foundation
import GRDB
import KeychainStore
import StoreTestSupport
import Testing

/// Crypto-shredding: each access group's items are sealed under the group's own data key, stored wrapped
/// in one `access_groups` row. Deleting only that row — and not one item row — must leave the group's
/// items unreadable (a typed integrity failure, never bytes passed off as a secret), while every other
/// group reads as before.
struct CryptoShreddingTests {
    static let scannerGroup = "com.contoso.scanner"
    static let timeclockGroup = "com.contoso.timeclock"

    @Test func deletingOnlyAGroupsKeyRowMakesItsItemsUnreadableAndLeavesOtherGroupsIntact() throws {
        let directory = TemporaryStateDirectory("crypto-shred")
        let raw: RawDatabase
        let scannerKeyRow: Data
        do {
            let store = try openStore(directory)
            try Self.add(3, to: Apps.sharedGroup, as: Apps.scanner, in: store)
            try Self.add(2, to: Self.timeclockGroup, as: Apps.timeclock, in: store)
            raw = try RawDatabase(path: directory.databasePath)
            let keyRowsBefore = try raw.groupKeyRows()
            // The key row the store creates with the group's first item is the scanner group's.
            try Self.add(4, to: Self.scannerGroup, as: Apps.scanner, in: store)
            let created = try raw.groupKeyRows().subtracting(keyRowsBefore)
            scannerKeyRow = try #require(created.first, "adding the first item of a group created no key row")
            try #require(created.count == 1)
        }
        let itemsBefore = try raw.items()
        try #require(itemsBefore.count == 9)

        try raw.execute("DELETE FROM access_groups WHERE name_index = ?", [scannerKeyRow])
        #expect(try raw.items().map(\.id) == itemsBefore.map(\.id), "the shred must not touch a single item row")

        // A process opening the store now.
        let store = try openStore(directory)
        for index in 0..<4 {
            let error = caughtError {
                try store.find(
                    ItemQuery(accessGroup: Self.scannerGroup, service: "svc", account: "\(Self.scannerGroup)-\(index)"),
                    as: Apps.scanner
                )
            }
            #expect(
                error?.code == .integrityFailure,
                "reading a shredded item gave \(error.map(String.init(describing:)) ?? "a secret")"
            )
            #expect(
                error?.damagedItems.count == 1 && error?.damagedItems.first?.accessGroup == Self.scannerGroup,
                "\(error?.damagedItems ?? [])"
            )
        }
        let listing = caughtError { try store.findAll(ItemQuery(accessGroup: Self.scannerGroup), as: Apps.scanner) }
        #expect(
            listing?.code == .integrityFailure,
            "listing the shredded group gave \(listing.map(String.init(describing:)) ?? "items")"
        )

        // The other groups, including the shared one the same app reads, are untouched.
        for (group, app, count) in [
            (Apps.sharedGroup, Apps.scanner, 3), (Apps.sharedGroup, Apps.timeclock, 3),
            (Self.timeclockGroup, Apps.timeclock, 2),
        ] {
            let items = try store.findAll(ItemQuery(accessGroup: group), as: app)
            #expect(items.count == count, "\(app.appID) finds \(items.count) items in \(group)")
            for item in items {
                #expect(
                    item.secret == Self.secret(group: group, account: item.account),
                    "\(group)/\(item.account) reads another secret"
                )
            }
        }

        // The administrator's check names exactly the shredded group's items.
        let report = try store.verify()
        #expect(!report.isIntact)
        #expect(report.checkedItems == 9)
        let scannerRows = Set(itemsBefore.filter { $0.groupIndex == scannerKeyRow }.map(\.id))
        #expect(scannerRows.count == 4)
        #expect(Set(report.damagedItems.map(\.rowID)) == scannerRows, "\(report)")

        // The group can be used again, under a new key: new items read, the shredded ones stay unreadable.
        try store.add(
            NewItem(accessGroup: Self.scannerGroup, service: "svc", account: "after-shred", secret: Data("new".utf8)),
            as: Apps.scanner
        )
        #expect(
            try store.find(ItemQuery(accessGroup: Self.scannerGroup, account: "after-shred"), as: Apps.scanner).secret
                == Data("new".utf8)
        )
        let old = caughtError {
            try store.find(
                ItemQuery(accessGroup: Self.scannerGroup, service: "svc", account: "\(Self.scannerGroup)-0"),
                as: Apps.scanner
            )
        }
        #expect(old?.code == .integrityFailure, "a new key for the group brought back a shredded item")
        withExtendedLifetime(directory) {}
    }

    // MARK: - Helpers

    static func secret(group: String, account: String) -> Data { Data("secret of \(group)/\(account)".utf8) }

    static func add(_ count: Int, to group: String, as app: AppIdentity, in store: KeychainStore) throws {
        for index in 0..<count {
            let name = group == Apps.sharedGroup ? "\(group)-\(app.appID)-\(index)" : "\(group)-\(index)"
            try store.add(
                NewItem(accessGroup: group, service: "svc", account: name, secret: secret(group: group, account: name)),
                as: app
            )
        }
    }
}

extension RawDatabase {
    /// The `name_index` of every row of the store's group-key table.
    func groupKeyRows() throws -> Set<Data> {
        try queue.read { db in Set(try Data.fetchAll(db, sql: "SELECT name_index FROM access_groups")) }
    }
}
