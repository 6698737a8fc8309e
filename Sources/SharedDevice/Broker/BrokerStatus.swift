public import Foundation

/// The broker daemon's state as `GetStatus` reports it (`devicectl status`).
public struct BrokerStatus: Sendable, Equatable, Encodable {
    /// A connection open to the broker, by the kernel's credentials of its peer.
    public struct Connection: Sendable, Equatable, Encodable {
        public var uid: UInt32
        public var pid: Int32
        /// The policy's app for `uid`, if any.
        public var appID: String?

        enum CodingKeys: String, CodingKey { case uid, pid, appID = "appId" }
    }

    public var version: String
    public var startedAt: Date
    public var provisioned: Bool
    /// `shared` or `private`.
    public var mode: String
    public var policyID: String?
    public var policySHA256: String?
    /// The signed-in worker, and since when.
    public var current: DeviceAccount?
    public var signedInAt: Date?
    public var lastAuditSequence: Int64
    /// The idle sign-out clock (`nil` when the policy sets none or the device is private).
    public var idle: IdleState?
    public var connections: [Connection]

    enum CodingKeys: String, CodingKey {
        case version, startedAt, provisioned, mode, policyID = "policyId", policySHA256 = "policySha256", current, signedInAt
        case lastAuditSequence, idle, connections
    }
}
