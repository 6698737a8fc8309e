public import Foundation

/// An account as MSAL describes it (MSALAccount).
public struct Account: Sendable, Hashable {
    /// `<oid>.<tid>`.
    public var homeAccountID: String
    /// The authority's host.
    public var environment: String
    /// The tenant.
    public var realm: String
    public var username: String?
    public var name: String?
    public var localAccountID: String?

    public init(homeAccountID: String, environment: String, realm: String, username: String? = nil, name: String? = nil,
                localAccountID: String? = nil) {
        self.homeAccountID = homeAccountID
        self.environment = environment
        self.realm = realm
        self.username = username
        self.name = name
        self.localAccountID = localAccountID
    }

    /// Whether this is the account of the Azure AD B2C user flow `policy` (`B2C_1_susi`): its home account
    /// id is `<oid>-<policy>.<tenant>`, compared case-insensitively (MSAL's `getAccountByPolicy`).
    public func isAccount(ofPolicy policy: String) -> Bool {
        guard let oid = localAccountID?.lowercased() else { return false }
        return homeAccountID.lowercased().hasPrefix("\(oid)-\(policy.lowercased()).")
    }
}

/// The device's current worker for this app, and the one before (MSAL's getCurrentAccount).
public struct CurrentAccount: Sendable, Hashable {
    public var current: Account?
    public var previous: Account?
}

/// The device's mode and registration (MSAL's getDeviceInformation).
public struct DeviceInformation: Sendable, Hashable {
    /// Shared device mode, or a personal device.
    public enum Mode: String, Sendable, Hashable {
        case shared, `private`
    }

    public var mode: Mode
    public var deviceID: String?
    public var deviceName: String?
    public var policyID: String?
    /// ssoProviderInstalled, ssoProviderMode, joinStatus, brokerVersion, deviceIdentifier, authority, clientId.
    public var extraDeviceInformation: [String: String]
}

/// A token and the account it is for (MSALResult). Its description never shows the token.
public struct AuthenticationResult: Sendable, Hashable, CustomStringConvertible {
    /// Where the token came from.
    public enum Source: String, Sendable, Hashable {
        case cache, refresh, interactive
    }

    /// The access token: send it as `Authorization: Bearer`. Never log it.
    public var accessToken: String
    public var scopes: [String]
    /// When the token expires, when the authority said.
    public var expiresOn: Date?
    public var account: Account
    public var source: Source
    /// Ties the call to its audit events.
    public var correlationID: String
    /// The ID token the identity provider issued for the account (a JWT), for a call that named an MSAL
    /// client id; nil otherwise. Never log it.
    public var idToken: String?

    public var description: String {
        "AuthenticationResult(account: \(account.username ?? account.homeAccountID), scopes: \(scopes), source: \(source.rawValue), accessToken: <redacted>)"
    }
}

/// What the worker must do to finish a device-code sign-in (RFC 8628): show it.
public struct DeviceCodeVerification: Sendable, Hashable {
    public var verificationURI: String
    public var verificationURIComplete: String?
    public var userCode: String
    /// Seconds until the code expires.
    public var expiresIn: Int
    /// The authority's message for the worker, when it sent one.
    public var message: String?
}

/// How an interactive sign-in shows itself to the worker. The broker does the sign-in; the app only shows.
public enum InteractiveFlow: Sendable {
    /// Device code: `showCode` gets the code to show (the call then waits for the worker).
    case deviceCode(showCode: @Sendable (DeviceCodeVerification) async -> Void)
    /// Browser: the broker listens on the loopback `redirectURI` (a free port when it names none);
    /// `openBrowser` gets the authorization URL to open; `timeout` seconds to wait for the browser.
    case browser(redirectURI: String = "http://127.0.0.1/", prompt: String? = nil, timeout: Int = 300,
                 openBrowser: @Sendable (URL) async -> Void)
    /// The worker's username and password, taken on the app's own screen (only where the device policy's
    /// `authority.flows` lists `password`): the broker sends them to the identity provider, and nowhere else.
    case password(username: String, password: String)
}

/// An interactive sign-in's parameters (MSALInteractiveTokenParameters).
public struct InteractiveTokenParameters: Sendable {
    public var scopes: [String]
    public var flow: InteractiveFlow
    public var loginHint: String?
    /// The MSAL client id of a request that came through Microsoft's broker protocol (the MSAL bridge):
    /// it must be among the app's `msalClientIds` in the device policy; the result then carries the ID token.
    public var msalClientID: String?
    /// The authority to sign in at (MSAL's `parameters.authority`) when it is not the device policy's
    /// issuer: one of the policy's `knownAuthorities`, such as an Azure AD B2C edit-profile user flow.
    public var authority: String?

    public init(scopes: [String], flow: InteractiveFlow, loginHint: String? = nil, msalClientID: String? = nil, authority: String? = nil) {
        self.scopes = scopes
        self.flow = flow
        self.loginHint = loginHint
        self.msalClientID = msalClientID
        self.authority = authority
    }
}

/// Why a worker signs out.
public enum SignOutReason: String, Sendable, Hashable {
    /// The worker signed out.
    case user
    /// The shift ended.
    case shiftEnd = "shift-end"
}

/// Why the worker was signed out, as an account event reports it (the `reason` of the broker's
/// `signedOut` event). Its description is a phrase for a person (`the shift ended`); `rawValue` is the
/// broker's word (`shift-end`). A reason this client does not know (a newer broker's) is `other`.
public enum SignedOutReason: Sendable, Hashable, CustomStringConvertible {
    /// The worker signed out (`user`).
    case user
    /// The shift ended: a shift switch or the end-of-shift button (`shift-end`).
    case shiftEnd
    /// An administrator signed the worker out (`admin`): root's `devicectl signout`, or a member of the
    /// policy's administratorsGroup.
    case admin
    /// The worker was idle past the policy's `session.idleSignOutSeconds` (`idle`).
    case idle
    /// A reason this client does not know, as the broker spelled it.
    case other(String)

    /// The reason the broker names with `rawValue` (`user`, `shift-end`, `admin`, `idle`, or any other word).
    public init(rawValue: String) {
        switch rawValue {
        case "user": self = .user
        case "shift-end": self = .shiftEnd
        case "admin": self = .admin
        case "idle": self = .idle
        default: self = .other(rawValue)
        }
    }

    /// The broker's word for the reason.
    public var rawValue: String {
        switch self {
        case .user: "user"
        case .shiftEnd: "shift-end"
        case .admin: "admin"
        case .idle: "idle"
        case .other(let reason): reason
        }
    }

    /// The reason in words, for a person (`the shift ended`).
    public var description: String {
        switch self {
        case .user: "the worker signed out"
        case .shiftEnd: "the shift ended"
        case .admin: "an administrator signed the worker out"
        case .idle: "the worker was idle too long"
        case .other(let reason): "signed out (\(reason))"
        }
    }
}

/// What a sign-out did, as the broker counted it.
public struct SignOutResult: Sendable, Hashable {
    /// Who was signed out (nil: nobody was signed in).
    public var account: Account?
    /// Signed out of every app on the device (shared mode).
    public var global: Bool
    /// Keychain items the sign-out removed.
    public var itemsRemoved: Int
}

/// What the broker pushes to a subscribed app (MSAL Android's CURRENT_ACCOUNT_CHANGED, and the idle
/// sign-out's countdown).
public enum AccountEvent: Sendable, Hashable {
    /// The subscription is live: every later change will be reported. `current` is the worker now.
    case subscribed(current: Account?, sequence: Int)
    /// A worker signed in.
    case signedIn(current: Account?, sequence: Int)
    /// The worker was signed out of every app, for `reason` (nil when the broker gave none).
    case signedOut(reason: SignedOutReason?, sequence: Int)
    /// One worker left and the next signed in, in one step.
    case switched(current: Account?, sequence: Int)
    /// The device's mode changed (shared or private).
    case deviceModeChanged(mode: DeviceInformation.Mode, sequence: Int)
    /// The worker will be signed out for inactivity in `secondsLeft` seconds unless there is activity: show a countdown.
    case idleWarning(secondsLeft: Int)
    /// There was activity: hide the countdown.
    case idleWarningCanceled
}

/// A keychain item (generic-password class) in one of the app's access groups.
public struct KeychainItem: Sendable, Hashable {
    public var accessGroup: String
    public var service: String
    public var account: String
    public var type: UInt32?
    public var label: String?
    public var generic: Data?
    public var creationDate: Date
    public var modificationDate: Date
    /// The secret, where the call returns it (a find); nil in a listing.
    public var secret: Data?
}

/// Which items a keychain call selects: any of service, account, label and type, in one access group
/// or (nil) in all of the app's groups.
public struct ItemQuery: Sendable, Hashable {
    public var accessGroup: String?
    public var service: String?
    public var account: String?
    public var label: String?
    public var type: UInt32?

    public init(accessGroup: String? = nil, service: String? = nil, account: String? = nil, label: String? = nil, type: UInt32? = nil) {
        self.accessGroup = accessGroup
        self.service = service
        self.account = account
        self.label = label
        self.type = type
    }
}

/// The idle sign-out's clock (the policy's `session`), in seconds.
public struct IdleState: Sendable, Hashable {
    public var idleSignOutSeconds: Int
    public var warningSeconds: Int
    /// Seconds since the worker's last activity (nil: nobody is signed in).
    public var idleSeconds: Double?
    /// Seconds until the idle sign-out (nil: nobody is signed in).
    public var signOutIn: Double?
    /// Whether an idle warning is out.
    public var warning: Bool
}

/// What a shift switch did: who went (and how many of their items), and the next worker's sign-in.
public struct WorkerSwitch: Sendable, Hashable {
    public var signedOut: SignOutResult
    public var result: AuthenticationResult
}

/// New attributes for the items an update selects (nil: unchanged).
public struct ItemChanges: Sendable, Hashable {
    public var service: String?
    public var account: String?
    public var label: String?
    public var type: UInt32?
    public var generic: Data?

    public init(service: String? = nil, account: String? = nil, label: String? = nil, type: UInt32? = nil, generic: Data? = nil) {
        self.service = service
        self.account = account
        self.label = label
        self.type = type
        self.generic = generic
    }
}

/// Who the broker takes this process for: the kernel's uid, and the policy's app for it.
public struct CallerIdentity: Sendable, Hashable {
    public var uid: Int
    /// The policy's app for the uid; nil when the policy lists none (every app call is then refused).
    public var appID: String?
    /// The keychain access groups the policy gives the app, the first being where an add goes by default.
    public var accessGroups: [String]
    /// Root, or a member of the policy's administratorsGroup.
    public var administrator: Bool
    /// The state directory (the store) the broker serves, when it says.
    public var stateDirectory: String?
}

/// A native sign-in waiting for the worker (Microsoft Entra External ID native authentication through the
/// broker): what they must type next. Finish it with `PublicClientApplication.submitNativeSignIn`.
public struct NativeSignIn: Sendable, Hashable {
    /// What the worker must type.
    public enum Next: Sendable, Hashable {
        /// Their password.
        case password
        /// The one-time code the authority sent: `length` characters, to `sentTo` (a masked address), by `channel`.
        case code(length: Int, sentTo: String, channel: String)
    }

    /// The broker's id of the sign-in (it belongs to this app's uid and waits 10 minutes at most).
    public var id: String
    public var next: Next
    /// For a sign-in that starts a shift change (`startNativeSignIn(username:switchReason:)`): the worker
    /// signed out of every app before the next one types (nil account: nobody was signed in).
    public var signedOut: SignOutResult?
}

