import Foundation
import KeychainStore
import SharedDevice
import Varlink

// The interface's types (Account, DeviceInformation, AuthenticationResult, KeychainItem) as varlink values.

extension VarlinkValue {
    /// A value or null.
    static func optional(_ text: String?) -> VarlinkValue { text.map(VarlinkValue.string) ?? .null }

    static func account(_ account: DeviceAccount?) -> VarlinkValue {
        guard let account else { return .null }
        return .object([
            "homeAccountId": .string(account.homeAccountID), "environment": .string(account.environment),
            "realm": .string(account.realm), "username": .optional(account.username), "name": .optional(account.name),
            "localAccountId": .optional(account.localAccountID),
        ])
    }

    static func information(_ information: DeviceInformation) -> VarlinkValue {
        .object([
            "mode": .string(information.mode.rawValue), "deviceId": .optional(information.deviceID),
            "deviceName": .optional(information.deviceName), "policyId": .optional(information.policyID),
            "extraDeviceInformation": .object(information.extraDeviceInformation.mapValues(VarlinkValue.string)),
        ])
    }

    static func result(_ result: AuthenticationResult) -> VarlinkValue {
        .object([
            "accessToken": .string(result.accessToken),
            "expiresOn": result.expiresOn.map { .int(Int64($0.timeIntervalSince1970)) } ?? .null,
            "scopes": .array(result.scopes.map(VarlinkValue.string)), "source": .string(result.source.rawValue),
            "account": .account(result.account), "correlationId": .string(result.correlationID),
        ])
    }

    static func item(_ metadata: ItemMetadata, secret: Data? = nil) -> VarlinkValue {
        .object([
            "accessGroup": .string(metadata.accessGroup), "service": .string(metadata.service), "account": .string(metadata.account),
            "type": metadata.type.map { .int(Int64($0)) } ?? .null, "label": .optional(metadata.label),
            "generic": .optional(metadata.generic?.base64EncodedString()),
            "creationDate": .double(metadata.creationDate.timeIntervalSince1970),
            "modificationDate": .double(metadata.modificationDate.timeIntervalSince1970),
            "secret": .optional(secret?.base64EncodedString()),
        ])
    }
}
