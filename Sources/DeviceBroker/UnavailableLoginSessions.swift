public import LoginSessions

/// The login manager of a broker that was given none: every call fails with "logind is not available",
/// so a recorded session is never taken for gone and a sign-out still completes (the failure is logged).
public struct UnavailableLoginSessions: LoginSessionControl {
    /// A login manager that cannot be reached.
    public init() {}

    private static let error = LoginSessionError(
        "logind is not available to the broker (no system bus or no logind); deviced ends no login session"
    )

    public func sessionExists(_ id: String) async throws(LoginSessionError) -> Bool { throw Self.error }
    public func sessionUser(_ id: String) async throws(LoginSessionError) -> UInt32? { throw Self.error }
    public func terminateSession(_ id: String) async throws(LoginSessionError) { throw Self.error }
    public func killSession(_ id: String, signal: Int32) async throws(LoginSessionError) { throw Self.error }
    public func lockSession(_ id: String) async throws(LoginSessionError) { throw Self.error }
    /// No session is ever reported removed: the stream ends at once.
    public func removedSessions() -> AsyncStream<String> { AsyncStream { $0.finish() } }
}
