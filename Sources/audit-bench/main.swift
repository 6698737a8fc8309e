// audit-bench: cost of the tamper-evident audit log. Run it with tools/bench-audit.
//
// It measures, in release builds and on real store files:
// - `AuditLog.append` in its own write transaction, without a checkpoint, with synchronous NORMAL
//   (the goal) and FULL (for reference);
// - what one append adds inside a transaction that is open anyway (a sign-out logs with its change);
// - an append that signs a checkpoint;
// - `AuditLog.verify` over a log of 100,000 events, in events per second;
// - where an append's time goes: the same steps timed one by one.
//
// It prints figures and never fails on a missed goal. The last lines are the goal lines:
//   audit append p50 (no checkpoint, synchronous NORMAL): X µs (goal ≤ 100 µs)
//   audit verify throughput: N events/s (goal ≥ 100,000 events/s)

import BenchSupport
import Foundation
import GRDB
import KeychainStore
import SharedDevice

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Options

/// Command-line options of `audit-bench` (see `--help`).
struct BenchOptions {
    var appends = 5000
    var fullAppends = 500
    var batchSize = 100
    var batches = 50
    var checkpointAppends = 1000
    var deviceAppends = 1000
    var verifyEvents = 100_000
    var verifyRuns = 5
    var checkpointInterval = 100
    var partRepeats = 5000
    var policy = "policies/kiosk.json"
    var directory: String?

    static let usage = """
        usage: audit-bench [options]

          --appends N             timed appends, one write transaction each, synchronous=NORMAL (default 5000)
          --full-appends N        the same with synchronous=FULL, for reference (default 500)
          --batch-size N          appends per transaction for the in-transaction cost (default 100)
          --batches N             transactions of --batch-size appends (default 50)
          --checkpoint-appends N  timed appends that each sign a checkpoint (default 1000)
          --device-appends N      timed ManagedDevice.append calls on a provisioned device (default 1000; 0 skips)
          --verify-events N       events in the log that verify reads (default 100000)
          --verify-runs N         timed verify runs (default 5)
          --checkpoint-interval N checkpoint interval of the verified log (default 100, as policies/kiosk.json)
          --part-repeats N        repetitions of each part of an append in the breakdown (default 5000)
          --policy PATH           policy that provisions the device (default policies/kiosk.json)
          --dir PATH              parent of the temporary directory of the store files (default: $TMPDIR or /tmp)
          -h, --help              show this help

        """

    /// Parses `arguments` (without the program name). Exits on `--help` or a malformed option.
    static func parse(_ arguments: [String]) -> BenchOptions {
        var options = BenchOptions()
        var reader = OptionReader(tool: "audit-bench", usage: usage, arguments: arguments)
        while let argument = reader.next() {
            switch argument {
            case "--appends": options.appends = reader.integer(argument)
            case "--full-appends": options.fullAppends = reader.integer(argument, minimum: 0)
            case "--batch-size": options.batchSize = reader.integer(argument)
            case "--batches": options.batches = reader.integer(argument)
            case "--checkpoint-appends": options.checkpointAppends = reader.integer(argument)
            case "--device-appends": options.deviceAppends = reader.integer(argument, minimum: 0)
            case "--verify-events": options.verifyEvents = reader.integer(argument)
            case "--verify-runs": options.verifyRuns = reader.integer(argument)
            case "--checkpoint-interval": options.checkpointInterval = reader.integer(argument)
            case "--part-repeats": options.partRepeats = reader.integer(argument)
            case "--policy": options.policy = reader.value(argument)
            case "--dir": options.directory = reader.value(argument)
            default:
                reader.fail("unknown argument \"\(argument)\"")
            }
        }
        return options
    }
}

// MARK: - Events

/// Realistic events: the account manager's sign-outs at the end of a shift on a kiosk.
struct EventFactory {
    static let actor = "com.contoso.kiosk.timeclock"
    private let triggers = ["timeclock", "idle-timer", "badge-tap"]

    /// The `index`th event (the correlation id is a fresh UUID, built here and not while timing).
    func entry(_ index: Int) -> AuditEntry {
        AuditEntry(type: AuditEventType("account.signed_out"), actor: Self.actor,
                   account: "worker\(index % 50 + 1)@contoso.com", reason: "shift-end",
                   details: ["sessionSeconds": "\(28_000 + index % 900)", "itemsRemoved": "\(index % 4 + 2)",
                             "trigger": triggers[index % triggers.count]])
    }

    func entries(_ count: Int, from start: Int = 0) -> [AuditEntry] {
        (start..<start + count).map(entry)
    }
}

// MARK: - Benchmark

/// One benchmark run in its own temporary directory.
struct Benchmark {
    let options: BenchOptions
    let root: URL
    let events = EventFactory()

    /// A checkpoint interval no benchmark log reaches: appends that never sign.
    static let noCheckpoint = 1_000_000_000

    func store(_ name: String, _ synchronous: StoreOptions.Synchronous) throws -> KeychainStore {
        try KeychainStore(directory: root.appendingPathComponent(name), options: StoreOptions(synchronous: synchronous))
    }

    /// Appends `warmUp` untimed events (the first creates the tables), then times `count` appends, each
    /// in its own write transaction.
    func timeOwnTransactionAppends(_ store: KeychainStore, signer: AuditLog.Signer, count: Int, warmUp: Int = 200,
                                   checkpoint: Bool = false) throws -> Samples {
        for entry in events.entries(warmUp) {
            _ = try store.writeTransaction { tx in try AuditLog.append(entry, in: tx, signer: signer) }
        }
        let entries = events.entries(count, from: warmUp)
        var timings = Samples(capacity: count)
        for entry in entries {
            let start = monotonicNanos()
            let event = try store.writeTransaction { tx in try AuditLog.append(entry, in: tx, signer: signer, checkpoint: checkpoint) }
            timings.append(monotonicNanos() - start)
            consume(Int(event.sequence))
        }
        return timings
    }

    func run() throws {
        let signingKey = try SigningKey.generate()
        let quiet = AuditLog.Signer(key: signingKey, checkpointInterval: Self.noCheckpoint)

        print("audit-bench: AuditLog.append and AuditLog.verify on KeychainStore files (release build)")
        print("  events: account.signed_out by \(EventFactory.actor), accounts workerN@contoso.com, reason shift-end, 3 details")
        print("  temporary directory \(root.path); load average \(loadAverage())")

        // --- 1. Appends in their own transaction, no checkpoint: NORMAL (the goal), then FULL.
        let normalStore = try store("append-normal", .normal)
        let normal = try timeOwnTransactionAppends(normalStore, signer: quiet, count: options.appends).summary()
        let full = options.fullAppends > 0
            ? try timeOwnTransactionAppends(try store("append-full", .full), signer: quiet, count: options.fullAppends).summary()
            : nil

        // --- 2. Appends inside a transaction that is open anyway: batches of `batchSize`, each append timed
        // on its own, and each transaction as a whole.
        let batchStore = try store("append-batched", .normal)
        _ = try batchStore.writeTransaction { tx in try AuditLog.append(events.entry(0), in: tx, signer: quiet) }
        var inTransaction = Samples(capacity: options.batches * options.batchSize)
        var batchTotals = Samples(capacity: options.batches)
        var emptyTransactions = Samples(capacity: options.batches)
        for batch in 0..<options.batches {
            let entries = events.entries(options.batchSize, from: 1 + batch * options.batchSize)
            var timings = Samples(capacity: entries.count)
            let start = monotonicNanos()
            try batchStore.writeTransaction { tx in
                for entry in entries {
                    let appendStart = monotonicNanos()
                    try AuditLog.append(entry, in: tx, signer: quiet)
                    timings.append(monotonicNanos() - appendStart)
                }
            }
            batchTotals.append(monotonicNanos() - start)
            inTransaction.append(contentsOf: timings)
            // An empty write transaction right after, for the transaction's own cost.
            let emptyStart = monotonicNanos()
            try batchStore.writeTransaction { _ in }
            emptyTransactions.append(monotonicNanos() - emptyStart)
        }
        let inTx = inTransaction.summary()
        let batchTotal = batchTotals.summary()
        let empty = emptyTransactions.summary()

        // --- 3. Appends that sign a checkpoint (Ed25519 over the sequence and chain), own transaction, NORMAL.
        let checkpointStore = try store("append-checkpoint", .normal)
        let checkpointed = try timeOwnTransactionAppends(checkpointStore, signer: quiet, count: options.checkpointAppends,
                                                         checkpoint: true).summary()

        // --- 4. The real sign-out path on a provisioned device: ManagedDevice.append in the caller's transaction
        // (it reads the device record and its signer each time), checkpoints per the policy.
        var deviceAppends: Summary?
        var deviceVerify: AuditVerification?
        var policyNote = ""
        if options.deviceAppends > 0 {
            if let document = FileManager.default.contents(atPath: options.policy) {
                let device = ManagedDevice(store: try store("device", .normal))
                try device.provision(policyDocument: document, actor: "devicectl (uid 0 root)")
                let policy = try device.policy()
                policyNote = "policy \(options.policy), checkpoint interval \(policy?.audit.checkpointInterval ?? 0)"
                for entry in events.entries(50) {
                    _ = try device.store.writeTransaction { tx in try device.append(entry, in: tx) }
                }
                var timings = Samples(capacity: options.deviceAppends)
                for entry in events.entries(options.deviceAppends, from: 50) {
                    let start = monotonicNanos()
                    let event = try device.store.writeTransaction { tx in try device.append(entry, in: tx) }
                    timings.append(monotonicNanos() - start)
                    consume(Int(event?.sequence ?? 0))
                }
                deviceAppends = timings.summary()
                deviceVerify = try device.verifyAudit()
            } else {
                policyNote = "skipped: no policy at \(options.policy) (run from the package root or pass --policy)"
            }
        }

        // --- 5. Verify: a log of `verifyEvents` events built in big transactions, checkpoints every
        // `checkpointInterval` events, then verified several times in a read transaction.
        let verifyStore = try store("verify", .normal)
        let signer = AuditLog.Signer(key: signingKey, checkpointInterval: options.checkpointInterval)
        let buildStart = monotonicNanos()
        var built = 0
        while built < options.verifyEvents {
            let entries = events.entries(min(5000, options.verifyEvents - built), from: built)
            try verifyStore.writeTransaction { tx in
                for entry in entries { try AuditLog.append(entry, in: tx, signer: signer) }
            }
            built += entries.count
        }
        let buildSeconds = Double(monotonicNanos() - buildStart) / 1e9
        let trusted: Set<Data> = [signingKey.publicKey]
        var verifyTimes: [Double] = []
        var verification: AuditVerification?
        for _ in 0...options.verifyRuns {  // the first run warms the page cache and is not counted
            let start = monotonicNanos()
            verification = try verifyStore.readTransaction { tx in
                try AuditLog.verify(in: tx, trustedKeys: trusted, expectsEvents: true)
            }
            verifyTimes.append(Double(monotonicNanos() - start) / 1e9)
        }
        let verifyWarmUp = verifyTimes.removeFirst()
        guard let verification, verification.isIntact, verification.eventCount == options.verifyEvents else {
            throw BenchError("the verified log is not intact: \(verification?.eventCount ?? 0) events, "
                + "problems \(verification?.problems.prefix(3) ?? [])")
        }
        let medianVerify = verifyTimes.sorted()[verifyTimes.count / 2]
        let throughput = Double(verification.eventCount) / medianVerify

        // --- 6. Where the time goes: an append's steps, one by one, and verify's three passes.
        let parts = try AppendParts(store: normalStore, signer: quiet, events: events, repeats: options.partRepeats).measure()
        let verifyParts = try VerifyParts.measure(verifyStore, runs: options.verifyRuns)

        // --- Report.
        print("")
        print("load average after the measurements: \(loadAverage())")
        func row(_ name: String, _ summary: Summary) -> [String] {
            [name, "\(summary.count)", fixed(summary.min), fixed(summary.p50), fixed(summary.p90), fixed(summary.p99),
             fixed(summary.max), fixed(summary.mean)]
        }
        print("")
        print("Appends, microseconds per append")
        var appends = TextTable("series", "appends", "min", "p50", "p90", "p99", "max", "mean")
        appends.add(row("own transaction, no checkpoint, synchronous=NORMAL", normal))
        if let full { appends.add(row("own transaction, no checkpoint, synchronous=FULL", full)) }
        appends.add(row("own transaction, signed checkpoint, synchronous=NORMAL", checkpointed))
        appends.add(row("inside a transaction of \(options.batchSize) appends (NORMAL)", inTx))
        appends.add(row("empty write transaction (NORMAL), for reference", empty))
        if let deviceAppends {
            appends.add(row("ManagedDevice.append, own transaction (NORMAL, provisioned)", deviceAppends))
        }
        print(appends.render())
        let perAppendInBatch = batchTotal.p50 / Double(options.batchSize)
        print("  a transaction of \(options.batchSize) appends: p50 \(fixed(batchTotal.p50)) µs, i.e. \(fixed(perAppendInBatch)) µs per append "
            + "(commit included); an empty write transaction: p50 \(fixed(empty.p50)) µs")
        print("  p99 and max of the own-transaction series include SQLite's WAL auto-checkpoints (every 1000 pages)")
        print("  and whatever else the machine runs (see the load averages).")
        if options.deviceAppends > 0 {
            print("  provisioned device: \(policyNote)"
                + (deviceVerify.map { "; its log verifies \($0.isIntact ? "intact" : "NOT intact: \($0.problems.prefix(2))") "
                    + "(\($0.eventCount) events, \($0.checkpointCount) checkpoints)" } ?? ""))
        }

        print("")
        print("Where an append's time goes (p50 of each step over \(options.partRepeats) repetitions, microseconds; the steps run")
        print("the same code as AuditLog.append on tables of their own, in turn with real appends, in one transaction;")
        print("the sum of p50s is approximate)")
        print(parts.table(appendInTransaction: inTx.p50, appendOwnTransaction: normal.p50))

        print("")
        print("Verify: a log of \(verification.eventCount) events with \(verification.checkpointCount) signed checkpoints "
            + "(interval \(options.checkpointInterval)), built in \(fixed(buildSeconds, 1)) s "
            + "(\(fixed(Double(options.verifyEvents) / buildSeconds, 0)) appends/s in transactions of 5000)")
        print("  database + WAL size \(fixed(Double(databaseSize(verifyStore.databaseURL.path)) / 1_048_576, 1)) MiB; "
            + "warm-up run \(fixed(verifyWarmUp * 1000, 1)) ms (not counted)")
        print("  runs: " + verifyTimes.map { "\(fixed($0 * 1000, 1)) ms" }.joined(separator: ", ")
            + "; median \(fixed(medianVerify * 1000, 1)) ms = \(fixed(medianVerify * 1e6 / Double(verification.eventCount), 2)) µs per event")
        print("")
        print("Where verify's time goes (median of \(options.verifyRuns) runs of each pass, timed separately with the same code as AuditLog.verify)")
        print(verifyParts.table(verifyMedian: medianVerify, events: verification.eventCount))

        print("")
        print("audit append p50 (no checkpoint, synchronous FULL, reference): "
            + (full.map { "\(fixed($0.p50, 1)) µs" } ?? "not measured"))
        print("audit append in an existing transaction (\(options.batchSize) per transaction): p50 \(fixed(inTx.p50, 1)) µs per append "
            + "(\(fixed(perAppendInBatch, 1)) µs per append with the commit shared)")
        print("audit append p50 (signed checkpoint, synchronous NORMAL): \(fixed(checkpointed.p50, 1)) µs")
        print("audit append p50 (no checkpoint, synchronous NORMAL): \(fixed(normal.p50, 1)) µs (goal ≤ 100 µs)")
        print("audit verify throughput: \(grouped(throughput)) events/s (goal ≥ 100,000 events/s)")
    }
}

// MARK: - An append, step by step

/// Times the steps of `AuditLog.append` separately, repeating the same code on tables shaped like the
/// audit log's (`bench_events`, `bench_head`) in the same database, so that nothing touches the real log.
struct AppendParts {
    let store: KeychainStore
    let signer: AuditLog.Signer
    let events: EventFactory
    let repeats: Int

    struct Result {
        /// The name of the real `AuditLog.append`, timed in turn with the steps.
        static let reference = "AuditLog.append, timed in turn with the steps"
        var parts: [(name: String, summary: Summary)] = []

        func table(appendInTransaction: Double, appendOwnTransaction: Double) -> String {
            let reference = parts.first { $0.name == Self.reference }?.summary.p50 ?? appendInTransaction
            var table = TextTable("step", "p50 µs", "share of the append")
            var sum = 0.0
            for part in parts where !part.name.hasPrefix("(") && part.name != Self.reference {
                table.add(part.name, fixed(part.summary.p50), fixed(100 * part.summary.p50 / reference, 0) + " %")
                sum += part.summary.p50
            }
            table.add("= sum of the steps", fixed(sum), fixed(100 * sum / reference, 0) + " %")
            table.add(Self.reference, fixed(reference), "100 %")
            table.add("(append inside a transaction, measured above)", fixed(appendInTransaction), "")
            for part in parts where part.name.hasPrefix("(") {
                table.add(part.name, fixed(part.summary.p50), "")
            }
            table.add("(append in its own transaction, measured above)", fixed(appendOwnTransaction), "")
            return table.render()
        }
    }

    /// The statements of `AuditLog.append`, on the bench's own tables.
    static let insertEvent = """
        INSERT INTO bench_events (sequence, time, type, actor, account, reason, correlation_id, details, chain)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
    static let upsertHead = "INSERT OR REPLACE INTO bench_head (id, sequence, chain, tag) VALUES (1, ?, ?, ?)"
    static let selectHead = "SELECT sequence, chain, tag FROM bench_head WHERE id = 1"

    func measure() throws -> Result {
        var result = Result()
        let entries = events.entries(repeats)
        let date = Date()
        let timeStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt)
        let timeText = date.formatted(timeStyle)
        let details = AppendParts.encodeDetails(entries[0].details)
        let chain = Data(repeating: 0xA5, count: ChainHash.byteCount)

        /// Runs the steps round-robin, `repeats` times each, so that they all see the same load
        /// (on a shared machine, timing one step after the other attributes load changes to steps).
        func timeInterleaved(_ steps: [(name: String, body: (Int) throws -> Int)]) throws {
            var samples = steps.map { _ in Samples(capacity: repeats) }
            for index in 0..<repeats {
                for (position, step) in steps.enumerated() {
                    let start = monotonicNanos()
                    let value = try step.body(index)
                    samples[position].append(monotonicNanos() - start)
                    consume(value)
                }
            }
            result.parts.append(contentsOf: zip(steps, samples).map { ($0.name, $1.summary()) })
        }

        try store.writeTransaction { tx in
            let db = tx.database
            try db.execute(sql: """
                CREATE TABLE bench_events (sequence INTEGER PRIMARY KEY, time TEXT NOT NULL, type TEXT NOT NULL,
                    actor TEXT NOT NULL, account TEXT, reason TEXT, correlation_id TEXT NOT NULL, details TEXT NOT NULL,
                    chain BLOB NOT NULL);
                CREATE TABLE bench_head (id INTEGER PRIMARY KEY CHECK (id = 1), sequence INTEGER NOT NULL,
                    chain BLOB NOT NULL, tag BLOB NOT NULL);
                """)
            try db.execute(sql: Self.upsertHead, arguments: [0, chain, chain])
        }

        // Inside one write transaction, as an append inside the caller's transaction, next to real appends
        // (to the store's own log, which this transaction extends by `repeats` events).
        try store.writeTransaction { tx in
            let db = tx.database
            try timeInterleaved([
                ("read the head (cached SELECT + tag check)", { _ in
                    let row = try Row.fetchOne(db.cachedStatement(sql: Self.selectHead))!
                    let sequence: Int64 = row[0]
                    let stored: Data = row[1]
                    let tag = tx.integrityTag(Self.headMessage(sequence: sequence, chain: stored), domain: 1)
                    return tag == row[2] as Data ? 1 : 0
                }),
                ("transaction clock (tx.now)", { _ in Int(tx.now.timeIntervalSince1970) & 1 }),
                ("format the time (ISO8601FormatStyle)", { _ in date.formatted(timeStyle).utf8.count }),
                ("encode the details (JSONEncoder, sorted keys)", { index in Self.encodeDetails(entries[index].details).utf8.count }),
                ("chain hash (encode the columns + BLAKE2b-256)", { index in
                    let entry = entries[index]
                    let columns = Columns(sequence: Int64(index + 1), time: timeText, type: entry.type.rawValue, actor: entry.actor,
                                          account: entry.account, reason: entry.reason, correlationID: entry.correlationID, details: details)
                    return Self.chainNext(after: chain, columns).count
                }),
                ("INSERT the event (cached statement)", { index in
                    let entry = entries[index]
                    try db.cachedStatement(sql: Self.insertEvent).execute(arguments: [
                        index + 1, timeText, entry.type.rawValue, entry.actor, entry.account, entry.reason,
                        entry.correlationID, details, chain])
                    return 1
                }),
                ("head tag (keyed BLAKE2b of the head)", { index in
                    tx.integrityTag(Self.headMessage(sequence: Int64(index), chain: chain), domain: 1).count
                }),
                ("INSERT OR REPLACE the head (cached statement)", { index in
                    try db.cachedStatement(sql: Self.upsertHead).execute(arguments: [index + 1, chain, chain])
                    return 1
                }),
                ("parse the time back for the returned event", { _ in
                    (try? timeStyle.parse(timeText)).map { Int($0.timeIntervalSince1970) & 1 } ?? 0
                }),
                (Result.reference, { index in
                    Int(try AuditLog.append(entries[index], in: tx, signer: signer).sequence & 1)
                }),
            ])
            try db.execute(sql: "DROP TABLE bench_events; DROP TABLE bench_head")
        }
        // Outside: the transaction itself, and the checkpoint's signature.
        let key = try SigningKey.generate()
        try timeInterleaved([
            ("(empty write transaction: BEGIN IMMEDIATE + COMMIT)", { _ in
                try store.writeTransaction { _ in }
                return 1
            }),
            ("(Ed25519 signature of a checkpoint)", { index in
                key.signature(for: Self.headMessage(sequence: Int64(index), chain: chain)).count
            }),
        ])
        return result
    }

    /// As `AuditLog.encodeDetails`.
    static func encodeDetails(_ details: [String: String]) -> String {
        guard !details.isEmpty else { return "{}" }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(details)) ?? Data("{}".utf8), as: UTF8.self)
    }

    /// As `AuditChain.headMessage`.
    static func headMessage(sequence: Int64, chain: Data) -> Data {
        var bytes = Array("devicectl audit head v1".utf8)
        appendBigEndian(UInt64(bitPattern: sequence), to: &bytes)
        return Data(bytes) + chain
    }

    /// As `AuditChain.checkpointMessage`.
    static func checkpointMessage(sequence: Int64, chain: Data) -> Data {
        var bytes = Array("devicectl audit checkpoint v1".utf8)
        appendBigEndian(UInt64(bitPattern: sequence), to: &bytes)
        return Data(bytes) + chain
    }

    /// As `AuditChain.Columns`: an event's stored columns.
    struct Columns {
        var sequence: Int64
        var time: String
        var type: String
        var actor: String
        var account: String?
        var reason: String?
        var correlationID: String
        var details: String
    }

    /// As `AuditChain.next`.
    static func chainNext(after previous: Data, _ columns: Columns) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        appendBigEndian(UInt64(bitPattern: columns.sequence), to: &bytes)
        func field(_ text: String) {
            let count = UInt32(text.utf8.count)
            for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: count >> UInt32(shift))) }
            bytes.append(contentsOf: text.utf8)
        }
        func optionalField(_ text: String?) {
            if let text {
                bytes.append(1)
                field(text)
            } else {
                bytes.append(0)
            }
        }
        field(columns.time)
        field(columns.type)
        field(columns.actor)
        optionalField(columns.account)
        optionalField(columns.reason)
        field(columns.correlationID)
        field(columns.details)
        return ChainHash.next(previous: previous, message: bytes)
    }

    static func appendBigEndian(_ value: UInt64, to bytes: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }
}

// MARK: - Verify, pass by pass

/// Times the passes of `AuditLog.verify` separately on the same log: reading and decoding the events,
/// recomputing the chain, and checking the checkpoints' signatures.
enum VerifyParts {
    struct Result {
        var rows = 0.0, chain = 0.0, signatures = 0.0
        var checkpoints = 0

        func table(verifyMedian: Double, events: Int) -> String {
            var table = TextTable("pass", "ms", "µs per event", "share of verify")
            func add(_ name: String, _ seconds: Double) {
                table.add(name, fixed(seconds * 1000, 1), fixed(seconds * 1e6 / Double(events), 2), fixed(100 * seconds / verifyMedian, 0) + " %")
            }
            add("SELECT all events + decode 9 columns (Row cursor, String/Data)", rows)
            add("recompute the chain (encode the columns + BLAKE2b-256)", chain)
            add("\(checkpoints) checkpoint signatures (Ed25519 verify)", signatures)
            add("= sum of the passes", rows + chain + signatures)
            add("measured: AuditLog.verify", verifyMedian)
            return table.render()
        }
    }

    static func measure(_ store: KeychainStore, runs: Int) throws -> Result {
        var rows: [Double] = [], chain: [Double] = [], signatures: [Double] = []
        var checkpoints = 0
        try store.readTransaction { tx in
            let db = tx.database
            for _ in 0..<runs {
                var start = monotonicNanos()
                var decoded: [AppendParts.Columns] = []
                var stored: [Data] = []
                let cursor = try Row.fetchCursor(db, sql: """
                    SELECT sequence, time, type, actor, account, reason, correlation_id, details, chain FROM audit_events ORDER BY sequence
                    """)
                while let row = try cursor.next() {
                    decoded.append(AppendParts.Columns(sequence: row[0], time: row[1], type: row[2], actor: row[3], account: row[4],
                                                       reason: row[5], correlationID: row[6], details: row[7]))
                    stored.append(row[8])
                }
                rows.append(Double(monotonicNanos() - start) / 1e9)

                start = monotonicNanos()
                var previous = Data(count: ChainHash.byteCount)
                var mismatches = 0
                for (columns, chainValue) in zip(decoded, stored) {
                    if AppendParts.chainNext(after: previous, columns) != chainValue { mismatches += 1 }
                    previous = chainValue
                }
                chain.append(Double(monotonicNanos() - start) / 1e9)
                guard mismatches == 0 else { throw BenchError("\(mismatches) events do not match the bench's copy of the chain encoding") }

                start = monotonicNanos()
                checkpoints = 0
                for row in try Row.fetchAll(db, sql: "SELECT sequence, chain, public_key, signature FROM audit_checkpoints ORDER BY sequence") {
                    let message = AppendParts.checkpointMessage(sequence: row[0], chain: row[1])
                    if SigningKey.isValidSignature(row[3], of: message, publicKey: row[2]) { checkpoints += 1 }
                }
                signatures.append(Double(monotonicNanos() - start) / 1e9)
            }
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        return Result(rows: median(rows), chain: median(chain), signatures: median(signatures), checkpoints: checkpoints)
    }
}

// MARK: - Main

let options = BenchOptions.parse(Array(CommandLine.arguments.dropFirst()))
exit(runInTemporaryDirectory(tool: "audit-bench", parent: options.directory) { root in try Benchmark(options: options, root: root).run() })
