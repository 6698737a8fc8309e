/// What the broker asks of the system's login manager (logind on `org.freedesktop.login1`) to end a
/// worker's shift where it runs: the login session the worker signed in to at the login screen.
///
/// The daemon hands the broker logind's (`Logind`); the broker's tests hand it one that records what it
/// was asked (there is no logind outside a booted systemd), and the system test runs the real one.
public protocol LoginSessionControl: Sendable {
    /// Whether logind still has the session `id`, in any state: a session closing after TerminateSession
    /// whose processes have not all exited yet still counts (its scope goes once the last one has).
    /// - Throws: `LoginSessionError` when logind cannot be asked (no system bus, no logind).
    func sessionExists(_ id: String) async throws(LoginSessionError) -> Bool

    /// The local user the session `id` runs as, nil when logind has no such session.
    func sessionUser(_ id: String) async throws(LoginSessionError) -> UInt32?

    /// Ends the session: logind's `TerminateSession` (SIGTERM to every process of its scope).
    /// A session that is already gone is no error.
    func terminateSession(_ id: String) async throws(LoginSessionError)

    /// Sends `signal` to every process of the session (`KillSession(id, "all", signal)`).
    /// A session that is already gone is no error.
    func killSession(_ id: String, signal: Int32) async throws(LoginSessionError)

    /// Locks the session's screen (`LockSession`); its processes keep running.
    /// A session that is already gone is no error.
    func lockSession(_ id: String) async throws(LoginSessionError)

    /// The ids of sessions as logind removes them (its `SessionRemoved` signal), until the stream's
    /// consumer stops iterating.
    func removedSessions() -> AsyncStream<String>
}

/// logind could not be asked or refused.
public struct LoginSessionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What failed, with what to do; never a secret.
    public var message: String
    /// The D-Bus error name logind replied with, when it replied.
    public var dbusError: String?

    /// An error saying `message`.
    public init(_ message: String, dbusError: String? = nil) {
        self.message = message
        self.dbusError = dbusError
    }

    public var description: String { message }
}
