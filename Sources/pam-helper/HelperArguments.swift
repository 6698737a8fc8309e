import BrokerContract

/// The helper's command line, as the PAM module writes it: the command, then `--name value` pairs.
struct HelperArguments: Sendable {
    /// What the module asks for.
    enum Command: String, Sendable {
        /// pam_sm_authenticate: sign the worker in.
        case authenticate
        /// pam_sm_open_session: record the shift's logind session.
        case openSession = "open-session"
        /// pam_sm_close_session: the session ended.
        case closeSession = "close-session"
    }

    var command: Command
    /// deviced's socket.
    var socket = Broker1.defaultSocketPath
    /// Where the sign-in happens (the PAM service, tty, seat, remote host), for the audit log.
    var loginScreen = Broker1.LoginScreen(service: "unknown")
    /// The name the worker typed (authenticate), or the session's user (the session commands).
    var user: String?
    /// The flow the module's `flow=` argument names.
    var flow: Broker1.LoginFlow?
    /// The app the module's `app=` argument names.
    var app: String?
    /// logind's session id (the session commands).
    var sessionID: String?
    /// The sign-in's correlation id (open-session).
    var correlationID: String?

    /// A command line that is not the module's.
    struct UsageError: Error, Sendable {
        var message: String
    }

    /// Parses `arguments` (without the program's name).
    static func parse(_ arguments: [String]) throws(UsageError) -> HelperArguments {
        guard let first = arguments.first, let command = Command(rawValue: first) else {
            throw UsageError(
                message: "usage: sharedmode-pam-helper authenticate|open-session|close-session [--name value]... "
                    + "(the PAM module pam_sharedmode runs it; it is not for use by hand)"
            )
        }
        var parsed = HelperArguments(command: command)
        var index = 1
        while index < arguments.count {
            let name = arguments[index]
            guard index + 1 < arguments.count else { throw UsageError(message: "\(name) needs a value") }
            let value = arguments[index + 1]
            switch name {
            case "--socket": parsed.socket = value
            case "--service": parsed.loginScreen.service = value
            case "--tty": parsed.loginScreen.tty = value
            case "--seat": parsed.loginScreen.seat = value
            case "--rhost": parsed.loginScreen.remoteHost = value
            case "--user": parsed.user = value
            case "--flow":
                let flow = Broker1.LoginFlow(rawValue: value)
                guard flow.isKnown else { throw UsageError(message: "unknown flow \(value)") }
                parsed.flow = flow
            case "--app": parsed.app = value
            case "--session-id": parsed.sessionID = value
            case "--correlation-id": parsed.correlationID = value
            default: throw UsageError(message: "unknown option \(name)")
            }
            index += 2
        }
        return parsed
    }
}
