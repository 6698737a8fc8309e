import Foundation
import KeychainStore
public import Logging
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
/// let accounts = AccountManager(device: ManagedDevice(store: store, logger: logger), logger: logger)
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
    /// Where sign-ins, sign-outs, switches and token lookups are reported (accounts by name, never a token).
    let logger: Logger

    /// The last `currentAccount` answer per app and the store state it was read from.
    let cache = Mutex<[AppIdentity: (stamp: StoreChangeStamp, answer: CurrentAccount)]>([:])
    /// The last silent-token answer per app, client and scopes, and the store state it was read from: while
    /// nothing is committed and the token has not expired, the answer stands (no decryption).
    let silentCache = Mutex<
        [SilentLookup: (stamp: StoreChangeStamp, account: DeviceAccount, token: AccessTokenCacheItem)]
    >([:])

    /// An account manager over `device`'s store.
    /// - Parameters:
    ///   - tokenCache: the MSAL-schema token cache the apps' tokens live in.
    ///   - logger: where sign-in, sign-out, switch and silent-token events go (debug and trace); by default
    ///     the task-local `Logger.current`.
    public init(device: ManagedDevice, tokenCache: TokenCache = TokenCache(), logger: Logger = Logger.current) {
        self.device = device
        self.tokenCache = tokenCache
        self.logger = logger
        signal = ChangeSignal(directory: device.store.databaseURL.deletingLastPathComponent())
    }

    var store: KeychainStore { device.store }

    /// What a silent token lookup asks for.
    struct SilentLookup: Hashable {
        var app: AppIdentity
        var clientID: String
        var scopes: [String]
        var b2cPolicy: String?
    }

    /// MSAL's group for an app's tokens: `com.microsoft.adalcache` when entitled, else the app's first group.
    static func tokenGroup(of app: AppIdentity) -> String {
        app.isEntitled(to: TokenCache.defaultAccessGroup)
            ? TokenCache.defaultAccessGroup : app.accessGroups.first ?? TokenCache.defaultAccessGroup
    }

    /// Every access group of every app in the record's policy (plus the acting app's), sorted.
    func allAppGroups(record: DeviceRecord?, app: AppIdentity?) throws -> [String] {
        let policyGroups = try record.map { try device.appGroups(of: $0) }
        let appGroups = app?.accessGroups ?? []
        if let policyGroups, appGroups.allSatisfy(policyGroups.set.contains) { return policyGroups.sorted }
        return Set(appGroups).union(policyGroups?.sorted ?? []).sorted()
    }

    /// Moves token-cache items an earlier version kept beside apps' items into the token cache's namespace
    /// (`TokenCache.moveIntoNamespace`), in every group of the policy's apps; a daemon does this when it
    /// starts, before it serves anyone. - Returns: how many items moved.
    @discardableResult
    public func moveTokenCacheIntoNamespace() throws(SharedDeviceError) -> Int {
        let record = try device.record()
        return try sharedDeviceErrors {
            try tokenCache.moveIntoNamespace(groups: try allAppGroups(record: record, app: nil), in: store)
        }
    }

    func mode(in tx: StoreTransaction) throws -> DevicePolicy.Mode {
        try device.record(in: tx)?.mode ?? .private
    }

    static func newCorrelationID() -> String { CorrelationID.make() }

    func read<T>(_ body: @escaping (StoreTransaction) throws -> T) throws(SharedDeviceError) -> T {
        try sharedDeviceErrors { try store.readTransaction(body) }
    }

    func write<T>(_ body: @escaping (StoreTransaction) throws -> T) throws(SharedDeviceError) -> T {
        try sharedDeviceErrors { try store.writeTransaction(body) }
    }

    /// A write that must work on a full disk (a sign-out): see `KeychainStore.essentialWriteTransaction`.
    func essentialWrite<T>(_ body: @escaping (StoreTransaction) throws -> T) throws(SharedDeviceError) -> T {
        try sharedDeviceErrors { try store.essentialWriteTransaction(body) }
    }
}

extension AuditEventType {
    /// A worker signed in (shared mode: the device's account changed).
    public static let accountSignedIn = AuditEventType("account.signed_in")
    /// A password sign-in the identity provider refused (wrong username or password); the account is the
    /// username as typed, never the password.
    public static let accountSignInFailed = AuditEventType("account.sign_in_failed")
    /// An account was signed out; `details.scope` is `global` or `local`.
    public static let accountSignedOut = AuditEventType("account.signed_out")
    /// A shift switch completed (with its sign-out and sign-in under the same correlation id).
    public static let accountSwitched = AuditEventType("account.switched")
}
