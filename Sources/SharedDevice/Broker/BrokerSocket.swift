public import Foundation

/// Where the broker daemon (`deviced`) listens, for the daemon and for every client alike.
public enum BrokerSocket {
    /// The default socket: systemd's `RuntimeDirectory=devicectl`.
    public static let defaultPath = "/run/devicectl/broker.sock"

    /// `explicit` (`--socket`), else `$DEVICECTL_SOCKET`, else `defaultPath`.
    public static func resolve(explicit: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnvironment = environment["DEVICECTL_SOCKET"], !fromEnvironment.isEmpty { return fromEnvironment }
        return defaultPath
    }
}
