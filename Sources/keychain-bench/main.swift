// keychain-bench: point-read latency of the encrypted KeychainStore against plain SQLite read the same
// way through GRDB, plus add latency with synchronous FULL and NORMAL. Run it with tools/bench-store.
//
// The last line of the output is always `store point-read ratio (encrypted/plain): R`, R being the
// encrypted p50 divided by the plain p50 (the plain read that uses the store's access path unless
// `--baseline` chooses another).

import BenchSupport
import Foundation
import GRDB
import KeychainStore

/// One benchmark run in its own temporary directory.
struct Benchmark {
    let options: BenchOptions
    let root: URL
    let group = AccessGroup.adalCache

    /// The plain baseline: the same three lookup attributes in one UNIQUE index, the secret in clear.
    static let plainSchema = """
        CREATE TABLE plain_items (
            id INTEGER PRIMARY KEY,
            group_name TEXT NOT NULL,
            service TEXT NOT NULL,
            account TEXT NOT NULL,
            secret BLOB NOT NULL,
            UNIQUE (group_name, service, account)
        )
        """
    static let plainInsert = "INSERT INTO plain_items (group_name, service, account, secret) VALUES (?, ?, ?, ?)"
    static let plainSelect = "SELECT id, secret FROM plain_items WHERE group_name = ? AND service = ? AND account = ?"

    /// The statement `KeychainStore.find` runs for a group+service+account query (text as in ItemTable.row(exactly:)).
    static let storeSelect = """
        SELECT id, label_index, type_index, format, nonce, ciphertext \
        FROM items WHERE group_index = ? AND service_index = ? AND account_index = ?
        """

    /// The configuration `KeychainStore.init` gives its connection: busy timeout, WAL and `synchronous`
    /// set in prepareDatabase. Used for the plain baseline and the raw view of the store's file.
    static func configuration(label: String, synchronous: StoreOptions.Synchronous) -> Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(30)
        configuration.label = label
        let pragma = synchronous.rawValue
        configuration.prepareDatabase { db in
            guard try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") == "wal" else {
                throw BenchError("cannot switch \(db.description) to WAL mode")
            }
            try db.execute(sql: "PRAGMA synchronous = \(pragma)")
        }
        return configuration
    }

    /// What the store's `sealedRow` extracts from a row (the copies it makes before decrypting).
    struct RawSealedRow {
        var id: Int64
        var group, service, account: Data
        var label, type: Data?
        var format: Int
        var nonce, ciphertext: Data
    }

    enum Series: CaseIterable {
        case encrypted, plainQueue, plainPool, plainUnsafe, storeQuery, storeQueryUnsafe
    }

    func run() throws {
        let count = options.items
        var generator = SplitMix64(seed: options.seed)
        let services = (0..<count).map { "svc-\($0)" }
        let accounts = (0..<count).map { "acct-\($0)" }
        let secrets = (0..<count).map { _ in generator.bytes(options.secretBytes) }
        let keys = (0..<options.reads).map { _ in Int.random(in: 0..<count, using: &generator) }
        let app = try AppIdentity(appID: "com.contoso.keychain-bench", accessGroups: [group])

        print("keychain-bench: \(count) items with \(options.secretBytes)-byte random secrets in access group \(group)")
        print("  \(options.reads) random point reads per series in \(options.rounds) rounds (the series rotate their order every round), seed \(options.seed)")
        print("  temporary directory \(root.path); load average \(loadAverage())")

        // --- Encrypted store (synchronous NORMAL), populated one add (= one transaction) per item.
        let store = try KeychainStore(directory: root.appendingPathComponent("encrypted"), options: StoreOptions(synchronous: .normal))
        var encryptedPopulate = Samples(capacity: count)
        for index in 0..<count {
            let item = NewItem(accessGroup: group, service: services[index], account: accounts[index], secret: secrets[index])
            let start = monotonicNanos()
            try store.add(item, as: app)
            encryptedPopulate.append(monotonicNanos() - start)
        }

        // --- Plain baseline: its own WAL file, written through a DatabaseQueue configured like the store's
        // connection, one transaction per insert as well. A DatabasePool on the same file is the second baseline.
        let plainDirectory = root.appendingPathComponent("plain")
        try FileManager.default.createDirectory(at: plainDirectory, withIntermediateDirectories: true)
        let plainPath = plainDirectory.appendingPathComponent("plain.sqlite").path
        let plainQueue = try DatabaseQueue(path: plainPath, configuration: Self.configuration(label: "plain-queue", synchronous: .normal))
        try plainQueue.write { db in try db.execute(sql: Self.plainSchema) }
        var plainPopulate = Samples(capacity: count)
        for index in 0..<count {
            let arguments: StatementArguments = [group, services[index], accounts[index], secrets[index]]
            let start = monotonicNanos()
            try plainQueue.write { db in try db.cachedStatement(sql: Self.plainInsert).execute(arguments: arguments) }
            plainPopulate.append(monotonicNanos() - start)
        }
        let plainPool = try DatabasePool(path: plainPath, configuration: Self.configuration(label: "plain-pool", synchronous: .normal))

        // --- A second, plain GRDB connection to the store's own file, to time the store's SQL without the crypto.
        // Items were added in order to a fresh table, so item i is row id i+1; its blind indexes are read back.
        let raw = try DatabaseQueue(path: store.databaseURL.path, configuration: Self.configuration(label: "store-raw", synchronous: .normal))
        let indexRows = try raw.read { db in
            try Row.fetchAll(db, sql: "SELECT id, group_index, service_index, account_index FROM items ORDER BY id")
        }
        guard indexRows.count == count, indexRows.enumerated().allSatisfy({ $0.element[0] as Int64 == Int64($0.offset + 1) }) else {
            throw BenchError("the store's items table does not hold rows 1...\(count) as expected")
        }
        let blindIndexes: [[Data]] = indexRows.map { [$0[1], $0[2], $0[3]] }

        let (sqliteVersion, journalMode, synchronous) = try plainQueue.read { db in
            (try String.fetchOne(db, sql: "SELECT sqlite_version()") ?? "?",
             try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "?",
             try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1)
        }
        let mb = { (bytes: Int) in fixed(Double(bytes) / 1_048_576, 1) + " MiB" }
        print("  SQLite \(sqliteVersion); plain baseline journal_mode=\(journalMode), synchronous=\(Self.synchronousName(synchronous))")
        print("  database + WAL size: encrypted \(mb(databaseSize(store.databaseURL.path))), plain \(mb(databaseSize(plainPath)))")

        // --- The read paths. Each returns the secret (or ciphertext) so nothing is optimised away.
        func readEncrypted(_ index: Int) throws -> Data {
            try store.find(ItemQuery(accessGroup: group, service: services[index], account: accounts[index]), as: app).secret
        }
        func readPlain(_ reader: some DatabaseReader, _ index: Int) throws -> Data {
            let service = services[index], account = accounts[index]
            let found = try reader.read { db -> (Int64, Data)? in
                guard let row = try Row.fetchOne(db.cachedStatement(sql: Self.plainSelect), arguments: [group, service, account]) else {
                    return nil
                }
                return (row[0], row[1])
            }
            guard let found else { throw BenchError("plain row \(index) is missing") }
            return found.1
        }
        // The same plain read without DatabaseQueue.read's PRAGMA query_only on/off (which expires every
        // prepared statement, so each read recompiles its SQL): unsafeRead plus an explicit deferred transaction.
        func readPlainUnsafe(_ index: Int) throws -> Data {
            let service = services[index], account = accounts[index]
            var found: Data?
            try plainQueue.unsafeRead { db in
                try db.inTransaction(.deferred) {
                    found = try Row.fetchOne(db.cachedStatement(sql: Self.plainSelect), arguments: [group, service, account]).map { $0[1] }
                    return .commit
                }
            }
            guard let found else { throw BenchError("plain row \(index) is missing") }
            return found
        }
        // The store's statement, arguments and row extraction, without decryption.
        func storeRows(_ db: Database, _ index: Int) throws -> [RawSealedRow] {
            let key = blindIndexes[index]
            return try Row.fetchAll(db.cachedStatement(sql: Self.storeSelect), arguments: StatementArguments(key)).map { row in
                RawSealedRow(id: row[0], group: key[0], service: key[1], account: key[2], label: row[1], type: row[2],
                             format: row[3], nonce: row[4], ciphertext: row[5])
            }
        }
        func readStoreQuery(_ index: Int) throws -> Data {
            let rows = try raw.read { db in try storeRows(db, index) }
            guard let first = rows.first else { throw BenchError("store row \(index) is missing") }
            return first.ciphertext
        }
        func readStoreQueryUnsafe(_ index: Int) throws -> Data {
            var rows: [RawSealedRow] = []
            try raw.unsafeRead { db in
                try db.inTransaction(.deferred) {
                    rows = try storeRows(db, index)
                    return .commit
                }
            }
            guard let first = rows.first else { throw BenchError("store row \(index) is missing") }
            return first.ciphertext
        }
        func read(_ series: Series, _ index: Int) throws -> Data {
            switch series {
            case .encrypted: try readEncrypted(index)
            case .plainQueue: try readPlain(plainQueue, index)
            case .plainPool: try readPlain(plainPool, index)
            case .plainUnsafe: try readPlainUnsafe(index)
            case .storeQuery: try readStoreQuery(index)
            case .storeQueryUnsafe: try readStoreQueryUnsafe(index)
            }
        }

        // --- Warm-up: every item once through every path, checking what comes back.
        for index in 0..<count {
            guard try readEncrypted(index) == secrets[index] else { throw BenchError("encrypted item \(index) came back different") }
            guard try readPlain(plainQueue, index) == secrets[index] else { throw BenchError("plain item \(index) came back different") }
            guard try readPlain(plainPool, index) == secrets[index] else { throw BenchError("plain item \(index) came back different") }
            guard try readPlainUnsafe(index) == secrets[index] else { throw BenchError("plain item \(index) came back different") }
            guard try readStoreQuery(index).count > options.secretBytes else { throw BenchError("store row \(index) is too short") }
            guard try readStoreQueryUnsafe(index).count > options.secretBytes else { throw BenchError("store row \(index) is too short") }
        }

        // --- Timed reads: rounds over consecutive slices of the key sequence; within a round every series
        // reads the same slice in the same order, and the series order rotates from round to round.
        var samples: [Series: Samples] = [:]
        var roundP50: [Series: [Double]] = [:]
        let roundSize = options.reads / options.rounds
        for round in 0..<options.rounds {
            let lower = round * roundSize
            let upper = round == options.rounds - 1 ? options.reads : lower + roundSize
            let slice = keys[lower..<upper]
            let all = Series.allCases
            for position in all.indices {
                let series = all[(position + round) % all.count]
                var timings = Samples(capacity: slice.count)
                for index in slice {
                    let start = monotonicNanos()
                    let secret = try read(series, index)
                    let end = monotonicNanos()
                    timings.append(end - start)
                    consume(secret.count)
                }
                roundP50[series, default: []].append(timings.summary().p50)
                samples[series, default: Samples(capacity: options.reads)].append(contentsOf: timings)
            }
        }
        let summaries = samples.mapValues { $0.summary() }
        let encrypted = summaries[.encrypted]!
        let storeQuery = summaries[.storeQuery]!
        let storeQueryUnsafe = summaries[.storeQueryUnsafe]!
        let plainUnsafe = summaries[.plainUnsafe]!
        let baselineSeries: Series = switch options.baseline {
        case .queue: .plainQueue
        case .pool: .plainPool
        case .unsafeRead: .plainUnsafe
        }
        let baseline = summaries[baselineSeries]!
        func name(_ series: Series) -> String {
            switch series {
            case .encrypted: "encrypted"
            case .plainQueue: "plain (queue)"
            case .plainPool: "plain (pool)"
            case .plainUnsafe: "plain (unsafe-read)"
            case .storeQuery: "store SELECT, no crypto (queue)"
            case .storeQueryUnsafe: "store SELECT, no crypto (unsafe-read)"
            }
        }

        // --- The libsodium share of a find, with the same primitives and sizes.
        let crypto = try CryptoCost.measure(group: group, services: services, accounts: accounts, secretBytes: options.secretBytes,
                                            keys: keys, generator: &generator)
        let hashes = crypto.blindIndexes.summary()
        let aead = crypto.aeadOpen.summary()

        // --- Adds into fresh stores: synchronous FULL (a WAL sync per commit) and NORMAL.
        func timeAdds(_ synchronous: StoreOptions.Synchronous, count adds: Int) throws -> Samples {
            let directory = root.appendingPathComponent("adds-\(synchronous.rawValue.lowercased())")
            let fresh = try KeychainStore(directory: directory, options: StoreOptions(synchronous: synchronous))
            // The first add also creates the access group's key; keep it out of the timings.
            try fresh.add(NewItem(accessGroup: group, service: "warm-up", account: "warm-up", secret: secrets[0]), as: app)
            var timings = Samples(capacity: adds)
            for index in 0..<adds {
                let item = NewItem(accessGroup: group, service: "svc-\(index)", account: "acct-\(index)", secret: secrets[index % count])
                let start = monotonicNanos()
                try fresh.add(item, as: app)
                timings.append(monotonicNanos() - start)
            }
            return timings
        }
        let fullAdds = try timeAdds(.full, count: options.fullAdds).summary()
        let normalAdds = try timeAdds(.normal, count: options.normalAdds).summary()

        // --- Reference: plain inserts with synchronous=FULL, same connection style, to show what a synced commit costs here.
        let fullDirectory = root.appendingPathComponent("plain-full")
        try FileManager.default.createDirectory(at: fullDirectory, withIntermediateDirectories: true)
        let fullQueue = try DatabaseQueue(path: fullDirectory.appendingPathComponent("plain.sqlite").path,
                                          configuration: Self.configuration(label: "plain-full", synchronous: .full))
        let fullSynchronous = try fullQueue.write { db in
            try db.execute(sql: Self.plainSchema)
            return try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1
        }
        var plainFull = Samples(capacity: options.fullAdds)
        for index in 0..<options.fullAdds {
            let arguments: StatementArguments = [group, services[index % count], "\(accounts[index % count])-\(index)", secrets[index % count]]
            let start = monotonicNanos()
            try fullQueue.write { db in try db.cachedStatement(sql: Self.plainInsert).execute(arguments: arguments) }
            plainFull.append(monotonicNanos() - start)
        }

        // --- Report.
        print("")
        print("load average after the measurements: \(loadAverage())")
        func row(_ name: String, _ summary: Summary) -> [String] {
            [name, "\(summary.count)", fixed(summary.min), fixed(summary.p50), fixed(summary.p90), fixed(summary.p99),
             fixed(summary.max), fixed(summary.mean)]
        }
        let baselineName = name(baselineSeries)
        print("")
        print("Point reads, microseconds per read (same keys, same order for every series)")
        var reads = TextTable("series", "reads", "min", "p50", "p90", "p99", "max", "mean")
        reads.add(row("encrypted: store.find (sync NORMAL)", encrypted))
        reads.add(row("plain (queue): DatabaseQueue.read", summaries[.plainQueue]!))
        reads.add(row("plain (pool): DatabasePool.read", summaries[.plainPool]!))
        reads.add(row("plain (unsafe-read): DatabaseQueue.unsafeRead + BEGIN DEFERRED", plainUnsafe))
        reads.add(row("store SELECT, no crypto (queue): DatabaseQueue.read", storeQuery))
        reads.add(row("store SELECT, no crypto (unsafe-read)", storeQueryUnsafe))
        print(reads.render())
        print("  plain: SELECT id, secret by (group, service, account) on the plain table, Row.fetchOne(db.cachedStatement).")
        print("  store SELECT: the store's own statement, arguments and row copies on the store's file, through a second")
        print("  connection opened like the store's, without decrypting. The store reads through DatabaseQueue.unsafeRead in")
        print("  a deferred transaction, so \"plain (unsafe-read)\" is its access path; the final ratio divides by \(baselineName)")
        print("  (--baseline queue|pool|unsafe-read).")

        print("")
        let roundRatios = zip(roundP50[.encrypted]!, roundP50[baselineSeries]!).map { $0 / $1 }
        if options.rounds <= 8 {
            print("p50 per round, microseconds")
            var rounds = TextTable(columns: ["series"] + (1...options.rounds).map { "round \($0)" })
            for series in Series.allCases {
                rounds.add([name(series)] + roundP50[series]!.map { fixed($0) })
            }
            rounds.add(["ratio encrypted/\(baselineName)"] + roundRatios.map { fixed($0) })
            print(rounds.render())
        } else {
            print("p50 of each of the \(options.rounds) rounds (\(options.reads / options.rounds) reads each), microseconds: spread over the rounds")
            var rounds = TextTable("series", "lowest", "median", "highest")
            func spread(_ values: [Double]) -> [String] {
                let sorted = values.sorted()
                return [fixed(sorted[0]), fixed(sorted[sorted.count / 2]), fixed(sorted[sorted.count - 1])]
            }
            for series in Series.allCases {
                rounds.add([name(series)] + spread(roundP50[series]!))
            }
            rounds.add(["ratio encrypted/\(baselineName)"] + spread(roundRatios))
            print(rounds.render())
        }

        print("")
        print("Writes, microseconds per add (one transaction each)")
        var writes = TextTable("series", "adds", "min", "p50", "p90", "p99", "max", "mean")
        if options.fullAdds > 0 { writes.add(row("encrypted add, fresh store, synchronous=FULL", fullAdds)) }
        if options.normalAdds > 0 { writes.add(row("encrypted add, fresh store, synchronous=NORMAL", normalAdds)) }
        writes.add(row("encrypted add while populating (NORMAL)", encryptedPopulate.summary()))
        writes.add(row("plain INSERT while populating (NORMAL)", plainPopulate.summary()))
        if options.fullAdds > 0 {
            writes.add(row("plain INSERT, fresh file, synchronous=\(Self.synchronousName(fullSynchronous))", plainFull.summary()))
        }
        print(writes.render())

        print("")
        print("Where an encrypted read's time goes (p50 of each part, microseconds; parts timed separately, so the sum is approximate)")
        let storeSelect = options.baseline == .unsafeRead ? storeQueryUnsafe : storeQuery
        let selectExtra = storeSelect.p50 - baseline.p50
        let rest = encrypted.p50 - storeSelect.p50 - hashes.p50 - aead.p50
        var parts = TextTable("part", "p50 µs", "share")
        func part(_ name: String, _ value: Double) { parts.add(name, fixed(value), fixed(100 * value / encrypted.p50, 0) + " %") }
        part("\(baselineName) read (the baseline)", baseline.p50)
        part("store's SELECT (same access path), minus the baseline", selectExtra)
        part("3 blind indexes: keyed BLAKE2b-128 (libsodium)", hashes.p50)
        part("XChaCha20-Poly1305 open of \(crypto.ciphertextBytes) bytes (libsodium)", aead.p50)
        part("rest: find's Swift work (index/AD/payload Data building, decode, copies, wipe, checks)", rest)
        parts.add("= encrypted store.find", fixed(encrypted.p50), "100 %")
        print(parts.render())
        let overhead = encrypted.p50 - baseline.p50
        let reprepare = storeQuery.p50 - storeQueryUnsafe.p50
        let shape = storeQueryUnsafe.p50 - plainUnsafe.p50
        print("breakdown: encrypted p50 \(fixed(encrypted.p50)) µs = store's SELECT \(fixed(storeSelect.p50)) (\(baselineName) \(fixed(baseline.p50)) "
            + "+ \(fixed(selectExtra))) + libsodium \(fixed(hashes.p50 + aead.p50)) (BLAKE2b x3 \(fixed(hashes.p50)), AEAD \(fixed(aead.p50))) "
            + "+ other Swift work \(fixed(rest)); overhead over the baseline \(fixed(overhead)) µs: "
            + "SELECT \(fixed(100 * selectExtra / overhead, 0)) %, libsodium \(fixed(100 * (hashes.p50 + aead.p50) / overhead, 0)) %, "
            + "Swift \(fixed(100 * rest / overhead, 0)) %")
        print("breakdown: the store's SELECT costs \(fixed(storeQuery.p50)) µs through DatabaseQueue.read but \(fixed(storeQueryUnsafe.p50)) µs "
            + "through unsafeRead + BEGIN DEFERRED, +\(fixed(reprepare)) µs (plain SELECT: +\(fixed(summaries[.plainQueue]!.p50 - plainUnsafe.p50)) µs): "
            + "read sets PRAGMA query_only on and off around every read, which expires every prepared statement, so the cached "
            + "SELECT is compiled again each time; without that, its 9 columns, blob keys and copies cost \(fixed(shape)) µs over the plain SELECT")
        if rest < 0 {
            print("breakdown: the rest is negative: the store no longer seems to read through DatabaseQueue.read; compare with the unsafe-read rows")
        }
        print("")
        print("point-read ratio against each plain read: "
            + [Series.plainQueue, .plainPool, .plainUnsafe].map { "\(name($0)) \(fixed(encrypted.p50 / summaries[$0]!.p50))" }.joined(separator: ", "))
        print("store point-read ratio (encrypted/plain): \(fixed(encrypted.p50 / baseline.p50))")
    }

    static func synchronousName(_ value: Int) -> String {
        switch value {
        case 0: "OFF"
        case 1: "NORMAL"
        case 2: "FULL"
        case 3: "EXTRA"
        default: "\(value)"
        }
    }
}

let options = BenchOptions.parse(Array(CommandLine.arguments.dropFirst()))
exit(runInTemporaryDirectory(tool: "keychain-bench", parent: options.directory) { root in try Benchmark(options: options, root: root).run() })
