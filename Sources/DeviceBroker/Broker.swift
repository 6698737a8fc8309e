public import BrokerContract
public import Foundation
public import IdentityClient
import KeychainStore
public import Logging
public import LoginSessions
public import ProcessSandbox
public import SharedDevice
import Synchronization
public import Varlink

/// The broker's service logic: every method of `org.sharedmode.Broker1` on top of the device's store,
/// account manager and identity client. It knows nothing of sockets: the daemon hands it each call with
/// the caller's kernel credentials and a way to reply.
///
/// The caller is the policy's app whose `uid` is the caller's uid; nothing the caller sends can change
/// that. A uid the policy does not list is refused (`CallerNotInPolicy`) and audited once per connection.
/// `handle` blocks on SQLite and crypto, so run it off any event loop (the daemon's server does); `replyAtOnce` only
/// reads (a silent token from the cache, the current account, the device's information), and may run on one.
public final class Broker: Sendable {
    /// The device whose store the broker owns.
    public let device: ManagedDevice
    /// The process's one account manager: every app's engine, the account events, the idle sign-out and
    /// the administrator's calls share its caches and change signal.
    let accounts: AccountManager
    let transport: any HTTPTransport
    let logger: Logger
    /// One application per app and policy revision, so each keeps its discovery cache.
    private let applications = Mutex<[String: (policySHA: String, application: ApplicationEngine)]>([:])
    private let policies: DevicePolicyCache
    /// Refusals, written to the audit log coalesced per uid, method and reason.
    let refusals: RefusalAudit
    /// The MSAL client ids used through the MSAL bridge (for `GetStatus`).
    let msalClients = MSALClientLedger()
    /// The back-off of failed password sign-ins, per username and per app, kept in the state directory.
    let passwordThrottle: PasswordThrottle
    /// Native sign-ins waiting for the worker's password or code.
    let nativeSignIns = NativeSignIns()
    /// Login-screen sign-ins waiting for the worker's password, code or device-code approval.
    let loginScreenSignIns: LoginScreenSignIns
    /// logind, through which the shift's login session is ended.
    let loginSessions: any LoginSessionControl
    /// The time the login session's graces run on (tests inject one).
    let sessionClock: any IdleClock
    /// The shift's login session, recorded in the state directory, and the sign-ins waiting for theirs.
    let shiftSessions: ShiftSessions
    /// Interactive sign-ins in progress, per app and per uid (`limits.pendingSignInsPerApp`).
    let pendingSignIns = Mutex<PendingCounts>(PendingCounts())
    /// Browser sign-ins in progress (each holds a loopback listener's thread), per uid, bounded over every
    /// uid by `browserSignInsInTotal`.
    let pendingBrowserSignIns = Mutex<[UInt32: Int]>([:])
    /// The most browser sign-ins pending over every app, beyond which an app that has one already is refused.
    let browserSignInsInTotal: Int
    let events: AccountEventHub
    /// The policy's idle sign-out.
    let idle: IdleMonitor
    /// Whether the last attempt to make the disk reserve failed (to log the change once).
    let diskReserveMissing = Mutex(false)
    /// When the broker was made (for `GetStatus`).
    let startedAt = Date()
    /// Who is connected, as the server in front of the broker knows them.
    let connections: any BrokerConnections
    /// Why the policy's Flatpak apps cannot be served (the server in front does not read sandboxes), or nil.
    let flatpakUnavailableReason: String?

    /// The processes connections act for (`ActForCaller`: the MSAL bridge's callers).
    let actingConnections = ActingConnections()

    /// The callers connected now (as the process a connection acts for, where it does).
    var connectedCallers: [BrokerCaller] { connections.connectedCallers().map(actingConnections.caller) }

    /// A broker for `device`.
    /// - Parameters:
    ///   - transport: the way to the identity provider.
    ///   - idleClock: the time the idle sign-out runs on (tests inject one).
    ///   - passwordClock: the time the password back-off runs on (tests inject one).
    ///   - logger: where the broker's debug events go; never a token or a secret.
    ///   - browserSignInsInTotal: the most browser sign-ins pending over every app (each holds a thread
    ///     while it listens for the browser); an app with none pending may still start one beyond it.
    ///   - connections: who is connected (the server's registry, for `GetStatus`); none by default.
    ///   - loginSessions: logind, to end the shift's login session at a sign-out; by default one that
    ///     cannot be reached (every call fails: "logind is not available").
    ///   - sessionClock: the time the login screen's sign-ins and the session's graces run on.
    ///   - identifiesSandboxes: whether the server in front reads its callers' sandboxes (as
    ///     `VarlinkServerConfiguration.identifiesSandboxes`); without, the policy's Flatpak apps are refused
    ///     and `GetStatus` says why.
    public init(
        device: ManagedDevice,
        transport: any HTTPTransport = CurlTransport(),
        idleClock: any IdleClock = SystemIdleClock(),
        passwordClock: @escaping @Sendable () -> Date = Date.init,
        browserSignInsInTotal: Int = Broker.defaultBrowserSignInsInTotal,
        connections: any BrokerConnections = NoBrokerConnections(),
        loginSessions: any LoginSessionControl = UnavailableLoginSessions(),
        sessionClock: any IdleClock = SystemIdleClock(),
        identifiesSandboxes: Bool = PeerPIDFD.kernelSupports,
        logger: Logger = Logger.current
    ) {
        self.device = device
        flatpakUnavailableReason =
            identifiesSandboxes
            ? nil
            : PeerPIDFD.unsupportedReason
                ?? "deviced was started with --without-peer-pidfd, as on a kernel before Linux 6.5, so it does not tell sandboxed apps apart"
        self.loginSessions = loginSessions
        self.sessionClock = sessionClock
        loginScreenSignIns = LoginScreenSignIns(clock: { sessionClock.now() })
        self.connections = connections
        self.browserSignInsInTotal = max(browserSignInsInTotal, 1)
        self.transport = transport
        self.logger = logger
        let policies = DevicePolicyCache(device: device)
        let accounts = AccountManager(device: device, logger: logger)
        self.accounts = accounts
        let events = AccountEventHub(accountManager: accounts)
        self.policies = policies
        self.events = events
        refusals = RefusalAudit(device: device)
        let stateDirectory = device.store.databaseURL.deletingLastPathComponent()
        shiftSessions = ShiftSessions(
            file: StateFile(
                directory: stateDirectory,
                fileName: "shift-session.json",
                subject: "the shift's session",
                logger: logger
            ),
            pendingFile: StateFile(
                directory: stateDirectory,
                fileName: "login-pending.json",
                subject: "the workers whose session has not opened",
                logger: logger
            )
        )
        passwordThrottle = PasswordThrottle(
            file: PasswordThrottleFile(directory: stateDirectory, logger: logger),
            clock: passwordClock
        )
        idle = IdleMonitor(
            clock: idleClock,
            accounts: accounts,
            events: events,
            file: IdleActivityFile(stateDirectory: stateDirectory),
            logger: logger,
            policy: { (try? policies.current())?.policy }
        )
    }

    /// Moves token-cache items an earlier version kept beside apps' items into the token cache's namespace
    /// (the daemon calls this once before it serves). - Returns: how many moved.
    public func moveTokenCacheIntoNamespace() throws(SharedDeviceError) -> Int {
        try accounts.moveTokenCacheIntoNamespace()
    }

    /// Runs the broker's background work until the task is cancelled (the daemon runs it beside its
    /// server): the policy's idle sign-out, and the watch of the shift's login session
    /// (`startLoginSessionWatch`).
    public func runIdleMonitor() async {
        let watch = startLoginSessionWatch()
        await idle.run()
        watch.cancel()
        await watch.value
    }

    /// Calls that last as long as their connection (the account-change subscription).
    public func isLongLived(_ call: VarlinkCall) -> Bool {
        call.method == Broker1.SubscribeAccountChanges.qualifiedName
    }

    /// The connection `connectionID` closed: forget what the broker kept for it.
    public func connectionClosed(_ connectionID: UInt64) {
        actingConnections.remove(connectionID)
    }

    /// Answers one call of `org.sharedmode.Broker1` from `caller`; `reply` sends a reply (and returns
    /// false once the caller is gone).
    public func handle(
        _ call: VarlinkCall,
        caller connectionCaller: BrokerCaller,
        reply: @escaping @Sendable (VarlinkReply) async -> Bool
    ) async {
        // A connection that acts for another process (ActForCaller) is that process from then on.
        let caller = actingConnections.caller(connectionCaller)
        var logger = self.logger
        // Only this function's own lines (debug) use the call's metadata: setting it costs a copy of the
        // handler's metadata on every call (4–5 % of a silent token in-process), so only when they print.
        if logger.logLevel <= .debug {
            logger[metadataKey: "broker.method"] = "\(call.member)"
            logger[metadataKey: "peer.uid"] = "\(caller.uid)"
        }
        let decoded: Broker1.Call
        do {
            decoded = try Broker1.Call(call)
        } catch {
            logger.debug("broker call refused", metadata: ["varlink.error": "\(error.reply.error ?? "")"])
            _ = await reply(error.reply)
            return
        }
        let isActivity = Self.isActivity(decoded)
        // After an account change the reserve a full disk's sign-out used is made again if there is room.
        defer { if Self.changesAccounts(decoded) { remakeDiskReserveIfMissing() } }
        do {
            // The identity provider's exchanges made for this caller count against its share of the slots.
            let outcome = await CurlExchangeSlots.Owner.$current.withValue(caller.uid) {
                () async -> Result<Void, BrokerFailure> in
                do throws(BrokerFailure) {
                    try await dispatch(decoded, more: call.more, context: caller, reply: reply)
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
            try outcome.get()
            if isActivity { idle.recordActivity() }
        } catch {
            if Task.isCancelled {
                // The connection closed during the call (the app went away or cancelled): whatever the call
                // was doing (a sign-in's polling, a browser's listener) has stopped, and nothing was kept.
                logger.debug(
                    "broker call stopped: the caller went away",
                    metadata: ["varlink.error": "\(error.reply.error ?? "")"]
                )
                return
            }
            logger.debug("broker call refused", metadata: ["varlink.error": "\(error.reply.error ?? "")"])
            // An app's call the keychain or the account manager answered (an item not found, …) was the worker's too.
            if isActivity, error.isAnswerToApp { idle.recordActivity() }
            _ = await reply(error.reply)
        }
    }

    /// The calls an app makes on the worker's behalf: each restarts the idle clock. Not the ones a
    /// background service makes (who am I, device information, status, the long-lived subscription) nor a
    /// sign-out. A caller the policy does not list does not count.
    static func isActivity(_ call: Broker1.Call) -> Bool {
        switch call {
        case .getCurrentAccount, .getAccounts, .acquireTokenSilent, .signInWithDeviceCode, .signInWithBrowser,
            .signInWithPassword, .switchWorker,
            .startNativeSignIn, .resendNativeSignInCode, .submitNativeSignIn,
            .addGenericPassword, .findGenericPassword, .updateGenericPassword, .deleteGenericPassword,
            .listGenericPasswords:
            true
        case .getCaller, .actForCaller, .getStatus, .reportActivity, .getDeviceInformation, .signOut,
            .subscribeAccountChanges,
            // The login screen's calls come from root's PAM stack, not from an app on the worker's behalf.
            .startLoginScreenSignIn, .submitLoginScreenSignIn, .awaitLoginScreenDeviceCode, .openLoginSession,
            .closeLoginSession:
            false
        }
    }

    /// Whether `call` signs a worker in or out (or switches).
    private static func changesAccounts(_ call: Broker1.Call) -> Bool {
        switch call {
        case .signInWithDeviceCode, .signInWithBrowser, .signInWithPassword, .submitNativeSignIn, .startNativeSignIn,
            .signOut, .switchWorker, .submitLoginScreenSignIn, .awaitLoginScreenDeviceCode, .closeLoginSession:
            true
        case .getCaller, .actForCaller, .getStatus, .reportActivity, .getDeviceInformation, .getCurrentAccount,
            .getAccounts, .acquireTokenSilent,
            .resendNativeSignInCode, .addGenericPassword, .findGenericPassword, .updateGenericPassword,
            .deleteGenericPassword,
            .listGenericPasswords, .subscribeAccountChanges, .startLoginScreenSignIn, .openLoginSession:
            false
        }
    }

    // MARK: - Who is calling

    /// The policy's app for the caller's uid, signing in at `authority` (one of the policy's
    /// `knownAuthorities`: `callAuthority`) or at the policy's issuer. One engine per app and authority.
    /// - Throws: `CallerNotInPolicy` (audited, coalesced per uid: see `RefusalAudit`) when the policy lists no app with
    ///   that uid or the device is not provisioned; AccountError `authorityNotAllowed`.
    func application(
        for caller: BrokerCaller,
        audit: Bool = true,
        authority requested: String? = nil
    ) throws(BrokerFailure) -> ApplicationEngine {
        let (record, policy) = try currentPolicy()
        guard let record, let policy, let app = policy.app(uid: caller.uid, sandbox: caller.sandbox) else {
            if audit { auditRefusal(of: caller, provisioned: record != nil) }
            throw .callerNotInPolicy(caller, provisioned: record != nil)
        }
        let authority = try Self.callAuthority(requested, policy: policy)
        return try application(of: app, authority: authority, record: record, policy: policy)
    }

    /// The engine made already for `caller` at `authority` as of the policy last read (nothing is read), and the
    /// store's change stamp then; nil when no policy was read yet, it lists no app for the caller or not the
    /// authority, or no engine was made for it (making one reads the store's policy as it is now and audits an app
    /// it does not list). The caller then goes the way that reads the store, which refuses and audits as it should.
    func applicationAsLastKnown(
        for caller: BrokerCaller,
        authority requested: String? = nil
    ) -> (application: ApplicationEngine, stamp: StoreChangeStamp)? {
        guard let known = policies.lastKnown(), let record = known.record, let policy = known.policy,
            let app = policy.app(uid: caller.uid, sandbox: caller.sandbox)
        else { return nil }
        // (Not `try?`: the policy's issuer is a nil authority, which `try?` would take for a failure.)
        do {
            let authority = try Self.callAuthority(requested, policy: policy)
            return madeApplication(of: app, authority: authority, record: record).map { ($0, known.stamp) }
        } catch {
            return nil
        }
    }

    /// The engine made already for the policy's `app` at `authority` (nil: the policy's issuer) under `record`'s
    /// policy, if any.
    private func madeApplication(
        of app: DevicePolicy.App,
        authority: String?,
        record: DeviceRecord
    )
        -> ApplicationEngine?
    {
        let key = authority.map { "\(app.id) \($0)" } ?? app.id
        guard let made = applications.withLock({ $0[key] }), made.policySHA == record.policySHA256 else { return nil }
        return made.application
    }

    /// The engine of the policy's `app` at `authority` (nil: the policy's issuer), one per app and authority
    /// for each policy revision.
    func application(
        of app: DevicePolicy.App,
        authority: String? = nil,
        record: DeviceRecord,
        policy: DevicePolicy
    ) throws(BrokerFailure) -> ApplicationEngine {
        if let made = madeApplication(of: app, authority: authority, record: record) { return made }
        let key = authority.map { "\(app.id) \($0)" } ?? app.id
        var configuration = ApplicationEngineConfiguration(appID: app.id, policy: policy)
        if let authority { configuration.authority = authority }
        let application: ApplicationEngine
        do {
            application = try ApplicationEngine(
                configuration: configuration,
                device: device,
                transport: transport,
                accounts: accounts,
                logger: logger
            )
        } catch {
            throw BrokerFailure(error)
        }
        applications.withLock { $0[key] = (record.policySHA256, application) }
        return application
    }

    /// The canonical form of a call's `authority`, which must be the policy's issuer or one of its
    /// `knownAuthorities` (MSAL's rule for B2C authorities); nil for the policy's issuer (or none given).
    /// - Throws: `InvalidParameter` for an overlong value; AccountError `authorityNotAllowed`.
    static func callAuthority(_ requested: String?, policy: DevicePolicy) throws(BrokerFailure) -> String? {
        guard let requested, !requested.isEmpty else { return nil }
        guard requested.utf8.count <= 2048 else { throw .invalidParameter("authority") }
        guard let listed = policy.authority.listedAuthority(requested) else {
            throw BrokerFailure(
                Broker1.AccountError(
                    code: "authorityNotAllowed",
                    message: policy.authority.unlistedAuthorityMessage(requested),
                    msalStatus: nil,
                    identityCode: nil
                )
            )
        }
        return policy.authority.isIssuer(listed) ? nil : listed.absoluteString
    }

    /// The device record and its policy, decrypted and decoded again only when the store changed.
    func currentPolicy() throws(BrokerFailure) -> (record: DeviceRecord?, policy: DevicePolicy?) {
        try policies.current()
    }

    private func auditRefusal(of caller: BrokerCaller, provisioned: Bool) {
        guard provisioned else { return }
        var details = ["pid": "\(caller.pid)", "gid": "\(caller.gid)"].merging(caller.sandboxDetails) { $1 }
        details["executable"] = caller.executable
        logger.debug(
            "caller not in device policy refused",
            metadata: ["peer.uid": "\(caller.uid)", "peer.sandbox": "\(caller.sandbox)"]
        )
        let reason: String
        switch caller.sandbox {
        case .host, .unpinned: reason = "uid not in device policy"
        case .flatpak: reason = "Flatpak app not in device policy"
        case .unidentified: reason = "caller's sandbox could not be identified"
        }
        refusals.refused(
            RefusalAudit.Kind(uid: caller.uid, method: "", reason: reason, app: caller.appKey),
            AuditEntry(type: .keychainAccessDenied, actor: caller.actor, reason: reason, details: details)
        )
    }

    /// Who the broker takes the caller to be, and the state directory it serves.
    public func getCaller(
        _ parameters: Broker1.GetCaller.Parameters,
        context caller: BrokerCaller
    ) -> Broker1.GetCaller.Reply {
        let application = try? application(for: caller, audit: false)
        return Broker1.GetCaller.Reply(
            uid: Int(caller.uid),
            appId: application?.app.appID,
            accessGroups: application?.app.accessGroups ?? [],
            administrator: isAdministrator(caller),
            stateDirectory: device.store.databaseURL.deletingLastPathComponent().path,
            sandbox: Broker1.SandboxKind(caller.sandbox),
            flatpakAppId: caller.sandbox.flatpakAppID
        )
    }

    /// Root, or a member of the policy's `administratorsGroup` (by the caller's gid at connect time, or
    /// the group's member list in the system's group database).
    func isAdministrator(_ caller: BrokerCaller) -> Bool {
        if caller.uid == 0 { return true }
        guard let name = (try? currentPolicy())?.policy?.administratorsGroup,
            let group = UserDatabase.groupEntry(named: name)
        else { return false }
        if caller.gid == group.gid { return true }
        guard let user = UserDatabase.user(uid: caller.uid) else { return false }
        return user.gid == group.gid || group.members.contains(user.name)
    }
}

// The broker implements the interface's generated service: `handle` decodes each call and `dispatch`
// routes it to the method of the same name (in the `Broker+…` files).
extension Broker: Broker1.Service {
    /// Who is calling, as the kernel said when the connection was accepted.
    public typealias Context = BrokerCaller
    /// The error reply a refused call gets.
    public typealias Failure = BrokerFailure

    /// The device's mode and registration; any caller may ask.
    public func getDeviceInformation(
        _ parameters: Broker1.GetDeviceInformation.Parameters,
        context caller: BrokerCaller
    )
        -> Broker1.GetDeviceInformation.Reply
    {
        // From the record and policy the broker keeps decoded (decrypting the record and decoding its policy at
        // every call cost more than the rest of the call); the store's answer when it cannot be read.
        guard let (record, policy) = try? currentPolicy() else {
            return Broker1.GetDeviceInformation.Reply(
                information: Broker1.DeviceInformation(device.information().information)
            )
        }
        let information = record.map { DeviceInformation(record: $0, policy: policy) } ?? .default
        return Broker1.GetDeviceInformation.Reply(information: Broker1.DeviceInformation(information))
    }
}
