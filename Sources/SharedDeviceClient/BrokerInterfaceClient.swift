public import BrokerContract
public import Logging
public import NIOCore
import NIOPosix
public import Varlink

/// Any method of the broker's interface with the generated contract's types (`Broker1.<Method>`): what
/// `PublicClientApplication` does not wrap (`GetStatus`, `GetCaller`'s state directory) and what tests of
/// the wire drive. The same connection handling as the application: pooled connections for single-reply
/// calls, one of its own for a call with more replies, the listener's uid
/// checked first, cancellation closing it, a reply off the interface refused naming the field.
public struct BrokerInterfaceClient: Sendable {
    private let broker: BrokerCall

    /// A client of the broker at `endpoint` (by default the system's).
    ///
    /// - Parameters:
    ///   - endpoint: where the broker listens and whom to trust to be it.
    ///   - logger: gets the client's own diagnostics (never a token or a secret).
    ///   - eventLoopGroup: runs the connections (nil: SwiftNIO's shared singleton group).
    public init(
        endpoint: BrokerEndpoint = BrokerEndpoint(),
        logger: Logger,
        eventLoopGroup: (any EventLoopGroup)? = nil
    ) {
        broker = BrokerCall(
            endpoint: endpoint,
            group: eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton,
            logger: logger
        )
    }

    /// Calls `method` once and returns its reply.
    public func call<Method: VarlinkMethod>(
        _ method: Method.Type,
        _ parameters: Method.Parameters
    ) async throws(SharedDeviceClientError) -> Method.Reply {
        try await broker.run(method, parameters) { reply throws(SharedDeviceClientError) in reply }
    }

    /// Calls `method` with `more` and hands each reply to `handle` until it returns a value (the call's
    /// connection is then closed) or the broker's last reply.
    public func stream<Method: VarlinkMethod, Value: Sendable>(
        _ method: Method.Type,
        _ parameters: Method.Parameters,
        until handle:
            @escaping @Sendable (Method.Reply, _ continues: Bool) async throws(SharedDeviceClientError) -> Value?
    ) async throws(SharedDeviceClientError) -> Value {
        try await broker.run(method, parameters, more: true, handle)
    }
}
