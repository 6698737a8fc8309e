import ArgumentParser
import Foundation
import IdentityClient
import KeychainStore
import Logging
import SharedDevice

/// The engine side of the commands that talk to the sign-in authority: the app's in-process
/// `ApplicationEngine` on the store, under the device policy. Used when the command's route
/// (`BrokerRoute.choose`, decided once per command) is `.direct`: root, or no broker running.
struct ApplicationContext {
    let application: ApplicationEngine

    /// The context of `app` on the store, signing in at `authority` (one the policy lists) or its issuer.
    init(_ location: StoreLocation, app: String?, authority: String? = nil) throws {
        guard let app else { throw CLIError(exitCode: .usage, "missing --app: name the calling app") }
        let store = try location.open()
        let device = ManagedDevice(store: store, logger: location.logger)
        guard let policy = try reportingDeviceErrors({ () throws(SharedDeviceError) in try device.policy() }) else {
            throw CLIError(
                exitCode: .unavailable,
                "the device is not provisioned, so it has no sign-in authority; run `devicectl provision --policy FILE` first"
            )
        }
        var configuration = ApplicationEngineConfiguration(appID: app, policy: policy)
        if let authority {
            guard let listed = policy.authority.listedAuthority(authority) else {
                throw CLIError(exitCode: .configuration, policy.authority.unlistedAuthorityMessage(authority))
            }
            configuration.authority = listed.absoluteString
        }
        application = try reportingDeviceErrors { () throws(SharedDeviceError) in
            try ApplicationEngine(configuration: configuration, device: device, logger: location.logger)
        }
    }
}

extension BrokerRoute {
    /// An identity client for the authority the broker's device information names (the policy's issuer
    /// and client id), for calling APIs with the tokens the broker gives.
    /// `authority`: the call's own (one of the policy's known authorities, which the broker checks).
    static func identityClient(
        _ broker: BrokerConnection,
        authority called: String? = nil,
        logger: Logger
    ) async throws -> IdentityClient {
        let information = try await broker.extraDeviceInformation()
        guard let issuer = called ?? information["authority"], let clientID = information["clientId"] else {
            // Not provisioned, or the caller is no app: the broker's own refusal says which.
            _ = try await broker.currentAccount()
            throw CLIError(
                exitCode: .unavailable,
                "the device is not provisioned, so it has no sign-in authority; run `devicectl provision --policy FILE` first"
            )
        }
        let authority: Authority
        do {
            authority = try Authority(issuer)
        } catch {
            throw CLIError.from(SharedDeviceError(error))
        }
        return IdentityClient(clientID: clientID, authority: authority, logger: logger)
    }
}

/// Scopes given as separate words, or comma- or space-separated in one.
func parseScopes(_ values: [String]) -> [String] {
    values.flatMap { $0.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init) }
}
