import Foundation
import KeychainStore
import StoreTestSupport
import Testing

/// The write-ahead log's checkpoints: off the committing call below the limit (a background queue copies
/// the log back), at once above; either way the log stays bounded and nothing committed is lost. The
/// stores here checkpoint from 100 pages and at 400 at the latest (1,000 and 4,000 by default), to keep the
/// tests' disk writes small.
@Suite(.serialized)
struct CheckpointTests {
    private static let app = try! AppIdentity(appID: "com.contoso.checkpoint", accessGroups: ["com.contoso.checkpoint"])
    private var app: AppIdentity { Self.app }
    /// 64 KiB: 16 pages of ciphertext per item.
    private static let secretSize = 64 << 10
    private static let filler = Data((0..<secretSize).map { UInt8(truncatingIfNeeded: $0 &* 7) })

    /// Item `index`'s secret: the filler led by the index.
    private static func secret(_ index: Int) -> Data {
        var secret = filler
        withUnsafeBytes(of: UInt64(index).littleEndian) { secret.replaceSubrange(0..<8, with: $0) }
        return secret
    }

    private func secret(_ index: Int) -> Data { Self.secret(index) }

    private func openSmallLogStore(_ directory: TemporaryStateDirectory) throws -> KeychainStore {
        var options = StoreOptions(synchronous: .normal)
        options.backgroundCheckpointPages = 100
        options.checkpointLimitPages = 400
        return try KeychainStore(directory: directory.url, options: options)
    }

    private func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    /// Adds items `range` in one transaction.
    private func addItems(_ range: Range<Int>, to store: KeychainStore) async throws {
        try await onOwnThread {
            try store.writeTransaction { tx in
                for index in range {
                    try tx.add(
                        NewItem(service: "svc", account: "item-\(index)", secret: Self.secret(index)),
                        as: Self.app
                    )
                }
            }
        }
    }

    @Test func aCommitPastTheBackgroundSizeIsCopiedIntoTheDatabaseFileWithoutAnotherCommit() async throws {
        let directory = TemporaryStateDirectory("checkpoint")
        let store = try openSmallLogStore(directory)
        let before = fileSize(directory.databasePath)
        try await addItems(0..<8, to: store)  // about 140 pages: past 100, below 400
        // The store stays open and idle: only the background checkpoint can move the pages into the file.
        let deadline = Date().addingTimeInterval(20)
        while fileSize(directory.databasePath) < before + 8 * Self.secretSize, Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(
            fileSize(directory.databasePath) >= before + 8 * Self.secretSize,
            "the log was not checkpointed within 20 s"
        )
        for index in [0, 5, 7] {
            #expect(
                try store.find(ItemQuery(service: "svc", account: "item-\(index)"), as: app).secret == secret(index)
            )
        }
    }

    @Test func aCommitPastTheLimitCheckpointsBeforeItReturns() async throws {
        let directory = TemporaryStateDirectory("checkpoint")
        let store = try openSmallLogStore(directory)
        try await addItems(0..<26, to: store)  // about 440 pages in one commit
        // No wait: the committing call copied the log back itself.
        #expect(fileSize(directory.databasePath) >= 26 * Self.secretSize)
        #expect(try store.find(ItemQuery(service: "svc", account: "item-25"), as: app).secret == secret(25))
    }

    @Test func manyCommitsKeepTheLogBoundedAndAStoreClosedWithACheckpointPendingLosesNothing() async throws {
        let directory = TemporaryStateDirectory("checkpoint")
        var store: KeychainStore? = try openSmallLogStore(directory)
        for batch in 0..<40 {  // 40 commits of 2 items (~34 pages each): ~1,400 pages in all
            try await addItems(batch * 2..<(batch + 1) * 2, to: try #require(store))
        }
        // Without checkpoints the log would hold every page written (~1,400 frames of 4,096 + 24 bytes); with
        // them it is copied back by the commit that takes it past 400 pages at the latest (one commit here
        // writes under 40), and the next commit starts it over.
        #expect(fileSize(directory.databasePath + "-wal") < (400 + 40) * (4_096 + 24))
        store = nil  // a background checkpoint may still be running
        let items = try await onOwnThread { try openStore(directory).findAll(ItemQuery(service: "svc"), as: Self.app) }
        #expect(items.count == 80)
        #expect(items.allSatisfy { item in item.secret == secret(Int(item.metadata.account.dropFirst(5))!) })
    }
}
