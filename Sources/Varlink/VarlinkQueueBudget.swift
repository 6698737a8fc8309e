/// What one connection may hold of calls received and not yet answered: how many, and how many bytes
/// of their messages. Calls run in order, so everything sent behind a call that never ends (a `more`
/// subscription) stays queued: without a bound in bytes, a peer could park megabytes behind one.
public struct VarlinkQueueBudget: Sendable, Equatable {
    /// Why a call was not admitted.
    public enum Refusal: Sendable, Equatable {
        /// `maximumCalls` calls are queued already.
        case tooManyCalls
        /// The call's bytes would take the queue over `maximumBytes`.
        case tooManyBytes
    }

    /// The most calls queued at once.
    public let maximumCalls: Int
    /// The most bytes of queued calls at once.
    public let maximumBytes: Int
    /// Calls admitted and not finished.
    public private(set) var calls = 0
    /// Their bytes.
    public private(set) var bytes = 0

    /// An empty queue with these bounds.
    public init(maximumCalls: Int, maximumBytes: Int) {
        self.maximumCalls = maximumCalls
        self.maximumBytes = maximumBytes
    }

    /// Admits a call of `byteCount` bytes, or says which bound it would break (and counts nothing).
    public mutating func admit(byteCount: Int) -> Refusal? {
        guard calls < maximumCalls else { return .tooManyCalls }
        guard byteCount <= maximumBytes - bytes else { return .tooManyBytes }
        calls += 1
        bytes += byteCount
        return nil
    }

    /// A call of `byteCount` bytes admitted earlier finished.
    public mutating func finish(byteCount: Int) {
        precondition(calls > 0 && byteCount <= bytes, "a call finished that was never admitted")
        calls -= 1
        bytes -= byteCount
    }
}
