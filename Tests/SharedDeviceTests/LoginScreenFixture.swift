import BrokerContract
import DeviceBroker
import Foundation
import Logging
import LoginSessions
import SharedDevice
import Synchronization
import Testing
import Varlink

/// A kiosk whose login screen is configured: policies/kiosk-password.json (the password flow, against the
/// real local provider) with `session.user` = `nobody` (a local account every system has, no app's), a
/// broker in the test's process with a recording logind (`RecordingLoginSessions`) and a clock the test
/// moves (`ManualIdleClock`) for the session's graces.
final class LoginScreenKiosk: @unchecked Sendable {
    static let quiet = Logger(label: "login-screen-tests", factory: { _ in SwiftLogNoOpLogHandler() })
    static let sessionUser = "nobody"
    static let password1 = "worker1-password", password2 = "worker2-password"
    static let root = BrokerCaller(uid: 0, gid: 0, pid: 1, connectionID: 1)
    static let scanner = BrokerCaller(uid: 1001, gid: 1001, pid: 2, connectionID: 2)
    static let place = Broker1.LoginScreen(service: "login", tty: "tty1", seat: "seat0", remoteHost: nil)

    let fixture: DeviceFixture
    let sessions = RecordingLoginSessions()
    let clock = ManualIdleClock()
    private(set) var broker: Broker

    /// The kiosk with `session` merged into the policy's `session` (over `user`: nobody).
    init(session: [String: Any] = [:], configured: Bool = true) async throws {
        let provider = try await LocalIdentityProvider.shared()
        fixture = try DeviceFixture()
        try fixture.provision(
            try Policies.edited("kiosk-password.json") { document in
                var authority = document["authority"] as! [String: Any]
                authority["issuer"] = provider.issuer
                document["authority"] = authority
                var keys = document["session"] as! [String: Any]
                if configured { keys["user"] = LoginScreenKiosk.sessionUser }
                keys.merge(session) { _, new in new }
                document["session"] = keys
            }
        )
        broker = Self.broker(fixture.device, sessions: sessions, clock: clock)
    }

    /// The broker: its idle sign-out and the session's graces run on `clock`.
    static func broker(_ device: ManagedDevice, sessions: RecordingLoginSessions, clock: ManualIdleClock) -> Broker {
        Broker(device: device, idleClock: clock, loginSessions: sessions, sessionClock: clock, logger: quiet)
    }

    /// A new broker on the same state directory (the daemon restarted).
    func restartBroker() {
        broker = Self.broker(fixture.device, sessions: sessions, clock: clock)
    }

    /// Starts a login-screen sign-in for `username` as `caller` (root by default).
    func start(
        _ username: String,
        as caller: BrokerCaller = root,
        flow: Broker1.LoginFlow? = nil
    ) async throws(BrokerFailure) -> Broker1.LoginChallenge {
        try await broker.startLoginScreenSignIn(
            .init(username: username, loginScreen: Self.place, flow: flow),
            context: caller
        ).next
    }

    /// Signs `username` in at the login screen with `password`.
    func signIn(
        _ username: String,
        password: String,
        as caller: BrokerCaller = root
    ) async throws(BrokerFailure) -> Broker1.LoginScreenSignIn {
        let challenge = try await start(username, as: caller)
        return try await broker.submitLoginScreenSignIn(
            .init(signInId: challenge.signInId, password: password),
            context: caller
        ).signIn
    }

    /// `nobody`'s uid: the user the kiosk's sessions run as.
    static var sessionUID: UInt32 { UserDatabase.uid(ofUser: sessionUser)! }

    /// Signs `username` in at the login screen and opens their logind session `sessionID` (which logind
    /// then has, as `nobody`; `lingering`: it outlives TerminateSession).
    @discardableResult
    func signInAndOpen(
        _ username: String = "worker1",
        password: String = LoginScreenKiosk.password1,
        session sessionID: String,
        lingering: Bool = false
    ) async throws -> (signIn: Broker1.LoginScreenSignIn, opened: Broker1.OpenLoginSession.Reply) {
        let signIn = try await self.signIn(username, password: password)
        sessions.add(sessionID, uid: Self.sessionUID, lingering: lingering)
        let opened = try await open(sessionID, signIn.correlationId)
        return (signIn, opened)
    }

    func open(
        _ sessionID: String,
        _ correlationID: String
    ) async throws(BrokerFailure)
        -> Broker1.OpenLoginSession.Reply
    {
        try await broker.openLoginSession(
            .init(sessionId: sessionID, correlationId: correlationID, loginScreen: Self.place),
            context: Self.root
        )
    }

    func close(_ sessionID: String) async throws(BrokerFailure) -> Broker1.CloseLoginSession.Reply {
        try await broker.closeLoginSession(.init(sessionId: sessionID), context: Self.root)
    }

    /// The shift's session as GetStatus reports it.
    func shiftSession() throws -> Broker1.ShiftSession? {
        try broker.getStatus(.init(), context: Self.root).status.shiftSession
    }

    /// Whether `condition` holds within two minutes (a hang, never a speed: a busy machine gets there sooner).
    func eventually(_ condition: () throws -> Bool) async rethrows -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(120)
        while try !condition() {
            guard clock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// The first audit event of `type` after sequence `after`, once it is there (nil after two minutes).
    func event(_ type: String, after: Int64 = 0) async throws -> AuditEvent? {
        var found: AuditEvent?
        _ = try await eventually {
            found = try events(after: after).first { $0.type.rawValue == type }
            return found != nil
        }
        return found
    }

    /// The device's current worker's username, nil when nobody is signed in.
    func currentWorker() throws -> String? {
        try broker.getStatus(.init(), context: Self.root).status.current?.username
    }

    /// The audit events after sequence `after`.
    func events(after: Int64 = 0) throws -> [AuditEvent] {
        try fixture.device.auditEvents().filter { $0.sequence > after }
    }
}

/// The AccountError code of a refused call (nil: another error).
func accountErrorCode(_ error: BrokerFailure) -> String? {
    guard error.reply.error == Broker1.AccountError.qualifiedName else { return nil }
    return error.reply.parameters["code"]?.string
}

/// What the broker asked of logind, and sessions the test says exist. A session `lingers` past its
/// termination (a process that ignores SIGTERM) until it is killed with SIGKILL.
final class RecordingLoginSessions: LoginSessionControl {
    enum Call: Equatable, Sendable {
        case terminate(String)
        case kill(String, Int32)
        case lock(String)
    }

    private struct State {
        var sessions: [String: UInt32] = [:]
        var lingering: Set<String> = []
        var calls: [Call] = []
        var removed: [AsyncStream<String>.Continuation] = []
    }

    private let state = Mutex(State())
    /// Calls to wait for: each recorded call is yielded here too.
    let recorded: AsyncStream<Call>
    private let recordedContinuation: AsyncStream<Call>.Continuation

    init() {
        (recorded, recordedContinuation) = AsyncStream.makeStream(of: Call.self)
    }

    /// logind has session `id` of user `uid`; `lingering`: it outlives TerminateSession.
    func add(_ id: String, uid: UInt32, lingering: Bool = false) {
        state.withLock {
            $0.sessions[id] = uid
            if lingering { $0.lingering.insert(id) }
        }
    }

    /// logind removed session `id` (its SessionRemoved signal).
    func remove(_ id: String) {
        let continuations = state.withLock { state in
            state.sessions[id] = nil
            return state.removed
        }
        for continuation in continuations { continuation.yield(id) }
    }

    var calls: [Call] { state.withLock { $0.calls } }
    var liveSessions: Set<String> { state.withLock { Set($0.sessions.keys) } }

    private func record(_ call: Call) {
        state.withLock { $0.calls.append(call) }
        recordedContinuation.yield(call)
    }

    func sessionExists(_ id: String) async throws(LoginSessionError) -> Bool {
        state.withLock { $0.sessions[id] != nil }
    }

    func sessionUser(_ id: String) async throws(LoginSessionError) -> UInt32? {
        state.withLock { $0.sessions[id] }
    }

    func terminateSession(_ id: String) async throws(LoginSessionError) {
        state.withLock { state in
            if !state.lingering.contains(id) { state.sessions[id] = nil }
        }
        record(.terminate(id))
    }

    func killSession(_ id: String, signal: Int32) async throws(LoginSessionError) {
        state.withLock { state in
            if signal == SIGKILL {
                state.sessions[id] = nil
                state.lingering.remove(id)
            }
        }
        record(.kill(id, signal))
    }

    func lockSession(_ id: String) async throws(LoginSessionError) {
        record(.lock(id))
    }

    func removedSessions() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        state.withLock { $0.removed.append(continuation) }
        return stream
    }
}
