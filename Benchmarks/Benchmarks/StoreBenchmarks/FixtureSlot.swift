/// Holds the fixture a benchmark's setup made until its teardown, shared by the three closures.
final class FixtureSlot<Fixture> {
    var fixture: Fixture?

    /// The fixture, or a failure if setup did not make one.
    func get() throws -> Fixture {
        guard let fixture else { throw BenchmarkFailure("the benchmark's setup made no fixture") }
        return fixture
    }
}
