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
        switch error {
        case .keychain(_, let code, let message):
            let error = KeychainError(KeychainError.Code(name: code) ?? .ioError, message)
            return CLIError(exitCode: DevicectlExit.forCode(error.code), error.description)
        case .account(let code, let message, _, let identityCode):
            // The call's authority is not one the policy lists: the device's configuration decides.
            if code == "authorityNotAllowed" { return CLIError(exitCode: .configuration, message) }
            if let identityCode, let code = IdentityError.Code(rawValue: identityCode) {
                return CLIError.from(SharedDeviceError(IdentityError(code, message)))
            }
            return CLIError.from(SharedDeviceError(SharedDeviceError.Code(name: code) ?? .store, message))
        case .callerNotInPolicy(_, let message):
            return CLIError(exitCode: .permissionDenied, message)
        case .brokerUnavailable(let message):
            return CLIError(exitCode: .unavailable, message)
        case .untrustedBroker(let message):
            return CLIError(exitCode: .unavailable, """
                \(message). Use the system's socket (\(DeviceLocations.systemBrokerSocket)), or trust that user with \
                DEVICECTL_BROKER_UID=<uid> if it is yours
                """)
        case .limitExceeded(let limit, _, let message):
            // The device holds password sign-ins back after repeated failures: try again later.
            if limit == "passwordBackoff" || limit == "passwordSignInInProgress" { return CLIError(exitCode: .tryLater, message) }
            // A limit of the broker or the policy: the service cannot take this call now.
            return CLIError(exitCode: .unavailable, message)
        case .refused(let name, let message):
            return CLIError(exitCode: name == "org.varlink.service.PermissionDenied" ? .permissionDenied : .badInput, message)
        case .cancelled:
            return CLIError(exitCode: .unavailable, "the call to the broker was cancelled; nothing was changed by it")
        }
    }
}
