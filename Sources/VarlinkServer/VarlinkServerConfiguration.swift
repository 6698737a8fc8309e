public import NIOCore
import ProcessSandbox

/// The limits and names a `VarlinkServer` works with. Every limit bounds what one peer can make the
/// server hold, so that a hostile peer cannot starve the others.
public struct VarlinkServerConfiguration: Sendable {
    /// The largest message accepted (NUL not counted); a longer one ends the connection. Default 1 MiB.
    public var maximumMessageBytes: Int = 1 << 20
    /// A connection with no call in progress that completes no message for this long is closed. Bytes of
    /// an unfinished message do not count as activity. Default 60 s.
    public var idleTimeout: TimeAmount = .seconds(60)
    /// A message whose first byte has arrived must be complete (its NUL received) within this; a peer that
    /// trickles bytes is closed like a silent one. Default 10 s.
    public var messageTimeout: TimeAmount = .seconds(10)
    /// The most connections served at once; beyond it a new connection gets `tooManyConnectionsError`
    /// and is closed, and the others keep being served. Default 256. `admission` may keep some of them
    /// for privileged peers and cap each user's share.
    public var maximumConnections: Int = 256
    /// The most calls one connection may have queued (pipelined) before the server closes it. Default 64.
    public var maximumQueuedCalls: Int = 64
    /// The most bytes of calls one connection may have queued or running, as held (their messages' bytes
    /// and `heldBytesPerValue` for each of their values); a call beyond it gets a `protocolError` naming
    /// the limit and the connection is closed. Default 4 MiB.
    public var maximumQueuedBytes: Int = 4 << 20
    /// The same bound over all the connections of one uid, the bytes of messages being received counted
    /// too. Default 16 MiB.
    public var maximumQueuedBytesPerUser: Int = 16 << 20
    /// The same bound over the connections of every uid together; privileged peers' calls (root's,
    /// administrators': `VarlinkConnectionAllowance.privileged`) are counted but never refused by it, so that
    /// they are served whatever the others queue. Default 48 MiB.
    public var maximumQueuedBytesInTotal: Int = 48 << 20
    /// What every uid may queue whatever the others do: calls that keep a uid within this are never
    /// refused by `maximumQueuedBytesInTotal`, so that apps filling the total cannot starve the others
    /// (the total may be passed by this much per uid with connections). Default 256 KiB.
    public var guaranteedQueuedBytesPerUser: Int = 256 << 10
    /// The most JSON values (objects, arrays, strings, numbers, bools, nulls) one message may decode into; a
    /// message over it gets a `protocolError` naming the limit and the connection is closed. A call is
    /// counted in the queued-bytes limits as held decoded: its message's bytes and `heldBytesPerValue` for
    /// each of its values. Default 1024.
    public var maximumMessageValues: Int = 1024
    /// What one decoded value is counted as in the queued-bytes limits, on top of its message's bytes: a
    /// value tree costs ~100 bytes a value beyond its text (1 MiB of `[{"":0},…]`, 300,000 values, is ~28 MiB
    /// decoded).
    public static let heldBytesPerValue = 128
    /// Replies written to one uid's connections and not yet taken by them (the peer does not read): once
    /// they are this many bytes, a further reply to that uid closes its connection instead of being held.
    /// A connection runs its next call only once its earlier replies are taken, so a uid that reads its
    /// replies is never near it. Default 8 MiB.
    public var maximumUnreadReplyBytesPerUser: Int = 8 << 20
    /// The same bound over every uid together (privileged peers are counted, never refused by it); a uid
    /// with no reply unread always gets its next one. Default 32 MiB.
    public var maximumUnreadReplyBytesInTotal: Int = 32 << 20
    /// The largest reply sent; a larger one is replaced by `limitExceededError` (limit `replyBytes`), so
    /// that a query over many items cannot make the server hold or send an unbounded answer. Default 4 MiB.
    public var maximumReplyBytes: Int = 4 << 20
    /// A reply the peer has not taken (read) within this closes the connection: a peer that never reads
    /// cannot pile replies up in the server. Default 30 s.
    public var replyTimeout: TimeAmount = .seconds(30)
    /// How long a graceful shutdown waits for calls in progress (subscriptions excepted). Default 10 s.
    public var shutdownGracePeriod: TimeAmount = .seconds(10)
    /// The qualified error sent to a connection over a connection limit (parameters: `limit`, and
    /// `scope`: `server`, `user`, `app` or `reserved`).
    public var tooManyConnectionsError: String
    /// The qualified error sent before closing a connection whose bytes are not a varlink call, or that
    /// queued more than it may (parameters: `reason`).
    public var protocolError: String
    /// The qualified error replacing a reply over `maximumReplyBytes` (parameters: `limit`, `maximum`,
    /// `message`).
    public var limitExceededError: String
    /// Decides, per peer, how many connections it may hold and whether it may take the slots kept for
    /// administrators. Without one every peer may take every slot.
    public var admission: (any VarlinkConnectionAdmission)?
    /// Whether the server reads each peer's sandbox at accept (`PeerCredentials.sandbox`), which takes a
    /// kernel that gives a peer's pidfd (`SO_PEERPIDFD`, Linux 6.5) and, for peers of other uids, ptrace
    /// access to their `/proc/PID/root`. Off (or on an older kernel) every peer is `unpinned`: known by
    /// its uid only.
    public var identifiesSandboxes: Bool = PeerPIDFD.kernelSupports
    /// Whether a connection's calls run on its event loop's thread instead of the handler's threads
    /// (`VarlinkHandlerExecutor`): no hop between threads per call, but a handler that blocks (the store's
    /// writes wait for the disk) holds up every connection of that loop. Off by default; for measuring what
    /// the hop costs (deviced's hidden `--calls-on-event-loop`).
    public var runsCallsOnEventLoop = false
    /// Whether a connection's calls start on its event loop's thread, where the handler may answer them at once
    /// (`VarlinkMethodHandler.replyAtOnce`: inside the read, when no earlier call of the connection is queued or
    /// running); the others hop to the handler's threads. On by default: a call
    /// answered at once costs no hop between threads either way. Off, every call runs on the handler's threads
    /// (deviced's hidden `--calls-on-store-threads`, for measuring what answering at once saves).
    public var answersCallsAtOnce = true

    /// Whether calls the handler can answer at once are answered on the socket's thread (`answersCallsAtOnce`,
    /// unless every call runs on the event loop anyway).
    var answersAtOnceOnSocketThread: Bool { answersCallsAtOnce && !runsCallsOnEventLoop }
    /// Who the server takes each peer for, given the kernel's credentials (`nil`: the kernel's, as they are):
    /// for tests only, which serve in their own process and need their callers to be an app's uid without
    /// running as one.
    ///
    /// Why this is safe: it is `@_spi(Testing)`, so only a module that imports `VarlinkServer` with
    /// `@_spi(Testing)` can set it, and no product module does (`VarlinkServerLifecycleTests` checks that no
    /// file under `Sources` imports a module so): deviced takes every caller's identity from `SO_PEERCRED`
    /// alone. A peer on the socket has no say in it; only code in the server's own process could set it, and
    /// such code could do anything to the server anyway.
    @_spi(Testing) public var callerIdentity: (@Sendable (PeerCredentials) -> PeerCredentials)?

    /// A configuration whose server-level errors belong to the interface named `interface`
    /// (`<interface>.TooManyConnections`, `<interface>.ProtocolError`, `<interface>.LimitExceeded`).
    public init(errorInterface interface: String) {
        tooManyConnectionsError = "\(interface).TooManyConnections"
        protocolError = "\(interface).ProtocolError"
        limitExceededError = "\(interface).LimitExceeded"
    }
}

/// How many connections a peer may hold (`VarlinkConnectionAdmission`).
public struct VarlinkConnectionAllowance: Sendable, Equatable {
    /// Connections this peer's uid may hold at once, over all its apps (the uid's total).
    public var connectionsPerUser: Int
    /// Connections this peer's app may hold at once (the connections of the peer's uid and sandbox,
    /// `PeerCredentials.sandbox`); nil: only the uid's total counts.
    public var connectionsPerApp: Int?
    /// Whether the peer may take the slots kept for administrators (`reservedConnections`).
    public var privileged: Bool
    /// Slots of `maximumConnections` that only privileged peers may take (at most a quarter of them are kept).
    public var reservedConnections: Int

    /// An allowance as given.
    public init(connectionsPerUser: Int, connectionsPerApp: Int? = nil, privileged: Bool, reservedConnections: Int) {
        self.connectionsPerUser = connectionsPerUser
        self.connectionsPerApp = connectionsPerApp
        self.privileged = privileged
        self.reservedConnections = reservedConnections
    }
}

/// The service's rule for sharing connection slots between peers (the broker's: per app, per unlisted
/// user, slots kept for administrators). Asked once per accepted connection, off the event loops.
public protocol VarlinkConnectionAdmission: Sendable {
    /// The allowance of `peer`, as the kernel identified it.
    func allowance(for peer: PeerCredentials) async -> VarlinkConnectionAllowance
}
