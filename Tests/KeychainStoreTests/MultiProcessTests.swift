import Foundation
import KeychainStore
import ProcessTestSupport
import StoreTestSupport
import Synchronization
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Real processes sharing one store: several `keychain-worker mixed` processes at once, and a
/// `keychain-worker writer` killed with SIGKILL at random points. No timing is asserted; every bound is
/// a generous safety net against a hung child.
@Suite(.serialized, .timeLimit(.minutes(3)), .tags(.integration))
struct MultiProcessTests {
    static let workerCount = 4
    static let mixedSeconds = 6

    @Test func fourProcessesAddingReadingAndDeletingLoseNothing() async throws {
        let directory = TemporaryStateDirectory("keychain-multiprocess")
        // Create the store (and its key file) up front so the workers all open an existing one.
        do { _ = try openStore(directory) }
        try #require(FileManager.default.fileExists(atPath: directory.keyFile.path))

        let workers = try (0..<Self.workerCount).map { worker in
            try ChildProcess(
                product: "keychain-worker",
                [
                    "mixed", "--dir", directory.url.path, "--worker", "\(worker)",
                    "--workers", "\(Self.workerCount)", "--seconds", "\(Self.mixedSeconds)",
                ]
            )
        }
        defer {
            for worker in workers { _ = worker.killIfRunning() }
        }
        for worker in workers {
            let exited = await worker.waitForExit(timeout: 90)
            #expect(exited, "worker \(worker.label) did not finish within 90 s")
        }

        var outputs: [(added: [String], deleted: [String])] = []
        for (number, worker) in workers.enumerated() {
            let stdout = worker.standardOutput
            let stderr = worker.standardError
            #expect(
                worker.exitedNormally && worker.status == 0,
                "worker \(number) ended with \(worker.status) (\(worker.reasonDescription)); stderr: \(stderr)"
            )
            #expect(!stderr.localizedCaseInsensitiveContains("locked"), "worker \(number) stderr: \(stderr)")
            #expect(!stderr.localizedCaseInsensitiveContains("error"), "worker \(number) stderr: \(stderr)")
            let lines = stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
            #expect(lines.last == "done", "worker \(number) did not print done; stderr: \(stderr)")
            var added: [String] = []
            var deleted: [String] = []
            for line in lines {
                if line.hasPrefix("added ") {
                    added.append(String(line.dropFirst(6)))
                } else if line.hasPrefix("deleted ") {
                    deleted.append(String(line.dropFirst(8)))
                } else {
                    #expect(line == "done", "worker \(number) printed an unexpected line: \(line)")
                }
            }
            outputs.append((added, deleted))
        }

        let store = try openStore(directory)
        var expectedTotal = 0
        var totalAdded = 0
        var totalDeleted = 0
        for (worker, output) in outputs.enumerated() {
            let service = "w\(worker)"
            let added = Set(output.added)
            let deleted = Set(output.deleted)
            #expect(added.count == output.added.count, "worker \(worker) acknowledged an account twice")
            #expect(deleted.count == output.deleted.count, "worker \(worker) deleted an account twice")
            #expect(deleted.isSubset(of: added), "worker \(worker) deleted accounts it never added")
            #expect(!output.added.isEmpty, "worker \(worker) added nothing")
            totalAdded += added.count
            totalDeleted += deleted.count
            let live = added.subtracting(deleted)
            expectedTotal += live.count
            for account in live.sorted() {
                let index = try #require(KeychainWorkerFixture.itemIndex(account), "unexpected account name \(account)")
                do {
                    let item = try store.find(ItemQuery(service: service, account: account), as: Apps.scanner)
                    #expect(item.service == service && item.account == account && item.accessGroup == Apps.sharedGroup)
                    #expect(
                        item.secret == KeychainWorkerFixture.mixedSecret(worker: worker, index: index),
                        "\(service)/\(account) has another secret"
                    )
                } catch {
                    Issue.record("acknowledged item \(service)/\(account) is missing: \(error)")
                }
            }
            for account in deleted.sorted() {
                do {
                    _ = try store.find(ItemQuery(service: service, account: account), as: Apps.scanner)
                    Issue.record("deleted item \(service)/\(account) is still there")
                } catch {
                    #expect(error.code == .itemNotFound, "finding deleted \(service)/\(account): \(error)")
                }
            }
        }
        #expect(totalAdded > 0)
        #expect(totalDeleted > 0, "the workers never deleted anything; the test exercised less than intended")

        let all = try store.metadata(matching: .all, as: Apps.scanner)
        #expect(all.count == expectedTotal, "the store holds \(all.count) items, expected \(expectedTotal)")
        let report = try store.verify()
        #expect(report.isIntact, "\(report)")
        #expect(report.checkedItems == expectedTotal)
        withExtendedLifetime(directory) {}
    }

    @Test func writerKilledWithSIGKILLLosesNoAcknowledgedItem() async throws {
        let directory = TemporaryStateDirectory("keychain-sigkill")
        do { _ = try openStore(directory) }
        // Kill points: after at least this many acks, plus a random 50–400 ms.
        let minimumAcks = [1, 4, 16, 40, 2, 100]
        let stride = 1_000_000
        /// Every item the store must hold from earlier rounds: index → present (the in-flight ones that
        /// made it are included once observed).
        var expected: Set<Int> = []

        for (round, minimum) in minimumAcks.enumerated() {
            let start = round * stride
            let writer = try ChildProcess(
                product: "keychain-worker",
                ["writer", "--dir", directory.url.path, "--start", "\(start)"]
            )
            defer { writer.killIfRunning() }
            let reached = await writer.waitForLines(atLeast: minimum, prefix: "ack ", timeout: 60)
            try #require(
                reached,
                "round \(round): the writer printed \(writer.lines(prefix: "ack ").count) acks; stderr: \(writer.standardError)"
            )
            try await Task.sleep(for: .milliseconds(Int.random(in: 50...400)))
            try #require(
                kill(writer.pid, SIGKILL) == 0,
                "round \(round): kill failed (the writer died by itself? stderr: \(writer.standardError))"
            )
            let exited = await writer.waitForExit(timeout: 30)
            try #require(exited, "round \(round): the writer did not die after SIGKILL")
            #expect(
                writer.killedBySignal == SIGKILL,
                "round \(round): writer ended with \(writer.reasonDescription) \(writer.status)"
            )
            #expect(writer.standardError.isEmpty, "round \(round): writer stderr: \(writer.standardError)")

            let acks = writer.lines(prefix: "ack ").map { Int($0.dropFirst(4)) }
            #expect(!acks.contains(nil), "round \(round): malformed ack line")
            let acked = acks.compactMap { $0 }
            try #require(acked.count >= minimum)
            #expect(
                acked == Array(start..<start + acked.count),
                "round \(round): acks are not consecutive from \(start)"
            )
            let lastAck = try #require(acked.last)

            // Reopen (this recovers the WAL the killed process left behind) and check everything.
            let store = try openStore(directory)
            var found: [Int: Data] = [:]
            for item in try store.findAll(ItemQuery(service: "writer"), as: Apps.scanner) {
                guard let index = KeychainWorkerFixture.itemIndex(item.account) else {
                    Issue.record("round \(round): unexpected writer account \(item.account)")
                    continue
                }
                #expect(found[index] == nil, "round \(round): writer/\(item.account) is stored twice")
                found[index] = item.secret
            }
            for index in acked {
                #expect(
                    found[index] == KeychainWorkerFixture.writerSecret(index: index),
                    "round \(round): acknowledged writer/item-\(index) is \(found[index] == nil ? "missing" : "corrupted")"
                )
            }
            let inFlight = lastAck + 1
            if let secret = found[inFlight] {
                #expect(
                    secret == KeychainWorkerFixture.writerSecret(index: inFlight),
                    "round \(round): in-flight writer/item-\(inFlight) is corrupted"
                )
            }
            let beyond = found.keys.filter { $0 >= start && $0 > inFlight }.sorted()
            #expect(beyond.isEmpty, "round \(round): items beyond the in-flight one exist: \(beyond.prefix(5))")
            // Earlier rounds' items are untouched.
            for index in expected {
                #expect(
                    found[index] == KeychainWorkerFixture.writerSecret(index: index),
                    "round \(round): earlier writer/item-\(index) changed or vanished"
                )
            }
            let thisRound = Set(acked).union(found[inFlight] != nil ? [inFlight] : [])
            expected.formUnion(thisRound)
            let missing = expected.subtracting(found.keys)
            let unexpected = Set(found.keys).subtracting(expected)
            #expect(
                missing.isEmpty && unexpected.isEmpty,
                "round \(round): \(missing.count) writer items missing (e.g. \(missing.sorted().prefix(5))), \(unexpected.count) unexpected (e.g. \(unexpected.sorted().prefix(5)))"
            )

            let report = try store.verify()
            #expect(report.isIntact, "round \(round): \(report)")
            #expect(report.checkedItems == expected.count)
        }
        withExtendedLifetime(directory) {}
    }
}
