import Synchronization

/// How many libcurl exchanges run at once: each blocks a thread of its own for as long as the authority
/// takes (up to the transport's timeout), so without a bound every sign-in, refresh and poll in progress
/// would hold a thread. An exchange beyond `maximum` waits for a slot and is never refused; a waiting
/// caller whose task is canceled leaves the line.
///
/// The slots are shared fairly between owners (a broker's callers, by uid: `Owner.current`, set around
/// each call): an owner holding `share` slots or more takes no further slot while another owner waits
/// for one. A free slot goes to the longest-waiting exchange whose owner is under its share, or, when
/// only one owner waits, to its first. So one app that fills every slot while nobody else calls cannot
/// keep them: each slot it gives back goes to another app that waits, until it holds no more than its
/// share; the others then wait at most for one of its exchanges to end.
public final class CurlExchangeSlots: Sendable {
    /// The slots the process's `CurlTransport`s share by default: 8 exchanges at once, at most 4 for one
    /// owner while another waits.
    public static let shared = CurlExchangeSlots(maximum: 8)

    /// Who an exchange is for: a broker's caller (its uid), set with `Owner.$current.withValue`
    /// around the work it does for that caller; exchanges started outside (`nil`) count as one owner.
    public enum Owner {
        /// The owner of the exchanges the current task starts.
        @TaskLocal public static var current: UInt32?
    }

    private struct Waiter {
        let id: UInt64
        let owner: UInt32?
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var inUse = 0
        var held: [UInt32?: Int] = [:]
        var waiters: [Waiter] = []
        var nextWaiter: UInt64 = 0

        /// Whether `owner` may take a free slot now: under its share, or nobody else waits.
        func mayTake(_ owner: UInt32?, share: Int) -> Bool {
            held[owner, default: 0] < share || !waiters.contains { $0.owner != owner }
        }

        mutating func take(_ owner: UInt32?) {
            inUse += 1
            held[owner, default: 0] += 1
        }

        /// The waiters that get the free slots now (removed from the line), in the order they came: first
        /// those who may take one; when none may (every waiting owner has its share and slots are still
        /// free, with a `share` under half), the first in line, so that no slot stays free while one waits.
        mutating func admit(maximum: Int, share: Int) -> [CheckedContinuation<Bool, Never>] {
            var admitted: [CheckedContinuation<Bool, Never>] = []
            while inUse < maximum, !waiters.isEmpty {
                let index = waiters.firstIndex(where: { mayTake($0.owner, share: share) }) ?? 0
                let waiter = waiters.remove(at: index)
                take(waiter.owner)
                admitted.append(waiter.continuation)
            }
            return admitted
        }
    }

    /// The most exchanges running at once.
    public let maximum: Int
    /// The most slots one owner takes while another waits for one.
    public let share: Int
    private let state = Mutex(State())

    /// Slots for `maximum` exchanges at once (at least one), at most `share` of them (by default half,
    /// at least one) for one owner while another waits.
    public init(maximum: Int, share: Int? = nil) {
        self.maximum = max(maximum, 1)
        self.share = min(max(share ?? self.maximum / 2, 1), self.maximum)
    }

    /// Exchanges running now.
    public var inUse: Int { state.withLock { $0.inUse } }

    /// Exchanges waiting for a slot now.
    public var waiting: Int { state.withLock { $0.waiters.count } }

    /// Exchanges running now for `owner`.
    public func inUse(by owner: UInt32?) -> Int { state.withLock { $0.held[owner, default: 0] } }

    /// Takes a slot for `owner` (by default the task's `Owner.current`), waiting while every slot is in use
    /// or the owner has its share and another waits; false when the task was canceled first (no slot taken then).
    func acquire(for owner: UInt32? = Owner.current) async -> Bool {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let admitted = state.withLock { state -> [CheckedContinuation<Bool, Never>]? in
                    if Task.isCancelled { return nil }
                    // In line behind the others; then whoever may take the free slots takes them (this one too).
                    state.waiters.append(Waiter(id: id, owner: owner, continuation: continuation))
                    return state.admit(maximum: maximum, share: share)
                }
                guard let admitted else { return continuation.resume(returning: false) }
                for next in admitted { next.resume(returning: true) }
            }
        } onCancel: {
            let (waiter, admitted) = state.withLock {
                state -> (CheckedContinuation<Bool, Never>?, [CheckedContinuation<Bool, Never>]) in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return (nil, []) }
                let waiter = state.waiters.remove(at: index).continuation
                // Its leaving may let another owner's waiter take a free slot.
                return (waiter, state.admit(maximum: maximum, share: share))
            }
            waiter?.resume(returning: false)
            for next in admitted { next.resume(returning: true) }
        }
    }

    /// Gives `owner`'s slot back: to the first waiter who may take it, if any.
    func release(for owner: UInt32? = Owner.current) {
        let admitted = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            state.inUse -= 1
            let left = state.held[owner, default: 1] - 1
            state.held[owner] = left > 0 ? left : nil
            return state.admit(maximum: maximum, share: share)
        }
        for next in admitted { next.resume(returning: true) }
    }
}
