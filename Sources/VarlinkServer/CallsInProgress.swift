import Synchronization

/// The handler's calls running now that a graceful shutdown waits for (long-lived ones are not counted),
/// and the shutdown's wait for them to end.
final class CallsInProgress: Sendable {
    private struct State {
        var running = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Mutex(State())

    /// A call started.
    func begin() {
        state.withLock { $0.running += 1 }
    }

    /// A call ended; the last one wakes whoever waits.
    func end() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.running -= 1
            guard state.running == 0 else { return [] }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once no call is running, or after `limit`, whichever comes first.
    func waitUntilNone(atMost limit: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: limit) }
            group.addTask { await self.waitUntilNone() }
            await group.next()
            group.cancelAll()
        }
    }

    /// Returns once no call is running (or the task is cancelled).
    private func waitUntilNone() async {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    guard state.running > 0, !Task.isCancelled else { return true }
                    state.waiters[id] = waiter
                    return false
                }
                if now { waiter.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
