import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Options

/// Command-line options of `keychain-bench` (see `--help`).
struct BenchOptions {
    var items = 10_000
    var secretBytes = 2048
    var reads = 20_000
    var rounds = 40
    var fullAdds = 500
    var normalAdds = 2000
    var seed: UInt64 = 0x5EED_CAFE
    var directory: String?
    /// Which plain baseline the final ratio divides by.
    var baseline: Baseline = .unsafeRead

    enum Baseline: String, CaseIterable {
        /// `DatabaseQueue.read` on a queue configured as `KeychainStore` opens its database (its access path).
        case queue
        /// `DatabasePool.read` on the same plain file.
        case pool
        /// `DatabaseQueue.unsafeRead` + a deferred transaction on the same queue (no `PRAGMA query_only` toggling).
        case unsafeRead = "unsafe-read"
    }

    static let usage = """
        usage: keychain-bench [options]

          --items N          items in the read stores (default 10000)
          --secret-bytes N   random secret size in bytes (default 2048)
          --reads N          timed point reads per series (default 20000)
          --rounds N         rounds the reads are split into; every round runs each series on the
                             same keys, in a rotating order, so load spikes hit all series (default 40)
          --full-adds N      timed adds into a fresh store with synchronous=FULL (default 500)
          --normal-adds N    timed adds into a fresh store with synchronous=NORMAL (default 2000)
          --seed N           seed of the key sequence and secrets (default 1592642302)
          --baseline KIND    plain read the final ratio divides by: unsafe-read (DatabaseQueue.unsafeRead +
                             BEGIN DEFERRED: the store's access path; default), queue (DatabaseQueue.read)
                             or pool (DatabasePool.read)
          --dir PATH         parent of the temporary directory (default: $TMPDIR or /tmp)
          -h, --help         show this help

        """

    /// Parses `arguments` (without the program name). Exits on `--help` or a malformed option.
    static func parse(_ arguments: [String]) -> BenchOptions {
        var options = BenchOptions()
        var rest = arguments[...]
        func fail(_ message: String) -> Never {
            FileHandle.standardError.write(Data("keychain-bench: \(message)\n\n\(usage)".utf8))
            exit(2)
        }
        func value(_ name: String) -> String {
            guard let next = rest.popFirst() else { fail("\(name) needs a value") }
            return next
        }
        func positive(_ name: String, minimum: Int = 1) -> Int {
            let text = value(name)
            guard let number = Int(text), number >= minimum else { fail("\(name) must be an integer >= \(minimum), got \"\(text)\"") }
            return number
        }
        while let argument = rest.popFirst() {
            // Accept --name=value as well as --name value.
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                rest.insert(String(argument[argument.index(after: equals)...]), at: rest.startIndex)
                rest.insert(String(argument[..<equals]), at: rest.startIndex)
                continue
            }
            switch argument {
            case "--items": options.items = positive(argument)
            case "--secret-bytes": options.secretBytes = positive(argument)
            case "--reads": options.reads = positive(argument)
            case "--rounds": options.rounds = positive(argument)
            case "--full-adds": options.fullAdds = positive(argument, minimum: 0)
            case "--normal-adds": options.normalAdds = positive(argument, minimum: 0)
            case "--seed":
                let text = value(argument)
                guard let seed = UInt64(text) else { fail("--seed must be an unsigned integer, got \"\(text)\"") }
                options.seed = seed
            case "--dir": options.directory = value(argument)
            case "--baseline":
                let text = value(argument)
                guard let baseline = Baseline(rawValue: text) else { fail("--baseline must be queue, pool or unsafe-read, got \"\(text)\"") }
                options.baseline = baseline
            case "-h", "--help":
                print(usage, terminator: "")
                exit(0)
            default:
                fail("unknown argument \"\(argument)\"")
            }
        }
        if options.rounds > options.reads { fail("--rounds (\(options.rounds)) exceeds --reads (\(options.reads))") }
        return options
    }
}

// MARK: - Randomness

/// SplitMix64: a small, fast, seedable generator so that runs use the same keys and secrets.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func bytes(_ count: Int) -> Data {
        var data = Data(count: count)
        data.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < count {
                var word = next()
                let chunk = min(8, count - offset)
                withUnsafeBytes(of: &word) { buffer.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: chunk) }
                offset += chunk
            }
        }
        return data
    }
}

// MARK: - Timing and statistics

/// Monotonic time in nanoseconds (`CLOCK_MONOTONIC`, as `ContinuousClock` uses on Linux, without its `Duration` arithmetic).
@inline(__always)
func monotonicNanos() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
}

/// Keeps a value alive so the optimiser cannot drop the work that produced it.
@inline(never)
func consume(_ value: Int) {
    consumed &+= value
}

nonisolated(unsafe) var consumed = 0

/// Durations of one series of operations, in nanoseconds.
struct Samples {
    private(set) var nanos: [UInt64] = []

    init(capacity: Int = 0) { nanos.reserveCapacity(capacity) }

    mutating func append(_ value: UInt64) { nanos.append(value) }
    mutating func append(contentsOf other: Samples) { nanos.append(contentsOf: other.nanos) }

    var count: Int { nanos.count }

    func summary() -> Summary { Summary(nanos) }
}

/// Percentiles of a series, in microseconds (nearest-rank).
struct Summary {
    let count: Int
    let min: Double
    let p50: Double
    let p90: Double
    let p99: Double
    let max: Double
    let mean: Double

    init(_ nanos: [UInt64]) {
        let sorted = nanos.sorted()
        count = sorted.count
        func micros(_ value: UInt64) -> Double { Double(value) / 1000 }
        func percentile(_ p: Double) -> Double {
            guard !sorted.isEmpty else { return .nan }
            let rank = Int((p * Double(sorted.count)).rounded(.up))
            return micros(sorted[Swift.max(0, Swift.min(sorted.count - 1, rank - 1))])
        }
        min = sorted.first.map(micros) ?? .nan
        max = sorted.last.map(micros) ?? .nan
        p50 = percentile(0.50)
        p90 = percentile(0.90)
        p99 = percentile(0.99)
        mean = sorted.isEmpty ? .nan : Double(sorted.reduce(0, &+)) / Double(sorted.count) / 1000
    }
}

// MARK: - Formatting

func fixed(_ value: Double, _ decimals: Int = 2) -> String {
    String(format: "%.\(decimals)f", value)
}

/// A plain-text table with a left-aligned first column and right-aligned others.
struct TextTable {
    var header: [String]
    var rows: [[String]] = []

    init(_ header: String...) { self.header = header }
    init(columns: [String]) { header = columns }

    mutating func add(_ cells: String...) { rows.append(cells) }
    mutating func add(_ cells: [String]) { rows.append(cells) }

    func render(indent: String = "  ") -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0.indices.contains(column) ? $0[column].count : 0 }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            var out = indent
            for (column, width) in widths.enumerated() {
                let cell = cells.indices.contains(column) ? cells[column] : ""
                let pad = String(repeating: " ", count: width - cell.count)
                out += column == 0 ? cell + pad : "  " + pad + cell
            }
            return out
        }
        let rule = indent + String(repeating: "-", count: widths.reduce(0, +) + 2 * (widths.count - 1))
        return ([line(header), rule] + rows.map(line)).joined(separator: "\n")
    }
}

// MARK: - Files

/// Creates a fresh private temporary directory under `parent`.
func makeTemporaryDirectory(parent: String?) throws -> URL {
    let base = parent ?? ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array((base + "/keychain-bench.XXXXXX").utf8CString)
    guard let made = mkdtemp(&template) else {
        throw BenchError("cannot create a temporary directory in \(base): \(String(cString: strerror(errno)))")
    }
    return URL(fileURLWithPath: String(cString: made), isDirectory: true)
}

/// Bytes of a database file plus its `-wal` file.
func databaseSize(_ path: String) -> Int {
    [path, path + "-wal"].reduce(0) { total, file in
        total + ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0)
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
