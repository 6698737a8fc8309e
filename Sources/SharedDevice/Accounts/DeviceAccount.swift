public import Foundation

/// An account as apps see it (MSAL's `MSALAccount`): ids and display claims, never a token.
public struct DeviceAccount: Sendable, Hashable, Codable {
    /// `home_account_id` (`<uid>.<utid>`): what apps compare to detect a change of account.
    public var homeAccountID: String
    /// The authority host (the cache's `environment`).
    public var environment: String
    /// The tenant the account signed in to.
    public var realm: String
    /// The displayable username (`preferred_username`, `upn` or `email`).
    public var username: String?
    /// The display name.
    public var name: String?
    /// The object id in the tenant (`oid`, MSAL's `local_account_id`).
    public var localAccountID: String?

    public init(
        homeAccountID: String,
        environment: String,
        realm: String,
        username: String?,
        name: String?,
        localAccountID: String?
    ) {
        self.homeAccountID = homeAccountID
        self.environment = environment
        self.realm = realm
        self.username = username
        self.name = name
        self.localAccountID = localAccountID
    }

    enum CodingKeys: String, CodingKey {
        case homeAccountID = "homeAccountId"
        case environment, realm, username, name
        case localAccountID = "localAccountId"
    }

    /// MSAL's `account.identifier`.
    public var identifier: String { homeAccountID }

    /// The keychain account attribute of the account's cache items (`<home_account_id>-<environment>`).
    var cacheAccountAttribute: String { "\(homeAccountID)-\(environment)".lowercased() }

    /// How the audit log names the account.
    public var auditName: String { username ?? homeAccountID }

    init(_ cached: CachedAccount) {
        self.init(
            homeAccountID: cached.homeAccountID,
            environment: cached.environment,
            realm: cached.tenantID,
            username: cached.username,
            name: cached.name,
            localAccountID: cached.objectID
        )
    }

    /// Same person: same home account id and environment (how an app tells whether the current account
    /// is still the one it saw: MSAL apps compare `identifier`s).
    public func isSameAccount(as other: DeviceAccount) -> Bool {
        homeAccountID.lowercased() == other.homeAccountID.lowercased()
            && environment.lowercased() == other.environment.lowercased()
    }

    /// The Azure AD B2C user flow this account signed in through (lowercased, e.g. `b2c_1_susi`), when its
    /// home account id has B2C's shape `<oid>-<policy>.<tenant>` (`oid` being its local account id); nil
    /// for any other account. MSAL's `getAccountByPolicy` picks accounts by it.
    public var b2cPolicy: String? { b2cParts?.policy }

    /// Same worker: the same account, or two accounts of one B2C user (same object id, tenant and
    /// environment) that differ only by the user flow they signed in through. On a shared device these
    /// are one worker: signing in through the edit-profile flow is not a second worker, and a sign-out
    /// removes them all.
    public func isSameWorker(as other: DeviceAccount) -> Bool {
        if isSameAccount(as: other) { return true }
        guard environment.lowercased() == other.environment.lowercased(), let mine = b2cParts,
            let theirs = other.b2cParts
        else { return false }
        return mine.user == theirs.user && mine.tenant == theirs.tenant
    }

    /// This B2C user's home account id under another user flow (`<oid>-<policy>.<tenant>`); nil when this
    /// is no B2C account.
    public func b2cHomeAccountID(policy: String) -> String? {
        b2cParts.map { "\($0.user)-\(policy.lowercased()).\($0.tenant)" }
    }

    /// `<oid>-<policy>.<tenant>` taken apart (lowercased), when the home account id has that shape.
    private var b2cParts: (user: String, policy: String, tenant: String)? {
        guard let user = localAccountID?.lowercased(), !user.isEmpty else { return nil }
        let home = homeAccountID.lowercased()
        guard home.hasPrefix(user + "-") else { return nil }
        let rest = home.dropFirst(user.count + 1)
        guard let dot = rest.firstIndex(of: "."), dot != rest.startIndex, rest.index(after: dot) != rest.endIndex else {
            return nil
        }
        return (user, String(rest[..<dot]), String(rest[rest.index(after: dot)...]))
    }
}

/// What `AccountManager.currentAccount` returns (MSAL's `getCurrentAccount` completion): the account
/// signed in now and the one this app saw at its previous call, so the app can tell that the worker changed.
public struct CurrentAccount: Sendable, Equatable, Encodable {
    /// The signed-in account, or `nil`.
    public var current: DeviceAccount?
    /// The account this app last saw; kept after a global sign-out wiped its credentials.
    public var previous: DeviceAccount?

    public init(current: DeviceAccount?, previous: DeviceAccount?) {
        self.current = current
        self.previous = previous
    }

    /// Whether the account changed since the app's previous call (compare ids, as MSAL advises).
    public var changed: Bool {
        switch (current, previous) {
        case (nil, nil): false
        case let (current?, previous?): !current.isSameAccount(as: previous)
        default: true
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(current, forKey: .current)
        try container.encode(previous, forKey: .previous)
    }

    enum CodingKeys: String, CodingKey { case current, previous }
}

/// Why a worker was signed out; recorded in the audit log.
public enum SignOutReason: String, Sendable, Codable, CaseIterable {
    /// The worker signed out.
    case user
    /// The shift ended (a switch to the next worker, or the end-of-shift button).
    case shiftEnd = "shift-end"
    /// Idle sign-out from the policy's session settings.
    case idle
    /// An administrator signed the worker out.
    case admin
    /// The shift's login session ended (the worker signed in at the login screen and the session closed,
    /// was removed, or never opened).
    case sessionEnd = "session-end"
}

/// An account the device knows, with its sign-in state (`devicectl accounts`). No secrets.
public struct AccountStatus: Sendable, Equatable, Codable {
    public var account: DeviceAccount
    /// Whether the account is signed in now.
    public var signedIn: Bool
    /// The app that signed it in last.
    public var signedInBy: String?
    public var signedInAt: Date?
    public var signedOutAt: Date?
    public var signOutReason: SignOutReason?
}

/// A change of account on the device, delivered across processes (MSAL Android's
/// `CURRENT_ACCOUNT_CHANGED` broadcast, the iOS Darwin notification).
public struct AccountChange: Sendable, Equatable {
    public enum Kind: String, Sendable, Equatable {
        /// A worker signed in (shared mode) or an app signed an account in (private mode).
        case signedIn = "signed_in"
        /// A worker was signed out of every app on the device.
        case signedOutGlobally = "signed_out"
        /// A shift switch: one worker out, the next in.
        case switched
        /// An administrator changed the device's mode (everyone signed out).
        case deviceModeChanged = "mode_changed"
    }

    public var kind: Kind
    /// The account concerned, as named in the audit log (username or home account id).
    public var account: String?
    /// The audit event's sequence number.
    public var sequence: Int64
    /// Why the worker was signed out (`signedOutGlobally` only).
    public var reason: SignOutReason? = nil
    /// The audit event's correlation id (a switch's sign-out, sign-in and switch share one); nil when
    /// the change was not read from the audit log.
    public var correlationID: String? = nil
}
