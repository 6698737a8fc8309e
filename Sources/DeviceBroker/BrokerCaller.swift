public import ProcessSandbox

/// Who called the broker, as the kernel said when the connection was accepted. Never anything the
/// caller sent.
public struct BrokerCaller: Sendable, Hashable {
    /// The caller's effective uid: the security boundary between users.
    public var uid: UInt32
    /// The caller's effective gid.
    public var gid: UInt32
    /// The caller's pid at connect time.
    public var pid: Int32
    /// The caller's executable, when the kernel could vouch for it (pidfd); for the audit record only.
    public var executable: String?
    /// The sandbox the caller runs in, read at accept from its root (the boundary between the apps of one
    /// uid): `host`, a Flatpak app, `unpinned` (not told apart on this kernel) or `unidentified`.
    public var sandbox: PeerSandbox
    /// The connection the call came on (unique for the broker's lifetime).
    public var connectionID: UInt64
    /// The pidfd of the connection's peer from accept, for `ActForCaller`; nil where the server keeps none.
    public var process: ProcessHandle?
    /// The pid of the host process (the MSAL bridge) that handed this caller over on its connection
    /// (`ActForCaller`); nil for a caller that connected itself. For the audit record.
    public var handedOverBy: Int32?

    public init(
        uid: UInt32,
        gid: UInt32,
        pid: Int32,
        executable: String? = nil,
        sandbox: PeerSandbox = .host,
        connectionID: UInt64,
        process: ProcessHandle? = nil
    ) {
        self.connectionID = connectionID
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.executable = executable
        self.sandbox = sandbox
        self.process = process
    }

    /// The audit log's actor for the caller: `uid N`, and `flatpak ID` after it for a sandboxed app.
    public var actor: String {
        guard let flatpak = sandbox.flatpakAppID else { return "uid \(uid)" }
        return "uid \(uid) flatpak \(flatpak)"
    }

    /// The app of its uid the caller is, for the limits kept per app: `uid` for a host process (or any
    /// process where sandboxes are not told apart), `uid/ID` for a Flatpak app, `uid?` for an unidentified one.
    var appKey: String {
        switch sandbox {
        case .host, .unpinned: "\(uid)"
        case .flatpak(let app): "\(uid)/\(app.appID)"
        case .unidentified: "\(uid)?"
        }
    }

    /// What the audit record says of the caller's sandbox: `sandboxed` (true/false), the Flatpak app id and
    /// its instance, or why it could not be identified.
    var sandboxDetails: [String: String] {
        var details: [String: String] =
            switch sandbox {
            case .host: ["sandboxed": "false"]
            case .unpinned: ["sandboxed": "unknown"]
            case .flatpak(let app):
                ["sandboxed": "true", "flatpakAppId": app.appID].merging(
                    app.instanceID.map { ["flatpakInstanceId": $0] } ?? [:]
                ) { first, _ in first }
            case .unidentified(let reason): ["sandboxed": "unknown", "identityError": reason]
            }
        if let handedOverBy { details["handedOverByPid"] = "\(handedOverBy)" }
        return details
    }
}
