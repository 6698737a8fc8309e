import DeviceBroker
import VarlinkServer

/// The server's connection slots shared out by the broker's policy: administrators may take the kept
/// slots, apps and other local users are held to their `limits`.
struct BrokerAdmission: VarlinkConnectionAdmission {
    let broker: Broker

    func allowance(for peer: PeerCredentials) async -> VarlinkConnectionAllowance {
        let share = broker.connectionShare(uid: peer.uid, gid: peer.gid, pid: peer.pid)
        return VarlinkConnectionAllowance(connectionsPerUser: share.connectionsPerUser, privileged: share.administrator,
                                          reservedConnections: share.administratorConnections)
    }
}
