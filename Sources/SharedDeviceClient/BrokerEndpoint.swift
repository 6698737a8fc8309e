import BrokerContract

#if canImport(Glibc)
import Glibc
#endif

/// Where the broker listens and whom the client trusts to be it. The app (its executable) decides both;
/// the library reads no environment variable and no configuration file.
public struct BrokerEndpoint: Sendable, Hashable {
    /// The system broker's socket (`deviced.socket`).
    public static let systemSocketPath = Broker1.defaultSocketPath

    /// The broker's Unix socket.
    public var socketPath: String
    /// The users the listener may run as: checked (`SO_PEERCRED`) on every connection before anything
    /// is sent; any other listener is refused with `untrustedBroker`.
    public var trustedUIDs: Set<UInt32>

    /// The broker at `socketPath`, run by root or by this process's own user (a developer's personal
    /// broker), or by one of `alsoTrusted`.
    public init(socketPath: String = BrokerEndpoint.systemSocketPath, alsoTrusted: Set<UInt32> = []) {
        self.socketPath = socketPath
        trustedUIDs = alsoTrusted.union([0, getuid()])
    }
}
