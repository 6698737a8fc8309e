public import BrokerContract
import KeychainStore
import Logging
import ProcessSandbox
import SharedDevice
import Synchronization

/// The processes connections act for (`ActForCaller`), by connection id: set once per connection, forgotten
/// when it closes.
final class ActingConnections: Sendable {
    private let acting = Mutex<[UInt64: HandedProcess]>([:])

    /// The process connection `connectionID` acts for, if any.
    func process(on connectionID: UInt64) -> HandedProcess? {
        acting.withLock { $0[connectionID] }
    }

    /// Connection `connectionID` acts for `process` from now on; false when it acts for one already.
    func act(for process: HandedProcess, on connectionID: UInt64) -> Bool {
        acting.withLock { acting in
            guard acting[connectionID] == nil else { return false }
            acting[connectionID] = process
            return true
        }
    }

    /// Connection `connectionID` closed.
    func remove(_ connectionID: UInt64) {
        _ = acting.withLock { $0.removeValue(forKey: connectionID) }
    }

    /// `caller` as its connection acts: the process it acts for (its pid, executable and sandbox; the
    /// connection's uid, which is that process's too), or `caller` unchanged.
    func caller(_ caller: BrokerCaller) -> BrokerCaller {
        guard let process = process(on: caller.connectionID) else { return caller }
        var acting = caller
        acting.handedOverBy = caller.pid
        acting.pid = process.pid
        acting.executable = process.executable
        acting.sandbox = process.sandbox
        return acting
    }
}

extension Broker {
    /// Serves every later call on the caller's connection as the process whose pidfd is descriptor
    /// `callerPidfd` of the caller (the MSAL bridge's D-Bus caller): identified from the process itself
    /// (`HandedProcess`), never from what the caller says. Only a host process may act for another, once
    /// per connection.
    /// - Throws: AccountError `actForCallerRefused` (why, and what to do) or `actForCallerUnsupported`.
    public func actForCaller(
        _ parameters: Broker1.ActForCaller.Parameters,
        context caller: BrokerCaller
    ) throws(BrokerFailure) -> Broker1.ActForCaller.Reply {
        if let acting = actingConnections.process(on: caller.connectionID) {
            throw Self.actForCallerRefused(
                "this connection acts for process \(acting.pid) already; open another connection to act for another process"
            )
        }
        if let reason = flatpakUnavailableReason {
            throw Self.actForCallerUnsupported(reason)
        }
        switch caller.sandbox {
        case .host:
            break
        case .unpinned:
            throw Self.actForCallerUnsupported(
                PeerPIDFD.unsupportedReason ?? "the broker did not pin the calling process to its connection"
            )
        case .flatpak(let app):
            throw Self.actForCallerRefused(
                "the calling process is the Flatpak app \(app.appID): only a host process may act for another; a Flatpak app calls as itself"
            )
        case .unidentified(let reason):
            throw Self.actForCallerRefused(
                "the broker could not tell which app the calling process is (\(reason)): only a host process may act for another"
            )
        }
        guard let peer = caller.process else {
            throw Self.actForCallerUnsupported("the broker kept no pidfd of the calling process (SO_PEERPIDFD)")
        }
        let process: HandedProcess
        do {
            process = try HandedProcess.identify(descriptor: parameters.callerPidfd, of: peer, uid: caller.uid)
        } catch {
            logger.debug(
                "ActForCaller refused",
                metadata: ["peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)", "reason": "\(error)"]
            )
            throw error.unsupported
                ? Self.actForCallerUnsupported(error.description) : Self.actForCallerRefused(error.description)
        }
        guard actingConnections.act(for: process, on: caller.connectionID) else {
            throw Self.actForCallerRefused("this connection acts for a process already; open another connection")
        }
        // The connection's slot is the acting app's from now on (its per-app share, within the same uid's).
        connections.connection(caller.connectionID, actsAs: process.sandbox)
        let acting = actingConnections.caller(caller)
        logger.debug(
            "connection acts for a caller process",
            metadata: [
                "peer.uid": "\(caller.uid)", "peer.pid": "\(caller.pid)", "caller.pid": "\(process.pid)",
                "caller.sandbox": "\(process.sandbox)",
            ]
        )
        let application = try? application(for: acting, audit: false)
        return Broker1.ActForCaller.Reply(
            uid: Int(acting.uid),
            appId: application?.app.appID,
            sandbox: Broker1.SandboxKind(acting.sandbox),
            flatpakAppId: acting.sandbox.flatpakAppID
        )
    }

    private static func actForCallerRefused(_ message: String) -> BrokerFailure {
        BrokerFailure(
            Broker1.AccountError(code: "actForCallerRefused", message: message, msalStatus: nil, identityCode: nil)
        )
    }

    private static func actForCallerUnsupported(_ message: String) -> BrokerFailure {
        BrokerFailure(
            Broker1.AccountError(
                code: "actForCallerUnsupported",
                message: "\(message); the MSAL bridge cannot hand its callers to the broker here",
                msalStatus: nil,
                identityCode: nil
            )
        )
    }
}
