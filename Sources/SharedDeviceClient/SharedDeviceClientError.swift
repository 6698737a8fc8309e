/// Why a call to the broker failed: a `code` to match (`catch SharedDeviceClientError.Code.itemNotFound`,
/// `error.code == .noCurrentAccount`), a `message` that says what happened and what to do, and the details
/// the broker gave with it. None of it carries a token or a secret.
///
/// Codes are extensible: a broker newer than this client may answer with a code this client has no constant
/// for; it arrives as a `Code` of that name (`Code(name:)`), so match the codes you handle and treat the rest
/// by their message.
public struct SharedDeviceClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, matchable in `catch` (`catch SharedDeviceClientError.Code.itemNotFound`). The
    /// keychain's refusals carry the keychain's code names and the account manager's its own (the broker's
    /// `KeychainError.code` and `AccountError.code`); the rest are the client's.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's stable identifier (`itemNotFound`), as the broker's error replies carry it.
        public let name: String

        /// The code named `name`: one of the constants below, or one a newer broker sends.
        public init(name: String) { self.name = name }

        // The client's own.

        /// No broker answers at the socket (not running, or it went away during the call), or it refused the
        /// connection as over its limits. The message names the socket's path and the cause (nothing there, a
        /// stale socket nothing accepts on, a directory on the way this uid may not search, a socket it may not
        /// write to) and the fix: start the broker (`systemctl start deviced.socket`, `deviced --socket PATH`),
        /// make the directory searchable, or try again. `socketPath` names the socket.
        public static let brokerUnavailable = Code(name: "brokerUnavailable")
        /// What listens at the socket runs as a user the client does not trust; nothing was sent to it.
        public static let untrustedBroker = Code(name: "untrustedBroker")
        /// The calling task was cancelled; the call's connection was closed, so the broker stopped it.
        public static let cancelled = Code(name: "cancelled")
        /// Any other refusal, named by `varlinkError` (`org.varlink.service.PermissionDenied`,
        /// `org.varlink.service.InvalidParameter`, `org.sharedmode.Broker1.ProtocolError`, …), or a reply
        /// that does not follow the interface.
        public static let refused = Code(name: "refused")

        // The broker's refusals of the caller.

        /// The device policy lists no app with this process's uid (or the device is not provisioned); `uid`
        /// is the uid the broker saw.
        public static let callerNotInPolicy = Code(name: "callerNotInPolicy")
        /// A limit of the broker or the policy refused the call; `limit` names it (`replyBytes`,
        /// `pendingSignInsPerApp`, `passwordBackoff`, …) and `maximum` is its value.
        public static let limitExceeded = Code(name: "limitExceeded")

        // The keychain's (with `keychainStatus`, its OSStatus).

        /// No item matched in the app's access groups (-25300, `errSecItemNotFound`).
        public static let itemNotFound = Code(name: "itemNotFound")
        /// An item with the same access group, service and account exists (-25299, `errSecDuplicateItem`).
        public static let duplicateItem = Code(name: "duplicateItem")
        /// The call named an access group the app is not entitled to (-34018, `errSecMissingEntitlement`).
        public static let missingEntitlement = Code(name: "missingEntitlement")
        /// A malformed argument (-50, `errSecParam`).
        public static let invalidParameter = Code(name: "invalidParameter")
        /// The app's items would go over its quota (-34, the policy's limits.itemsPerApp or bytesPerApp).
        public static let quotaExceeded = Code(name: "quotaExceeded")
        /// The filesystem holding the device's store is full (-34).
        public static let diskFull = Code(name: "diskFull")

        // The account manager's and the identity provider's (with `msalStatus` and `identityCode` for `identity`).

        /// Nobody is signed in (or not the account the call names).
        public static let noCurrentAccount = Code(name: "noCurrentAccount")
        /// The call names another account than the signed-in one.
        public static let currentAccountMismatch = Code(name: "currentAccountMismatch")
        /// A worker is signed in already: sign out (or switch) first.
        public static let accountAlreadySignedIn = Code(name: "accountAlreadySignedIn")
        /// The identity provider refused or failed; `identityCode` says how (`interaction_required`,
        /// `device_code_expired`, `authority_unreachable`, …) and `msalStatus` is MSAL's code for it.
        public static let identity = Code(name: "identity")
        /// The policy's `authority.flows` does not list the sign-in's flow.
        public static let flowNotAllowed = Code(name: "flowNotAllowed")
        /// The call's authority is neither the policy's issuer nor one of its knownAuthorities.
        public static let authorityNotAllowed = Code(name: "authorityNotAllowed")
        /// The call's `msalClientId` is not in the app's `msalClientIds` in the device policy.
        public static let msalClientNotAllowed = Code(name: "msalClientNotAllowed")
        /// The device is not provisioned.
        public static let notProvisioned = Code(name: "notProvisioned")
        /// The broker would not act for the process a connection handed it (the MSAL bridge's caller): not a
        /// pidfd, another user's process, one that exited, or a caller that is not a host process; the
        /// message says which.
        public static let actForCallerRefused = Code(name: "actForCallerRefused")
        /// The broker cannot act for a handed-over process here (a kernel without `SO_PEERPIDFD` or
        /// `pidfd_getfd`, or deviced started with `--without-peer-pidfd`).
        public static let actForCallerUnsupported = Code(name: "actForCallerUnsupported")

        /// Lets `catch SharedDeviceClientError.Code.itemNotFound { … }` match.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? SharedDeviceClientError)?.code == code
        }

        /// The code's name (`itemNotFound`).
        public var description: String { name }
    }

    /// What went wrong.
    public let code: Code
    /// What happened and what to do; never a token or a secret.
    public let message: String
    /// The keychain's OSStatus when the keychain refused the call (-25300 item not found, -25299 duplicate,
    /// -34018 missing entitlement, -34 quota exceeded or disk full, -50 invalid parameter), nil otherwise.
    public let keychainStatus: Int?
    /// MSAL's status for an identity provider's failure (-50002 interaction required, -50005 user canceled, …).
    public let msalStatus: Int?
    /// The identity client's code for an identity provider's failure (`interaction_required`, …).
    public let identityCode: String?
    /// The limit that refused the call (`limitExceeded`: `replyBytes`, `pendingSignInsPerApp`, …).
    public let limit: String?
    /// The limit's value (`limitExceeded`; for `passwordBackoff` the seconds left).
    public let maximum: Int?
    /// The uid the broker saw (`callerNotInPolicy`).
    public let uid: Int?
    /// The varlink error the broker answered with (`refused`).
    public let varlinkError: String?
    /// The socket the client tried (`brokerUnavailable`, `untrustedBroker`).
    public let socketPath: String?

    /// An error of `code` with its details (the client makes these; so may an app's test double).
    public init(
        _ code: Code,
        _ message: String,
        keychainStatus: Int? = nil,
        msalStatus: Int? = nil,
        identityCode: String? = nil,
        limit: String? = nil,
        maximum: Int? = nil,
        uid: Int? = nil,
        varlinkError: String? = nil,
        socketPath: String? = nil
    ) {
        self.code = code
        self.message = message
        self.keychainStatus = keychainStatus
        self.msalStatus = msalStatus
        self.identityCode = identityCode
        self.limit = limit
        self.maximum = maximum
        self.uid = uid
        self.varlinkError = varlinkError
        self.socketPath = socketPath
    }

    /// The message, then the code and the detail that names the failure: `… (itemNotFound, -25300)`,
    /// `… (interaction_required)`, `… (replyBytes)`, `… (org.varlink.service.PermissionDenied)`.
    public var description: String {
        if let keychainStatus { return "\(message) (\(code), \(keychainStatus))" }
        if let detail = identityCode ?? limit ?? varlinkError { return "\(message) (\(detail))" }
        switch code {
        case .brokerUnavailable, .untrustedBroker, .callerNotInPolicy, .cancelled: return message
        default: return "\(message) (\(code))"
        }
    }
}

// The client's own errors, by what they are.
extension SharedDeviceClientError {
    static func brokerUnavailable(_ message: String, socketPath: String) -> Self {
        Self(.brokerUnavailable, message, socketPath: socketPath)
    }

    static func untrustedBroker(_ message: String, socketPath: String) -> Self {
        Self(.untrustedBroker, message, socketPath: socketPath)
    }

    static func refused(error: String, message: String) -> Self {
        Self(.refused, message, varlinkError: error)
    }

    static let cancelled = Self(.cancelled, "the call was cancelled")
}
