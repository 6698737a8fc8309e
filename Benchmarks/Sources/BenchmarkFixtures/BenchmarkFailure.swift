/// A benchmark could not run; the message says why (package-benchmark reports it as the benchmark's failure).
public struct BenchmarkFailure: Error, CustomStringConvertible {
    public let description: String

    /// A failure described by `description`.
    public init(_ description: String) { self.description = description }
}
