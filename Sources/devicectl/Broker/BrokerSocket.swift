#if canImport(Glibc)
import Glibc
#endif
import BrokerContract
import Foundation

/// Where the broker daemon (`deviced`) listens, for the daemon and for every client alike.
enum BrokerSocket {
    /// The default socket: systemd's `RuntimeDirectory=devicectl`.
    static let defaultPath = Broker1.defaultSocketPath

    /// `explicit` (`--socket`), else `$DEVICECTL_SOCKET`, else `defaultPath`.
    static func resolve(explicit: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnvironment = environment["DEVICECTL_SOCKET"], !fromEnvironment.isEmpty { return fromEnvironment }
        return defaultPath
    }

    /// The users a broker may run as for this client to talk to it: root (the system's `deviced`), the
    /// client's own user (a personal broker a developer runs), and the uids `$DEVICECTL_BROKER_UID` lists
    /// (comma-separated). Anything else listening on the socket is someone else's: never trusted.
    static func trustedUIDs(environment: [String: String] = ProcessInfo.processInfo.environment) -> Set<UInt32> {
        var uids: Set<UInt32> = [0, getuid()]
        for entry in (environment["DEVICECTL_BROKER_UID"] ?? "").split(separator: ",") {
            if let uid = UInt32(entry.trimmingCharacters(in: .whitespaces)) { uids.insert(uid) }
        }
        return uids
    }

    /// The largest request the broker takes (its varlink message limit): 1 MiB.
    static let maximumRequestBytes = 1 << 20
}
