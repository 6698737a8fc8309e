import Foundation
import SharedDevice

/// The broker daemon's state as `GetStatus` reports it (`devicectl status`).
struct BrokerStatus: Sendable, Equatable, Encodable {
    /// A connection open to the broker, by the kernel's credentials of its peer.
    struct Connection: Sendable, Equatable, Encodable {
        var uid: UInt32
        var pid: Int32
        /// The policy's app for `uid` and `sandbox`, if any.
        var appID: String?
        /// Which app of its uid the peer is: `host`, `flatpak`, `unpinned` or `unidentified` (nil: the
        /// broker does not say).
        var sandbox: String? = nil
        /// The peer's Flatpak app id, when it runs in a Flatpak sandbox.
        var flatpakAppID: String? = nil

        enum CodingKeys: String, CodingKey {
            case uid, pid
            case appID = "appId"
            case sandbox
            case flatpakAppID = "flatpakAppId"
        }
    }

    /// An MSAL client id an app used through the MSAL bridge since the broker started.
    struct MSALClient: Sendable, Equatable, Encodable {
        var appID: String?
        var uid: UInt32
        var clientID: String
        var calls: Int
        /// Calls refused because the policy does not list the client id for the app.
        var refused: Int
        var lastCall: Date

        enum CodingKeys: String, CodingKey {
            case appID = "appId"
            case uid
            case clientID = "clientId"
            case calls, refused, lastCall
        }
    }

    /// The login session the worker's shift runs in (a worker signed in at the login screen).
    struct ShiftSession: Sendable, Equatable, Encodable {
        /// logind's session id.
        var sessionId: String
        /// The local account it runs as (the policy's `session.user`).
        var user: String
        var account: DeviceAccount?
        var openedAt: Date
        /// What a sign-out does to it: `terminate`, `lock` or `none`.
        var onSignOut: String
        /// The PAM service, and the terminal or seat.
        var service: String
        var tty: String?
        var seat: String?
        var remoteHost: String?
    }

    var version: String
    var startedAt: Date
    var provisioned: Bool
    /// `shared` or `private`.
    var mode: String
    var policyID: String?
    var policySHA256: String?
    /// The signed-in worker, and since when.
    var current: DeviceAccount?
    var signedInAt: Date?
    var lastAuditSequence: Int64
    /// The idle sign-out clock (`nil` when the policy sets none or the device is private).
    var idle: IdleState?
    var connections: [Connection]
    /// MSAL clients seen through the MSAL bridge, the most recent first.
    var msalClients: [MSALClient]
    /// Whether the space kept for sign-outs on a full disk is in place (nil: the broker does not say).
    var diskReserve: Bool?
    /// The shift's login session (nil: none, or the broker does not say).
    var shiftSession: ShiftSession? = nil
    /// Why the policy's Flatpak apps are refused on this device (nil: they are served, or none are listed).
    var flatpakUnavailable: String? = nil

    enum CodingKeys: String, CodingKey {
        case version, startedAt, provisioned, mode
        case policyID = "policyId"
        case policySHA256 = "policySha256"
        case current, signedInAt
        case lastAuditSequence, idle, connections, msalClients, diskReserve, shiftSession, flatpakUnavailable
    }
}
