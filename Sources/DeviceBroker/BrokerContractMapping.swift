import BrokerContract
import Foundation
import IdentityClient
import KeychainStore
public import ProcessSandbox
import SharedDevice
import Varlink

// The one place where the engine's types become the contract's (replies) and the contract's become the
// engine's (parameters the interface types loosely: base64, ranges, names of cases).

extension Broker1.Account {
    init(_ account: DeviceAccount) {
        self.init(
            homeAccountId: account.homeAccountID,
            environment: account.environment,
            realm: account.realm,
            username: account.username,
            name: account.name,
            localAccountId: account.localAccountID
        )
    }
}

extension Broker1.DeviceMode {
    init(_ mode: SharedDevice.DeviceInformation.Mode) {
        switch mode {
        case .shared: self = .shared
        case .private: self = .private
        }
    }
}

extension Broker1.TokenSource {
    init(_ source: SharedDevice.AuthenticationResult.Source) {
        switch source {
        case .cache: self = .cache
        case .refresh: self = .refresh
        case .interactive: self = .interactive
        }
    }
}

extension Broker1.DeviceInformation {
    init(_ information: SharedDevice.DeviceInformation) {
        self.init(
            mode: Broker1.DeviceMode(information.mode),
            deviceId: information.deviceID,
            deviceName: information.deviceName,
            policyId: information.policyID,
            extraDeviceInformation: information.extraDeviceInformation
        )
    }
}

extension Broker1.AuthenticationResult {
    init(_ result: SharedDevice.AuthenticationResult) {
        self.init(
            accessToken: result.accessToken,
            expiresOn: result.expiresOn.map { Int($0.timeIntervalSince1970) },
            scopes: result.scopes,
            source: Broker1.TokenSource(result.source),
            account: Broker1.Account(result.account),
            correlationId: result.correlationID
        )
    }
}

extension Broker1.KeychainItem {
    init(_ metadata: ItemMetadata, secret: Data? = nil) {
        self.init(
            accessGroup: metadata.accessGroup,
            service: metadata.service,
            account: metadata.account,
            type: metadata.type.map { Int($0) },
            label: metadata.label,
            generic: metadata.generic?.base64EncodedString(),
            creationDate: metadata.creationDate.timeIntervalSince1970,
            modificationDate: metadata.modificationDate.timeIntervalSince1970,
            secret: secret?.base64EncodedString()
        )
    }
}

extension Broker1.DeviceCodeVerification {
    init(_ session: DeviceCodeSession) {
        self.init(
            verificationUri: session.verificationURI.absoluteString,
            verificationUriComplete: session.verificationURIComplete?.absoluteString,
            userCode: session.userCode,
            expiresIn: Int(max(0, session.expiresAt.timeIntervalSinceNow.rounded())),
            message: session.serverMessage
        )
    }
}

extension Broker1.IdleState {
    init(_ state: SharedDevice.IdleState) {
        self.init(
            idleSignOutSeconds: state.idleSignOutSeconds,
            warningSeconds: state.warningSeconds,
            idleSeconds: state.idleSeconds,
            signOutIn: state.signOutIn,
            warning: state.warning
        )
    }
}

/// Checks of parameters beyond their varlink type; each failure is `InvalidParameter` naming the parameter.
enum ParameterCheck {
    /// Base64 (standard alphabet) bytes.
    static func bytes(_ text: String?, _ name: String) throws(BrokerFailure) -> Data? {
        guard let text else { return nil }
        guard let data = Data(base64Encoded: text) else { throw .invalidParameter(name) }
        return data
    }

    /// A keychain item type (0 through 2^32 - 1).
    static func itemType(_ value: Int?, _ name: String) throws(BrokerFailure) -> UInt32? {
        guard let value else { return nil }
        guard let type = UInt32(exactly: value) else { throw .invalidParameter(name) }
        return type
    }

    /// Seconds to wait for the browser (1 through 3600, default 300).
    static func browserTimeout(_ value: Int?) throws(BrokerFailure) -> TimeInterval {
        guard let value else { return 300 }
        guard (1...3600).contains(value) else { throw .invalidParameter("timeout") }
        return TimeInterval(value)
    }

    static func redirectURI(_ text: String?) throws(BrokerFailure) -> URL {
        guard let text, let url = URL(string: text) else { throw .invalidParameter("redirectUri") }
        return url
    }

    static func prompt(_ value: Broker1.SignInPrompt?) throws(BrokerFailure) -> Prompt? {
        guard let value else { return nil }
        guard value.isKnown, let prompt = Prompt(rawValue: value.rawValue) else { throw .invalidParameter("prompt") }
        return prompt
    }

    /// A sign-out reason among `allowed`, `fallback` when absent.
    static func reason(
        _ name: String?,
        default fallback: SignOutReason,
        allowed: Set<SignOutReason>
    ) throws(BrokerFailure) -> SignOutReason {
        guard let name else { return fallback }
        guard let reason = SignOutReason(rawValue: name), allowed.contains(reason) else {
            throw .invalidParameter("reason")
        }
        return reason
    }
}

extension Broker1.SandboxKind {
    init(_ sandbox: PeerSandbox) {
        switch sandbox {
        case .host: self = .host
        case .flatpak: self = .flatpak
        case .unpinned: self = .unpinned
        case .unidentified: self = .unidentified
        }
    }
}
