import Foundation
public import KeychainStore
import Synchronization

/// The single-current-account manager: who is signed in on the device, sign-in, global sign-out and
/// the shift switch, with MSAL's semantics (iOS `getCurrentAccount`/`signout` in shared device mode,
/// Android single-account mode).
///
/// - Shared mode: one worker at a time for the whole device. A second app signing in the same worker
///   gets single sign-on; another worker is refused until the shift ends. Sign-out is global: the
///   worker's credentials leave every access group of every app in one transaction.
/// - Private mode (and an unprovisioned device): accounts are per app; sign-out is local unless the
///   app asks to wipe the account everywhere.
///
/// Every sign-in and sign-out is audited in the same transaction, and other processes learn of it
/// through `changes()`.
///
/// ```swift
/// let accounts = AccountManager(device: ManagedDevice(store: store))
/// let scanner = try accounts.device.appIdentity("com.contoso.kiosk.scanner", actor: "com.contoso.kiosk.scanner")!
/// let (current, previous) = try accounts.currentAccount(for: scanner).pair
/// try accounts.signOut(app: scanner, reason: .shiftEnd)
/// ```
public final class AccountManager: Sendable {
    /// The device whose policy decides the mode and whose audit log records the events.
    public let device: ManagedDevice
    /// The MSAL-schema token cache the apps' tokens live in.
    public let tokenCache: TokenCache
    /// The cross-process signal rung after every committed change of account.
    public let signal: ChangeSignal

    /// The last `currentAccount` answer per app and the store state it was read from.
    let cache = Mutex<[AppIdentity: (stamp: StoreChangeStamp, answer: CurrentAccount)]>([:])

    public init(device: ManagedDevice, tokenCache: TokenCache = TokenCache()) {
        self.device = device
        self.tokenCache = tokenCache
        signal = ChangeSignal(directory: device.store.databaseURL.deletingLastPathComponent())
    }

    private var store: KeychainStore { device.store }

    // MARK: - Current account

    /// The current and previous account for `app` (MSAL's `getCurrentAccount`).
    ///
    /// Shared mode: current is the device's signed-in worker. Private mode: the account this app last
    /// signed in, while its credentials are still cached. Previous is the account the app saw at its
    /// last call (rebuilt from stored ids even after a global wipe); it is updated whenever the app sees
    /// a new account, never cleared.
    public func currentAccount(for app: AppIdentity) throws(SharedDeviceError) -> CurrentAccount {
        let seen = try read { tx -> (CurrentAccount, Bool) in
            // Nothing committed since the last answer for this app: the answer stands (no decryption).
            let stamp = try tx.changeStamp()
            if let cached = self.cache.withLock({ $0[app] }), cached.stamp == stamp { return (cached.answer, false) }
            let previous = try AccountRecords.principal(of: app.appID, in: tx)
            let current = try self.current(for: app, previous: previous, in: tx)
            let needsUpdate = current.map { current in previous.map { !$0.isSameAccount(as: current) || $0 != current } ?? true } ?? false
            let answer = CurrentAccount(current: current, previous: previous)
            if !needsUpdate { self.cache.withLock { $0[app] = (stamp, answer) } }
            return (answer, needsUpdate)
        }
        if seen.1, let current = seen.0.current {
            try write { tx in try AccountRecords.setPrincipal(current, of: app.appID, in: tx) }
        }
        return seen.0
    }

    func current(for app: AppIdentity, previous: DeviceAccount?, in tx: StoreTransaction) throws -> DeviceAccount? {
        if try mode(in: tx) == .shared { return try AccountRecords.current(in: tx) }
        guard let previous else { return nil }
        let cached = try tokenCache.account(homeAccountID: previous.homeAccountID, environment: previous.environment,
                                            as: app, in: tx)
        return cached.map(DeviceAccount.init)
    }

    /// Every account the device knows, with its sign-in state (no secrets).
    public func accounts() throws(SharedDeviceError) -> [AccountStatus] {
        try read { tx in try AccountRecords.allStatuses(in: tx) }
            .sorted { ($0.account.username ?? $0.account.homeAccountID) < ($1.account.username ?? $1.account.homeAccountID) }
    }

    // MARK: - Sign-in

    /// Signs an account in for `app` from a token response (the flows that obtain one validate it; this
    /// trusts it): caches the tokens in the app's token group, makes the account current (shared mode)
    /// and the app's principal, and audits `account.signed_in` when the device's account changes.
    ///
    /// - Throws: `accountAlreadySignedIn` in shared mode while another worker is signed in;
    ///   `tokenCache` for an unusable response. A failure changes nothing.
    @discardableResult
    public func signIn(_ response: TokenResponse, context: TokenRequestContext, app: AppIdentity,
                       accessGroup: String? = nil, correlationID: String? = nil) throws(SharedDeviceError) -> DeviceAccount {
        let (account, isNew) = try write { tx -> (DeviceAccount, Bool) in
            try self.signIn(response, context: context, app: app, accessGroup: accessGroup,
                            correlationID: correlationID ?? Self.newCorrelationID(), in: tx)
        }
        if isNew { signal.notify() }
        return account
    }

    private func signIn(_ response: TokenResponse, context: TokenRequestContext, app: AppIdentity, accessGroup: String?,
                        correlationID: String, in tx: StoreTransaction) throws -> (DeviceAccount, Bool) {
        // The device record is read (decrypted) once: for the mode here and for the audit event below.
        let deviceRecord = try DeviceRecordStore.record(in: tx)
        let shared = deviceRecord?.mode == .shared
        let current = shared ? try AccountRecords.current(in: tx) : nil
        let group = accessGroup ?? Self.tokenGroup(of: app)
        let record = try tokenCache.save(response, context: context, as: app, accessGroup: group, in: tx)
        let homeAccountID = record.accessToken.homeAccountID, environment = record.accessToken.environment
        let account = try tokenCache.account(homeAccountID: homeAccountID, environment: environment, as: app, accessGroup: group, in: tx)
            .map(DeviceAccount.init)
            ?? DeviceAccount(homeAccountID: homeAccountID, environment: environment, realm: record.accessToken.realm,
                             username: nil, name: nil, localAccountID: nil)
        if let current, !current.isSameAccount(as: account) {
            throw SharedDeviceError(.accountAlreadySignedIn,
                "an account is already signed in on this shared device (\(current.auditName)); end the shift with `devicectl signout` or `devicectl switch` first")
        }
        let previousStatus = try AccountRecords.status(of: account, in: tx)
        let isNew = shared ? current == nil : !(previousStatus?.signedIn ?? false)
        try AccountRecords.setStatus(AccountStatus(account: account, signedIn: true, signedInBy: app.appID, signedInAt: isNew ? tx.now : previousStatus?.signedInAt ?? tx.now,
                                                   signedOutAt: nil, signOutReason: nil), in: tx)
        if shared { try AccountRecords.setCurrent(account, in: tx) }
        try AccountRecords.setPrincipal(account, of: app.appID, in: tx)
        if isNew {
            try device.append(AuditEntry(type: .accountSignedIn, actor: app.appID, account: account.auditName, reason: "sign-in",
                                         correlationID: correlationID,
                                         details: ["homeAccountId": account.homeAccountID, "environment": account.environment,
                                                   "mode": shared ? "shared" : "private"]),
                              in: tx, record: deviceRecord, checkpoint: false)
        }
        return (account, isNew)
    }

    // MARK: - Sign-out

    /// What a sign-out did.
    public struct SignOutOutcome: Sendable, Encodable {
        /// The account signed out, `nil` when nobody was signed in.
        public var account: DeviceAccount?
        /// Whether every app's credentials were removed (shared mode, or a wipe everywhere).
        public var global: Bool
        /// Keychain items removed.
        public var itemsRemoved: Int
        /// Access groups searched.
        public var accessGroups: Int
    }

    /// Signs out (MSAL's `signout`). Shared mode: the device's current worker, globally — in one
    /// transaction their credentials leave every access group of every app in the policy, the account is
    /// marked signed out, a wipe tombstone is recorded and `account.signed_out` is audited with a signed
    /// checkpoint. Private mode: `app`'s account, only from `app`'s groups unless `wipeEverywhere`; with no
    /// `app` (an administrator), the most recently signed-in account, from every app.
    ///
    /// - Parameters:
    ///   - app: the acting app; `nil` for an administrator (`devicectl signout` without `--app`). In private
    ///     mode the account signed out is the app's principal (its current account).
    /// - Throws: `noCurrentAccount` when there is nobody to sign out.
    @discardableResult
    public func signOut(app: AppIdentity?, reason: SignOutReason, wipeEverywhere: Bool = false, actor: String? = nil,
                        correlationID: String? = nil) throws(SharedDeviceError) -> SignOutOutcome {
        let outcome = try write { tx in
            try self.signOut(app: app, reason: reason, wipeEverywhere: wipeEverywhere, actor: actor ?? app?.appID ?? "devicectl",
                             correlationID: correlationID ?? Self.newCorrelationID(), in: tx)
        }
        signal.notify()
        return outcome
    }

    private func signOut(app: AppIdentity?, reason: SignOutReason, wipeEverywhere: Bool, actor: String, correlationID: String,
                         in tx: StoreTransaction) throws -> SignOutOutcome {
        let record = try DeviceRecordStore.record(in: tx)
        let policy = try record.map { try device.policy(of: $0) }
        let shared = policy?.device.mode == .shared
        let account: DeviceAccount
        if shared {
            guard let current = try AccountRecords.current(in: tx) else {
                throw SharedDeviceError(.noCurrentAccount, "nobody is signed in on this device; nothing to sign out")
            }
            account = current
        } else if app == nil {
            // An administrator on a private device: the most recently signed-in account, everywhere
            // (repeat to sign out the others).
            guard let latest = try AccountRecords.allStatuses(in: tx).filter(\.signedIn)
                .max(by: { ($0.signedInAt ?? .distantPast) < ($1.signedInAt ?? .distantPast) })?.account else {
                throw SharedDeviceError(.noCurrentAccount, "no account is signed in on this device; nothing to sign out")
            }
            account = latest
        } else {
            // The app's principal, while the app still holds it (after a local sign-out it is only the
            // app's "previous"); a wipe everywhere may still name it.
            guard let app, let principal = try AccountRecords.principal(of: app.appID, in: tx),
                  try wipeEverywhere || self.current(for: app, previous: principal, in: tx) != nil else {
                throw SharedDeviceError(.noCurrentAccount, "no account is signed in for this app; nothing to sign out")
            }
            account = principal
        }
        let global = shared || wipeEverywhere || app == nil
        let groups = global ? Self.allAppGroups(policy: policy, app: app) : app?.accessGroups ?? []
        let wiper = try AppIdentity(appID: "devicectl", accessGroups: groups)
        let removed = try tokenCache.removeCredentials(homeAccountID: account.homeAccountID, environment: account.environment,
                                                       as: wiper, in: tx)
        // After a local sign-out the account stays signed in while another app's groups still hold it.
        let stillSignedIn = try !global && tokenCache.account(
            homeAccountID: account.homeAccountID, environment: account.environment,
            as: try AppIdentity(appID: "devicectl", accessGroups: Self.allAppGroups(policy: policy, app: app)), in: tx) != nil
        if !stillSignedIn {
            var status = try AccountRecords.status(of: account, in: tx)
                ?? AccountStatus(account: account, signedIn: true, signedInBy: nil, signedInAt: nil, signedOutAt: nil, signOutReason: nil)
            status.signedIn = false
            status.signedOutAt = tx.now
            status.signOutReason = reason
            try AccountRecords.setStatus(status, in: tx)
        }
        if shared { try AccountRecords.setCurrent(nil, in: tx) }
        if global {
            try AccountRecords.addTombstone(.init(homeAccountID: account.homeAccountID, environment: account.environment,
                                                  wipedAt: tx.now, reason: reason.rawValue, actor: actor, itemsRemoved: removed), in: tx)
        }
        try device.append(AuditEntry(type: .accountSignedOut, actor: actor, account: account.auditName, reason: reason.rawValue,
                                     correlationID: correlationID,
                                     details: ["scope": global ? "global" : "local", "itemsRemoved": "\(removed)",
                                               "accessGroups": "\(groups.count)", "homeAccountId": account.homeAccountID]),
                          in: tx, record: record, checkpoint: true)
        return SignOutOutcome(account: account, global: global, itemsRemoved: removed, accessGroups: groups.count)
    }

    // MARK: - Shift switch

    /// What a shift switch did.
    public struct SwitchOutcome: Sendable {
        /// The sign-out of the worker whose shift ended (`nil` when nobody was signed in).
        public var signedOut: SignOutOutcome?
        /// The next worker, when the sign-in succeeded.
        public var signedIn: DeviceAccount?
        /// Why the sign-in failed; the sign-out stands.
        public var signInError: SharedDeviceError?
        /// The correlation id shared by the switch's audit events.
        public var correlationID: String
    }

    /// Ends the current worker's shift and signs the next one in as one audited step: `account.signed_out`,
    /// `account.signed_in` and `account.switched` share a correlation id. The sign-out commits first; if
    /// the sign-in then fails, the sign-out stands and the failure is returned in `signInError`.
    public func switchAccount(to response: TokenResponse, context: TokenRequestContext, app: AppIdentity,
                              reason: SignOutReason = .shiftEnd) throws(SharedDeviceError) -> SwitchOutcome {
        let correlationID = Self.newCorrelationID()
        var outcome = SwitchOutcome(correlationID: correlationID)
        do {
            outcome.signedOut = try signOut(app: app, reason: reason, correlationID: correlationID)
        } catch where error.code == .noCurrentAccount {
            outcome.signedOut = nil
        }
        do {
            outcome.signedIn = try write { tx -> DeviceAccount in
                let (account, _) = try self.signIn(response, context: context, app: app, accessGroup: nil, correlationID: correlationID, in: tx)
                try self.device.append(AuditEntry(type: .accountSwitched, actor: app.appID, account: account.auditName, reason: reason.rawValue,
                                                  correlationID: correlationID,
                                                  details: ["from": outcome.signedOut?.account?.auditName ?? "(nobody)", "to": account.auditName]),
                                       in: tx)
                return account
            }
            signal.notify()
        } catch {
            outcome.signInError = error
        }
        return outcome
    }

    // MARK: - Tokens

    /// The cached, unexpired access token of the current account for `scopes` (a silent token call's
    /// cache step). Shared mode checks the account first.
    /// - Throws: `noCurrentAccount` when nobody is signed in (shared) or the app has no account (private);
    ///   `currentAccountMismatch` when `account` is not the current one.
    /// - Returns: `nil` when no unexpired token covers the scopes (refresh next).
    public func accessToken(for app: AppIdentity, clientID: String, scopes: [String], account requested: DeviceAccount? = nil) throws(SharedDeviceError) -> AccessTokenCacheItem? {
        try read { tx in
            let previous = try AccountRecords.principal(of: app.appID, in: tx)
            guard let current = try self.current(for: app, previous: previous, in: tx) else {
                throw SharedDeviceError(.noCurrentAccount, "no account is signed in; sign a worker in first")
            }
            if let requested, !requested.isSameAccount(as: current) {
                throw SharedDeviceError(.currentAccountMismatch,
                    "the token call names \(requested.auditName), but the signed-in account is \(current.auditName); call currentAccount again")
            }
            return try self.tokenCache.accessToken(homeAccountID: current.homeAccountID, environment: current.environment,
                                                   clientID: clientID, realm: current.realm, scopes: scopes, as: app, in: tx)
        }
    }

    // MARK: - Helpers

    /// MSAL's group for an app's tokens: `com.microsoft.adalcache` when entitled, else the app's first group.
    static func tokenGroup(of app: AppIdentity) -> String {
        app.isEntitled(to: TokenCache.defaultAccessGroup) ? TokenCache.defaultAccessGroup : app.accessGroups.first ?? TokenCache.defaultAccessGroup
    }

    /// Every access group of every app in the policy (plus the acting app's), sorted.
    static func allAppGroups(policy: DevicePolicy?, app: AppIdentity?) -> [String] {
        var groups = Set(policy?.apps.flatMap(\.accessGroups) ?? [])
        groups.formUnion(app?.accessGroups ?? [])
        return groups.sorted()
    }

    private func mode(in tx: StoreTransaction) throws -> DevicePolicy.Mode {
        try DeviceRecordStore.record(in: tx)?.mode ?? .private
    }

    static func newCorrelationID() -> String { UUID().uuidString.lowercased() }

    func read<T>(_ body: @escaping (StoreTransaction) throws -> T) throws(SharedDeviceError) -> T {
        try sharedDeviceErrors { try store.readTransaction(body) }
    }

    func write<T>(_ body: @escaping (StoreTransaction) throws -> T) throws(SharedDeviceError) -> T {
        try sharedDeviceErrors { try store.writeTransaction(body) }
    }
}

extension CurrentAccount {
    /// `(current, previous)`, as MSAL's completion block passes them.
    public var pair: (current: DeviceAccount?, previous: DeviceAccount?) { (current, previous) }
}

extension AuditEventType {
    /// A worker signed in (shared mode: the device's account changed).
    public static let accountSignedIn = AuditEventType("account.signed_in")
    /// An account was signed out; `details.scope` is `global` or `local`.
    public static let accountSignedOut = AuditEventType("account.signed_out")
    /// A shift switch completed (with its sign-out and sign-in under the same correlation id).
    public static let accountSwitched = AuditEventType("account.switched")
}
