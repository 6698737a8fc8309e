import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The scopes of every silent token the benchmark asks for.
let scopes = ["User.Read"]

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("broker-load: \(message)\n".utf8))
    exit(1)
}

/// Monotonic nanoseconds.
func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// One line on standard output, written at once (no buffering: another process reads it as it comes).
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

/// Wall-clock nanoseconds (comparable across processes).
func wallNanoseconds() -> UInt64 { UInt64(Date().timeIntervalSince1970 * 1e9) }

/// p50 and p99 (µs) of nanosecond samples.
func percentiles(_ samples: [UInt64]) -> (p50: Double, p99: Double) {
    let sorted = samples.sorted()
    func at(_ q: Double) -> Double { Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]) / 1000 }
    return (at(0.50), at(0.99))
}

/// The samples of one figure (nanoseconds), printed as `LABEL p50 X p99 Y` in µs, as `measure` prints.
struct Samples {
    let label: String
    private(set) var values: [UInt64] = []

    init(_ label: String, capacity: Int = 0) {
        self.label = label
        values.reserveCapacity(capacity)
    }

    mutating func append(_ nanoseconds: UInt64) { values.append(nanoseconds) }

    /// Times `body` and keeps the sample.
    @discardableResult
    mutating func time<T>(_ body: () throws -> T) rethrows -> T {
        let start = now()
        let result = try body()
        values.append(now() - start)
        return result
    }

    var p50: Double { percentiles(values).p50 }

    /// `LABEL p50 X p99 Y` (µs, `decimals` places) and `extra` after it.
    func line(decimals: Int = 1, _ extra: String = "") -> String {
        let (p50, p99) = values.isEmpty ? (Double.nan, Double.nan) : percentiles(values)
        let format = "%@ p50 %.\(decimals)f p99 %.\(decimals)f"
        return String(format: format, label, p50, p99) + (extra.isEmpty ? "" : " " + extra)
    }

    func print(decimals: Int = 1, _ extra: String = "") { say(line(decimals: decimals, extra)) }
}

/// Set once SIGTERM arrives: the attackers and holders run until then, then report and exit.
final class StopSignal: @unchecked Sendable {
    private let stopped = Atomic<Bool>(false)
    private let source: any DispatchSourceSignal

    init() {
        signal(SIGTERM, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .global())
        source.setEventHandler { [weak self] in self?.stopped.store(true, ordering: .relaxed) }
        source.resume()
    }

    var isSet: Bool { stopped.load(ordering: .relaxed) }

    /// Sleeps `seconds` or until the signal, whichever comes first; false once it came.
    func sleep(_ seconds: Double) -> Bool {
        let end = now() + UInt64(seconds * 1e9)
        while !isSet && now() < end { usleep(UInt32(min(50_000, max(1, Int((end - now()) / 1000))))) }
        return !isSet
    }
}
