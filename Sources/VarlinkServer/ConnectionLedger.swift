import Synchronization
import Varlink

/// What one connection holds, shared by its event-loop handlers and its call task: the calls received and
/// not finished and the bytes of a message being received (as held: `ReceivedCall.bytes`; counted against
/// the uid's share and the server's total in `ServerUsage` too), the replies written since its last call,
/// whether the connection is being closed, and how much memory it ever held (past `largeConnectionBytes`,
/// the heap is handed back to the system once it closes).
final class ConnectionLedger: Sendable {
    /// A connection that held this much (queued calls and unfinished message), or wrote a reply this
    /// large, has its memory returned to the system when it closes.
    static let largeConnectionBytes = 256 << 10

    private struct State {
        var queue: VarlinkQueueBudget
        /// The connection closed: calls still queued will never run, their bytes are no longer the uid's.
        var released = false
        /// A refusal or a close is under way: nothing more is read or queued.
        var closing = false
        /// Bytes of an unfinished message held by the decoder.
        var bufferedBytes = 0
        var peakBytes = 0
        var wroteLargeReply = false
        /// Bytes of replies written since the call task last waited for them to be taken.
        var repliesSinceFlush = 0
    }

    private let state: Mutex<State>
    private let configuration: VarlinkServerConfiguration
    private let uid: UInt32
    private let usage: ServerUsage

    /// Root or an administrator (`VarlinkConnectionAllowance.privileged`): counted in the server's totals,
    /// never refused by them.
    let privileged: Bool

    init(configuration: VarlinkServerConfiguration, uid: UInt32, privileged: Bool, usage: ServerUsage) {
        self.privileged = privileged
        state = Mutex(
            State(
                queue: VarlinkQueueBudget(
                    maximumCalls: configuration.maximumQueuedCalls,
                    maximumBytes: configuration.maximumQueuedBytes
                )
            )
        )
        self.configuration = configuration
        self.uid = uid
        self.usage = usage
    }

    /// Counts a call of `bytes` against the connection's and the uid's limits; returns the reason (the
    /// `protocolError`'s text) when it would break one, and counts nothing then.
    func admit(bytes: Int) -> String? {
        let refusal = state.withLock { state -> String? in
            switch state.queue.admit(byteCount: bytes) {
            case .tooManyCalls?:
                return
                    "more than \(configuration.maximumQueuedCalls) calls queued on one connection (the limit); wait for replies before sending more"
            case .tooManyBytes?:
                return
                    "calls queued on one connection exceed \(configuration.maximumQueuedBytes) bytes (the limit); wait for replies before sending more"
            case nil:
                state.peakBytes = max(state.peakBytes, state.queue.bytes + state.bufferedBytes)
                return nil
            }
        }
        if let refusal { return refusal }
        if let refusal = reserveShared(bytes) {
            state.withLock { $0.queue.finish(byteCount: bytes) }
            return refusal
        }
        return nil
    }

    /// Counts `bytes` against the uid's share and the server's total (`ServerUsage`); the reason when it
    /// would break one (nothing counted then).
    private func reserveShared(_ bytes: Int) -> String? {
        switch usage.reserveQueuedBytes(
            bytes,
            for: uid,
            limit: configuration.maximumQueuedBytesPerUser,
            totalLimit: privileged ? nil : configuration.maximumQueuedBytesInTotal,
            guaranteed: configuration.guaranteedQueuedBytesPerUser
        ) {
        case nil:
            return nil
        case .user?:
            return
                "calls queued by uid \(uid) on all its connections exceed \(configuration.maximumQueuedBytesPerUser) bytes (the limit); wait for replies before sending more"
        case .total?:
            return
                "calls queued by all callers together exceed \(configuration.maximumQueuedBytesInTotal) bytes (the server's limit); wait for replies before sending more, or try again later"
        }
    }

    /// A call of `bytes` admitted earlier finished: its bytes leave the connection's and the uid's counts.
    func finish(bytes: Int) {
        let released = state.withLock { state -> Bool in
            state.queue.finish(byteCount: bytes)
            return state.released
        }
        if !released { usage.releaseQueuedBytes(bytes, for: uid) }
    }

    /// The connection closed: the bytes of calls still queued, and of a message left unfinished, are given
    /// back to the uid at once.
    func release() {
        let queued = state.withLock { state -> Int in
            guard !state.released else { return 0 }
            state.released = true
            return state.queue.bytes + state.bufferedBytes
        }
        usage.releaseQueuedBytes(queued, for: uid)
    }

    /// Calls received and not finished (queued or running).
    var queuedCalls: Int { state.withLock { $0.queue.calls } }

    /// Marks the connection as closing; false when it already was.
    func beginClosing() -> Bool {
        state.withLock { state in
            defer { state.closing = true }
            return !state.closing
        }
    }

    /// Whether a refusal or a close is under way.
    var isClosing: Bool { state.withLock { $0.closing } }

    /// The decoder holds `bytes` of an unfinished message now: they count against the uid's share and the
    /// server's total as queued calls do (a message being received is held too). Returns the reason when
    /// more would break one of them (the count is left as it was then).
    func noteBuffered(_ bytes: Int) -> String? {
        state.withLock { state -> String? in
            guard !state.released else { return nil }
            let growth = bytes - state.bufferedBytes
            if growth > 0, let refusal = reserveShared(growth) { return refusal }
            if growth < 0 { usage.releaseQueuedBytes(-growth, for: uid) }
            state.bufferedBytes = bytes
            state.peakBytes = max(state.peakBytes, state.queue.bytes + bytes)
            return nil
        }
    }

    /// A reply of `bytes` was built for the connection.
    func noteReply(bytes: Int) {
        state.withLock { state in
            state.repliesSinceFlush += bytes
            if bytes >= Self.largeConnectionBytes { state.wroteLargeReply = true }
        }
    }

    /// The bytes of replies written since the call task last waited for them to be taken.
    var repliesSinceFlush: Int { state.withLock { $0.repliesSinceFlush } }

    /// The bytes of replies written since the last call, counted from zero again.
    func takeRepliesSinceFlush() -> Int {
        state.withLock { state in
            defer { state.repliesSinceFlush = 0 }
            return state.repliesSinceFlush
        }
    }

    /// Whether the connection ever held `largeConnectionBytes` or more.
    var heldMegabytes: Bool {
        state.withLock { $0.peakBytes >= Self.largeConnectionBytes || $0.wroteLargeReply }
    }
}
