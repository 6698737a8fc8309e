public import NIOCore

/// The limits and names a `VarlinkServer` works with.
public struct VarlinkServerConfiguration: Sendable {
    /// The largest message accepted (NUL not counted); a longer one ends the connection. Default 1 MiB.
    public var maximumMessageBytes: Int = 1 << 20
    /// A connection with no call in progress that sends nothing for this long is closed. Default 60 s.
    public var idleTimeout: TimeAmount = .seconds(60)
    /// The most connections served at once; beyond it a new connection gets `tooManyConnectionsError`
    /// and is closed, and the others keep being served. Default 256.
    public var maximumConnections: Int = 256
    /// The most calls one connection may have queued (pipelined) before the server closes it. Default 64.
    public var maximumQueuedCalls: Int = 64
    /// How long a graceful shutdown waits for calls in progress (subscriptions excepted). Default 10 s.
    public var shutdownGracePeriod: TimeAmount = .seconds(10)
    /// The qualified error sent to a connection over the limit (parameters: `limit`).
    public var tooManyConnectionsError: String
    /// The qualified error sent before closing a connection whose bytes are not a varlink call
    /// (parameters: `reason`).
    public var protocolError: String

    /// A configuration whose two server-level errors belong to the interface named `interface`
    /// (`<interface>.TooManyConnections`, `<interface>.ProtocolError`).
    public init(errorInterface interface: String) {
        tooManyConnectionsError = "\(interface).TooManyConnections"
        protocolError = "\(interface).ProtocolError"
    }
}
