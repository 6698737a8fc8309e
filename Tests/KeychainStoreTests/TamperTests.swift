import Foundation
import GRDB
import KeychainStore
import StoreTestSupport
import Testing

/// Edits made with raw SQL must fail authentication, never yield another item's secret, and leave
/// every other item readable.
struct TamperTests {
    /// A store with two items in the shared group and one in the scanner's private group.
    private func populatedStore() throws -> (TemporaryStateDirectory, KeychainStore, RawDatabase) {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        try store.add(
            NewItem(
                accessGroup: Apps.sharedGroup,
                service: "svc",
                account: "a",
                secret: Data("secret-A"),
                label: "LA",
                type: 2001
            ),
            as: Apps.scanner
        )
        try store.add(
            NewItem(
                accessGroup: Apps.sharedGroup,
                service: "svc",
                account: "b",
                secret: Data("secret-B"),
                label: "LB",
                type: 2002
            ),
            as: Apps.scanner
        )
        try store.add(
            NewItem(accessGroup: "com.contoso.scanner", service: "svc", account: "a", secret: Data("secret-P")),
            as: Apps.scanner
        )
        try store.add(
            NewItem(accessGroup: Apps.sharedGroup, service: "bystander", account: "z", secret: Data("secret-Z")),
            as: Apps.scanner
        )
        return (directory, store, try RawDatabase(path: directory.databasePath))
    }

    private func expectIntegrityFailure(
        _ query: ItemQuery,
        _ store: KeychainStore,
        rowID: Int64,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do {
            let item = try store.find(query, as: Apps.scanner)
            Issue.record(
                "tampered item was returned with a secret of \(item.secret.count) bytes",
                sourceLocation: sourceLocation
            )
        } catch let error as KeychainError {
            #expect(error.code == .integrityFailure, sourceLocation: sourceLocation)
            #expect(error.damagedItems.map(\.rowID) == [rowID], sourceLocation: sourceLocation)
            #expect(!error.description.contains("secret-"), sourceLocation: sourceLocation)
        } catch {
            Issue.record(error, sourceLocation: sourceLocation)
        }
    }

    @Test func ciphertextSwappedBetweenTwoRowsOfOneGroupFailsForBoth() throws {
        let (_, store, raw) = try populatedStore()
        let rows = try raw.items()
        try raw.swapCiphertexts(rows[0], rows[1])
        expectIntegrityFailure(ItemQuery(service: "svc", account: "a"), store, rowID: rows[0].id)
        expectIntegrityFailure(ItemQuery(service: "svc", account: "b"), store, rowID: rows[1].id)
        #expect(try store.find(ItemQuery(service: "bystander"), as: Apps.scanner).secret == Data("secret-Z"))
        let report = try store.verify()
        #expect(Set(report.damagedItems.map(\.rowID)) == [rows[0].id, rows[1].id])
        #expect(report.checkedItems == 4)
    }

    @Test func ciphertextSwappedBetweenTwoGroupsFailsForBoth() throws {
        let (_, store, raw) = try populatedStore()
        let rows = try raw.items()
        try raw.swapCiphertexts(rows[0], rows[2])  // same service and account, different groups
        expectIntegrityFailure(
            ItemQuery(accessGroup: Apps.sharedGroup, service: "svc", account: "a"),
            store,
            rowID: rows[0].id
        )
        expectIntegrityFailure(
            ItemQuery(accessGroup: "com.contoso.scanner", service: "svc", account: "a"),
            store,
            rowID: rows[2].id
        )
        #expect(try store.find(ItemQuery(account: "b"), as: Apps.scanner).secret == Data("secret-B"))
        #expect(Set(try store.verify().damagedItems.map(\.rowID)) == [rows[0].id, rows[2].id])
    }

    @Test func rowMovedIntoAnotherGroupFailsAndIsNeverReturned() throws {
        let (_, store, raw) = try populatedStore()
        let rows = try raw.items()
        // Move the shared item into the private group: its ciphertext was sealed under the shared group's key.
        try raw.execute("UPDATE items SET group_index = ? WHERE id = ?", [rows[2].groupIndex, rows[1].id])
        expectError(.integrityFailure) {
            try store.findAll(ItemQuery(accessGroup: "com.contoso.scanner"), as: Apps.scanner)
        }
        #expect(try store.verify().damagedItems.map(\.rowID) == [rows[1].id])
    }

    @Test func editedAttributeColumnsFailAuthentication() throws {
        let (_, store, raw) = try populatedStore()
        let rows = try raw.items()
        // Give row A the label index and type index of row B, so a label query for "LB" reaches it.
        try raw.execute(
            "UPDATE items SET label_index = (SELECT label_index FROM items WHERE id = ?) WHERE id = ?",
            [rows[1].id, rows[0].id]
        )
        try raw.execute(
            "UPDATE items SET type_index = (SELECT type_index FROM items WHERE id = ?) WHERE id = ?",
            [rows[1].id, rows[0].id]
        )
        expectError(.integrityFailure) { try store.findAll(ItemQuery(label: "LB"), as: Apps.scanner) }
        expectError(.integrityFailure) { try store.findAll(ItemQuery(type: 2002), as: Apps.scanner) }
        expectIntegrityFailure(ItemQuery(service: "svc", account: "a"), store, rowID: rows[0].id)
        #expect(try store.verify().damagedItems.map(\.rowID) == [rows[0].id])
    }

    @Test func flippedCiphertextBitFailsAloneAndVerifyNamesTheItem() throws {
        let (_, store, raw) = try populatedStore()
        let rows = try raw.items()
        var corrupted = rows[3].ciphertext
        corrupted[corrupted.startIndex + 5] ^= 0x01
        try raw.execute("UPDATE items SET ciphertext = ? WHERE id = ?", [corrupted, rows[3].id])
        expectIntegrityFailure(ItemQuery(service: "bystander"), store, rowID: rows[3].id)
        #expect(try store.find(ItemQuery(service: "svc", account: "a"), as: Apps.scanner).secret == Data("secret-A"))
        #expect(try store.find(ItemQuery(service: "svc", account: "b"), as: Apps.scanner).secret == Data("secret-B"))
        let report = try store.verify()
        #expect(
            report.damagedItems == [
                DamagedItem(rowID: rows[3].id, accessGroup: Apps.sharedGroup, reason: "it failed authentication")
            ]
        )
        #expect(!report.isIntact)
        // The damaged item can still be deleted by its attributes, after which the store is intact.
        try store.delete(ItemQuery(service: "bystander"), as: Apps.scanner)
        #expect(try store.verify().isIntact)
    }

    @Test func groupKeyRecordsSwappedBetweenGroupsFailAuthentication() throws {
        let (directory, _, raw) = try populatedStore()
        let groups = try raw.queue.read { db in
            try Row.fetchAll(db, sql: "SELECT name_index, key_nonce, wrapped_key FROM access_groups")
        }
        try #require(groups.count == 2)
        for (target, source) in [(groups[0], groups[1]), (groups[1], groups[0])] {
            try raw.execute(
                "UPDATE access_groups SET key_nonce = ?, wrapped_key = ? WHERE name_index = ?",
                [source["key_nonce"] as Data, source["wrapped_key"] as Data, target["name_index"] as Data]
            )
        }
        let fresh = try openStore(directory)  // no cached keys
        expectError(.integrityFailure) { try fresh.find(ItemQuery(service: "bystander"), as: Apps.scanner) }
        expectError(.integrityFailure) {
            try fresh.find(ItemQuery(accessGroup: "com.contoso.scanner", service: "svc"), as: Apps.scanner)
        }
        let report = try fresh.verify()
        #expect(report.damagedGroups == 2)
        #expect(report.damagedItems.count == 4)
    }

    @Test func validItemsSurviveVerifyUntouched() throws {
        let (_, store, _) = try populatedStore()
        let report = try store.verify()
        #expect(report.isIntact)
        #expect(report.checkedItems == 4)
        #expect(report.checkedGroups == 2)
    }
}
