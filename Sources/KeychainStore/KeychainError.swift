import Foundation

/// An error from the keychain store. Mirrors the keychain's `OSStatus` results (`errSecItemNotFound`,
/// `errSecDuplicateItem`, `errSecMissingEntitlement`, …) and adds the store's own failure classes.
///
/// The message says what happened and what to do. It never contains a secret, a key or a passphrase,
/// nor the cleartext of a blind-indexed attribute the caller did not supply.
public struct KeychainError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, matchable in `catch` (`catch KeychainError.Code.itemNotFound`).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Kind: Hashable, Sendable {
            case duplicateItem, itemNotFound, missingEntitlement, integrityFailure, wrongKey
            case corruptStore, invalidParameter, ioError, storeBusy, insecureKeyFile, insecureStateDirectory,
                cryptoUnavailable
            case quotaExceeded, diskFull
        }
        let kind: Kind
        init(_ kind: Kind) { self.kind = kind }

        /// An item with the same access group, service and account exists (`errSecDuplicateItem`).
        public static let duplicateItem = Code(.duplicateItem)
        /// No item matched in the caller's access groups (`errSecItemNotFound`).
        public static let itemNotFound = Code(.itemNotFound)
        /// The caller named an access group it is not entitled to (`errSecMissingEntitlement`).
        public static let missingEntitlement = Code(.missingEntitlement)
        /// A stored item or group failed authentication: tampered or corrupted (`errSecDecode`).
        public static let integrityFailure = Code(.integrityFailure)
        /// The master key or passphrase does not open this store (`errSecAuthFailed`).
        public static let wrongKey = Code(.wrongKey)
        /// The database file itself is damaged or not a store (`errSecDecode` as well; the database level).
        public static let corruptStore = Code(.corruptStore)
        /// A malformed argument: empty group name, empty passphrase, … (`errSecParam`).
        public static let invalidParameter = Code(.invalidParameter)
        /// The file system refused a read or write (`errSecIO`).
        public static let ioError = Code(.ioError)
        /// Another process held the store's write lock for longer than the busy timeout (`errSecNotAvailable`).
        public static let storeBusy = Code(.storeBusy)
        /// The key file can be read by users other than its owner (`errSecWrPerm`).
        public static let insecureKeyFile = Code(.insecureKeyFile)
        /// The state directory, or a directory above it, could be swapped by another user: owned by them, or
        /// writable by others without the sticky bit (`errSecWrPerm` as well). Nothing in it was used.
        public static let insecureStateDirectory = Code(.insecureStateDirectory)
        /// libsodium could not run: missing library, no locked memory, out of memory.
        public static let cryptoUnavailable = Code(.cryptoUnavailable)
        /// The app's items would go over its quota (the policy's limits.itemsPerApp or bytesPerApp);
        /// `errSecDiskFull`, -34: to the app, its share of the disk is full.
        public static let quotaExceeded = Code(.quotaExceeded)
        /// The filesystem holding the store is full (`errSecDiskFull`, -34).
        public static let diskFull = Code(.diskFull)

        /// The Apple keychain `OSStatus` this code corresponds to.
        public var osStatus: Int32 {
            switch kind {
            case .duplicateItem: -25299
            case .itemNotFound: -25300
            case .missingEntitlement: -34018
            case .integrityFailure, .corruptStore: -26275
            case .wrongKey: -25293
            case .invalidParameter: -50
            case .ioError: -36
            case .storeBusy: -25291
            case .insecureKeyFile, .insecureStateDirectory: -61
            case .cryptoUnavailable: -67585
            case .quotaExceeded, .diskFull: -34
            }
        }

        /// Lets `catch KeychainError.Code.itemNotFound { … }` match.
        /// Every code, for lookups by name.
        static let all: [Code] = [
            .duplicateItem, .itemNotFound, .missingEntitlement, .integrityFailure, .wrongKey, .corruptStore,
            .invalidParameter, .ioError, .storeBusy, .insecureKeyFile, .insecureStateDirectory, .cryptoUnavailable,
            .quotaExceeded, .diskFull,
        ]

        /// The code's stable identifier (`missingEntitlement`), as IPC error replies carry it.
        public var name: String { "\(kind)" }

        /// The code named `name` (see `name`), `nil` for an unknown one.
        public init?(name: String) {
            guard let code = Self.all.first(where: { $0.name == name }) else { return nil }
            self = code
        }

        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? KeychainError)?.code == code
        }

        public var description: String {
            switch kind {
            case .duplicateItem: "duplicate item"
            case .itemNotFound: "item not found"
            case .missingEntitlement: "missing entitlement"
            case .integrityFailure: "integrity failure"
            case .wrongKey: "wrong key"
            case .corruptStore: "corrupt store"
            case .invalidParameter: "invalid parameter"
            case .ioError: "I/O error"
            case .storeBusy: "store busy"
            case .insecureKeyFile: "insecure key file"
            case .insecureStateDirectory: "insecure state directory"
            case .cryptoUnavailable: "crypto unavailable"
            case .quotaExceeded: "quota exceeded"
            case .diskFull: "disk full"
            }
        }
    }

    /// The failure class.
    public let code: Code
    /// A human-readable explanation with the next step to take. Never contains secrets.
    public let message: String
    /// For `integrityFailure`: the items that failed authentication.
    public let damagedItems: [DamagedItem]

    /// An error of `code` (the store makes these; so does a client reading a broker's error reply).
    public init(_ code: Code, _ message: String, damagedItems: [DamagedItem] = []) {
        self.code = code
        self.message = message
        self.damagedItems = damagedItems
    }

    public var description: String { "\(message) (\(code), OSStatus \(code.osStatus))" }
}

/// A stored item that failed its integrity check, named without revealing any of its attributes.
public struct DamagedItem: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The row id of the item in the store's `items` table.
    public let rowID: Int64
    /// The item's access group, when the group itself is intact.
    public let accessGroup: String?
    /// Why the item failed.
    public let reason: String

    /// Names a damaged item.
    public init(rowID: Int64, accessGroup: String?, reason: String) {
        self.rowID = rowID
        self.accessGroup = accessGroup
        self.reason = reason
    }

    public var description: String {
        "item #\(rowID)" + (accessGroup.map { " in \($0)" } ?? "") + ": \(reason)"
    }
}
