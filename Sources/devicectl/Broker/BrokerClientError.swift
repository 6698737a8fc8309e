import KeychainStore
import SharedDevice

/// A broker call that failed, with the library error it stands for where there is one, so a client
/// handles a refusal through the broker exactly as it would in-process.
enum BrokerClientError: Error, Sendable, CustomStringConvertible {
    /// The keychain refused (`KeychainError`, with its OSStatus).
    case keychain(KeychainError)
    /// The account manager or identity provider refused (`SharedDeviceError`, with MSAL's codes).
    case device(SharedDeviceError)
    /// The broker takes the caller's uid for no app of the device policy.
    case callerNotInPolicy(uid: UInt32, message: String)
    /// The broker is not running, went away, or is at its connection limit.
    case unavailable(String)
    /// What listens on the socket is not a broker this client may trust (it runs as another user than
    /// root, the client itself, or one `$DEVICECTL_BROKER_UID` names); nothing was sent to it.
    case untrustedBroker(String)
    /// Any other error reply (a malformed request: `org.varlink.service.InvalidParameter`, …).
    case refused(error: String, message: String)

    var description: String {
        switch self {
        case .keychain(let error): error.description
        case .device(let error): error.description
        case .callerNotInPolicy(_, let message): message
        case .unavailable(let message): message
        case .untrustedBroker(let message): message
        case .refused(let error, let message): "\(message) (\(error))"
        }
    }
}
