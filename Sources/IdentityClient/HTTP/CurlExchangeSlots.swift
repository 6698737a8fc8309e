import Synchronization

/// How many libcurl exchanges run at once: each blocks a thread of its own for as long as the authority
/// takes (up to the transport's timeout), so without a bound every sign-in, refresh and poll in progress
/// would hold a thread. An exchange beyond `maximum` waits for a slot (first come, first served) and is
/// never refused; a waiting caller whose task is canceled leaves the line.
public final class CurlExchangeSlots: Sendable {
    /// The slots the process's `CurlTransport`s share by default: 8 exchanges at once.
    public static let shared = CurlExchangeSlots(maximum: 8)

    private struct State {
        var inUse = 0
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []
        var nextWaiter: UInt64 = 0
    }

    /// The most exchanges running at once.
    public let maximum: Int
    private let state = Mutex(State())

    /// Slots for `maximum` exchanges at once (at least one).
    public init(maximum: Int) {
        self.maximum = max(maximum, 1)
    }

    /// Exchanges running now.
    public var inUse: Int { state.withLock { $0.inUse } }

    /// Exchanges waiting for a slot now.
    public var waiting: Int { state.withLock { $0.waiters.count } }

    /// Takes a slot, waiting for one while all are in use; false when the task was canceled first (no slot
    /// taken then).
    func acquire() async -> Bool {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let granted = state.withLock { state -> Bool? in
                    if Task.isCancelled { return false }
                    if state.inUse < maximum {
                        state.inUse += 1
                        return true
                    }
                    state.waiters.append((id, continuation))
                    return nil
                }
                if let granted { continuation.resume(returning: granted) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume(returning: false)
        }
    }

    /// Gives a slot back: to the first caller waiting, if any.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard !state.waiters.isEmpty else {
                state.inUse -= 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume(returning: true)
    }
}
