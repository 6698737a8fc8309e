public import Varlink

// What a client tells its user when the broker refuses in a way that is not the call's own failure: the
// connection limits and the standard varlink errors. One text for every client of the contract.

extension Broker1.TooManyConnections {
    /// Why the connection was refused, and what to do.
    public var explanation: String {
        switch scope {
        case .user?:
            "the broker refused this connection: this user already holds \(limit) connections to it (the policy's limits); close some or try again later"
        case .app?:
            "the broker refused this connection: this app already holds \(limit) connections to it (the policy's limits, per app of a user); close some or try again later"
        case .reserved?:
            "the broker refused this connection: its last free connections are kept for administrators; try again later"
        case .server?, .unknown?, nil:
            "the broker at its limit of \(limit) connections refused this one; try again later"
        }
    }
}

extension Broker1 {
    /// The message of an error reply that is none of the interface's own errors (`org.varlink.service.*`).
    public static func refusalMessage(_ reply: VarlinkReply) -> String {
        switch reply.error {
        case "org.varlink.service.PermissionDenied"?:
            "the broker refused: only an administrator (root, or the policy's administratorsGroup) may do this"
        case "org.varlink.service.InvalidParameter"?:
            "the broker refused parameter \(reply.parameters["parameter"]?.string ?? "?")"
        default:
            reply.parameters["message"]?.string ?? "the broker refused the call (\(reply.error ?? "no error name"))"
        }
    }
}
