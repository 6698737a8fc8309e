/// The caller of a store operation: an app id and the keychain access groups it is entitled to,
/// like an iOS app's `keychain-access-groups` entitlement.
///
/// In-process the identity is asserted by the app; a broker daemon can construct one from a verified
/// peer instead. The store never looks further than this value, so that change needs no store code.
public struct AppIdentity: Sendable, Hashable, Codable {
    /// The app's identifier (for example `com.contoso.kiosk.scanner`).
    public let appID: String
    /// The entitled access groups, in priority order. The first one is where an item added
    /// without an explicit group goes, as on iOS.
    public let accessGroups: [String]
    /// Item types this caller can neither see nor write in any group: a broker hides the token cache it
    /// keeps (MSAL's 2001–2003, 1003, 3001) from an app's keychain calls. Empty by default.
    public private(set) var hiddenItemTypes: Set<UInt32> = []

    /// Creates an app's identity; every group name must be valid (see `AccessGroup.validate`) and none
    /// may be reserved for the device (`devicectl.` prefix): no app can be entitled to those.
    public init(appID: String, accessGroups: [String]) throws(KeychainError) {
        guard !appID.isEmpty else { throw KeychainError(.invalidParameter, "the app id is empty") }
        for group in accessGroups {
            try AccessGroup.validate(group)
            guard !AccessGroup.isReserved(group) else {
                throw KeychainError(
                    .missingEntitlement,
                    "access group \(group) is reserved for the device itself; no app can be entitled to it"
                )
            }
        }
        self.appID = appID
        self.accessGroups = accessGroups
    }

    private init(unchecked appID: String, accessGroups: [String]) {
        self.appID = appID
        self.accessGroups = accessGroups
    }

    /// The device administrator (`devicectl`), entitled only to the reserved groups: the device's own
    /// (`AccessGroup.device`: policy, device id, audit signing key) and the audit log's trust anchor
    /// (`AccessGroup.auditAnchor`).
    public static let deviceAdministrator = AppIdentity(
        unchecked: "devicectl",
        accessGroups: [AccessGroup.device, AccessGroup.auditAnchor]
    )

    /// Whether the app may read and write `group`.
    public func isEntitled(to group: String) -> Bool { accessGroups.contains(group) }

    /// The same identity, to which items of `types` are invisible (find, list, update and delete pass them
    /// by as if they were not there) and which may not add items of those types or give an item one
    /// (missing entitlement, -34018).
    public func hidingItemTypes(_ types: Set<UInt32>) -> AppIdentity {
        var identity = self
        identity.hiddenItemTypes.formUnion(types)
        return identity
    }

    /// Whether an item of `type` is hidden from this caller.
    func hides(_ type: UInt32?) -> Bool {
        guard let type, !hiddenItemTypes.isEmpty else { return false }
        return hiddenItemTypes.contains(type)
    }

    private enum CodingKeys: String, CodingKey { case appID, accessGroups, hiddenItemTypes }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        appID = try container.decode(String.self, forKey: .appID)
        accessGroups = try container.decode([String].self, forKey: .accessGroups)
        hiddenItemTypes = try container.decodeIfPresent(Set<UInt32>.self, forKey: .hiddenItemTypes) ?? []
    }
}

/// Rules for access-group names.
public enum AccessGroup {
    /// MSAL's keychain group on iOS.
    public static let adalCache = "com.microsoft.adalcache"
    /// MSAL's keychain group on macOS.
    public static let universalStorage = "com.microsoft.identity.universalstorage"

    /// The device's own group: the provisioned policy, device id and audit signing key.
    public static let device = "devicectl.device"
    /// The group that outlives deprovisioning: the public keys that signed the audit log.
    public static let auditAnchor = "devicectl.audit"
    /// The prefix of groups reserved for the device; `AppIdentity` refuses them for apps.
    public static let reservedPrefix = "devicectl."

    /// Whether `name` is reserved for the device.
    public static func isReserved(_ name: String) -> Bool { name.hasPrefix(reservedPrefix) }

    /// A group name is 1–255 characters of letters, digits, `.`, `-` and `_`, not starting or ending with `.`.
    public static func validate(_ name: String) throws(KeychainError) {
        let allowed = name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2E || byte == 0x2D || byte == 0x5F
        }
        guard !name.isEmpty, name.utf8.count <= 255, allowed, !name.hasPrefix("."), !name.hasSuffix(".") else {
            throw KeychainError(
                .invalidParameter,
                "access group \"\(name)\" is malformed: use 1-255 letters, digits, '.', '-' or '_', e.g. com.microsoft.adalcache"
            )
        }
    }
}
