public import Varlink

/// The service behind a `VarlinkServer`: answers every call outside `org.varlink.service` (which the
/// server answers itself from `VarlinkServiceInfo`).
public protocol VarlinkMethodHandler: Sendable {
    /// Answers one call. Calls of one connection arrive one at a time, in order; the next waits until this
    /// returns. Send each reply through `replies` (the last one without `continues`). The task is
    /// cancelled when the peer disconnects: long calls should stop and change nothing.
    func handle(_ call: VarlinkCall, context: VarlinkCallContext, replies: VarlinkReplies) async

    /// The one reply to `call`, if the handler can answer it at once without blocking the thread it runs on (the
    /// connection's socket thread, inside the read that received the call: no task, no hop): from memory and
    /// reads that never wait for a writer (no write, no network, no lock held for long). `nil`, having changed
    /// nothing, when the call needs `handle` (which then runs on the handler's threads). By default every call does.
    func replyAtOnce(to call: VarlinkCall, context: VarlinkCallContext) -> VarlinkReply?

    /// Calls that may last as long as the connection (subscriptions): a graceful shutdown does not wait
    /// for them.
    func isLongLived(_ call: VarlinkCall) -> Bool

    /// The connection is gone (after its last call returned).
    func connectionClosed(_ context: VarlinkCallContext)
}

extension VarlinkMethodHandler {
    public func replyAtOnce(to call: VarlinkCall, context: VarlinkCallContext) -> VarlinkReply? { nil }
    public func isLongLived(_ call: VarlinkCall) -> Bool { false }
    public func connectionClosed(_ context: VarlinkCallContext) {}
}

/// Who made a call, on which connection.
public struct VarlinkCallContext: Sendable {
    /// The kernel's credentials of the peer, read when the connection was accepted.
    public let peer: PeerCredentials
    /// A number unique to the connection for the server's lifetime.
    public let connectionID: UInt64

    /// A context (the server makes these; tests of a handler may too).
    public init(peer: PeerCredentials, connectionID: UInt64) {
        self.peer = peer
        self.connectionID = connectionID
    }
}

/// Where a handler sends the replies of one call.
public struct VarlinkReplies: Sendable {
    private let write: @Sendable (VarlinkReply) async -> Bool
    /// The call wanted no reply (`oneway`): `send` drops everything.
    public let oneway: Bool
    /// The call accepts several replies (`more`).
    public let more: Bool

    /// A sink calling `write` for each reply (`write` returns false once the peer is gone).
    public init(oneway: Bool, more: Bool, write: @escaping @Sendable (VarlinkReply) async -> Bool) {
        self.oneway = oneway
        self.more = more
        self.write = write
    }

    /// Sends `reply`; `false` when the peer is gone (a streaming handler should stop).
    @discardableResult
    public func send(_ reply: VarlinkReply) async -> Bool {
        if oneway { return true }
        return await write(reply)
    }
}
