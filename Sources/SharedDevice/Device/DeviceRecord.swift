public import Foundation
import KeychainStore

/// What provisioning records about the device, sealed as an item in the device's own access group.
public struct DeviceRecord: Sendable, Equatable, Codable {
    /// A random id given at provisioning, kept across policy updates and mode changes.
    public var deviceID: String
    /// The policy's `device.name`.
    public var name: String
    /// The policy's `device.mode`.
    public var mode: DevicePolicy.Mode
    /// The policy's optional `id`.
    public var policyID: String?
    /// SHA-256 of the policy file's bytes, lowercase hex.
    public var policySHA256: String
    /// The policy file's bytes, as applied.
    public var policyDocument: Data
    /// When the device was provisioned.
    public var provisionedAt: Date
    /// When the policy was last applied (provisioning, update or mode change).
    public var policyAppliedAt: Date
    /// The Ed25519 public key that signs this device's audit checkpoints.
    public var auditPublicKey: Data

    /// The applied policy, decoded again.
    public func policy() throws(SharedDeviceError) -> DevicePolicy {
        do {
            return try DevicePolicy.decode(policyDocument)
        } catch {
            throw SharedDeviceError(
                .deviceRecordDamaged,
                "the device's recorded policy no longer decodes (\(error)); re-provision with `devicectl provision --policy FILE`"
            )
        }
    }
}

/// Where the device's own items live: service names in `AccessGroup.device` and `AccessGroup.auditAnchor`.
enum DeviceItems {
    static let account = "device"
    static let recordService = "device-record"
    static let signingKeyService = "audit-signing-key"
    static let anchorService = "audit-anchor"

    static let administrator = AppIdentity.deviceAdministrator

    static func query(_ service: String, group: String = AccessGroup.device) -> ItemQuery {
        ItemQuery(accessGroup: group, service: service, account: account)
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.dataEncodingStrategy = .base64
        return encoder
    }()

    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        decoder.dataDecodingStrategy = .base64
        return decoder
    }()
}

/// The audit log's trust anchor: every public key that ever signed this device's checkpoints.
/// Kept in `AccessGroup.auditAnchor`, which deprovisioning keeps, so the log stays verifiable afterwards.
struct AuditAnchor: Codable, Equatable {
    var publicKeys: [Data]
}
