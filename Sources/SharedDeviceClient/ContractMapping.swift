import BrokerContract
import Foundation

// The broker's contract types (generated from org.sharedmode.Broker1.varlink) as the client's public types.

extension Account {
    init(_ account: Broker1.Account) {
        self.init(
            homeAccountID: account.homeAccountId,
            environment: account.environment,
            realm: account.realm,
            username: account.username,
            name: account.name,
            localAccountID: account.localAccountId
        )
    }
}

extension DeviceInformation.Mode {
    init(_ mode: Broker1.DeviceMode) throws(SharedDeviceClientError) {
        switch mode {
        case .shared: self = .shared
        case .private: self = .private
        case .unknown(let value):
            throw .refused(
                error: "org.varlink.service.InvalidParameter",
                message: "the broker's device mode \(value) is neither shared nor private"
            )
        }
    }
}

extension DeviceInformation {
    init(_ information: Broker1.DeviceInformation) throws(SharedDeviceClientError) {
        self.init(
            mode: try Mode(information.mode),
            deviceID: information.deviceId,
            deviceName: information.deviceName,
            policyID: information.policyId,
            extraDeviceInformation: information.extraDeviceInformation
        )
    }
}

extension AuthenticationResult {
    init(_ result: Broker1.AuthenticationResult) throws(SharedDeviceClientError) {
        let source: Source
        switch result.source {
        case .cache: source = .cache
        case .refresh: source = .refresh
        case .interactive: source = .interactive
        case .unknown(let value):
            throw .refused(
                error: "org.varlink.service.InvalidParameter",
                message: "the broker's token source \(value) is not cache, refresh or interactive"
            )
        }
        self.init(
            accessToken: result.accessToken,
            scopes: result.scopes,
            expiresOn: result.expiresOn.map { Date(timeIntervalSince1970: TimeInterval($0)) },
            account: Account(result.account),
            source: source,
            correlationID: result.correlationId,
            idToken: result.idToken
        )
    }
}

extension DeviceCodeVerification {
    init(_ verification: Broker1.DeviceCodeVerification) {
        self.init(
            verificationURI: verification.verificationUri,
            verificationURIComplete: verification.verificationUriComplete,
            userCode: verification.userCode,
            expiresIn: verification.expiresIn,
            message: verification.message
        )
    }
}

extension IdleState {
    init(_ idle: Broker1.IdleState) {
        self.init(
            idleSignOutSeconds: idle.idleSignOutSeconds,
            warningSeconds: idle.warningSeconds,
            idleSeconds: idle.idleSeconds,
            signOutIn: idle.signOutIn,
            warning: idle.warning
        )
    }
}

extension AccountEvent {
    /// The event, or nil for a kind this client does not know (a newer broker's).
    init?(_ event: Broker1.AccountEvent) throws(SharedDeviceClientError) {
        let current = event.current.map(Account.init)
        switch event.kind {
        case .subscribed: self = .subscribed(current: current, sequence: event.sequence)
        case .signedIn: self = .signedIn(current: current, sequence: event.sequence)
        case .signedOut:
            self = .signedOut(reason: event.reason.map(SignedOutReason.init(rawValue:)), sequence: event.sequence)
        case .switched: self = .switched(current: current, sequence: event.sequence)
        case .deviceModeChanged:
            self = .deviceModeChanged(mode: try DeviceInformation.Mode(event.mode), sequence: event.sequence)
        case .idleWarning:
            guard let secondsLeft = event.secondsLeft else {
                throw .refused(
                    error: "org.varlink.service.InvalidParameter",
                    message: "the broker's idleWarning has no secondsLeft"
                )
            }
            self = .idleWarning(secondsLeft: secondsLeft)
        case .idleWarningCanceled: self = .idleWarningCanceled
        case .unknown: return nil
        }
    }
}

extension KeychainItem {
    init(_ item: Broker1.KeychainItem) throws(SharedDeviceClientError) {
        func bytes(_ base64: String?, _ field: String) throws(SharedDeviceClientError) -> Data? {
            guard let base64 else { return nil }
            guard let data = Data(base64Encoded: base64) else {
                throw .refused(
                    error: "org.varlink.service.InvalidParameter",
                    message: "the broker's item has a \(field) that is not base64"
                )
            }
            return data
        }
        guard item.type.map({ UInt32(exactly: $0) != nil }) ?? true else {
            throw .refused(
                error: "org.varlink.service.InvalidParameter",
                message: "the broker's item has a type out of range"
            )
        }
        self.init(
            accessGroup: item.accessGroup,
            service: item.service,
            account: item.account,
            type: item.type.map { UInt32($0) },
            label: item.label,
            generic: try bytes(item.generic, "generic"),
            creationDate: Date(timeIntervalSince1970: item.creationDate),
            modificationDate: Date(timeIntervalSince1970: item.modificationDate),
            secret: try bytes(item.secret, "secret")
        )
    }
}

extension NativeSignIn {
    init(_ challenge: Broker1.NativeSignInChallenge) throws(SharedDeviceClientError) {
        switch challenge.challenge {
        case .password:
            self.init(id: challenge.signInId, next: .password)
        case .code:
            guard let length = challenge.codeLength, let sentTo = challenge.sentTo, let channel = challenge.channel
            else {
                throw .refused(
                    error: "org.varlink.service.InvalidParameter",
                    message: "the broker's code challenge lacks its length, target or channel"
                )
            }
            self.init(id: challenge.signInId, next: .code(length: length, sentTo: sentTo, channel: channel))
        case .unknown(let value):
            throw .refused(
                error: "org.varlink.service.InvalidParameter",
                message: "the broker's native sign-in challenge \(value) is not password or code"
            )
        }
    }
}
