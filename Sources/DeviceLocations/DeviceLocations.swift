import BrokerContract
public import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where the device's programs find their state and the broker, from the command line and the
/// environment. Only the executables (`devicectl`, `deviced`) resolve locations; they pass the result to
/// the libraries, which read no environment variables and assume no default paths.
public enum DeviceLocations {
    /// The broker daemon's socket when nothing else is named: systemd's `RuntimeDirectory=devicectl`.
    public static let systemBrokerSocket = Broker1.defaultSocketPath

    /// Whether this process runs as root (effective uid 0): root's store is `/var/lib/devicectl`, and
    /// root's app commands go to the engine rather than through the broker.
    public static var runsAsRoot: Bool { geteuid() == 0 }

    /// The state directory (the store): `explicit` (`--state-dir`), else `$DEVICECTL_STATE_DIR`, else
    /// `/var/lib/devicectl` for root and `$XDG_STATE_HOME/devicectl` (default `~/.local/state/devicectl`)
    /// for other users.
    public static func stateDirectory(
        explicit: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        isRoot: Bool = DeviceLocations.runsAsRoot
    ) -> URL {
        if let named = namedStateDirectory(explicit: explicit, environment: environment) {
            return URL(fileURLWithPath: named)
        }
        if isRoot { return URL(fileURLWithPath: "/var/lib/devicectl") }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") {
            return URL(fileURLWithPath: xdg).appendingPathComponent("devicectl")
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".local/state/devicectl")
    }

    /// The state directory the user named (`explicit`, else a non-empty `$DEVICECTL_STATE_DIR`), if any.
    public static func namedStateDirectory(
        explicit: String?,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String? {
        if let explicit, !explicit.isEmpty { return explicit }
        let fromEnvironment = environment["DEVICECTL_STATE_DIR"] ?? ""
        return fromEnvironment.isEmpty ? nil : fromEnvironment
    }

    /// The broker's socket the user named (`explicit`, else a non-empty `$DEVICECTL_SOCKET`), if any: a
    /// command given one acts through that broker or not at all.
    public static func namedBrokerSocket(
        explicit: String?,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String? {
        if let explicit, !explicit.isEmpty { return explicit }
        let fromEnvironment = environment["DEVICECTL_SOCKET"] ?? ""
        return fromEnvironment.isEmpty ? nil : fromEnvironment
    }

    /// The broker's socket: `explicit` (`--socket`), else `$DEVICECTL_SOCKET`, else `systemBrokerSocket`.
    public static func brokerSocket(
        explicit: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnvironment = environment["DEVICECTL_SOCKET"], !fromEnvironment.isEmpty { return fromEnvironment }
        return systemBrokerSocket
    }

    /// The users besides root and the caller a broker may run as for a client to talk to it: the uids
    /// `$DEVICECTL_BROKER_UID` lists (comma-separated; a developer's own broker under another user).
    public static func alsoTrustedBrokerUIDs(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> Set<UInt32> {
        var uids: Set<UInt32> = []
        for entry in (environment["DEVICECTL_BROKER_UID"] ?? "").split(separator: ",") {
            if let uid = UInt32(entry.trimmingCharacters(in: .whitespaces)) { uids.insert(uid) }
        }
        return uids
    }
}
