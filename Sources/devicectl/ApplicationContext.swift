import ArgumentParser
import Foundation
import IdentityClient
import KeychainStore
import SharedDevice

/// Shared plumbing of the commands that talk to the sign-in authority: the app's
/// `PublicClientApplication` under the device policy.
struct ApplicationContext {
    let application: PublicClientApplication

    init(_ location: StoreLocation, app: String) throws {
        let store = try location.open()
        let device = ManagedDevice(store: store, logger: location.logger)
        guard let policy = try reportingDeviceErrors({ () throws(SharedDeviceError) in try device.policy() }) else {
            throw CLIError(exitCode: .unavailable,
                "the device is not provisioned, so it has no sign-in authority; run `devicectl provision --policy FILE` first")
        }
        application = try reportingDeviceErrors { () throws(SharedDeviceError) in
            try PublicClientApplication(configuration: PublicClientApplicationConfiguration(appID: app, policy: policy), device: device,
                                        logger: location.logger)
        }
    }
}

/// Scopes given as separate words, or comma- or space-separated in one.
func parseScopes(_ values: [String]) -> [String] {
    values.flatMap { $0.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init) }
}
