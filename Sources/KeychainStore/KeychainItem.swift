public import Foundation

/// The attributes of a generic-password item (`kSecClassGenericPassword`), without its secret.
public struct ItemMetadata: Sendable, Hashable, Codable {
    /// `kSecAttrAccessGroup`; with service and account, the item's primary key.
    public var accessGroup: String
    /// `kSecAttrService`.
    public var service: String
    /// `kSecAttrAccount`.
    public var account: String
    /// `kSecAttrType`, a four-character code or small number (MSAL: 2001 access token, 2002 refresh token, …).
    public var type: UInt32?
    /// `kSecAttrGeneric`: opaque bytes the app attaches.
    public var generic: Data?
    /// `kSecAttrLabel`.
    public var label: String?
    /// `kSecAttrCreator`, a four-character code.
    public var creator: UInt32?
    /// `kSecAttrCreationDate`.
    public var creationDate: Date
    /// `kSecAttrModificationDate`.
    public var modificationDate: Date

    public init(
        accessGroup: String,
        service: String,
        account: String,
        type: UInt32? = nil,
        generic: Data? = nil,
        label: String? = nil,
        creator: UInt32? = nil,
        creationDate: Date,
        modificationDate: Date
    ) {
        self.accessGroup = accessGroup
        self.service = service
        self.account = account
        self.type = type
        self.generic = generic
        self.label = label
        self.creator = creator
        self.creationDate = creationDate
        self.modificationDate = modificationDate
    }
}

/// A stored item: its attributes and its secret value (`kSecValueData`).
public struct KeychainItem: Sendable, Hashable {
    /// The item's attributes.
    public var metadata: ItemMetadata
    /// The secret bytes. Callers should not log them.
    public var secret: Data

    public var accessGroup: String { metadata.accessGroup }
    public var service: String { metadata.service }
    public var account: String { metadata.account }

    /// An item with its attributes and secret (the store makes these; so does a broker client).
    public init(metadata: ItemMetadata, secret: Data) {
        self.metadata = metadata
        self.secret = secret
    }
}

/// The attributes and secret for `KeychainStore.add` (`SecItemAdd`).
public struct NewItem: Sendable {
    /// The group to add to; `nil` means the caller's first entitled group.
    public var accessGroup: String?
    public var service: String
    public var account: String
    public var type: UInt32?
    public var generic: Data?
    public var label: String?
    public var creator: UInt32?
    public var secret: Data

    public init(
        accessGroup: String? = nil,
        service: String,
        account: String,
        secret: Data,
        label: String? = nil,
        type: UInt32? = nil,
        generic: Data? = nil,
        creator: UInt32? = nil
    ) {
        self.accessGroup = accessGroup
        self.service = service
        self.account = account
        self.secret = secret
        self.label = label
        self.type = type
        self.generic = generic
        self.creator = creator
    }
}

/// Which items an operation applies to (the attribute part of a `SecItemCopyMatching` query).
/// `nil` attributes match anything. Without an access group, only the caller's groups are searched.
public struct ItemQuery: Sendable, Hashable {
    public var accessGroup: String?
    public var service: String?
    public var account: String?
    public var label: String?
    public var type: UInt32?
    public var generic: Data?
    public var creator: UInt32?

    public init(
        accessGroup: String? = nil,
        service: String? = nil,
        account: String? = nil,
        label: String? = nil,
        type: UInt32? = nil,
        generic: Data? = nil,
        creator: UInt32? = nil
    ) {
        self.accessGroup = accessGroup
        self.service = service
        self.account = account
        self.label = label
        self.type = type
        self.generic = generic
        self.creator = creator
    }

    /// Every item in the caller's groups.
    public static let all = ItemQuery()
}

/// New values for `KeychainStore.update` (`SecItemUpdate`); `nil` leaves an attribute as it is.
/// Changing service or account re-keys the item; a clash with an existing item is `duplicateItem`.
public struct ItemChanges: Sendable {
    public var service: String?
    public var account: String?
    public var label: String?
    public var type: UInt32?
    public var generic: Data?
    public var creator: UInt32?
    public var secret: Data?

    public init(
        service: String? = nil,
        account: String? = nil,
        label: String? = nil,
        type: UInt32? = nil,
        generic: Data? = nil,
        creator: UInt32? = nil,
        secret: Data? = nil
    ) {
        self.service = service
        self.account = account
        self.label = label
        self.type = type
        self.generic = generic
        self.creator = creator
        self.secret = secret
    }

    var isEmpty: Bool {
        service == nil && account == nil && label == nil && type == nil && generic == nil && creator == nil
            && secret == nil
    }
}
