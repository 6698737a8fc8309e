public import Foundation

/// An account as MSAL describes it (MSALAccount).
public struct Account: Sendable, Hashable {
    /// `<oid>.<tid>`.
    public var homeAccountID: String
    /// The authority's host.
    public var environment: String
    /// The tenant.
    public var realm: String
    /// The sign-in name (`preferred_username`, usually an email address), for showing; nil when the
    /// identity provider gave none.
    public var username: String?
    /// The worker's display name (`name`), for showing; nil when the identity provider gave none.
    public var name: String?
    /// The account's id in its tenant (`oid`); nil when the identity provider gave none.
    public var localAccountID: String?

    /// An account with these identifiers, as the broker reports one (an app's test double makes these;
    /// the broker's replies make the rest).
    ///
    /// - Parameters:
    ///   - homeAccountID: `<oid>.<tid>` (for an Azure AD B2C user flow `<oid>-<policy>.<tid>`).
    ///   - environment: the authority's host.
    ///   - realm: the tenant.
    ///   - username: the sign-in name, for showing.
    ///   - name: the display name, for showing.
    ///   - localAccountID: the account's id in its tenant (`oid`).
    public init(
        homeAccountID: String,
        environment: String,
        realm: String,
        username: String? = nil,
        name: String? = nil,
        localAccountID: String? = nil
    ) {
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
    /// The worker signed in now; nil when nobody is (the app then signs one in with
    /// `PublicClientApplication.acquireToken(_:)`, or waits for an `AccountEvent.signedIn`).
    public var current: Account?
    /// The worker signed in before the current one (or before the last sign-out); nil when there was none.
    /// Compare it with the account the app last served to drop that worker's data.
    public var previous: Account?
}

/// The device's mode and registration (MSAL's getDeviceInformation).
public struct DeviceInformation: Sendable, Hashable {
    /// Shared device mode, or a personal device.
    public enum Mode: String, Sendable, Hashable {
        /// Shared device mode: one worker at a time, signed in to every app; a sign-out signs them out of all.
        case shared
        /// A personal device: each app keeps its own accounts.
        case `private`
    }

    /// Whether the device is in shared device mode: in `shared` mode a sign-out signs the worker out of
    /// every app, and the app must not keep a worker's data past it.
    public var mode: Mode
    /// The id the device was given when it was provisioned; nil when it is not provisioned.
    public var deviceID: String?
    /// The device's name in its policy (`device.name`); nil when it is not provisioned.
    public var deviceName: String?
    /// The device policy's own `id`; nil when the policy has none or the device is not provisioned.
    public var policyID: String?
    /// ssoProviderInstalled, ssoProviderMode, joinStatus, brokerVersion, deviceIdentifier, authority, clientId.
    public var extraDeviceInformation: [String: String]
}

/// A token and the account it is for (MSALResult). Its description never shows the token.
public struct AuthenticationResult: Sendable, Hashable, CustomStringConvertible {
    /// Where the token came from.
    public enum Source: String, Sendable, Hashable {
        /// The broker's cached access token.
        case cache
        /// A new access token, redeemed with the cached refresh token.
        case refresh
        /// A sign-in by the worker.
        case interactive
    }

    /// The access token: send it as `Authorization: Bearer`. Never log it.
    public var accessToken: String
    /// The scopes the token grants (the authority's answer, which may differ from the request's).
    public var scopes: [String]
    /// When the token expires, when the authority said.
    public var expiresOn: Date?
    /// The worker the token is for.
    public var account: Account
    /// Whether the broker's cache, a refresh or an interactive sign-in produced the token.
    public var source: Source
    /// Ties the call to its audit events.
    public var correlationID: String
    /// The ID token the identity provider issued for the account (a JWT), for a call that named an MSAL
    /// client id; nil otherwise. Never log it.
    public var idToken: String?

    /// The account, scopes and source, for a log line; the access token and the ID token are never in it.
    public var description: String {
        "AuthenticationResult(account: \(account.username ?? account.homeAccountID), scopes: \(scopes), source: \(source.rawValue), accessToken: <redacted>)"
    }
}

/// What the worker must do to finish a device-code sign-in (RFC 8628): show it.
public struct DeviceCodeVerification: Sendable, Hashable {
    /// Where the worker goes to enter the code (show it, or a QR code of it).
    public var verificationURI: String
    /// The verification address with the code in it, when the authority sent one: a QR code of it spares
    /// the worker typing the code.
    public var verificationURIComplete: String?
    /// The code the worker enters at `verificationURI`.
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
    /// `openBrowser` gets the authorization URL to open; `timeout` seconds to wait for the browser. `prompt`:
    /// what the sign-in page asks (`login`, `select_account`, `consent` or `none`; the interface's
    /// `SignInPrompt`); nil sends none, and any other value is refused as an invalid parameter.
    case browser(
        redirectURI: String = "http://127.0.0.1/",
        prompt: String? = nil,
        timeout: Int = 300,
        openBrowser: @Sendable (URL) async -> Void
    )
    /// The worker's username and password, taken on the app's own screen (only where the device policy's
    /// `authority.flows` lists `password`): the broker sends them to the identity provider, and nowhere else.
    case password(username: String, password: String)
}

/// An interactive sign-in's parameters (MSALInteractiveTokenParameters).
public struct InteractiveTokenParameters: Sendable {
    /// The scopes the token must grant (`User.Read`, `api://…/.default`).
    public var scopes: [String]
    /// How the sign-in shows itself to the worker: a device code, a browser, or a password the app took.
    public var flow: InteractiveFlow
    /// The username to suggest to the identity provider (the worker still confirms it); nil for none.
    public var loginHint: String?
    /// The MSAL client id of a request that came through Microsoft's broker protocol (the MSAL bridge):
    /// it must be among the app's `msalClientIds` in the device policy; the result then carries the ID token.
    public var msalClientID: String?
    /// The authority to sign in at (MSAL's `parameters.authority`) when it is not the device policy's
    /// issuer: one of the policy's `knownAuthorities`, such as an Azure AD B2C edit-profile user flow.
    public var authority: String?

    /// The parameters of a sign-in for `scopes` shown by `flow`.
    ///
    /// - Parameters:
    ///   - scopes: the scopes the token must grant.
    ///   - flow: how the sign-in shows itself (`.deviceCode { code in … }`, `.browser { url in … }`, `.password`).
    ///   - loginHint: the username to suggest.
    ///   - msalClientID: the MSAL client id of a request that came through Microsoft's broker protocol.
    ///   - authority: one of the device policy's `knownAuthorities`, to sign in there instead of at its issuer.
    public init(
        scopes: [String],
        flow: InteractiveFlow,
        loginHint: String? = nil,
        msalClientID: String? = nil,
        authority: String? = nil
    ) {
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
    /// The shift's login session ended (`session-end`): the worker logged out at the kiosk, or the session
    /// was closed, and the sign-out followed it.
    case sessionEnd
    /// A reason this client does not know, as the broker spelled it.
    case other(String)

    /// The reason the broker names with `rawValue` (`user`, `shift-end`, `admin`, `idle`, `session-end`, or any
    /// other word).
    public init(rawValue: String) {
        switch rawValue {
        case "user": self = .user
        case "shift-end": self = .shiftEnd
        case "admin": self = .admin
        case "idle": self = .idle
        case "session-end": self = .sessionEnd
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
        case .sessionEnd: "session-end"
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
        case .sessionEnd: "the shift's login session ended"
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
    /// The access group the item is in (`kSecAttrAccessGroup`); every app the policy gives this group sees it.
    public var accessGroup: String
    /// The item's service (`kSecAttrService`): with `account`, what makes it unique in its group.
    public var service: String
    /// The item's account (`kSecAttrAccount`): with `service`, what makes it unique in its group.
    public var account: String
    /// The app's own type code for the item (`kSecAttrType`); nil when it set none.
    public var type: UInt32?
    /// A name for people (`kSecAttrLabel`); nil when the app set none.
    public var label: String?
    /// The app's own attribute bytes (`kSecAttrGeneric`), not secret; nil when it set none.
    public var generic: Data?
    /// When the item was added.
    public var creationDate: Date
    /// When the item was last updated.
    public var modificationDate: Date
    /// The secret, where the call returns it (a find); nil in a listing.
    public var secret: Data?
}

/// Which items a keychain call selects: any of service, account, label and type, in one access group
/// or (nil) in all of the app's groups.
public struct ItemQuery: Sendable, Hashable {
    /// The access group to search; nil: every group the policy gives the app.
    public var accessGroup: String?
    /// The service the items must have; nil: any.
    public var service: String?
    /// The account the items must have; nil: any.
    public var account: String?
    /// The label the items must have; nil: any.
    public var label: String?
    /// The type code the items must have; nil: any.
    public var type: UInt32?

    /// A query for the items that have every attribute given (nil: any value). Name the app's own group
    /// in `accessGroup` to keep a group shared with other apps out of it.
    public init(
        accessGroup: String? = nil,
        service: String? = nil,
        account: String? = nil,
        label: String? = nil,
        type: UInt32? = nil
    ) {
        self.accessGroup = accessGroup
        self.service = service
        self.account = account
        self.label = label
        self.type = type
    }
}

/// The idle sign-out's clock (the policy's `session`), in seconds.
public struct IdleState: Sendable, Hashable {
    /// How long the worker may be idle before the broker signs them out (the policy's
    /// `session.idleSignOutSeconds`).
    public var idleSignOutSeconds: Int
    /// How long before the idle sign-out the broker sends `AccountEvent.idleWarning` (the policy's
    /// `session.warningSeconds`).
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
    /// The worker who went, and how many of their items the sign-out removed (nil account: nobody was signed in).
    public var signedOut: SignOutResult
    /// The next worker's token.
    public var result: AuthenticationResult
}

/// New attributes for the items an update selects (nil: unchanged).
public struct ItemChanges: Sendable, Hashable {
    /// The new service; nil: unchanged.
    public var service: String?
    /// The new account; nil: unchanged.
    public var account: String?
    /// The new label; nil: unchanged.
    public var label: String?
    /// The new type code; nil: unchanged.
    public var type: UInt32?
    /// The new app-defined attribute bytes; nil: unchanged.
    public var generic: Data?

    /// Changes to the attributes given (nil: unchanged). A change of service or account that would make
    /// two items alike in a group fails with `duplicateItem`.
    public init(
        service: String? = nil,
        account: String? = nil,
        label: String? = nil,
        type: UInt32? = nil,
        generic: Data? = nil
    ) {
        self.service = service
        self.account = account
        self.label = label
        self.type = type
        self.generic = generic
    }
}

/// Who the broker takes this process for: the kernel's uid, and the policy's app for it.
public struct CallerIdentity: Sendable, Hashable {
    /// The uid the kernel reported for this process's connection: the app is who runs as it.
    public var uid: Int
    /// The policy's app for the uid; nil when the policy lists none (every app call is then refused).
    public var appID: String?
    /// The keychain access groups the policy gives the app, the first being where an add goes by default.
    public var accessGroups: [String]
    /// Root, or a member of the policy's administratorsGroup.
    public var administrator: Bool
    /// The state directory (the store) the broker serves, when it says.
    public var stateDirectory: String?
    /// The Flatpak app id of this process's sandbox, when it runs in one (the broker read it from the
    /// sandbox, which the app cannot change); nil for a process on the host.
    public var flatpakAppID: String? = nil
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
    /// What the worker must type next: pass it to `PublicClientApplication.submitNativeSignIn`.
    public var next: Next
    /// For a sign-in that starts a shift change (`startNativeSignIn(username:switchReason:)`): the worker
    /// signed out of every app before the next one types (nil account: nobody was signed in).
    public var signedOut: SignOutResult?
}
