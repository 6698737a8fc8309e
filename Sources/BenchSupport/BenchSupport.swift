// Timing, statistics, tables and scratch directories shared by the benchmark drivers (not a test).
public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Timing and statistics

/// Monotonic time in nanoseconds (`CLOCK_MONOTONIC`, as `ContinuousClock` uses on Linux, without its `Duration` arithmetic).
@inline(__always)
public func monotonicNanos() -> UInt64 {
    DispatchTime.now().uptimeNanoseconds
}

/// Keeps a value alive so the optimiser cannot drop the work that produced it.
@inline(never)
public func consume(_ value: Int) {
    consumed &+= value
}

public nonisolated(unsafe) var consumed = 0

/// Durations of one series of operations, in nanoseconds.
public struct Samples {
    public private(set) var nanos: [UInt64] = []

    public init(capacity: Int = 0) { nanos.reserveCapacity(capacity) }

    public mutating func append(_ value: UInt64) { nanos.append(value) }
    public mutating func append(contentsOf other: Samples) { nanos.append(contentsOf: other.nanos) }

    public var count: Int { nanos.count }

    public func summary() -> Summary { Summary(nanos) }
}

/// Percentiles of a series, in microseconds (nearest-rank).
public struct Summary {
    public let count: Int
    public let min: Double
    public let p50: Double
    public let p90: Double
    public let p99: Double
    public let max: Double
    public let mean: Double

    public init(_ nanos: [UInt64]) {
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

public func fixed(_ value: Double, _ decimals: Int = 2) -> String {
    String(format: "%.\(decimals)f", value)
}

/// An integer with thousands separators: `123,456`.
public func grouped(_ value: Double) -> String {
    let digits = String(Int(value.rounded()))
    var out = ""
    for (offset, character) in digits.enumerated() {
        if offset > 0, (digits.count - offset) % 3 == 0 { out.append(",") }
        out.append(character)
    }
    return out
}

/// A plain-text table with a left-aligned first column and right-aligned others.
public struct TextTable {
    public var header: [String]
    public var rows: [[String]] = []

    public init(_ header: String...) { self.header = header }
    public init(columns: [String]) { header = columns }

    public mutating func add(_ cells: String...) { rows.append(cells) }
    public mutating func add(_ cells: [String]) { rows.append(cells) }

    public func render(indent: String = "  ") -> String {
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

/// The 1, 5 and 15 minute load averages (the machine's other work shows up in the percentiles).
public func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "unknown" }
    return text.split(separator: " ").prefix(3).joined(separator: " ")
}

// MARK: - Files

/// Creates a fresh private temporary directory `PREFIX.XXXXXX` under `parent` (default `$TMPDIR`, else /tmp).
public func makeTemporaryDirectory(parent: String?, prefix: String) throws -> URL {
    let base = parent ?? ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array((base + "/\(prefix).XXXXXX").utf8CString)
    guard let made = mkdtemp(&template) else {
        throw BenchError("cannot create a temporary directory in \(base): \(String(cString: strerror(errno)))")
    }
    return URL(fileURLWithPath: String(cString: made), isDirectory: true)
}

/// Bytes of a database file plus its `-wal` file.
public func databaseSize(_ path: String) -> Int {
    [path, path + "-wal"].reduce(0) { total, file in
        total + ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0)
    }
}

/// A benchmark could not run (its message says why).
public struct BenchError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

// MARK: - Command line

/// Reads a benchmark's `--name value` / `--name=value` options; exits with the usage on a mistake.
public struct OptionReader {
    private let tool: String
    private let usage: String
    private var rest: ArraySlice<String>

    public init(tool: String, usage: String, arguments: [String]) {
        self.tool = tool
        self.usage = usage
        rest = arguments[...]
    }

    /// The next option name (`--name=value` is split into name and value), or `nil` at the end.
    /// `-h`/`--help` prints the usage and exits.
    public mutating func next() -> String? {
        guard let argument = rest.popFirst() else { return nil }
        if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
            rest.insert(String(argument[argument.index(after: equals)...]), at: rest.startIndex)
            return String(argument[..<equals])
        }
        if argument == "-h" || argument == "--help" {
            print(usage, terminator: "")
            exit(0)
        }
        return argument
    }

    /// The value of option `name`.
    public mutating func value(_ name: String) -> String {
        guard let next = rest.popFirst() else { fail("\(name) needs a value") }
        return next
    }

    /// The integer value (at least `minimum`) of option `name`.
    public mutating func integer(_ name: String, minimum: Int = 1) -> Int {
        let text = value(name)
        guard let number = Int(text), number >= minimum else { fail("\(name) must be an integer >= \(minimum), got \"\(text)\"") }
        return number
    }

    /// Prints `message` and the usage to standard error and exits with status 2.
    public func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("\(tool): \(message)\n\n\(usage)".utf8))
        exit(2)
    }
}

// MARK: - Main

/// Runs `body` in a fresh temporary directory under `parent` and removes the directory afterwards;
/// an error is printed as `TOOL: …`. - Returns: the exit status.
public func runInTemporaryDirectory(tool: String, parent: String?, _ body: (URL) throws -> Void) -> Int32 {
    let root: URL
    do {
        root = try makeTemporaryDirectory(parent: parent, prefix: tool)
    } catch {
        FileHandle.standardError.write(Data("\(tool): \(error)\n".utf8))
        return 1
    }
    defer { try? FileManager.default.removeItem(at: root) }
    do {
        try body(root)
        return 0
    } catch {
        FileHandle.standardError.write(Data("\(tool): \(error)\n".utf8))
        return 1
    }
}
