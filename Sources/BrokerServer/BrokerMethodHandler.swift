public import DeviceBroker
public import Varlink
public import VarlinkServer

/// Hands the server's calls to the broker with the caller's credentials as the server has them.
public struct BrokerMethodHandler: VarlinkMethodHandler {
    let broker: Broker

    /// A handler for `broker`.
    public init(broker: Broker) {
        self.broker = broker
    }

    public func handle(_ call: VarlinkCall, context: VarlinkCallContext, replies: VarlinkReplies) async {
        await broker.handle(call, caller: BrokerCaller(context.peer, connectionID: context.connectionID)) { reply in
            await replies.send(reply)
        }
    }

    public func replyAtOnce(to call: VarlinkCall, context: VarlinkCallContext) -> VarlinkReply? {
        broker.replyAtOnce(to: call, caller: BrokerCaller(context.peer, connectionID: context.connectionID))
    }

    public func isLongLived(_ call: VarlinkCall) -> Bool { broker.isLongLived(call) }

    public func connectionClosed(_ context: VarlinkCallContext) { broker.connectionClosed(context.connectionID) }
}

extension BrokerCaller {
    /// The caller on connection `connectionID`, who the server says `peer` is.
    init(_ peer: PeerCredentials, connectionID: UInt64) {
        self.init(
            uid: peer.uid,
            gid: peer.gid,
            pid: peer.pid,
            executable: peer.executable,
            sandbox: peer.sandbox,
            connectionID: connectionID,
            process: peer.process
        )
    }
}
