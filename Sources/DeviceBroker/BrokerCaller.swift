/// Who called the broker, as the kernel said when the connection was accepted. Never anything the
/// caller sent.
public struct BrokerCaller: Sendable, Hashable {
    /// The caller's effective uid: the security boundary (one uid is one app).
    public var uid: UInt32
    /// The caller's effective gid.
    public var gid: UInt32
    /// The caller's pid at connect time.
    public var pid: Int32
    /// The caller's executable, when the kernel could vouch for it (pidfd); for the audit record only.
    public var executable: String?
    /// The connection the call came on (unique for the broker's lifetime).
    public var connectionID: UInt64

    public init(uid: UInt32, gid: UInt32, pid: Int32, executable: String? = nil, connectionID: UInt64) {
        self.connectionID = connectionID
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.executable = executable
    }

    /// The audit log's actor for the caller: `uid N`.
    public var actor: String { "uid \(uid)" }
}
