import Logging
import LoginSessions

/// logind for the broker, on the system bus; nil where there is none (no system bus, as on a machine
/// without systemd): deviced then serves anyway with a broker that says logind is unavailable, so only
/// the policy's ending of the shift's session fails, saying why.
enum LoginManager {
    static func connect(logger: Logger) -> (any LoginSessionControl)? {
        do {
            return try Logind(logger: logger)
        } catch {
            logger.notice(
                "deviced: logind is unavailable; the shift's login session cannot be ended or locked",
                metadata: ["reason": "\(error.message)"]
            )
            return nil
        }
    }
}
