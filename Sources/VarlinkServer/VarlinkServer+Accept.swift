import Logging
import NIOCore
import ProcessSandbox
import Synchronization
import Varlink

/// What the accept loop gets for an accepted socket.
enum AcceptedConnection: Sendable {
    /// Over a connection limit: answered with `tooManyConnectionsError` and closed (`RefusingHandler`).
    case refused
    /// Given a slot: its calls are the server's to serve.
    case admitted(ServedConnection)
}

/// An admitted connection: its calls as they come off the wire, where its replies go, and who is calling.
struct ServedConnection: Sendable {
    var channel: NIOAsyncChannel<ReceivedCall, ByteBuffer>
    var context: VarlinkCallContext
    var ledger: ConnectionLedger
    /// Closes the connection should the server never serve it.
    let unserved: UnservedConnectionCloser

    init(channel: NIOAsyncChannel<ReceivedCall, ByteBuffer>, context: VarlinkCallContext, ledger: ConnectionLedger) {
        self.channel = channel
        self.context = context
        self.ledger = ledger
        unserved = UnservedConnectionCloser(channel)
    }
}

/// Closes an admitted connection that is dropped without being served: one whose setup finished while the
/// server was stopping, after its accept loop had ended. (Dropping the async channel unserved would stop the
/// process: its writer must be finished, and only `executeThenClose` does that.)
final class UnservedConnectionCloser: Sendable {
    private let channel: NIOAsyncChannel<ReceivedCall, ByteBuffer>
    private let served = Atomic<Bool>(false)

    init(_ channel: NIOAsyncChannel<ReceivedCall, ByteBuffer>) {
        self.channel = channel
    }

    /// The server serves the connection: nothing to do when it is dropped.
    func markServed() {
        served.store(true, ordering: .releasing)
    }

    deinit {
        guard !served.load(ordering: .acquiring) else { return }
        let channel = self.channel
        Task { try? await channel.executeThenClose { _, _ in } }
    }
}

extension VarlinkServer {
    /// Sets up an accepted socket, before it is registered: reads who is calling (the kernel's credentials,
    /// or what the tests' `callerIdentity` makes of them), gives it a slot or refuses it, and builds the
    /// pipeline of an admitted one (unread replies, reply deadline, framing, idle state, queue limits, then
    /// the async channel its task reads from).
    func accept(_ channel: any Channel) -> EventLoopFuture<AcceptedConnection> {
        let id = connections.makeID()
        return PeerCredentials.read(from: channel, identifySandboxes: configuration.identifiesSandboxes).map {
            [callerIdentity = configuration.callerIdentity] peer in
            callerIdentity?(peer) ?? peer
        }.flatMap { [self] peer in
            allowance(for: peer, on: channel.eventLoop).flatMapThrowing { [self] allowance -> AcceptedConnection in
                if let refusal = admit(id, channel: channel, peer: peer, allowance: allowance) {
                    logger.debug(
                        "varlink connection refused: too many connections",
                        metadata: [
                            "peer.uid": "\(peer.uid)", "varlink.limit": "\(refusal.limit)",
                            "varlink.scope": "\(refusal.scope)",
                        ]
                    )
                    let reply = VarlinkReply(
                        error: configuration.tooManyConnectionsError,
                        parameters: ["limit": .int(Int64(refusal.limit)), "scope": .string(refusal.scope)]
                    )
                    try channel.pipeline.syncOperations.addHandler(RefusingHandler(reply: reply))
                    return .refused
                }
                channel.closeFuture.whenComplete { [connections] _ in connections.remove(id) }
                return .admitted(
                    try makePipeline(
                        channel,
                        context: VarlinkCallContext(peer: peer, connectionID: id),
                        privileged: allowance.privileged
                    )
                )
            }
        }.flatMapError { [logger] error in
            logger.debug("varlink connection dropped while being set up", metadata: ["error": "\(error)"])
            channel.close(promise: nil)
            return channel.eventLoop.makeSucceededFuture(.refused)
        }
    }

    /// The handlers of an admitted connection, and the async channel over them. The inbound buffer never
    /// makes the socket wait: the queue limits bound it first (a peer over them is told so and closed).
    private func makePipeline(
        _ channel: any Channel,
        context: VarlinkCallContext,
        privileged: Bool
    ) throws -> ServedConnection {
        var logger = self.logger
        logger[metadataKey: "peer.uid"] = "\(context.peer.uid)"
        let ledger = ConnectionLedger(
            configuration: configuration,
            uid: context.peer.uid,
            privileged: privileged,
            usage: usage
        )
        let handlers = channel.pipeline.syncOperations
        try handlers.addHandler(
            UnreadReplyHandler(
                configuration: configuration,
                uid: context.peer.uid,
                privileged: privileged,
                usage: usage,
                logger: logger
            )
        )
        try handlers.addHandler(ReplyDeadlineHandler(timeout: configuration.replyTimeout))
        try handlers.addHandler(
            ByteToMessageHandler(
                VarlinkMessageDecoder(
                    maximumMessageBytes: configuration.maximumMessageBytes,
                    maximumValues: configuration.maximumMessageValues,
                    messageTimeout: configuration.messageTimeout,
                    ledger: ledger
                )
            )
        )
        // After the decoder: only a completed message counts as reading (a reply written, as writing).
        try handlers.addHandler(IdleStateHandler(allTimeout: configuration.idleTimeout))
        try handlers.addHandler(
            CallQueueHandler(protocolError: configuration.protocolError, ledger: ledger, logger: logger)
        )
        if configuration.answersAtOnceOnSocketThread {
            try handlers.addHandler(
                AtOnceCallHandler(
                    handler: handler,
                    context: context,
                    ledger: ledger,
                    interfaces: servedInterfaces,
                    configuration: configuration
                )
            )
        }
        let queued = max(configuration.maximumQueuedCalls, 1)
        let asyncChannel = try NIOAsyncChannel<ReceivedCall, ByteBuffer>(
            wrappingChannelSynchronously: channel,
            configuration: .init(backPressureStrategy: .init(lowWatermark: queued, highWatermark: queued + 1))
        )
        return ServedConnection(channel: asyncChannel, context: context, ledger: ledger)
    }

    /// The peer's allowance from the configuration's admission rule (asked on the handler's threads: it
    /// may read the service's policy from its store), or every slot when there is no rule.
    private func allowance(
        for peer: PeerCredentials,
        on eventLoop: any EventLoop
    ) -> EventLoopFuture<VarlinkConnectionAllowance> {
        guard let admission = configuration.admission else {
            return eventLoop.makeSucceededFuture(
                VarlinkConnectionAllowance(
                    connectionsPerUser: configuration.maximumConnections,
                    privileged: true,
                    reservedConnections: 0
                )
            )
        }
        let promise = eventLoop.makePromise(of: VarlinkConnectionAllowance.self)
        Task(executorPreference: executor) {
            promise.succeed(await admission.allowance(for: peer))
        }
        return promise.futureResult
    }

    /// Takes a slot for connection `id` if `peer` may have one: under the server's limit, outside the
    /// reserved slots unless privileged, and under its uid's share. Returns the limit that refused it.
    private func admit(
        _ id: UInt64,
        channel: any Channel,
        peer: PeerCredentials,
        allowance: VarlinkConnectionAllowance
    ) -> (limit: Int, scope: String)? {
        let maximum = configuration.maximumConnections
        return connections.withOpen { open -> (limit: Int, scope: String)? in
            if open.count >= maximum { return (maximum, "server") }
            // At most a quarter of the slots are kept: a small server still serves apps.
            let unreserved = maximum - min(allowance.reservedConnections, maximum / 4)
            if !allowance.privileged && open.count >= unreserved { return (unreserved, "reserved") }
            let mine = open.values.filter { $0.peer.uid == peer.uid }
            if mine.count >= allowance.connectionsPerUser { return (allowance.connectionsPerUser, "user") }
            if let perApp = allowance.connectionsPerApp,
                mine.count(where: { $0.peer.sandbox.isSameApp(as: peer.sandbox) }) >= perApp
            {
                return (perApp, "app")
            }
            open[id] = OpenConnection(channel: channel, peer: peer)
            return nil
        }
    }
}
