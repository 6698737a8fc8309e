public import ProcessSandbox

/// Who is connected to the broker now, as its server knows them: handed to the broker when it is made (the
/// daemon makes its server's connection registry first), read for `GetStatus`.
public protocol BrokerConnections: Sendable {
    /// The callers with a connection open now, in the order they connected.
    func connectedCallers() -> [BrokerCaller]

    /// Connection `connectionID` acts for another process of its uid (`ActForCaller`): from now on it counts
    /// as that process's app (`sandbox`) among the connections of its uid.
    func connection(_ connectionID: UInt64, actsAs sandbox: PeerSandbox)
}

/// No server in front of the broker (its calls made directly, as its own tests do): nobody is connected.
public struct NoBrokerConnections: BrokerConnections {
    /// The empty list.
    public init() {}

    public func connectedCallers() -> [BrokerCaller] { [] }

    public func connection(_ connectionID: UInt64, actsAs sandbox: PeerSandbox) {}
}
