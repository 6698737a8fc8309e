import BrokerContract
import PamHomeReset

/// pam_sm_open_session's and pam_sm_close_session's half: the shift's logind session recorded in deviced
/// (OpenLoginSession), and its end (CloseLoginSession, which signs the worker out of every app). Where the
/// broker says so, the session's user gets a fresh home.
struct ShiftSession {
    let arguments: HelperArguments
    let channel: ModuleChannel

    /// Records the session as the shift's.
    func open() throws(PamFailure) {
        guard let sessionID = arguments.sessionID, let correlationID = arguments.correlationID else {
            throw PamFailure(.sessionError, "The login session has no session id or sign-in to record.")
        }
        let broker = try BrokerLink(socket: arguments.socket, unavailable: .sessionError)
        let reply = try broker.call(
            Broker1.OpenLoginSession.self,
            .init(sessionId: sessionID, correlationId: correlationID, loginScreen: arguments.loginScreen)
        )
        if reply.resetHome { try resetHome() }
    }

    /// The session ended: the worker is signed out (idempotent).
    func close() throws(PamFailure) {
        guard let sessionID = arguments.sessionID else { return }
        let broker = try BrokerLink(socket: arguments.socket, unavailable: .sessionError)
        let reply = try broker.call(Broker1.CloseLoginSession.self, .init(sessionId: sessionID))
        if reply.resetHome { try resetHome() }
    }

    private func resetHome() throws(PamFailure) {
        guard let user = arguments.user else { return }
        do {
            try HomeReset.reset(user: user)
        } catch {
            throw PamFailure(.sessionError, "The home of \(user) could not be reset: \(error.message)")
        }
    }
}
