public import DeviceBroker
public import ProcessSandbox
public import VarlinkServer

/// The broker's view of its server's connection registry: the callers connected now, as the server
/// identified them.
public struct BrokerServerConnections: BrokerConnections {
    let registry: VarlinkConnectionRegistry

    /// The callers of the connections in `registry` (the one the server is given).
    public init(_ registry: VarlinkConnectionRegistry) {
        self.registry = registry
    }

    public func connection(_ connectionID: UInt64, actsAs sandbox: PeerSandbox) {
        registry.reassign(connectionID, to: sandbox)
    }

    public func connectedCallers() -> [BrokerCaller] {
        registry.peers.map { BrokerCaller($0.peer, connectionID: $0.connectionID) }
    }
}
