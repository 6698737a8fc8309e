/// Holds the fixture a benchmark's `setup` made until its `teardown`, shared by the benchmark's three closures
/// (package-benchmark runs them one after the other, never at the same time).
public final class FixtureSlot<Fixture> {
    /// The fixture, between setup and teardown.
    public var fixture: Fixture?

    /// An empty slot.
    public init() {}

    /// The fixture, or a failure if setup did not make one.
    public func get() throws -> Fixture {
        guard let fixture else { throw BenchmarkFailure("the benchmark's setup made no fixture") }
        return fixture
    }
}
