import BrokerContract
import Varlink

/// deviced as the helper reaches it: the blocking varlink client on its socket, trusted only when the
/// listener runs as root (`SO_PEERCRED`, checked before anything is sent: the helper runs as root in a
/// greeter and sends a worker's password). Every failure is a `PamFailure` whose message names the socket.
struct BrokerLink {
    /// The socket.
    let socket: String
    /// What a failure of the link itself returns: PAM_AUTHINFO_UNAVAIL in authentication,
    /// PAM_SESSION_ERR in the session phase.
    let unavailable: PamCode
    private let connection: VarlinkConnection

    /// Connects to deviced at `socket` and checks that root listens there.
    init(socket: String, unavailable: PamCode) throws(PamFailure) {
        self.socket = socket
        self.unavailable = unavailable
        do {
            connection = try VarlinkConnection(unixSocketPath: socket)
        } catch {
            switch error.code {
            case .notRunning:
                throw PamFailure(
                    unavailable,
                    "The sign-in service is not running: nothing listens on \(socket). Ask an administrator to "
                        + "start deviced."
                )
            default:
                throw PamFailure(unavailable, "The sign-in service at \(socket) cannot be reached: \(error.message)")
            }
        }
        let peer: VarlinkPeer
        do {
            peer = try connection.peer()
        } catch {
            throw PamFailure(unavailable, "The sign-in service at \(socket) cannot be checked: \(error.message)")
        }
        guard peer.uid == 0 else {
            connection.close()
            throw PamFailure(
                unavailable,
                "The sign-in service at \(socket) was refused: it runs as uid \(peer.uid), not root."
            )
        }
    }

    /// Calls `method` and returns its reply; an error reply is mapped by `refusal`.
    func call<Method: VarlinkMethod>(
        _ method: Method.Type,
        _ parameters: Method.Parameters,
        timeout: Duration? = .seconds(120)
    ) throws(PamFailure) -> Method.Reply {
        try send(VarlinkCall(method, parameters))
        return try decode(method, try nextReply(timeout: timeout))
    }

    /// Sends a `more` call of `method`; read its replies with `next(_:)`.
    func stream<Method: VarlinkMethod>(_ method: Method.Type, _ parameters: Method.Parameters) throws(PamFailure) {
        try send(VarlinkCall(method, parameters, more: true))
    }

    /// The next reply of a `more` call of `method`, and whether more follow.
    func next<Method: VarlinkMethod>(_ method: Method.Type) throws(PamFailure) -> (Method.Reply, continues: Bool) {
        let reply = try nextReply(timeout: nil)
        return (try decode(method, reply), reply.continues)
    }

    private func send(_ call: VarlinkCall) throws(PamFailure) {
        do {
            try connection.send(call)
        } catch {
            throw PamFailure(unavailable, "The sign-in service at \(socket) closed the connection: \(error.message)")
        }
    }

    private func nextReply(timeout: Duration?) throws(PamFailure) -> VarlinkReply {
        do {
            return try connection.nextReply(timeout: timeout)
        } catch {
            throw PamFailure(unavailable, "The sign-in service at \(socket) did not answer: \(error.message)")
        }
    }

    private func decode<Method: VarlinkMethod>(
        _ method: Method.Type,
        _ reply: VarlinkReply
    ) throws(PamFailure)
        -> Method.Reply
    {
        if reply.error != nil { throw refusal(reply) }
        do {
            return try Method.Reply(varlinkFields: reply.parameters)
        } catch {
            throw PamFailure(unavailable, "The sign-in service at \(socket) sent a reply this helper cannot read.")
        }
    }

    /// The PAM code and message for an error reply.
    func refusal(_ reply: VarlinkReply) -> PamFailure {
        let decoded: Broker1.ErrorReply?
        do { decoded = try Broker1.ErrorReply(reply) } catch { decoded = nil }
        switch decoded {
        case .accountError(let error)?: return accountRefusal(error)
        case .limitExceeded(let error)?:
            switch error.limit {
            case .passwordBackoff, .passwordSignInInProgress: return PamFailure(.authError, error.message)
            default: return PamFailure(unavailable, error.message)
            }
        case .callerNotInPolicy(let error)?: return PamFailure(unavailable, error.message)
        case .keychainError(let error)?: return PamFailure(unavailable, error.message)
        case .protocolError(let error)?:
            return PamFailure(unavailable, "The sign-in service refused the call: \(error.reason)")
        case .tooManyConnections?: return PamFailure(unavailable, "The sign-in service is busy. Try again.")
        case nil: break
        }
        switch reply.error ?? "" {
        case "org.varlink.service.PermissionDenied":
            return PamFailure(unavailable, "The sign-in service at \(socket) refused the login screen.")
        case "org.varlink.service.MethodNotImplemented", "org.varlink.service.MethodNotFound":
            return PamFailure(
                unavailable,
                "The sign-in service at \(socket) does not offer signing in at the login screen."
            )
        default:
            return PamFailure(unavailable, "The sign-in service refused: \(reply.error ?? "an error")")
        }
    }

    private func accountRefusal(_ error: Broker1.AccountError) -> PamFailure {
        switch error.code {
        case "localAccount": return PamFailure(.userUnknown, nil)
        case "accountAlreadySignedIn":
            return PamFailure(.authError, "Another worker is signed in on this device: \(error.message)")
        case "noCurrentAccount", "signInNotFound":
            return PamFailure(unavailable == .sessionError ? .sessionError : .authError, error.message)
        case "identity":
            switch error.identityCode ?? "" {
            case "invalid_credentials", "invalid_grant": return PamFailure(.authError, "Wrong name or password.")
            case "invalid_code": return PamFailure(.authError, "Wrong code.")
            case "authority_unreachable":
                return PamFailure(
                    .authInfoUnavailable,
                    "The sign-in authority cannot be reached. Check the network, then try again."
                )
            case "user_canceled", "access_denied", "device_code_expired", "expired_token":
                return PamFailure(.authError, error.message)
            default: return PamFailure(.authError, error.message)
            }
        default:
            // flowNotAllowed, notProvisioned, appNotInPolicy, the login screen not configured, …
            return PamFailure(unavailable, error.message)
        }
    }
}
