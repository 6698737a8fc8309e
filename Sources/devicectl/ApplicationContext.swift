import ArgumentParser
import Foundation
import IdentityClient
import KeychainStore
import Logging
import SharedDevice

/// Shared plumbing of the commands that talk to the sign-in authority: the app's
/// `PublicClientApplication` under the device policy, through the broker daemon when it runs and the
/// caller is not root (see `BrokerRoute`).
struct ApplicationContext {
    let application: PublicClientApplication

    /// The context of `app` (`nil`: the caller's own app, which only the broker knows).
    init(_ location: StoreLocation, app: String?) throws {
        if case .broker(let client, let own) = try BrokerRoute.choose(app: app, stateDir: location.stateDir) {
            application = try Self.brokered(client, appID: own, logger: location.logger)
            return
        }
        guard let app else { throw CLIError(exitCode: .usage, "missing --app: name the calling app") }
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

extension ApplicationContext {
    /// The app's application on the broker, registered with the authority the broker's device information
    /// names (the policy's issuer and client id).
    static func brokered(_ client: BrokerClient, appID: String?, logger: Logger) throws -> PublicClientApplication {
        let information = try reportingBrokerErrors { () throws(BrokerClientError) in try client.deviceInformation() }
        guard let appID, let authority = information.extraDeviceInformation["authority"],
              let clientID = information.extraDeviceInformation["clientId"] else {
            // Not provisioned, or the caller is no app: the broker's own refusal says which.
            _ = try reportingBrokerErrors { () throws(BrokerClientError) in try client.currentAccount() }
            throw CLIError(exitCode: .unavailable,
                "the device is not provisioned, so it has no sign-in authority; run `devicectl provision --policy FILE` first")
        }
        return try reportingDeviceErrors { () throws(SharedDeviceError) in
            try PublicClientApplication(configuration: PublicClientApplicationConfiguration(clientID: clientID, authority: authority, appID: appID),
                                        broker: client, logger: logger)
        }
    }
}

/// Scopes given as separate words, or comma- or space-separated in one.
func parseScopes(_ values: [String]) -> [String] {
    values.flatMap { $0.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init) }
}
