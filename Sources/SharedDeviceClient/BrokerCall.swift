import BrokerContract
import Foundation
import Logging
import NIOCore
import NIOPosix
import Varlink
import VarlinkNIO

#if canImport(Glibc)
import Glibc
#endif

/// Calls to the broker. A call with more replies (a sign-in, a subscription) runs on a connection of its
/// own: connect, check who listens (`SO_PEERCRED`), send, read replies until the handler has what it
/// needs, close. A single-reply call runs on a pooled connection (checked the same way when opened),
/// one call at a time on each. Cancelling the calling task closes the call's connection, which the
/// broker takes as the app going away (a sign-in in progress stops). With `callerPidfd` (the MSAL bridge
/// serving a sandboxed caller) every connection first asks the broker to act for that process
/// (`ActForCaller`), before any call of the app's.
struct BrokerCall: Sendable {
    let endpoint: BrokerEndpoint
    let group: any EventLoopGroup
    let logger: Logger
    /// A pidfd open in this process whose process every connection acts for; nil: this process's own calls.
    var callerPidfd: Int32? = nil
    let pool = ConnectionPool()

    /// The largest reply read (the broker sends at most 4 MiB).
    static let maximumReplyBytes = 16 << 20

    /// Calls `method` and hands each reply to `handle` until it returns a value.
    /// - Throws: `SharedDeviceClientError`: the broker's error replies by their codes, `brokerUnavailable`
    ///   when it cannot be reached or goes away, `untrustedBroker`, `cancelled`, `refused` for a reply off
    ///   the interface (a field missing or mistyped is named).
    func run<Method: VarlinkMethod, Value: Sendable>(
        _ method: Method.Type,
        _ parameters: Method.Parameters,
        more: Bool = false,
        _ handle: @escaping @Sendable (Method.Reply) async throws(SharedDeviceClientError) -> Value?
    )
        async throws(SharedDeviceClientError) -> Value
    {
        try await run(method, parameters, more: more) { reply, _ throws(SharedDeviceClientError) in
            try await handle(reply)
        }
    }

    /// Calls `method` and hands each reply, and whether more follow, to `handle` until it returns a value.
    func run<Method: VarlinkMethod, Value: Sendable>(
        _ method: Method.Type,
        _ parameters: Method.Parameters,
        more: Bool = false,
        _ handle: @escaping @Sendable (Method.Reply, Bool) async throws(SharedDeviceClientError) -> Value?
    )
        async throws(SharedDeviceClientError) -> Value
    {
        let call = VarlinkCall(method, parameters, more: more)
        let member = String(Method.qualifiedName.split(separator: ".").last ?? "")
        let encoded = call.encoded()
        guard encoded.count - 1 <= 1 << 20 else {
            throw .refused(
                error: Broker1.ProtocolError.qualifiedName,
                message: """
                    the request is \(encoded.count - 1) bytes, over the broker's limit of 1048576 bytes; secrets travel \
                    base64-encoded, so a secret through the broker can be at most about 750 KB
                    """
            )
        }
        if Task.isCancelled { throw .cancelled }
        if !more {
            return try await single(encoded, member: member) { message throws(SharedDeviceClientError) in
                let (reply, continues): (Method.Reply, Bool) = try Self.decode(message, member: member)
                guard let value = try await handle(reply, continues) else {
                    throw .refused(
                        error: Method.qualifiedName,
                        message: "the broker's reply to \(member) did not carry what the call needs"
                    )
                }
                return value
            }
        }
        let (channel, peer) = try await connect()
        do {
            return try await channel.executeThenClose { inbound, outbound in
                try await checkPeer(peer)
                var messages = inbound.makeAsyncIterator()
                if let callerPidfd {
                    try await outbound.write(ByteBuffer(bytes: Self.actForCallerCall(callerPidfd)))
                    guard let message = try await messages.next() else {
                        throw SharedDeviceClientError.brokerUnavailable(
                            "the broker at \(endpoint.socketPath) closed the connection during ActForCaller; try again",
                            socketPath: endpoint.socketPath
                        )
                    }
                    let _: (Broker1.ActForCaller.Reply, Bool) = try Self.decode(message, member: "ActForCaller")
                }
                do {
                    try await outbound.write(ByteBuffer(bytes: encoded))
                } catch {
                    // The broker may have refused the connection (TooManyConnections) and closed it before the
                    // call went out: its reply says why.
                    if let message = try? await messages.next() {
                        let _: (Method.Reply, Bool) = try Self.decode(message, member: member)
                    }
                    throw error
                }
                while let message = try await messages.next() {
                    let (decoded, continues): (Method.Reply, Bool) = try Self.decode(message, member: member)
                    if let value = try await handle(decoded, continues) { return value }
                    guard continues else {
                        throw SharedDeviceClientError.refused(
                            error: Method.qualifiedName,
                            message: "the broker's last reply to \(member) was incomplete"
                        )
                    }
                }
                if Task.isCancelled { throw SharedDeviceClientError.cancelled }
                throw SharedDeviceClientError.brokerUnavailable(
                    "the broker at \(endpoint.socketPath) closed the connection during \(member); try again",
                    socketPath: endpoint.socketPath
                )
            }
        } catch let error as SharedDeviceClientError {
            throw error
        } catch is CancellationError {
            throw .cancelled
        } catch {
            if Task.isCancelled { throw .cancelled }
            throw .brokerUnavailable(
                "the broker at \(endpoint.socketPath) went away during \(member) (\(error)); try again",
                socketPath: endpoint.socketPath
            )
        }
    }

    /// One reply's worth of a message: the reply decoded strictly, and whether more follow.
    static func decode<Reply: VarlinkStruct>(
        _ message: ByteBuffer,
        member: String
    ) throws(SharedDeviceClientError) -> (Reply, Bool) {
        let reply: VarlinkReply
        do throws(VarlinkProtocolError) {
            reply = try VarlinkReply.decode(Data(message.readableBytesView))
        } catch {
            throw .refused(
                error: "org.varlink.service.InvalidParameter",
                message: "the broker's reply to \(member) is not a varlink reply: \(error)"
            )
        }
        if reply.error != nil { throw failure(reply) }
        do throws(VarlinkFieldError) {
            return (try Reply(varlinkFields: reply.parameters), reply.continues)
        } catch {
            throw .refused(
                error: "org.varlink.service.InvalidParameter",
                message: "the broker's reply to \(member) has the field \(error.field) missing or mistyped"
            )
        }
    }

    /// A single-reply call on a pooled connection. A pooled connection the broker closed while it sat
    /// idle (its idle timeout, a restart) is replaced once: the broker never saw the call on it.
    private func single<Value: Sendable>(
        _ request: Data,
        member: String,
        _ handle: (ByteBuffer) async throws(SharedDeviceClientError) -> Value
    ) async throws(SharedDeviceClientError) -> Value {
        let buffer = ByteBuffer(bytes: request)
        var reused = true
        var connection: PooledConnection
        if let idle = pool.take() {
            connection = idle
        } else {
            connection = try await openPooled()
            reused = false
        }
        while true {
            let message: ByteBuffer
            do {
                message = try await connection.exchange(buffer)
            } catch {
                connection.close()
                if Task.isCancelled { throw .cancelled }
                if reused, (error as? ChannelError) == .ioOnClosedChannel || (error as? ChannelError) == .alreadyClosed
                {
                    connection = try await openPooled()
                    reused = false
                    continue
                }
                throw .brokerUnavailable(
                    "the broker at \(endpoint.socketPath) went away during \(member) (\(error)); try again",
                    socketPath: endpoint.socketPath
                )
            }
            do throws(SharedDeviceClientError) {
                let value = try await handle(message)
                pool.give(connection)
                return value
            } catch {
                // An error reply leaves the connection in step; anything else off the interface does not.
                if case .refused = error { connection.close() } else { pool.give(connection) }
                throw error
            }
        }
    }

    /// A new connection for the pool, its listener checked before anything is sent.
    private func openPooled() async throws(SharedDeviceClientError) -> PooledConnection {
        let connection: PooledConnection
        do {
            connection = try await PooledConnection.open(
                endpoint.socketPath,
                group: group,
                maximumReplyBytes: Self.maximumReplyBytes
            )
        } catch {
            throw unreachable(error)
        }
        do throws(SharedDeviceClientError) {
            try await checkPeer(connection.peer)
            if let callerPidfd {
                let message: ByteBuffer
                do {
                    message = try await connection.exchange(ByteBuffer(bytes: Self.actForCallerCall(callerPidfd)))
                } catch {
                    if Task.isCancelled { throw SharedDeviceClientError.cancelled }
                    throw SharedDeviceClientError.brokerUnavailable(
                        "the broker at \(endpoint.socketPath) went away during ActForCaller (\(error)); try again",
                        socketPath: endpoint.socketPath
                    )
                }
                let _: (Broker1.ActForCaller.Reply, Bool) = try Self.decode(message, member: "ActForCaller")
            }
        } catch {
            connection.close()
            throw error
        }
        return connection
    }

    /// The `ActForCaller` call that makes a connection act for the process of `callerPidfd`.
    static func actForCallerCall(_ callerPidfd: Int32) -> Data {
        VarlinkCall(Broker1.ActForCaller.self, .init(callerPidfd: Int(callerPidfd))).encoded()
    }

    /// A connection of its own (for a call with more replies), and who listens on it.
    private func connect() async throws(SharedDeviceClientError) -> (
        NIOAsyncChannel<ByteBuffer, ByteBuffer>, EventLoopFuture<VarlinkPeer>
    ) {
        // The connection's own event loop, so the handler completes the promise without a hop.
        let loop = group.next()
        let peer = loop.makePromise(of: VarlinkPeer.self)
        do {
            let channel = try await ClientBootstrap(group: loop).connect(unixDomainSocketPath: endpoint.socketPath) {
                channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        PeerCredentialsCapture(peer),
                        ByteToMessageHandler(VarlinkMessageSplitter(maximumMessageBytes: Self.maximumReplyBytes)),
                    ])
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
            return (channel, peer.futureResult)
        } catch {
            peer.fail(error)
            throw unreachable(error)
        }
    }

    /// The client error for a connection that could not be made: which socket, why (nothing there, nothing
    /// accepting, which directory or the socket itself refused this uid) and what to do.
    private func unreachable(_ error: any Error) -> SharedDeviceClientError {
        if Task.isCancelled { return .cancelled }
        let code = (error as? IOError)?.errnoCode ?? 0
        return .brokerUnavailable(
            SocketDiagnosis(socketPath: endpoint.socketPath).explain(errno: code, underlying: "\(error)"),
            socketPath: endpoint.socketPath
        )
    }

    /// Refuses a listener that runs as a user the endpoint does not trust; nothing has been sent yet.
    private func checkPeer(_ peer: EventLoopFuture<VarlinkPeer>) async throws(SharedDeviceClientError) {
        let credentials: VarlinkPeer
        do {
            credentials = try await peer.get()
        } catch {
            throw .untrustedBroker(
                "refusing the broker at \(endpoint.socketPath): the kernel does not say who runs it (\(error)); nothing was sent",
                socketPath: endpoint.socketPath
            )
        }
        guard endpoint.trustedUIDs.contains(credentials.uid) else {
            logger.warning(
                "refusing an untrusted broker",
                metadata: ["socket": "\(endpoint.socketPath)", "peer.uid": "\(credentials.uid)"]
            )
            throw .untrustedBroker(
                """
                refusing the broker at \(endpoint.socketPath): it runs as uid \(credentials.uid) (pid \(credentials.pid)), not as root \
                or as this user, so it is not the device's broker; nothing was sent
                """,
                socketPath: endpoint.socketPath
            )
        }
    }

    /// The client error for an error reply.
    static func failure(_ reply: VarlinkReply) -> SharedDeviceClientError {
        let name = reply.error ?? ""
        let decoded: Broker1.ErrorReply?
        do {
            decoded = try Broker1.ErrorReply(reply)
        } catch {
            return .refused(
                error: name,
                message: "the broker's error reply has the field \(error.field) missing or mistyped"
            )
        }
        switch decoded {
        case .keychainError(let error)?:
            return SharedDeviceClientError(.init(name: error.code), error.message, keychainStatus: error.status)
        case .accountError(let error)?:
            return SharedDeviceClientError(
                .init(name: error.code),
                error.message,
                msalStatus: error.msalStatus,
                identityCode: error.identityCode
            )
        case .callerNotInPolicy(let error)?:
            return SharedDeviceClientError(.callerNotInPolicy, error.message, uid: error.uid)
        case .limitExceeded(let error)?:
            return SharedDeviceClientError(
                .limitExceeded,
                error.message,
                limit: error.limit.rawValue,
                maximum: error.maximum
            )
        case .tooManyConnections(let error)?:
            return SharedDeviceClientError(.brokerUnavailable, error.explanation)
        case .protocolError(let error)?:
            return .refused(error: name, message: error.reason)
        case nil:
            return .refused(error: name, message: Broker1.refusalMessage(reply))
        }
    }
}
