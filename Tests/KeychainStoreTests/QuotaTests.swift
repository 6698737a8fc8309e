import Foundation
import KeychainStore
import StoreTestSupport
import Testing

/// A per-app quota on the items an app adds (a broker's `limits.itemsPerApp` / `bytesPerApp`).
struct QuotaTests {
    @Test func addsOverTheItemQuotaFailWithDiskFullAndAddNothing() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        let quota = ItemQuota(items: 3, bytes: 1 << 20)
        for index in 0..<3 {
            try store.add(
                NewItem(service: "s\(index)", account: "a", secret: Data("x".utf8)),
                as: Apps.scanner,
                quota: quota
            )
        }
        let error = caughtError {
            try store.add(NewItem(service: "s3", account: "a", secret: Data("x".utf8)), as: Apps.scanner, quota: quota)
        }
        #expect(error?.code == .quotaExceeded && error?.code.osStatus == -34)
        #expect(error?.message.contains("limits.itemsPerApp") == true)
        expectError(.itemNotFound) { try store.find(ItemQuery(service: "s3", account: "a"), as: Apps.scanner) }
        // Another app's quota is its own; items added without a quota (the broker's token cache) count for nobody.
        try store.add(NewItem(service: "t0", account: "a", secret: Data("x".utf8)), as: Apps.timeclock, quota: quota)
        try store.add(NewItem(service: "cache", account: "a", secret: Data("x".utf8)), as: Apps.scanner)
        // Deleting one makes room again.
        try store.delete(ItemQuery(service: "s0", account: "a"), as: Apps.scanner)
        try store.add(NewItem(service: "s3", account: "a", secret: Data("x".utf8)), as: Apps.scanner, quota: quota)
        #expect(try store.verify().isIntact)
    }

    @Test func anUpdateThatGrowsPastTheByteQuotaChangesNothing() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        let quota = ItemQuota(items: 100, bytes: 64 << 10)
        try store.add(
            NewItem(service: "s", account: "a", secret: Data(repeating: 1, count: 1000)),
            as: Apps.scanner,
            quota: quota
        )
        let error = caughtError {
            try store.update(
                ItemQuery(service: "s", account: "a"),
                with: ItemChanges(secret: Data(repeating: 2, count: 100 << 10)),
                as: Apps.scanner,
                quota: quota
            )
        }
        #expect(error?.code == .quotaExceeded && error?.message.contains("limits.bytesPerApp") == true)
        #expect(
            try store.find(ItemQuery(service: "s", account: "a"), as: Apps.scanner).secret
                == Data(repeating: 1, count: 1000)
        )
        let big = caughtError {
            try store.add(
                NewItem(service: "big", account: "a", secret: Data(repeating: 3, count: 70 << 10)),
                as: Apps.scanner,
                quota: quota
            )
        }
        #expect(big?.code == .quotaExceeded)
    }
}
