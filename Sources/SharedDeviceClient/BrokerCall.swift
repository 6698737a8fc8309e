#if canImport(Glibc)
import Glibc
#endif
import BrokerContract
import Foundation
import Logging
import NIOCore
import NIOPosix
import Varlink

/// One call to the broker on a connection of its own: connect, check who listens (`SO_PEERCRED`),
/// send, read replies until the handler has what it needs, close. Cancelling the calling task closes the
/// connection, which the broker takes as the app going away (a sign-in in progress stops).
struct BrokerCall: Sendable {
    let endpoint: BrokerEndpoint
    let group: any EventLoopGroup
    let logger: Logger

    /// The largest reply read (the broker sends at most 4 MiB).
    static let maximumReplyBytes = 16 << 20

    /// Calls `method` and hands each reply to `handle` until it returns a value.
    /// - Throws: `SharedDeviceClientError`: the broker's error replies as their cases, `brokerUnavailable`
    ///   when it cannot be reached or goes away, `untrustedBroker`, `cancelled`, `refused` for a reply off
    ///   the interface (a field missing or mistyped is named).
    func run<Method: VarlinkMethod, Value: Sendable>(_ method: Method.Type, _ parameters: Method.Parameters, more: Bool = false,
                                                     _ handle: @escaping @Sendable (Method.Reply) async throws(SharedDeviceClientError) -> Value?)
        async throws(SharedDeviceClientError) -> Value {
        try await run(method, parameters, more: more) { reply, _ throws(SharedDeviceClientError) in try await handle(reply) }
    }

    /// Calls `method` and hands each reply, and whether more follow, to `handle` until it returns a value.
    func run<Method: VarlinkMethod, Value: Sendable>(_ method: Method.Type, _ parameters: Method.Parameters, more: Bool = false,
                                                     _ handle: @escaping @Sendable (Method.Reply, Bool) async throws(SharedDeviceClientError) -> Value?)
        async throws(SharedDeviceClientError) -> Value {
        let call = VarlinkCall(method, parameters, more: more)
        let member = String(Method.qualifiedName.split(separator: ".").last ?? "")
        let encoded = call.encoded()
        guard encoded.count - 1 <= 1 << 20 else {
            throw .refused(error: Broker1.ProtocolError.qualifiedName, message: """
                the request is \(encoded.count - 1) bytes, over the broker's limit of 1048576 bytes; secrets travel \
                base64-encoded, so a secret through the broker can be at most about 750 KB
                """)
        }
        if Task.isCancelled { throw .cancelled }
        let channel = try await connect()
        do {
            return try await channel.executeThenClose { inbound, outbound in
                try await checkPeer(of: channel.channel)
                try await outbound.write(ByteBuffer(bytes: encoded))
                for try await message in inbound {
                    let reply: VarlinkReply
                    do throws(VarlinkProtocolError) {
                        reply = try VarlinkReply.decode(Data(message.readableBytesView))
                    } catch {
                        throw SharedDeviceClientError.refused(error: "org.varlink.service.InvalidParameter",
                                                              message: "the broker's reply to \(member) is not a varlink reply: \(error)")
                    }
                    if reply.error != nil { throw Self.failure(reply) }
                    let decoded: Method.Reply
                    do throws(VarlinkFieldError) {
                        decoded = try Method.Reply(varlinkFields: reply.parameters)
                    } catch {
                        throw SharedDeviceClientError.refused(error: "org.varlink.service.InvalidParameter",
                                                              message: "the broker's reply to \(member) has the field \(error.field) missing or mistyped")
                    }
                    if let value = try await handle(decoded, reply.continues) { return value }
                    guard reply.continues else {
                        throw SharedDeviceClientError.refused(error: Method.qualifiedName, message: "the broker's last reply to \(member) was incomplete")
                    }
                }
                if Task.isCancelled { throw SharedDeviceClientError.cancelled }
                throw SharedDeviceClientError.brokerUnavailable("the broker at \(endpoint.socketPath) closed the connection during \(member); try again")
            }
        } catch let error as SharedDeviceClientError {
            throw error
        } catch is CancellationError {
            throw .cancelled
        } catch {
            if Task.isCancelled { throw .cancelled }
            throw .brokerUnavailable("the broker at \(endpoint.socketPath) went away during \(member) (\(error)); try again")
        }
    }

    private func connect() async throws(SharedDeviceClientError) -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
        do {
            return try await ClientBootstrap(group: group).connect(unixDomainSocketPath: endpoint.socketPath) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(VarlinkMessageSplitter(maximumBytes: Self.maximumReplyBytes)))
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        } catch {
            if Task.isCancelled { throw .cancelled }
            let code = (error as? IOError)?.errnoCode ?? 0
            switch code {
            case EACCES, EPERM:
                throw .brokerUnavailable("no permission to connect to the broker at \(endpoint.socketPath)")
            case ENOENT, ECONNREFUSED, ENOTDIR:
                throw .brokerUnavailable("""
                    the broker daemon is not running (nothing listens on \(endpoint.socketPath)); start it with \
                    `systemctl start deviced` (or run deviced), or point the app at the socket of a broker that runs
                    """)
            default:
                throw .brokerUnavailable("cannot reach the broker at \(endpoint.socketPath): \(error)")
            }
        }
    }

    /// Refuses a listener that runs as a user the endpoint does not trust; nothing has been sent yet.
    private func checkPeer(of channel: any Channel) async throws(SharedDeviceClientError) {
        let credentials: VarlinkPeer
        do {
            guard let provider = channel as? any SocketOptionProvider else { throw ChannelError.operationUnsupported }
            credentials = try await provider.unsafeGetSocketOption(level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED)).get()
        } catch {
            throw .untrustedBroker("refusing the broker at \(endpoint.socketPath): the kernel does not say who runs it (\(error)); nothing was sent")
        }
        guard endpoint.trustedUIDs.contains(credentials.uid) else {
            logger.warning("refusing an untrusted broker", metadata: ["socket": "\(endpoint.socketPath)", "peer.uid": "\(credentials.uid)"])
            throw .untrustedBroker("""
                refusing the broker at \(endpoint.socketPath): it runs as uid \(credentials.uid) (pid \(credentials.pid)), not as root \
                or as this user, so it is not the device's broker; nothing was sent
                """)
        }
    }

    /// The client error for an error reply.
    static func failure(_ reply: VarlinkReply) -> SharedDeviceClientError {
        let name = reply.error ?? ""
        let decoded: Broker1.ErrorReply?
        do {
            decoded = try Broker1.ErrorReply(reply)
        } catch {
            return .refused(error: name, message: "the broker's error reply has the field \(error.field) missing or mistyped")
        }
        switch decoded {
        case .keychainError(let error)?:
            return .keychain(status: error.status, code: error.code, message: error.message)
        case .accountError(let error)?:
            return .account(code: error.code, message: error.message, msalStatus: error.msalStatus, identityCode: error.identityCode)
        case .callerNotInPolicy(let error)?:
            return .callerNotInPolicy(uid: error.uid, message: error.message)
        case .limitExceeded(let error)?:
            return .limitExceeded(limit: error.limit, maximum: error.maximum, message: error.message)
        case .tooManyConnections(let error)?:
            return .brokerUnavailable(error.explanation)
        case .protocolError(let error)?:
            return .refused(error: name, message: error.reason)
        case nil:
            return .refused(error: name, message: Broker1.refusalMessage(reply))
        }
    }
}

/// Splits the bytes of a connection into varlink messages (each ends with a NUL), refusing one larger
/// than `maximumBytes`.
struct VarlinkMessageSplitter: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer
    let maximumBytes: Int

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let end = buffer.readableBytesView.firstIndex(of: 0) else {
            if buffer.readableBytes > maximumBytes { throw ChannelError.inappropriateOperationForState }
            return .needMoreData
        }
        let length = end - buffer.readerIndex
        guard length <= maximumBytes, let message = buffer.readSlice(length: length) else { throw ChannelError.inappropriateOperationForState }
        buffer.moveReaderIndex(forwardBy: 1)
        context.fireChannelRead(wrapInboundOut(message))
        return .continue
    }
}
