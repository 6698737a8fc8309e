import BrokerContract
import Foundation
import KeychainStore
import SharedDevice

// The one place where the client turns the contract's types (what the broker replied) into the
// library's.

extension DeviceAccount {
    init(_ account: Broker1.Account) {
        self.init(homeAccountID: account.homeAccountId, environment: account.environment, realm: account.realm,
                  username: account.username, name: account.name, localAccountID: account.localAccountId)
    }
}

extension DeviceInformation {
    init(_ information: Broker1.DeviceInformation) {
        self.init(mode: information.mode == "shared" ? .shared : .private, deviceID: information.deviceId, deviceName: information.deviceName,
                  policyID: information.policyId, extraDeviceInformation: information.extraDeviceInformation)
    }
}

extension AuthenticationResult {
    init(_ result: Broker1.AuthenticationResult) {
        self.init(accessToken: result.accessToken, scopes: result.scopes,
                  expiresOn: result.expiresOn.map { Date(timeIntervalSince1970: TimeInterval($0)) },
                  account: DeviceAccount(result.account), idToken: nil,
                  source: AuthenticationResult.Source(rawValue: result.source) ?? .cache, correlationID: result.correlationId)
    }
}

extension IdleState {
    init(_ state: Broker1.IdleState) {
        self.init(idleSignOutSeconds: state.idleSignOutSeconds, warningSeconds: state.warningSeconds, idleSeconds: state.idleSeconds,
                  signOutIn: state.signOutIn, warning: state.warning)
    }
}

extension BrokerStatus {
    init(_ status: Broker1.BrokerStatus) {
        self.init(version: status.version, startedAt: Date(timeIntervalSince1970: status.startedAt), provisioned: status.provisioned,
                  mode: status.mode, policyID: status.policyId, policySHA256: status.policySha256, current: status.current.map(DeviceAccount.init),
                  signedInAt: status.signedInAt.map { Date(timeIntervalSince1970: $0) }, lastAuditSequence: Int64(status.lastAuditSequence),
                  idle: status.idle.map(IdleState.init),
                  connections: status.connections.map { Connection(uid: UInt32(clamping: $0.uid), pid: Int32(clamping: $0.pid), appID: $0.appId) })
    }
}

extension KeychainItem {
    /// An item the broker sent; its base64 fields must decode.
    /// - Throws: `refused` (`org.varlink.service.InvalidParameter`) naming a field that is not base64.
    init(_ item: Broker1.KeychainItem) throws(BrokerClientError) {
        func bytes(_ text: String?, _ field: String) throws(BrokerClientError) -> Data? {
            guard let text else { return nil }
            guard let data = Data(base64Encoded: text) else {
                throw .refused(error: "org.varlink.service.InvalidParameter", message: "the broker sent an item whose \(field) is not base64")
            }
            return data
        }
        let metadata = ItemMetadata(
            accessGroup: item.accessGroup, service: item.service, account: item.account, type: item.type.map { UInt32(clamping: $0) },
            generic: try bytes(item.generic, "generic"), label: item.label, creator: nil,
            creationDate: Date(timeIntervalSince1970: item.creationDate), modificationDate: Date(timeIntervalSince1970: item.modificationDate))
        self.init(metadata: metadata, secret: try bytes(item.secret, "secret") ?? Data())
    }
}
