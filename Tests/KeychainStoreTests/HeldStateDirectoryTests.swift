import Foundation
import KeychainStore
import ProcessTestSupport
import StoreTestSupport
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Every file of the store is reached through the state directory held since it was checked: the database
/// with its log and shared memory (SQLite through `/proc/self/fd/N`), the key file, the sealed key and a
/// rotation's pending files (`openat` with `O_NOFOLLOW`). The state directory's path swapped for a symbolic
/// link after the store opened changes nothing; a symbolic link planted at a key file's name is refused,
/// never read or written through.
@Suite(.tags(.needsRoot)) struct HeldStateDirectoryTests {
    /// The names in `directory` (none when it is missing).
    static func names(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    /// The paths this process's descriptors lead to (`/proc/self/fd`).
    static func openPaths() -> [String] {
        names("/proc/self/fd").compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)
        }
    }

    @Test func theStoreKeepsUsingTheDirectoryItCheckedAfterItsPathIsSwappedForASymlink() throws {
        let directory = TemporaryStateDirectory("held")
        let moved = directory.url.path + "-moved"
        let decoy = directory.url.path + "-decoy"
        defer {
            unlink(directory.url.path)
            try? FileManager.default.removeItem(atPath: moved)
            try? FileManager.default.removeItem(atPath: decoy)
        }
        // The decoy holds files under the log's names, which SQLite removes by name when the store closes.
        let planted = [KeychainStore.databaseFileName + "-wal", KeychainStore.databaseFileName + "-shm"]
        try FileManager.default.createDirectory(atPath: decoy, withIntermediateDirectories: false)
        for name in planted {
            #expect(FileManager.default.createFile(atPath: decoy + "/" + name, contents: Data("decoy")))
        }
        do {
            let store = try openStore(directory)
            try store.add(NewItem(service: "api", account: "before", secret: Data("one")), as: Apps.scanner)
            let oldKey = try Data(contentsOf: directory.keyFile)
            // Someone moves the state directory away and puts a link to another one at its path.
            #expect(rename(directory.url.path, moved) == 0)
            try FileManager.default.createSymbolicLink(atPath: directory.url.path, withDestinationPath: decoy)

            // Writes (the database and its write-ahead log), a verification, and a rotation (the lock, the pending
            // key, its rename over the key) all land in the directory the store checked.
            try store.add(NewItem(service: "api", account: "after", secret: Data("two")), as: Apps.scanner)
            #expect(try store.verify().damagedItems.isEmpty)
            let rotation = try MasterKeyRotation.rotate(store)
            #expect(rotation.sealing == nil)
            #expect(Self.names(decoy) == planted.sorted(), "written through the swapped path: \(Self.names(decoy))")
            #expect(!Self.openPaths().contains { $0.hasPrefix(decoy) }, "a descriptor leads into the decoy")
            let newKey = try Data(contentsOf: URL(fileURLWithPath: moved + "/" + KeychainStore.keyFileName))
            #expect(newKey.count == 32 && newKey != oldKey, "the rotation did not replace the held directory's key")
            #expect(!Self.names(moved).contains { $0.hasSuffix(".next") }, "\(Self.names(moved))")
        }
        // Closed: SQLite folded and removed the log in the checked directory, and left the decoy's files alone.
        #expect(!Self.names(moved).contains(planted[0]), "\(Self.names(moved))")
        for name in planted {
            #expect(FileManager.default.contents(atPath: decoy + "/" + name) == Data("decoy"), "\(name)")
        }

        // The moved directory is the store, whole, under the new key.
        let reopened = try KeychainStore(directory: URL(fileURLWithPath: moved))
        #expect(try reopened.findAll(ItemQuery(service: "api"), as: Apps.scanner).count == 2)
    }

    @Test func aSymlinkPlantedAtTheKeyFileIsRefusedAndItsTargetNeitherReadNorWritten() throws {
        let directory = TemporaryStateDirectory("planted-key")
        _ = try openStore(directory)
        let victim = directory.url.path + "-victim"
        defer { unlink(victim) }
        // A root file of exactly a key's size, which a store reading through the link would take for its key.
        let secret = Data((0..<32).map { UInt8($0) })
        #expect(
            FileManager.default.createFile(atPath: victim, contents: secret, attributes: [.posixPermissions: 0o600])
        )
        try FileManager.default.removeItem(at: directory.keyFile)
        try FileManager.default.createSymbolicLink(atPath: directory.keyFile.path, withDestinationPath: victim)
        let error = try #require(caughtError { try openStore(directory) })
        #expect(error.code == .insecureKeyFile && error.message.contains("symbolic link"), "\(error)")
        #expect(FileManager.default.contents(atPath: victim) == secret)
        // A new store would create its key file through the link: it does not either.
        let fresh = TemporaryStateDirectory("planted-new-key")
        let target = fresh.url.path + "-target"
        defer { unlink(target) }
        try FileManager.default.createSymbolicLink(atPath: fresh.keyFile.path, withDestinationPath: target)
        let refused = try #require(caughtError { try openStore(fresh) })
        #expect(refused.code == .insecureKeyFile, "\(refused)")
        #expect(!FileManager.default.fileExists(atPath: target), "the key was written through the link")
    }

    @Test func aSymlinkPlantedAtTheSealedKeyOrARotationsPendingKeyIsNeverFollowed() throws {
        let directory = TemporaryStateDirectory("planted-sealed")
        let store = try openStore(directory)
        try store.add(NewItem(service: "api", account: "a", secret: Data("one")), as: Apps.scanner)
        let victim = directory.url.path + "-victim"
        defer { unlink(victim) }
        #expect(
            FileManager.default.createFile(
                atPath: victim,
                contents: Data("root's own".utf8),
                attributes: [.posixPermissions: 0o600]
            )
        )

        // A stale pending key that is a link: the rotation removes the link, writes its own file, and the
        // link's target is untouched.
        let pending = directory.url.appendingPathComponent(KeychainStore.keyFileName + ".next").path
        try FileManager.default.createSymbolicLink(atPath: pending, withDestinationPath: victim)
        _ = try MasterKeyRotation.rotate(store)
        #expect(FileManager.default.contents(atPath: victim) == Data("root's own".utf8))
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: directory.keyFile.path)) == nil)
        let reopened = try openStore(directory)
        #expect(try reopened.find(ItemQuery(service: "api", account: "a"), as: Apps.scanner).secret == Data("one"))

        // A link at master.key.cred: the store takes its key to be sealed, and refuses to read through the link.
        let sealed = directory.url.appendingPathComponent(SealedKeyFile.fileName).path
        try FileManager.default.createSymbolicLink(atPath: sealed, withDestinationPath: victim)
        let error = try #require(caughtError { try openStore(directory) })
        #expect(error.code == .insecureKeyFile && error.message.contains("symbolic link"), "\(error)")
        #expect(FileManager.default.contents(atPath: victim) == Data("root's own".utf8))
    }

    @Test func aKeyFileNamedOutsideTheStateDirectoryIsRefusedInADirectoryAnotherUserOwns() throws {
        let users = TemporaryStateDirectory("users-keys")
        #expect(chown(users.url.path, 1001, 1001) == 0)
        let key = users.url.appendingPathComponent("store.key")
        #expect(
            FileManager.default.createFile(
                atPath: key.path,
                contents: Data((0..<32).map { UInt8($0) }),
                attributes: [.posixPermissions: 0o600]
            )
        )
        let directory = TemporaryStateDirectory("explicit-key")
        let error = try #require(caughtError { try openStore(directory, key: .keyFile(key)) })
        #expect(error.code == .insecureKeyFile && error.message.contains("owned by uid 1001"), "\(error)")
        // The same key file in a directory of root's opens the store.
        let own = TemporaryStateDirectory("own-keys")
        let safe = own.url.appendingPathComponent("store.key")
        try FileManager.default.copyItem(at: key, to: safe)
        _ = try openStore(directory, key: .keyFile(safe))
    }

    @Test func withoutItsProcTheStoreRefusesToOpenSayingSoInsteadOfFallingBackToItsPath() async throws {
        let directory = TemporaryStateDirectory("no-proc")
        _ = try openStore(directory)
        let before = directory.databaseFiles()
        // devicectl in a mount namespace of its own where its /proc/self/fd is an empty directory (without /proc
        // at all the Swift runtime does not start).
        let devicectl = productsDirectory.appendingPathComponent("devicectl").path
        let empty = directory.url.path + "-empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: false)
        defer { rmdir(empty) }
        let result = try await Command.run(
            URL(fileURLWithPath: "/usr/bin/unshare"),
            [
                "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                "mount --bind \"$0\" /proc/$$/fd && exec \"$@\"",
                empty, devicectl, "accounts", "--state-dir", directory.url.path,
            ]
        )
        #expect(
            result.status == 74 && result.stderr.contains("/proc is not mounted")
                && result.stderr.contains("mount -t proc proc /proc"),
            "\(result.status) \(result.stderr)"
        )
        #expect(directory.databaseFiles() == before)
    }

    @Test func errorsNameTheDatabasesRealPathNotTheDescriptorItIsOpenedThrough() throws {
        let directory = TemporaryStateDirectory("real-path")
        _ = try openStore(directory)
        // Not a database any more: SQLite's refusal comes back naming the file as the administrator knows it.
        let garbage = Data(repeating: 0x5a, count: 8192)
        try garbage.write(to: URL(fileURLWithPath: directory.databasePath))
        unlink(directory.databasePath + "-wal")
        unlink(directory.databasePath + "-shm")
        let error = try #require(caughtError { try openStore(directory) })
        #expect(error.code == .corruptStore && error.message.contains(directory.databasePath), "\(error)")
        #expect(!error.message.contains("/proc/self/fd"), "\(error)")
    }
}
