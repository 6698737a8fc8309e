import Logging
import NIOCore
import Synchronization
import Varlink

extension VarlinkServer {
    /// Serves one admitted connection until it closes: its calls run one at a time, in order, on a child
    /// task. The connection closing (the peer gone, a limit, the server stopping) cancels the call running
    /// (an interactive sign-in stops); the peer half-closing gets its replies, then the close.
    func serve(_ connection: ServedConnection) async {
        connection.unserved.markServed()
        let channel = connection.channel.channel
        do {
            try await connection.channel.executeThenClose { inbound, outbound in
                let writer = ReplyWriter(
                    outbound: outbound,
                    channel: channel,
                    maximumBytes: configuration.maximumReplyBytes,
                    limitExceededError: configuration.limitExceededError,
                    ledger: connection.ledger
                )
                await withTaskCancellationHandler {
                    await withTaskGroup(of: Void.self) { group in
                        // The calls start on the socket's thread when the handler may answer some at once, else
                        // on the handler's threads from the moment they come off the wire: no hop to and from the
                        // cooperative pool per call either way.
                        let callExecutor: any TaskExecutor =
                            configuration.runsCallsOnEventLoop || configuration.answersCallsAtOnce
                            ? EventLoopTaskExecutor(channel.eventLoop) : executor
                        group.addTask(executorPreference: callExecutor) {
                            await self.runCalls(inbound, of: connection, writer: writer)
                        }
                        group.addTask { try? await channel.closeFuture.get() }
                        // Whichever ends first: the calls (the peer stopped sending), or the connection.
                        await group.next()
                        group.cancelAll()
                        channel.close(promise: nil)
                    }
                } onCancel: {
                    channel.close(promise: nil)
                }
            }
        } catch {
            logger.debug(
                "varlink connection ended",
                metadata: ["peer.uid": "\(connection.context.peer.uid)", "error": "\(error)"]
            )
        }
        handler.connectionClosed(connection.context)
        if connection.ledger.heldMegabytes { usage.returnFreedMemory() }
    }

    /// Runs the connection's calls in order until the peer stops sending (then waits until every reply is
    /// taken) or the task is cancelled.
    private func runCalls(
        _ inbound: NIOAsyncChannelInboundStream<ReceivedCall>,
        of connection: ServedConnection,
        writer: ReplyWriter
    ) async {
        do {
            for try await received in inbound {
                // A call queued on a connection that closed never starts (the close cancels this task too,
                // a moment later).
                if Task.isCancelled || !writer.channel.isActive { return }
                // A peer that has not taken its replies (more than the channel's high watermark) gets its
                // next call run once it has: a peer that pipelines calls and never reads holds one reply, not
                // one per call.
                if connection.ledger.takeRepliesSinceFlush() > Self.repliesBeforeFlush || !writer.channel.isWritable,
                    !(await writer.flushed())
                {
                    return
                }
                await run(received.call, context: connection.context, writer: writer)
                connection.ledger.finish(bytes: received.bytes)
            }
        } catch {
            return
        }
        if !Task.isCancelled { _ = await writer.flushed() }
    }

    /// Bytes of replies a connection's calls may write before its next call waits for them to be taken
    /// (NIO's default high watermark of a channel's pending writes).
    static let repliesBeforeFlush = 64 << 10

    /// Runs one call: `org.varlink.service` here, everything else by the handler (at once on the socket's thread
    /// when it can, else on its threads).
    private func run(_ call: VarlinkCall, context: VarlinkCallContext, writer: ReplyWriter) async {
        let replies = VarlinkReplies(oneway: call.oneway, more: call.more) { reply in await writer.write(reply) }
        if call.interface == "org.varlink.service" {
            await replies.send(info.answer(call))
        } else if !servedInterfaces.contains(call.interface) {
            await replies.send(.interfaceNotFound(call.interface))
        } else {
            let counted = !handler.isLongLived(call)
            if counted { callsInProgress.begin() }
            if !configuration.answersAtOnceOnSocketThread {
                await handler.handle(call, context: context, replies: replies)
            } else if !call.more, let reply = handler.replyAtOnce(to: call, context: context) {
                // A call queued behind another (else `AtOnceCallHandler` answered it in the read).
                await replies.send(reply)
            } else {
                // Not at once: on the handler's threads (a call there may block its thread: SQLite's writes).
                await withTaskExecutorPreference(executor) {
                    await handler.handle(call, context: context, replies: replies)
                }
            }
            guard counted else { return }
            // A shutdown waits for this call: its replies are taken before it counts as done (and the
            // connection may be closed).
            if isStopping { _ = await writer.flushed() }
            callsInProgress.end()
        }
    }
}
