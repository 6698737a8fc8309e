import Foundation
import KeychainStore
import StoreTestSupport
import Testing

/// What an attacker holding the database file (and its WAL) can and cannot learn or do.
struct AtRestTests {
    private func fileBytes(_ directory: TemporaryStateDirectory) -> [String: Data] {
        var files: [String: Data] = [:]
        for suffix in ["", "-wal", "-shm"] {
            let path = directory.databasePath + suffix
            if let data = FileManager.default.contents(atPath: path) { files[suffix.isEmpty ? "db" : suffix] = data }
        }
        return files
    }

    @Test func databaseFileAndWALHoldNoCleartextServiceAccountLabelGroupOrSecret() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        let needles = [
            "ServiceNeedleQ7", "AccountNeedleK3", "LabelNeedleZ9", "SecretNeedleW1", "UpdatedSecretNeedleP4",
            "com.needle.groupX",
        ]
        let app = try AppIdentity(appID: "com.needle.app", accessGroups: ["com.needle.groupX"])
        for i in 0..<50 {
            try store.add(
                NewItem(
                    service: "ServiceNeedleQ7-\(i)",
                    account: "AccountNeedleK3-\(i)",
                    secret: Data("SecretNeedleW1-\(i)-" + String(repeating: "s", count: 300)),
                    label: "LabelNeedleZ9-\(i)"
                ),
                as: app
            )
        }
        try store.update(
            ItemQuery(service: "ServiceNeedleQ7-3"),
            with: ItemChanges(secret: Data("UpdatedSecretNeedleP4")),
            as: app
        )
        try store.delete(ItemQuery(service: "ServiceNeedleQ7-4"), as: app)
        // The store is still open, so recent writes are in the WAL rather than checkpointed.
        let files = fileBytes(directory)
        #expect(files["-wal"].map { !$0.isEmpty } == true)
        #expect(files.values.reduce(0) { $0 + $1.count } > 50 * 300)
        for (name, bytes) in files {
            for needle in needles {
                #expect(bytes.range(of: Data(needle.utf8)) == nil, "\(needle) found in clear in \(name)")
            }
        }
        #expect(
            try store.find(ItemQuery(service: "ServiceNeedleQ7-3"), as: app).secret == Data("UpdatedSecretNeedleP4")
        )
    }

    @Test func wrongKeyFileIsItsOwnErrorAndChangesNothing() throws {
        let directory = TemporaryStateDirectory()
        do {
            let store = try openStore(directory)
            try store.add(NewItem(service: "svc", account: "a", secret: Data("kept")), as: Apps.scanner)
        }
        let before = try RawDatabase(path: directory.databasePath).dump()
        try RawDatabase(path: directory.databasePath).checkpoint()
        let bytesBefore = fileBytes(directory)["db"]
        let wrongKey = directory.url.appendingPathComponent("other.key")
        FileManager.default.createFile(
            atPath: wrongKey.path,
            contents: Data((0..<32).map { UInt8($0) }),
            attributes: [.posixPermissions: 0o600]
        )
        expectError(.wrongKey) { try openStore(directory, key: .keyFile(wrongKey)) }
        expectError(.wrongKey) { try openStore(directory, key: .passphrase("guess")) }
        #expect(fileBytes(directory)["db"] == bytesBefore)
        #expect(try RawDatabase(path: directory.databasePath).dump() == before)
        #expect(try openStore(directory).find(ItemQuery(service: "svc"), as: Apps.scanner).secret == Data("kept"))
    }

    @Test func wrongPassphraseIsWrongKeyAndTheRightOneStillOpens() throws {
        let directory = TemporaryStateDirectory()
        do {
            let store = try openStore(directory, key: .passphrase("right passphrase"))
            try store.add(NewItem(service: "svc", account: "a", secret: Data("kept")), as: Apps.scanner)
        }
        let before = try RawDatabase(path: directory.databasePath).dump()
        expectError(.wrongKey) { try openStore(directory, key: .passphrase("wrong passphrase")) }
        expectError(.wrongKey) { try openStore(directory) }  // key file instead of passphrase
        #expect(!FileManager.default.fileExists(atPath: directory.keyFile.path))
        #expect(try RawDatabase(path: directory.databasePath).dump() == before)
        #expect(
            try openStore(directory, key: .passphrase("right passphrase")).find(
                ItemQuery(service: "svc"),
                as: Apps.scanner
            ).secret == Data("kept")
        )
    }

    @Test func missingKeyFileOfAnExistingStoreIsWrongKeyAndNoNewKeyIsMade() throws {
        let directory = TemporaryStateDirectory()
        do {
            let store = try openStore(directory)
            try store.add(NewItem(service: "svc", account: "a", secret: Data("kept")), as: Apps.scanner)
        }
        let saved = directory.url.appendingPathComponent("saved.key")
        try FileManager.default.moveItem(at: directory.keyFile, to: saved)
        expectError(.wrongKey) { try openStore(directory) }
        #expect(!FileManager.default.fileExists(atPath: directory.keyFile.path))
        try FileManager.default.moveItem(at: saved, to: directory.keyFile)
        #expect(try openStore(directory).find(ItemQuery(service: "svc"), as: Apps.scanner).secret == Data("kept"))
    }

    @Test func aFileThatIsNotAStoreIsCorruptStoreNotWrongKey() throws {
        let directory = TemporaryStateDirectory()
        _ = try openStore(directory)
        FileManager.default.createFile(atPath: directory.databasePath, contents: Data(repeating: 0x5A, count: 8192))
        try? FileManager.default.removeItem(atPath: directory.databasePath + "-wal")
        try? FileManager.default.removeItem(atPath: directory.databasePath + "-shm")
        expectError(.corruptStore) { try openStore(directory) }
    }

    @Test func errorsNeverContainTheSecretOrPassphrase() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory, key: .passphrase("pass-phrase-VALUE"))
        try store.add(NewItem(service: "svc", account: "a", secret: Data("SECRET-VALUE")), as: Apps.scanner)
        let duplicate = caughtError {
            try store.add(NewItem(service: "svc", account: "a", secret: Data("SECRET-VALUE-2")), as: Apps.scanner)
        }
        #expect(duplicate?.code == .duplicateItem)
        #expect(duplicate.map { !$0.description.contains("SECRET-VALUE") } == true)
        let wrong = caughtError { try openStore(directory, key: .passphrase("wrong-pass-phrase-VALUE")) }
        #expect(wrong?.code == .wrongKey)
        #expect(wrong.map { !$0.description.contains("pass-phrase-VALUE") } == true)
    }
}
