import BrokerContract
import Foundation
import KeychainStore
import SharedDevice
import SharedDeviceClient

// The keychain's item types by their plain names here; the client's same-named ones are SharedDeviceClient.X.
import struct KeychainStore.ItemChanges
import struct KeychainStore.ItemQuery
import struct KeychainStore.KeychainItem

// The one place where what the broker answered (the client's types, and the contract's for `GetStatus`)
// becomes the library types devicectl prints, so that both routes print the same.

extension DeviceAccount {
    init(_ account: SharedDeviceClient.Account) {
        self.init(
            homeAccountID: account.homeAccountID,
            environment: account.environment,
            realm: account.realm,
            username: account.username,
            name: account.name,
            localAccountID: account.localAccountID
        )
    }

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

extension SharedDevice.CurrentAccount {
    init(_ accounts: SharedDeviceClient.CurrentAccount) {
        self.init(
            current: accounts.current.map(DeviceAccount.init),
            previous: accounts.previous.map(DeviceAccount.init)
        )
    }
}

extension SharedDevice.AuthenticationResult {
    init(_ result: SharedDeviceClient.AuthenticationResult) {
        self.init(
            accessToken: result.accessToken,
            scopes: result.scopes,
            expiresOn: result.expiresOn,
            account: DeviceAccount(result.account),
            idToken: nil,
            source: Source(rawValue: result.source.rawValue) ?? .cache,
            correlationID: result.correlationID
        )
    }
}

extension SharedDevice.IdleState {
    init(_ state: SharedDeviceClient.IdleState) {
        self.init(
            idleSignOutSeconds: state.idleSignOutSeconds,
            warningSeconds: state.warningSeconds,
            idleSeconds: state.idleSeconds,
            signOutIn: state.signOutIn,
            warning: state.warning
        )
    }

    init(_ state: Broker1.IdleState) {
        self.init(
            idleSignOutSeconds: state.idleSignOutSeconds,
            warningSeconds: state.warningSeconds,
            idleSeconds: state.idleSeconds,
            signOutIn: state.signOutIn,
            warning: state.warning
        )
    }
}

extension ItemMetadata {
    init(_ item: SharedDeviceClient.KeychainItem) {
        self.init(
            accessGroup: item.accessGroup,
            service: item.service,
            account: item.account,
            type: item.type,
            generic: item.generic,
            label: item.label,
            creator: nil,
            creationDate: item.creationDate,
            modificationDate: item.modificationDate
        )
    }
}

extension KeychainItem {
    init(_ item: SharedDeviceClient.KeychainItem) {
        self.init(metadata: ItemMetadata(item), secret: item.secret ?? Data())
    }
}

extension SharedDeviceClient.ItemQuery {
    init(_ query: ItemQuery) {
        self.init(
            accessGroup: query.accessGroup,
            service: query.service,
            account: query.account,
            label: query.label,
            type: query.type
        )
    }
}

extension SharedDeviceClient.ItemChanges {
    init(_ changes: ItemChanges) {
        self.init(
            service: changes.service,
            account: changes.account,
            label: changes.label,
            type: changes.type,
            generic: changes.generic
        )
    }
}

extension BrokerStatus {
    init(_ status: Broker1.BrokerStatus) {
        self.init(
            version: status.version,
            startedAt: Date(timeIntervalSince1970: status.startedAt),
            provisioned: status.provisioned,
            mode: status.mode.rawValue,
            policyID: status.policyId,
            policySHA256: status.policySha256,
            current: status.current.map(DeviceAccount.init),
            signedInAt: status.signedInAt.map { Date(timeIntervalSince1970: $0) },
            lastAuditSequence: Int64(status.lastAuditSequence),
            idle: status.idle.map(SharedDevice.IdleState.init),
            connections: status.connections.map {
                Connection(
                    uid: UInt32(clamping: $0.uid),
                    pid: Int32(clamping: $0.pid),
                    appID: $0.appId,
                    sandbox: $0.sandbox?.rawValue,
                    flatpakAppID: $0.flatpakAppId
                )
            },
            msalClients: status.msalClients.map { client in
                MSALClient(
                    appID: client.appId,
                    uid: UInt32(clamping: client.uid),
                    clientID: client.clientId,
                    calls: client.calls,
                    refused: client.refused,
                    lastCall: Date(timeIntervalSince1970: client.lastCall)
                )
            },
            diskReserve: status.diskReserve,
            shiftSession: status.shiftSession.map { session in
                ShiftSession(
                    sessionId: session.sessionId,
                    user: session.user,
                    account: session.account.map(DeviceAccount.init),
                    openedAt: Date(timeIntervalSince1970: session.openedAt),
                    onSignOut: session.onSignOut.rawValue,
                    service: session.loginScreen.service,
                    tty: session.loginScreen.tty,
                    seat: session.loginScreen.seat,
                    remoteHost: session.loginScreen.remoteHost
                )
            },
            flatpakUnavailable: status.flatpakUnavailable
        )
    }
}
