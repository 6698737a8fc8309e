public import Foundation
public import KeychainStore
public import ProcessSandbox

/// A device policy: what an administrator provisions a kiosk or personal device with.
/// Decoded strictly from JSON by `DevicePolicy.decode(_:)`; see `policies/README.md` for every key.
public struct DevicePolicy: Sendable, Equatable, Encodable {
    /// The only policy format version this build understands.
    public static let currentVersion = 1

    /// Whether one worker at a time signs in for the whole device, or the device belongs to one user.
    public enum Mode: String, Sendable, Equatable, Codable {
        /// Shared device mode: one current account, global sign-out (MSAL's shared device mode).
        case shared
        /// Private (personal) device: MSAL's default mode, sign-out local to the app.
        case `private`
    }

    /// The device's name and mode.
    public struct Device: Sendable, Equatable, Encodable {
        public var name: String
        public var mode: Mode
    }

    /// An interactive sign-in the device may run (policy key `authority.flows`).
    public enum SignInFlow: String, Sendable, Equatable, Encodable, CaseIterable {
        /// The device code flow (RFC 8628): the worker signs in on another device.
        case deviceCode
        /// The authorization code flow with PKCE in the browser.
        case browser
        /// The resource-owner password grant (RFC 6749 §4.3): the kiosk's own screen takes the password.
        /// Off unless the policy lists it: for kiosks whose provider requires it.
        case password
        /// Microsoft Entra External ID native authentication (`ciamlogin.com` authorities).
        case nativeAuth

        /// The flows of a policy without `authority.flows`.
        public static let defaults: [SignInFlow] = [.deviceCode, .browser]
    }

    /// The sign-in authority apps on the device use.
    public struct Authority: Sendable, Equatable, Encodable {
        /// The OpenID Connect issuer URL (https, or http on loopback for a local provider).
        public var issuer: URL
        /// The public client id registered for the device's apps.
        public var clientId: String
        /// Scopes requested when an app asks for none.
        public var scopes: [String]
        /// Further authorities apps may use (B2C user flows, other tenants), as URLs.
        public var knownAuthorities: [URL]
        /// The interactive sign-ins the device may run (default device code and browser).
        public var flows: [SignInFlow] = SignInFlow.defaults
        /// The client secret, when the provider has the device's apps authenticate as a confidential client
        /// (some issue tokens for the password grant only to one). Kept with the policy in the device's
        /// encrypted store; never encoded (printed) with the policy.
        public var clientSecret: String?

        enum CodingKeys: String, CodingKey { case issuer, clientId, scopes, knownAuthorities, flows }
    }

    /// An app allowed on the device.
    public struct App: Sendable, Equatable, Encodable {
        /// The app id the app presents (`--app`).
        public var id: String
        /// Its keychain access groups, first one the default (the `keychain-access-groups` entitlement).
        public var accessGroups: [String]
        /// The Unix user the app runs as: the broker daemon takes a caller with this uid (from the kernel)
        /// to be this app, never 0 (root is the device administrator). One uid is one host app (`flatpak`
        /// nil) plus its Flatpak apps: the uid is the boundary between users, the sandbox between the apps
        /// of one user.
        public var uid: UInt32
        /// The Flatpak app id (policy key `flatpak`, e.g. `com.contoso.Scanner`) when the app is the
        /// sandboxed app of that id run by `uid`; nil for the uid's host (non-sandboxed) app. The broker
        /// reads a caller's id from its sandbox (`/.flatpak-info`), which the app cannot change.
        public var flatpak: String? = nil
        /// The app's Unix user by name (policy key `user`), when the policy named it so; `uid` is then
        /// that user's uid in the system's user database.
        public var user: String?
        /// The MSAL client ids (application ids) the app may use when it reaches the device through
        /// Microsoft's broker protocol (an unmodified MSAL app); nil when the policy lists none, and then
        /// every such request of the app is refused.
        public var msalClientIds: [String]?
    }

    /// The worker's session: the idle sign-out, and the login screen's keys (a worker signs in at the kiosk's
    /// login prompt and the shift becomes the login session of `user`).
    public struct Session: Sendable, Equatable, Encodable {
        /// Seconds of inactivity before the worker is signed out; 0 disables idle sign-out.
        public var idleSignOutSeconds: Int
        /// Seconds of warning shown before an idle sign-out.
        public var warningSeconds: Int
        /// The kiosk's local account whose login session a worker signed in at the login screen gets
        /// (policy key `session.user`); nil: the login screen is not configured.
        public var user: String? = nil
        /// `user`'s uid in the system's user database (never root's, never an app's).
        public var userUID: UInt32? = nil
        /// The app the login screen's sign-ins sign in for (policy key `session.app`); nil: the first app.
        public var app: String? = nil
        /// What a global sign-out does to the shift's login session (policy key `session.onSignOut`).
        public var onSignOut: SessionEndAction = .terminate
        /// What a login-screen sign-in does while another worker is signed in (`session.workerSignedIn`).
        public var workerSignedIn: WorkerSignedIn = .switch
        /// Whether the session user gets a fresh home at each session (policy key `session.resetHome`).
        public var resetHome: Bool = false
        /// Seconds a worker signed in at the login screen may wait for their session to open before the
        /// broker signs them out again (policy key `session.openGraceSeconds`, 5 to 3600, default 60).
        public var openGraceSeconds: Int = 60
        /// Seconds between logind's TerminateSession and KillSession with SIGKILL at a sign-out (policy key
        /// `session.terminateGraceSeconds`, 1 to 300, default 5).
        public var terminateGraceSeconds: Int = 5
    }

    /// What a global sign-out does to the shift's login session (`session.onSignOut`).
    public enum SessionEndAction: String, Sendable, Equatable, Codable, CaseIterable {
        /// logind's TerminateSession, then KillSession with SIGKILL after `terminateGraceSeconds`.
        case terminate
        /// logind's LockSession: the weaker choice; the session's processes keep running.
        case lock
        /// Nothing: the session outlives the sign-out (apps hear the account change as before).
        case none
    }

    /// What a login-screen sign-in does while another worker is signed in (`session.workerSignedIn`).
    public enum WorkerSignedIn: String, Sendable, Equatable, Encodable, CaseIterable {
        /// A shift switch: the other worker is signed out when the sign-in completes.
        case `switch`
        /// The sign-in is refused (`accountAlreadySignedIn`).
        case refuse
    }

    /// The app the login screen's sign-ins sign in for: `session.app`, else the first app.
    public var loginScreenApp: App? {
        guard let id = session.app else { return apps.first }
        return app(id)
    }

    /// What one app (or a local user the policy does not list) may take of the broker and the store, so
    /// that no app can starve the others (policy key `limits`; every key optional, defaults below).
    public struct Limits: Sendable, Equatable, Encodable {
        /// Connections one app (one uid of the policy) may hold open to the broker at once. Default 16.
        public var connectionsPerApp: Int
        /// Connections a local user the policy does not list may hold open at once. Default 2.
        public var connectionsPerOtherUser: Int
        /// Connection slots only root and the `administratorsGroup` may take, so that an administrator can
        /// always sign the worker out and see the status. Default 16.
        public var administratorConnections: Int
        /// Interactive sign-ins (device code, browser, shift switch) one app may have pending at once. Default 2.
        public var pendingSignInsPerApp: Int
        /// Keychain items one app may hold, counted in the groups it adds to (its quota). Default 1000.
        public var itemsPerApp: Int
        /// Bytes of secrets and attributes one app's items may take (its quota). Default 8 MiB.
        public var bytesPerApp: Int
        /// Recent failed password sign-ins of one username, or of one app, before its back-off starts
        /// (one failure is forgotten every 10 minutes). Default 3.
        public var passwordFailuresBeforeBackoff: Int
        /// The first back-off after those failures, in seconds; it doubles with every further failure, up
        /// to an hour for an app and 5 minutes for a username; a successful sign-in ends its username's. Default 30.
        public var passwordBackoffSeconds: Int

        /// The defaults of a policy with no `limits` key.
        public static let defaults = Limits(
            connectionsPerApp: 16,
            connectionsPerOtherUser: 2,
            administratorConnections: 16,
            pendingSignInsPerApp: 2,
            itemsPerApp: 1000,
            bytesPerApp: 8 << 20
        )

        /// Limits as given.
        public init(
            connectionsPerApp: Int,
            connectionsPerOtherUser: Int,
            administratorConnections: Int,
            pendingSignInsPerApp: Int,
            itemsPerApp: Int,
            bytesPerApp: Int,
            passwordFailuresBeforeBackoff: Int = 3,
            passwordBackoffSeconds: Int = 30
        ) {
            self.connectionsPerApp = connectionsPerApp
            self.connectionsPerOtherUser = connectionsPerOtherUser
            self.administratorConnections = administratorConnections
            self.pendingSignInsPerApp = pendingSignInsPerApp
            self.itemsPerApp = itemsPerApp
            self.bytesPerApp = bytesPerApp
            self.passwordFailuresBeforeBackoff = passwordFailuresBeforeBackoff
            self.passwordBackoffSeconds = passwordBackoffSeconds
        }
    }

    /// Audit log settings.
    public struct Audit: Sendable, Equatable, Encodable {
        /// A signed checkpoint is written every this many events (and at every sign-out).
        public var checkpointInterval: Int
    }

    public var version: Int
    /// The administrator's name for this policy revision (optional `id` key), shown in device information.
    public var id: String?
    public var device: Device
    public var authority: Authority
    public var apps: [App]
    public var session: Session
    public var audit: Audit
    /// The Unix group whose members may call the broker's administrative methods besides root
    /// (policy key `administratorsGroup`).
    public var administratorsGroup: String?
    /// What one app may take of the broker and the store (policy key `limits`).
    public var limits: Limits = .defaults
    /// How the store's master key is to be sealed to the device (policy key `keyProtection`); `nil` leaves it
    /// to the administrator's `--seal`.
    public var keyProtection: KeyProtection?

    /// How the store's master key is to be sealed: `seal` (tpm2, host, tpm2+host) and, for a TPM2, the PCRs
    /// it is bound to.
    public struct KeyProtection: Sendable, Equatable, Encodable {
        public var seal: KeySealing.Binding
        public var tpm2Pcrs: [Int]?

        /// The sealing `devicectl` performs.
        public var sealing: KeySealing {
            tpm2Pcrs.map { KeySealing(binding: seal, pcrs: $0) } ?? KeySealing(binding: seal)
        }
    }

    /// The app with `id`, if the policy allows it on the device.
    public func app(_ id: String) -> App? { apps.first { $0.id == id } }

    /// The host (non-sandboxed) app that runs as `uid`, if the policy lists one.
    public func app(uid: UInt32) -> App? { apps.first { $0.uid == uid && $0.flatpak == nil } }

    /// The app a caller of `uid` in `sandbox` is: the uid's host app for a host process (or for any process
    /// of the uid where sandboxes are not told apart: `unpinned`), the Flatpak entry of the uid with the
    /// sandbox's app id for a Flatpak app, and none for a caller whose sandbox could not be read.
    public func app(uid: UInt32, sandbox: PeerSandbox) -> App? {
        switch sandbox {
        case .host, .unpinned: app(uid: uid)
        case .flatpak(let flatpak): apps.first { $0.uid == uid && $0.flatpak == flatpak.appID }
        case .unidentified: nil
        }
    }

    /// How many apps the policy lists for `uid` (its host app and its Flatpak apps): the uid's share of a
    /// per-app limit is this many times the limit, whatever number of sandboxes it starts.
    public func appCount(uid: UInt32) -> Int { apps.count { $0.uid == uid } }

    /// Whether the policy tells apps apart by their Flatpak sandbox.
    public var hasFlatpakApps: Bool { apps.contains { $0.flatpak != nil } }
}
