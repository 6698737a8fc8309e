import Foundation
import KeychainStore
import Logging
import ProcessTestSupport
import StoreTestSupport
import Synchronization
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The space an essential write (a sign-out) is given on a full disk stays its own: a keeper making the disk
/// reserve again at the same time (the daemon's timer, on another thread) never takes it back between the
/// reserve's release and the write's retry.
@Suite(.serialized, .tags(.needsRoot)) struct DiskReserveRaceTests {
    /// A keeper thread making the reserve again as fast as it can, as the daemon's timer does every 2 s.
    final class Keeper: Sendable {
        let stopped = Atomic<Bool>(false)
        /// Calls of `keepDiskReserve` that returned.
        let finished = Atomic<Int>(0)

        func run(_ store: KeychainStore) {
            let thread = Thread {
                while !self.stopped.load(ordering: .relaxed) {
                    try? store.keepDiskReserve()
                    self.finished.add(1, ordering: .relaxed)
                    usleep(100)
                }
                self.finished.store(-1, ordering: .relaxed)
            }
            thread.start()
        }

        /// Stops the thread and waits until it has.
        func stop() async throws {
            stopped.store(true, ordering: .relaxed)
            while finished.load(ordering: .relaxed) >= 0 { try await Task.sleep(for: .milliseconds(1)) }
        }
    }

    /// Holds the thread that logs the store's warning between the reserve's release and the write's retry
    /// until the keeper has made a whole attempt since (at most `patience`): the preemption a busy machine
    /// may give that thread at that point, made certain.
    struct PreemptingLogHandler: LogHandler {
        let keeper: Keeper
        let patience: Duration
        var logLevel: Logger.Level = .info
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            guard "\(event.message)".contains("releasing the disk reserve") else { return }
            let seen = keeper.finished.load(ordering: .relaxed)
            let clock = ContinuousClock()
            let deadline = clock.now.advanced(by: patience)
            while keeper.finished.load(ordering: .relaxed) < seen + 2 && clock.now < deadline { usleep(200) }
        }
    }

    /// Fills the filesystem holding `directory` to its last block with a file named `name` (a real process).
    static func fill(_ directory: URL, _ name: String) async throws {
        let path = directory.appendingPathComponent(name).path
        let fill = try await Command.run(URL(fileURLWithPath: "/bin/sh"), ["-c", "cat /dev/zero > '\(path)'"])
        try #require(fill.stderr.contains("No space left"), "\(fill.stderr)")
    }

    @Test func aKeeperRacingTheSignOutNeverTakesTheReleasedSpaceBack() async throws {
        let mountPoint = TemporaryStateDirectory("reserve-race")
        let mounting = try await Command.run(
            URL(fileURLWithPath: "/bin/mount"),
            ["-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs", mountPoint.url.path]
        )
        try #require(mounting.status == 0, "cannot mount a tmpfs for the test: \(mounting.stderr)")
        defer { _ = umount(mountPoint.url.path) }

        for round in 0..<3 {
            // A store of its own each round (a new write-ahead log, so the deletes need new blocks).
            let directory = mountPoint.url.appendingPathComponent("round-\(round)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
            let keeper = Keeper()
            let store = try KeychainStore(
                directory: directory,
                options: StoreOptions(),
                logger: Logger(label: "test") { _ in PreemptingLogHandler(keeper: keeper, patience: .seconds(2)) }
            )
            try store.keepDiskReserve()
            for index in 0..<20 {
                try store.add(
                    NewItem(service: "token", account: "worker-\(index)", secret: Data(repeating: 7, count: 4_000)),
                    as: Apps.scanner
                )
            }
            try await Self.fill(mountPoint.url, "filler")

            // The sign-out deletes every item on the full disk while the keeper runs.
            keeper.run(store)
            let deleted = Result {
                try store.essentialWriteTransaction { tx in try tx.delete(ItemQuery(), as: Apps.scanner) }
            }
            try await keeper.stop()
            try #require((try? deleted.get()) == 20, "round \(round): the sign-out on a full disk: \(deleted)")
            #expect(throws: KeychainError.self) { try store.find(ItemQuery(account: "worker-0"), as: Apps.scanner) }
            // The filler is still there: the reserve was spent on the sign-out and cannot be made again …
            #expect(!store.hasDiskReserve, "round \(round): the sign-out did not run on the reserve")
            #expect(throws: KeychainError.self) { try store.keepDiskReserve() }
            // … until there is room.
            try FileManager.default.removeItem(at: mountPoint.url.appendingPathComponent("filler"))
            try store.keepDiskReserve()
            #expect(store.hasDiskReserve)
            try FileManager.default.removeItem(at: directory)
        }
    }
}
