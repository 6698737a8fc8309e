/// Why a call to the broker failed. Every case carries a message that says what to do; none carries a
/// token or a secret.
public enum SharedDeviceClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No broker answers at the socket (not running, or it went away during the call), or it refused the
    /// connection as over its limits. The message names the socket's path and the cause (nothing there, a
    /// stale socket nothing accepts on, a directory on the way this uid may not search, a socket it may not
    /// write to) and the fix: start the broker (`systemctl start deviced.socket`, `deviced --socket PATH`),
    /// make the directory searchable, or try again.
    case brokerUnavailable(String)
    /// What listens at the socket runs as a user the client does not trust; nothing was sent to it.
    case untrustedBroker(String)
    /// The device policy lists no app with this process's uid (or the device is not provisioned).
    case callerNotInPolicy(uid: Int, message: String)
    /// The keychain refused: `status` is its OSStatus (-25300 item not found, -25299 duplicate, -34018
    /// missing entitlement, -34 quota exceeded or disk full, -50 invalid parameter, …), `code` its name.
    case keychain(status: Int, code: String, message: String)
    /// The account manager or the identity provider refused: `code` (noCurrentAccount, identity, …),
    /// MSAL's status for identity failures (-50002 interaction required, -50005 user canceled, …) and the
    /// identity client's code (interaction_required, device_code_expired, authority_unreachable, …).
    case account(code: String, message: String, msalStatus: Int?, identityCode: String?)
    /// A limit of the broker or the policy refused the call (`replyBytes`, `pendingSignInsPerApp`).
    case limitExceeded(limit: String, maximum: Int, message: String)
    /// Any other refusal, by its varlink error name (`org.varlink.service.PermissionDenied`,
    /// `org.varlink.service.InvalidParameter`, `org.sharedmode.Broker1.ProtocolError`, …), or a reply
    /// that does not follow the interface.
    case refused(error: String, message: String)
    /// The calling task was cancelled; the call's connection was closed, so the broker stopped it.
    case cancelled

    public var description: String {
        switch self {
        case .brokerUnavailable(let message), .untrustedBroker(let message): message
        case .callerNotInPolicy(_, let message): message
        case .keychain(let status, let code, let message): "\(message) (\(code), \(status))"
        case .account(let code, let message, _, let identityCode): "\(message) (\(identityCode ?? code))"
        case .limitExceeded(let limit, _, let message): "\(message) (\(limit))"
        case .refused(let error, let message): "\(message) (\(error))"
        case .cancelled: "the call was cancelled"
        }
    }
}
