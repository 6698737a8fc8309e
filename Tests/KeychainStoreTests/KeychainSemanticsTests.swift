import Foundation
import KeychainStore
import StoreTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The generic-password rules of the Apple keychain, as the store mirrors them.
struct KeychainSemanticsTests {
    @Test func addedItemReadsBackWithEveryAttributeAndItsSecret() throws {
        let directory = TemporaryStateDirectory()
        let clock = FakeClock()
        let store = try openStore(directory, clock: clock)
        try store.add(
            NewItem(
                accessGroup: Apps.sharedGroup,
                service: "svc",
                account: "worker-1",
                secret: Data("s3cret"),
                label: "Label",
                type: 2001,
                generic: Data("gen"),
                creator: 42
            ),
            as: Apps.scanner
        )
        let item = try store.find(ItemQuery(service: "svc", account: "worker-1"), as: Apps.scanner)
        #expect(item.secret == Data("s3cret"))
        #expect(
            item.metadata
                == ItemMetadata(
                    accessGroup: Apps.sharedGroup,
                    service: "svc",
                    account: "worker-1",
                    type: 2001,
                    generic: Data("gen"),
                    label: "Label",
                    creator: 42,
                    creationDate: clock.date,
                    modificationDate: clock.date
                )
        )
    }

    @Test func addWithoutGroupUsesTheCallersFirstGroup() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        let stored = try store.add(NewItem(service: "svc", account: "a", secret: Data("x")), as: Apps.timeclock)
        #expect(stored.accessGroup == Apps.timeclock.accessGroups[0])
        #expect(
            try store.find(ItemQuery(accessGroup: Apps.sharedGroup, service: "svc"), as: Apps.scanner).secret
                == Data("x")
        )
    }

    @Test func secondAddWithSamePrimaryKeyIsDuplicateAndKeepsTheFirstSecret() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        try store.add(NewItem(service: "svc", account: "a", secret: Data("first")), as: Apps.scanner)
        expectError(.duplicateItem) {
            try store.add(NewItem(service: "svc", account: "a", secret: Data("second")), as: Apps.scanner)
        }
        #expect(try store.find(ItemQuery(service: "svc", account: "a"), as: Apps.scanner).secret == Data("first"))
        // Same service and account in another group is a different item.
        try store.add(
            NewItem(accessGroup: "com.contoso.scanner", service: "svc", account: "a", secret: Data("other")),
            as: Apps.scanner
        )
        #expect(try store.findAll(ItemQuery(service: "svc", account: "a"), as: Apps.scanner).count == 2)
    }

    @Test func noMatchIsItemNotFound() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        try store.add(NewItem(service: "svc", account: "a", secret: Data("x")), as: Apps.scanner)
        for query in [
            ItemQuery(service: "other"), ItemQuery(service: "svc", account: "b"), ItemQuery(label: "none"),
            ItemQuery(type: 7),
        ] {
            expectError(.itemNotFound) { try store.find(query, as: Apps.scanner) }
            expectError(.itemNotFound) { try store.findAll(query, as: Apps.scanner) }
        }
    }

    @Test func findReturnsOneItemUnlessAskedForAllInTheCallersGroupOrder() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        try store.add(
            NewItem(accessGroup: "com.contoso.scanner", service: "svc", account: "a", secret: Data("private")),
            as: Apps.scanner
        )
        try store.add(
            NewItem(accessGroup: Apps.sharedGroup, service: "svc", account: "b", secret: Data("shared")),
            as: Apps.scanner
        )
        try store.add(
            NewItem(accessGroup: Apps.sharedGroup, service: "svc", account: "c", secret: Data("shared2")),
            as: Apps.scanner
        )
        // The shared group comes first in the scanner's entitlements.
        #expect(try store.find(ItemQuery(service: "svc"), as: Apps.scanner).secret == Data("shared"))
        let all = try store.findAll(ItemQuery(service: "svc"), as: Apps.scanner)
        #expect(all.map(\.account) == ["b", "c", "a"])
    }

    @Test func queriesMatchOnLabelTypeGenericAndCreator() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        try store.add(
            NewItem(
                service: "at",
                account: "a",
                secret: Data("1"),
                label: "L1",
                type: 2001,
                generic: Data("g1"),
                creator: 1
            ),
            as: Apps.scanner
        )
        try store.add(
            NewItem(
                service: "rt",
                account: "a",
                secret: Data("2"),
                label: "L2",
                type: 2002,
                generic: Data("g2"),
                creator: 2
            ),
            as: Apps.scanner
        )
        #expect(try store.find(ItemQuery(type: 2002), as: Apps.scanner).secret == Data("2"))
        #expect(try store.find(ItemQuery(label: "L1"), as: Apps.scanner).secret == Data("1"))
        #expect(try store.find(ItemQuery(generic: Data("g2")), as: Apps.scanner).secret == Data("2"))
        #expect(try store.find(ItemQuery(account: "a", creator: 1), as: Apps.scanner).secret == Data("1"))
        #expect(try store.findAll(ItemQuery(account: "a"), as: Apps.scanner).count == 2)
    }

    @Test func updateActsOnAllMatchesAndStampsTheModificationDate() throws {
        let directory = TemporaryStateDirectory()
        let clock = FakeClock()
        let store = try openStore(directory, clock: clock)
        let created = clock.date
        try store.add(NewItem(service: "svc", account: "a", secret: Data("1")), as: Apps.scanner)
        try store.add(NewItem(service: "svc", account: "b", secret: Data("2")), as: Apps.scanner)
        try store.add(NewItem(service: "other", account: "c", secret: Data("3")), as: Apps.scanner)
        clock.advance(by: 60)
        let count = try store.update(
            ItemQuery(service: "svc"),
            with: ItemChanges(label: "rotated", secret: Data("new")),
            as: Apps.scanner
        )
        #expect(count == 2)
        for item in try store.findAll(ItemQuery(service: "svc"), as: Apps.scanner) {
            #expect(item.secret == Data("new"))
            #expect(item.metadata.label == "rotated")
            #expect(item.metadata.creationDate == created)
            #expect(item.metadata.modificationDate == clock.date)
        }
        #expect(try store.find(ItemQuery(service: "other"), as: Apps.scanner).secret == Data("3"))
        #expect(try store.find(ItemQuery(account: "b", label: "rotated"), as: Apps.scanner).secret == Data("new"))
    }

    @Test func updateThatRekeysOntoAnExistingItemIsDuplicateAndChangesNothing() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        try store.add(NewItem(service: "svc", account: "a", secret: Data("1")), as: Apps.scanner)
        try store.add(NewItem(service: "svc", account: "b", secret: Data("2")), as: Apps.scanner)
        expectError(.duplicateItem) {
            try store.update(
                ItemQuery(service: "svc"),
                with: ItemChanges(account: "z", secret: Data("9")),
                as: Apps.scanner
            )
        }
        #expect(try store.find(ItemQuery(account: "a"), as: Apps.scanner).secret == Data("1"))
        #expect(try store.find(ItemQuery(account: "b"), as: Apps.scanner).secret == Data("2"))
        expectError(.itemNotFound) { try store.find(ItemQuery(account: "z"), as: Apps.scanner) }
        // A re-key to a free name works and the item is found under its new name only.
        try store.update(ItemQuery(account: "a"), with: ItemChanges(service: "renamed"), as: Apps.scanner)
        #expect(try store.find(ItemQuery(service: "renamed", account: "a"), as: Apps.scanner).secret == Data("1"))
        expectError(.itemNotFound) { try store.find(ItemQuery(service: "svc", account: "a"), as: Apps.scanner) }
    }

    @Test func updateAndDeleteWithoutMatchAreItemNotFound() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        expectError(.itemNotFound) {
            try store.update(ItemQuery(service: "svc"), with: ItemChanges(label: "x"), as: Apps.scanner)
        }
        expectError(.itemNotFound) { try store.delete(ItemQuery(service: "svc"), as: Apps.scanner) }
    }

    @Test func deleteActsOnAllMatchesAndLeavesTheRest() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        for account in ["a", "b", "c"] {
            try store.add(NewItem(service: "svc", account: account, secret: Data(account)), as: Apps.scanner)
        }
        try store.add(NewItem(service: "keep", account: "a", secret: Data("k")), as: Apps.scanner)
        #expect(try store.delete(ItemQuery(service: "svc"), as: Apps.scanner) == 3)
        expectError(.itemNotFound) { try store.find(ItemQuery(service: "svc"), as: Apps.scanner) }
        #expect(try store.find(ItemQuery(service: "keep"), as: Apps.scanner).secret == Data("k"))
        // A deleted primary key can be added again.
        try store.add(NewItem(service: "svc", account: "a", secret: Data("again")), as: Apps.scanner)
        #expect(try store.find(ItemQuery(service: "svc", account: "a"), as: Apps.scanner).secret == Data("again"))
    }

    @Test func itemsSurviveReopeningTheStore() throws {
        let directory = TemporaryStateDirectory()
        do {
            let store = try openStore(directory, synchronous: .full)
            try store.add(NewItem(service: "svc", account: "a", secret: Data("durable")), as: Apps.scanner)
        }
        let reopened = try openStore(directory)
        #expect(try reopened.find(ItemQuery(service: "svc"), as: Apps.scanner).secret == Data("durable"))
    }

    @Test func passphraseProtectedStoreReopensWithTheSamePassphrase() throws {
        let directory = TemporaryStateDirectory()
        do {
            let store = try openStore(directory, key: .passphrase("correct horse battery staple"))
            try store.add(NewItem(service: "svc", account: "a", secret: Data("pw")), as: Apps.scanner)
        }
        #expect(!FileManager.default.fileExists(atPath: directory.keyFile.path))
        let reopened = try openStore(directory, key: .passphrase("correct horse battery staple"))
        #expect(try reopened.find(ItemQuery(service: "svc"), as: Apps.scanner).secret == Data("pw"))
    }

    @Test func stateDirectoryAndKeyFileAreOwnerOnly() throws {
        let parent = TemporaryStateDirectory()
        let directory = parent.url.appendingPathComponent("nested/state")
        let store = try KeychainStore(directory: directory)
        try store.add(NewItem(service: "svc", account: "a", secret: Data("x")), as: Apps.scanner)
        func mode(_ path: String) throws -> Int {
            (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
        }
        #expect(try mode(directory.path) == 0o700)
        #expect(try mode(directory.appendingPathComponent(KeychainStore.keyFileName).path) == 0o600)
        #expect(try mode(directory.appendingPathComponent(KeychainStore.databaseFileName).path) == 0o600)
    }

    @Test func keyFileReadableByOthersIsRefused() throws {
        let directory = TemporaryStateDirectory()
        _ = try openStore(directory)
        chmod(directory.keyFile.path, 0o644)
        expectError(.insecureKeyFile) { try openStore(directory) }
    }
}
