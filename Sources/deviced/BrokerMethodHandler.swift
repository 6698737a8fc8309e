import DeviceBroker
import Varlink
import VarlinkServer

/// Hands the server's calls to the broker with the caller's kernel credentials.
struct BrokerMethodHandler: VarlinkMethodHandler {
    let broker: Broker

    func handle(_ call: VarlinkCall, context: VarlinkCallContext, replies: VarlinkReplies) async {
        let caller = BrokerCaller(uid: context.peer.uid, gid: context.peer.gid, pid: context.peer.pid,
                                  executable: context.peer.executable, connectionID: context.connectionID)
        await broker.handle(call, caller: caller) { reply in await replies.send(reply) }
    }

    func isLongLived(_ call: VarlinkCall) -> Bool { broker.isLongLived(call) }

    func connectionClosed(_ context: VarlinkCallContext) { broker.connectionClosed(context.connectionID) }
}
