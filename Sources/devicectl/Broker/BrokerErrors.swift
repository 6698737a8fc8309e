import DeviceLocations
import IdentityClient
import KeychainStore
import SharedDevice
import SharedDeviceClient

/// Runs a call through the broker; its refusal becomes the exit code and message the same failure has
/// in-process (a keychain status, an account or identity error), so a command behaves alike on both routes.
func reportingBrokerErrors<T>(_ body: () async throws(SharedDeviceClientError) -> T) async throws -> T {
    do {
        return try await body()
    } catch {
        throw CLIError.from(error)
    }
}

extension CLIError {
    /// The documented exit code and message of a refusal through the broker.
    static func from(_ error: SharedDeviceClientError) -> CLIError {
        if error.keychainStatus != nil {
            let error = KeychainError(KeychainError.Code(name: error.code.name) ?? .ioError, error.message)
            return CLIError(exitCode: DevicectlExit.forCode(error.code), error.description)
        }
        switch error.code {
        case .brokerUnavailable:
            return CLIError(exitCode: .unavailable, error.message)
        case .cancelled:
            return CLIError(exitCode: .unavailable, "the call to the broker was cancelled; nothing was changed by it")
        case .callerNotInPolicy:
            return CLIError(exitCode: .permissionDenied, error.message)
        case .untrustedBroker:
            return CLIError(
                exitCode: .unavailable,
                """
                \(error.message). Use the system's socket (\(DeviceLocations.systemBrokerSocket)), or trust that user with \
                DEVICECTL_BROKER_UID=<uid> if it is yours
                """
            )
        case .limitExceeded:
            // The device holds password sign-ins back after repeated failures: try again later.
            if error.limit == "passwordBackoff" || error.limit == "passwordSignInInProgress" {
                return CLIError(exitCode: .tryLater, error.message)
            }
            // A limit of the broker or the policy: the service cannot take this call now.
            return CLIError(exitCode: .unavailable, error.message)
        case .refused:
            return CLIError(
                exitCode: error.varlinkError == "org.varlink.service.PermissionDenied" ? .permissionDenied : .badInput,
                error.message
            )
        case .authorityNotAllowed:
            // The call's authority is not one the policy lists: the device's configuration decides.
            return CLIError(exitCode: .configuration, error.message)
        default:
            // The account manager's answers, as the same failure is in-process.
            if let identityCode = error.identityCode, let code = IdentityError.Code(rawValue: identityCode) {
                return CLIError.from(SharedDeviceError(IdentityError(code, error.message)))
            }
            return CLIError.from(
                SharedDeviceError(SharedDeviceError.Code(name: error.code.name) ?? .store, error.message)
            )
        }
    }
}
