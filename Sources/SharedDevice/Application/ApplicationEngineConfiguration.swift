public import Foundation
public import IdentityClient

/// How an app registers with its authority (MSAL's `MSALPublicClientApplicationConfig`).
public struct ApplicationEngineConfiguration: Sendable {
    /// The app registration's client id.
    public var clientID: String
    /// Where users sign in: a Microsoft tenant, a B2C user flow or an OpenID Connect issuer.
    public var authority: String
    /// The loopback redirect URI registered for the app (`http://127.0.0.1/`; the port is chosen at
    /// sign-in, RFC 8252 §7.3). Only its path is used.
    public var redirectURI: URL
    /// Hosts of authorities the app trusts beyond the Microsoft cloud (B2C tenants).
    public var knownAuthorities: [String]
    /// The keychain access group the app's tokens live in (MSAL's `keychainSharingGroup`); `nil` means
    /// `com.microsoft.adalcache` when the app is entitled to it, else the app's first group.
    public var keychainAccessGroup: String?
    /// The app's id on this device: the device policy gives it its access groups.
    public var appID: String
    /// Scopes every sign-in asks for besides the call's own (the policy's default scopes).
    public var defaultScopes: [String]
    /// The interactive sign-ins the app may run (the policy's `authority.flows`; device code and browser
    /// by default: the password flow only where the policy lists it).
    public var allowedFlows: [DevicePolicy.SignInFlow] = DevicePolicy.SignInFlow.defaults
    /// The client secret of a confidential client (the policy's `authority.clientSecret`); nil for a public
    /// client, as MSAL apps are.
    public var clientSecret: String?
    /// The Flatpak app id of the policy's entry for `appID` (its key `flatpak`), when the app is a sandboxed
    /// app: named in its audit events with `sandboxed`.
    public var flatpakAppID: String?

    public init(
        clientID: String,
        authority: String,
        appID: String,
        redirectURI: URL = URL(string: "http://127.0.0.1/")!,
        knownAuthorities: [String] = [],
        keychainAccessGroup: String? = nil,
        defaultScopes: [String] = []
    ) {
        self.clientID = clientID
        self.authority = authority
        self.appID = appID
        self.redirectURI = redirectURI
        self.knownAuthorities = knownAuthorities
        self.keychainAccessGroup = keychainAccessGroup
        self.defaultScopes = defaultScopes
    }

    /// The configuration the device policy gives `appID`: the policy authority's issuer, client id,
    /// default scopes and known authorities.
    public init(appID: String, policy: DevicePolicy) {
        self.init(
            clientID: policy.authority.clientId,
            authority: policy.authority.issuer.absoluteString,
            appID: appID,
            knownAuthorities: policy.authority.knownAuthorities.compactMap(\.host),
            defaultScopes: policy.authority.scopes
        )
        allowedFlows = policy.authority.flows
        clientSecret = policy.authority.clientSecret
        flatpakAppID = policy.app(appID)?.flatpak
    }
}

/// How `acquireToken` signs the user in.
public enum InteractiveFlow: Sendable {
    /// RFC 8628: show the code (`DeviceCodeSession.message`) with `showCode`, then wait; `progress` is
    /// called before every poll with the time left.
    case deviceCode(
        showCode: @Sendable (DeviceCodeSession) -> Void,
        progress: @Sendable (DeviceCodeProgress) -> Void = { _ in }
    )
    /// The system browser on a loopback redirect; `openBrowser` opens (or prints) the URL.
    case browser(openBrowser: @Sendable (URL) async throws(IdentityError) -> Void)
    /// The resource-owner password grant: the app's screen took the worker's username and password
    /// (only where the policy's `authority.flows` lists `password`). Never logged or audited.
    case password(username: String, password: String)

    /// The policy's name of the flow.
    public var policyFlow: DevicePolicy.SignInFlow {
        switch self {
        case .deviceCode: .deviceCode
        case .browser: .browser
        case .password: .password
        }
    }
}

/// The parameters of an interactive token call (MSAL's `MSALInteractiveTokenParameters`).
public struct InteractiveTokenParameters: Sendable {
    /// The scopes of the API the token is for (`openid profile offline_access` are added).
    public var scopes: [String]
    /// Device code or browser.
    public var flow: InteractiveFlow
    /// MSAL's prompt type; `nil` for "prompt if necessary".
    public var prompt: Prompt?
    /// Prefills the username at the authority.
    public var loginHint: String?
    /// How long the browser flow waits for the user before it gives up (`userCanceled`).
    public var browserTimeout: TimeInterval
    /// The MSAL client id of a request that came through Microsoft's broker protocol (the MSAL bridge):
    /// named in the sign-in's audit event (`msalClientId`).
    public var msalClientID: String?

    public init(
        scopes: [String],
        flow: InteractiveFlow,
        prompt: Prompt? = nil,
        loginHint: String? = nil,
        browserTimeout: TimeInterval = 300,
        msalClientID: String? = nil
    ) {
        self.scopes = scopes
        self.flow = flow
        self.prompt = prompt
        self.loginHint = loginHint
        self.browserTimeout = browserTimeout
        self.msalClientID = msalClientID
    }
}

/// The parameters of a sign-out (MSAL's `MSALSignoutParameters`).
public struct SignOutParameters: Sendable {
    /// Also end the session at the authority in the browser (its `end_session_endpoint`).
    public var signOutFromBrowser: Bool
    /// Private mode: remove the account from every app on the device, not just this one.
    public var wipeAccount: Bool
    /// Why (for the audit log).
    public var reason: SignOutReason
    /// Opens the end-session URL when `signOutFromBrowser`.
    public var openBrowser: (@Sendable (URL) async throws(IdentityError) -> Void)?

    public init(
        signOutFromBrowser: Bool = false,
        wipeAccount: Bool = false,
        reason: SignOutReason = .user,
        openBrowser: (@Sendable (URL) async throws(IdentityError) -> Void)? = nil
    ) {
        self.signOutFromBrowser = signOutFromBrowser
        self.wipeAccount = wipeAccount
        self.reason = reason
        self.openBrowser = openBrowser
    }
}

/// A token call's result (MSAL's `MSALResult`). `description` shows no token.
public struct AuthenticationResult: Sendable, CustomStringConvertible {
    /// The access token, for `Authorization: Bearer`.
    public let accessToken: String
    /// The scopes it is good for.
    public let scopes: [String]
    /// When it expires.
    public let expiresOn: Date?
    /// The signed-in account.
    public let account: DeviceAccount
    /// The raw ID token, when this call received one.
    public let idToken: String?
    /// Where the token came from: the cache, a refresh, or an interactive sign-in.
    public let source: Source
    /// The id the call's audit events and logs carry.
    public let correlationID: String

    /// Where a token came from.
    public enum Source: String, Sendable, Codable {
        case cache, refresh, interactive
    }

    public init(
        accessToken: String,
        scopes: [String],
        expiresOn: Date?,
        account: DeviceAccount,
        idToken: String?,
        source: Source,
        correlationID: String
    ) {
        self.accessToken = accessToken
        self.scopes = scopes
        self.expiresOn = expiresOn
        self.account = account
        self.idToken = idToken
        self.source = source
        self.correlationID = correlationID
    }

    public var description: String {
        "AuthenticationResult(account: \(account.auditName), scopes: \(scopes.joined(separator: " ")), expiresOn: \(expiresOn.map { "\($0)" } ?? "?"), source: \(source.rawValue))"
    }
}
