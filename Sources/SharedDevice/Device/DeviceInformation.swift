public import Foundation
public import KeychainStore
public import Logging
import SystemPackage

/// What an app learns about the device it runs on: MSAL's `MSALDeviceInformation`
/// (`getDeviceInformation`), answered from the device policy.
///
/// An unprovisioned device reports `private` mode (MSAL: unknown means private). When the device
/// service fails, callers get `DeviceInformation.default` together with the error, as MSAL does.
public struct DeviceInformation: Sendable, Equatable, Encodable {
    /// MSAL's device mode: `shared` (shared device mode) or `private` (MSAL's "default"/"personal").
    public enum Mode: String, Sendable, Equatable, Encodable {
        case shared
        case `private`
    }

    /// Shared or private.
    public var mode: Mode
    /// The id given at provisioning; `nil` when not provisioned.
    public var deviceID: String?
    /// The policy's `device.name`.
    public var deviceName: String?
    /// The policy's optional `id`.
    public var policyID: String?
    /// SHA-256 of the applied policy file, lowercase hex.
    public var policySHA256: String?
    /// When the device was provisioned.
    public var provisionedAt: Date?
    /// When the current policy was applied.
    public var policyAppliedAt: Date?
    /// Further facts in the spirit of MSAL's `extraDeviceInformation` (string keys and values):
    /// `ssoProviderInstalled`, `ssoProviderMode`, `joinStatus` (`provisioned` / `notProvisioned`),
    /// `brokerVersion`, and when provisioned `deviceIdentifier`, `authority`, `clientId`.
    public var extraDeviceInformation: [String: String]

    enum CodingKeys: String, CodingKey {
        case mode
        case deviceID = "deviceId"
        case deviceName
        case policyID = "policyId"
        case policySHA256 = "policySha256"
        case provisionedAt, policyAppliedAt, extraDeviceInformation
    }

    /// The version of this shared-device implementation, reported as `brokerVersion`.
    public static let brokerVersion = "0.3.0"

    /// A device nobody provisioned: private mode, no ids.
    public static let `default` = DeviceInformation(
        mode: .private,
        deviceID: nil,
        deviceName: nil,
        policyID: nil,
        policySHA256: nil,
        provisionedAt: nil,
        policyAppliedAt: nil,
        extraDeviceInformation: [
            "ssoProviderInstalled": "false", "ssoProviderMode": "private",
            "joinStatus": "notProvisioned", "brokerVersion": brokerVersion,
        ]
    )

    /// The information of a provisioned device.
    public init(record: DeviceRecord) {
        self.init(record: record, policy: try? record.policy())
    }

    /// The information of a provisioned device whose record's policy is decoded already (`policy`, or nil when
    /// it does not decode): a caller that keeps the decoded policy saves decoding it again.
    public init(record: DeviceRecord, policy: DevicePolicy?) {
        mode = record.mode == .shared ? .shared : .private
        deviceID = record.deviceID
        deviceName = record.name
        policyID = record.policyID
        policySHA256 = record.policySHA256
        provisionedAt = record.provisionedAt
        policyAppliedAt = record.policyAppliedAt
        extraDeviceInformation = [
            "ssoProviderInstalled": "true", "ssoProviderMode": mode.rawValue,
            "joinStatus": "provisioned", "brokerVersion": Self.brokerVersion,
            "deviceIdentifier": record.deviceID,
        ]
        extraDeviceInformation["authority"] = policy?.authority.issuer.absoluteString
        extraDeviceInformation["clientId"] = policy?.authority.clientId
    }

    /// Information as given (a broker's report, which carries no policy hash or dates).
    public init(
        mode: Mode,
        deviceID: String?,
        deviceName: String?,
        policyID: String?,
        policySHA256: String? = nil,
        provisionedAt: Date? = nil,
        policyAppliedAt: Date? = nil,
        extraDeviceInformation: [String: String]
    ) {
        self.mode = mode
        self.deviceID = deviceID
        self.deviceName = deviceName
        self.policyID = policyID
        self.policySHA256 = policySHA256
        self.provisionedAt = provisionedAt
        self.policyAppliedAt = policyAppliedAt
        self.extraDeviceInformation = extraDeviceInformation
    }

    /// The device's information from the store in `directory`, without creating anything.
    ///
    /// - Returns: the information and, when the store cannot be read, the error next to
    ///   `DeviceInformation.default` (MSAL returns the default information with the error).
    ///   A store this user may not open (another user's) is such an error, not "not provisioned".
    public static func current(
        stateDirectory directory: URL,
        key: MasterKeySource? = nil,
        logger: Logger = Logger.current
    ) -> (information: DeviceInformation, error: SharedDeviceError?) {
        let database = directory.appendingPathComponent(KeychainStore.databaseFileName)
        do {
            _ = try FilePath(database.path).stat()
        } catch .noSuchFileOrDirectory {
            return (.default, nil)
        } catch {
            // Unreadable for another reason: opening it below says why.
        }
        do {
            let store = try KeychainStore(directory: directory, key: key, logger: logger)
            return ManagedDevice(store: store, logger: logger).information()
        } catch {
            return (.default, SharedDeviceError.wrapping(error))
        }
    }
}

extension ManagedDevice {
    /// The device's information; on a failure, the default information and the error.
    public func information() -> (information: DeviceInformation, error: SharedDeviceError?) {
        do {
            guard let record = try record() else { return (.default, nil) }
            return (DeviceInformation(record: record), nil)
        } catch {
            return (.default, error)
        }
    }
}
