public import DeviceBroker
public import VarlinkServer

/// The server's connection slots shared out by the broker's policy: administrators may take the kept
/// slots, apps and other local users are held to their `limits`.
public struct BrokerAdmission: VarlinkConnectionAdmission {
    let broker: Broker

    /// The admission rule of `broker`'s policy.
    public init(broker: Broker) {
        self.broker = broker
    }

    public func allowance(for peer: PeerCredentials) async -> VarlinkConnectionAllowance {
        let share = broker.connectionShare(uid: peer.uid, gid: peer.gid, pid: peer.pid, sandbox: peer.sandbox)
        return VarlinkConnectionAllowance(
            connectionsPerUser: share.connectionsPerUser,
            connectionsPerApp: share.connectionsPerApp,
            privileged: share.administrator,
            reservedConnections: share.administratorConnections
        )
    }
}
