public import IdentityClient
public import KeychainStore

/// An error from the shared-device layer: provisioning, device information, the audit log.
///
/// Like `KeychainError`, a struct with an extensible `Code` and a message that says what to do; it never
/// contains a secret. Store failures keep the underlying `KeychainError`.
public struct SharedDeviceError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, matchable in `catch` (`catch SharedDeviceError.Code.notProvisioned`).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Kind: Hashable, Sendable {
            case notProvisioned, invalidPolicy, modeChangeRequiresForce, appNotInPolicy, deviceRecordDamaged
            case auditLogTampered, store
            case accountAlreadySignedIn, noCurrentAccount, currentAccountMismatch, tokenCache, identity
            case brokerUnavailable, flowNotAllowed
        }
        let kind: Kind
        init(_ kind: Kind) { self.kind = kind }

        static let all: [Code] = [
            .notProvisioned, .invalidPolicy, .modeChangeRequiresForce, .appNotInPolicy, .deviceRecordDamaged,
            .auditLogTampered, .store, .accountAlreadySignedIn, .noCurrentAccount, .currentAccountMismatch,
            .tokenCache, .identity, .brokerUnavailable, .flowNotAllowed,
        ]

        /// The code's stable identifier (`noCurrentAccount`), as IPC error replies carry it.
        public var name: String { "\(kind)" }

        /// The code named `name` (see `name`), `nil` for an unknown one.
        public init?(name: String) {
            guard let code = Self.all.first(where: { $0.name == name }) else { return nil }
            self = code
        }

        /// The device has no policy yet: run `devicectl provision`.
        public static let notProvisioned = Code(.notProvisioned)
        /// The policy file is invalid (see `policyError`).
        public static let invalidPolicy = Code(.invalidPolicy)
        /// The new policy changes the device's mode, which wipes every app's credentials: needs `--force`.
        public static let modeChangeRequiresForce = Code(.modeChangeRequiresForce)
        /// The app is not listed in the device policy, so it has no entitlements on this device.
        public static let appNotInPolicy = Code(.appNotInPolicy)
        /// The device record in the device's own group is unreadable or inconsistent.
        public static let deviceRecordDamaged = Code(.deviceRecordDamaged)
        /// The audit log failed verification: edited, deleted, reordered or truncated events, or a bad head.
        public static let auditLogTampered = Code(.auditLogTampered)
        /// The keychain store failed (see `storeError`).
        public static let store = Code(.store)
        /// Shared mode: another account is signed in on the device; sign it out (end the shift) first.
        public static let accountAlreadySignedIn = Code(.accountAlreadySignedIn)
        /// Shared mode: nobody is signed in on the device (MSAL: no current account / account required).
        public static let noCurrentAccount = Code(.noCurrentAccount)
        /// Shared mode: the call names an account that is not the device's current one.
        public static let currentAccountMismatch = Code(.currentAccountMismatch)
        /// A token response or cache document was unusable (see `tokenCacheError`).
        public static let tokenCache = Code(.tokenCache)
        /// The identity provider call failed (see `identityError`: interaction required, user canceled,
        /// server error, authority unreachable, invalid ID token).
        public static let identity = Code(.identity)
        /// The broker daemon is not running, went away, or refused the connection (MSAL: broker not available).
        public static let brokerUnavailable = Code(.brokerUnavailable)
        /// The device policy does not list the sign-in flow (`authority.flows`): the administrator decides.
        public static let flowNotAllowed = Code(.flowNotAllowed)

        /// Lets `catch SharedDeviceError.Code.notProvisioned { … }` match.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? SharedDeviceError)?.code == code
        }

        public var description: String {
            switch kind {
            case .notProvisioned: "not provisioned"
            case .invalidPolicy: "invalid policy"
            case .modeChangeRequiresForce: "mode change requires --force"
            case .appNotInPolicy: "app not in policy"
            case .deviceRecordDamaged: "device record damaged"
            case .auditLogTampered: "audit log tampered"
            case .store: "store error"
            case .accountAlreadySignedIn: "an account is already signed in"
            case .noCurrentAccount: "no current account"
            case .currentAccountMismatch: "current account mismatch"
            case .tokenCache: "token cache error"
            case .identity: "identity provider error"
            case .brokerUnavailable: "broker not available"
            case .flowNotAllowed: "sign-in flow not allowed"
            }
        }
    }

    /// The failure class.
    public let code: Code
    /// What happened and what to do. Never contains secrets.
    public let message: String
    /// For `.store`: the store's error.
    public let storeError: KeychainError?
    /// For `.invalidPolicy`: the path and problem.
    public let policyError: PolicyError?
    /// For `.identity`: the identity client's error (`identityError?.code == .interactionRequired`
    /// is MSAL's -50002).
    public let identityError: IdentityError?

    public init(
        _ code: Code,
        _ message: String,
        storeError: KeychainError? = nil,
        policyError: PolicyError? = nil,
        identityError: IdentityError? = nil
    ) {
        self.code = code
        self.message = message
        self.storeError = storeError
        self.policyError = policyError
        self.identityError = identityError
    }

    /// Wraps an identity client error.
    public init(_ identityError: IdentityError) {
        self.init(.identity, identityError.description, identityError: identityError)
    }

    /// The same failure, for a shift switch whose sign-out stood (`previous` left): the message says nobody is signed in now.
    public func afterSwitchSignOut(_ previous: DeviceAccount?) -> SharedDeviceError {
        let who = previous.map { "\($0.username ?? $0.homeAccountID) was signed out" } ?? "nobody was signed in"
        return SharedDeviceError(
            code,
            "shift switch: \(who) and the next worker's sign-in failed, so nobody is signed in now; sign in again — \(message)",
            storeError: storeError,
            policyError: policyError,
            identityError: identityError
        )
    }

    /// MSAL's -50002: only an interactive sign-in can help (call `acquireToken`).
    public var isInteractionRequired: Bool { identityError?.code == .interactionRequired }

    /// Wraps any error from a store transaction: shared-device errors pass through, store errors are kept.
    /// (Public for layers that run their own store transactions, such as the broker.)
    public static func wrapping(_ error: any Error) -> SharedDeviceError {
        switch error {
        case let error as SharedDeviceError: error
        case let error as IdentityError: SharedDeviceError(error)
        case let error as KeychainError: SharedDeviceError(.store, error.message, storeError: error)
        case let error as PolicyError: SharedDeviceError(.invalidPolicy, error.description, policyError: error)
        case let error as TokenCacheError:
            if let storeError = error.storeError {
                SharedDeviceError(.store, storeError.message, storeError: storeError)
            } else {
                SharedDeviceError(.tokenCache, error.description)
            }
        default: SharedDeviceError(.store, "the store failed: \(type(of: error))")
        }
    }

    public var description: String {
        if let storeError { return storeError.description }
        return "\(message) (\(code))"
    }
}

/// Runs `body`, turning any error into a `SharedDeviceError`.
func sharedDeviceErrors<T>(_ body: () throws -> T) throws(SharedDeviceError) -> T {
    do {
        return try body()
    } catch {
        throw SharedDeviceError.wrapping(error)
    }
}
