public import BrokerContract
import Foundation
import Logging
import LoginSessions
import SharedDevice
import Varlink

#if canImport(Glibc)
import Glibc
#endif

// The shift's login session: OpenLoginSession records it, CloseLoginSession signs its worker out, and any
// global sign-out ends it through logind as the policy's `session.onSignOut` says.
extension Broker {
    /// The actor of the broker's own login-session audit events and sign-outs.
    static let loginSessionActor = "deviced (login session)"

    /// A worker signed in at the login screen: unless their session opens within the policy's
    /// `session.openGraceSeconds`, they are signed out again (reason `session-end`).
    func expectLoginSession(_ outcome: LoginScreenSignInOutcome, policy: DevicePolicy) {
        let deadline = sessionClock.now().addingTimeInterval(TimeInterval(policy.session.openGraceSeconds))
        shiftSessions.expect(outcome.correlationID, account: outcome.account, deadline: deadline)
        armOpenGrace(outcome.correlationID, deadline: deadline)
    }

    /// Starts the wait for the grace of the sign-in `correlationID`, which ends at `deadline`.
    private func armOpenGrace(_ correlationID: String, deadline: Date) {
        let grace = Task { [self] in
            defer { shiftSessions.graceEnded(correlationID) }
            do {
                try await sessionClock.sleep(until: deadline)
            } catch {
                return
            }
            openGraceEnded(correlationID)
        }
        shiftSessions.keepGrace(correlationID, grace)
    }

    /// Stops every grace this broker waits on, as the daemon's end does (tests of a restart).
    @_spi(Testing) public func stopLoginSessionGraces() {
        shiftSessions.cancelGraces()
    }

    /// Waits until every grace kept so far has been acted on (tests move the session clock past them all,
    /// then wait here before they look).
    @_spi(Testing) public func settleLoginSessionGraces() async {
        await shiftSessions.settleGraces()
    }

    /// The grace of the sign-in `correlationID` ended: a worker whose session never opened is signed out.
    private func openGraceEnded(_ correlationID: String) {
        guard let expected = shiftSessions.takeExpected(correlationID) else { return }
        guard let current = try? accounts.accounts().first(where: \.signedIn)?.account,
            current.isSameWorker(as: expected.account), shiftSessions.record?.account.isSameWorker(as: current) != true
        else { return }
        logger.notice(
            "login screen: the worker's session never opened; signing them out",
            metadata: ["account": "\(current.auditName)", "correlation_id": "\(correlationID)"]
        )
        signOutForSessionEnd()
    }

    /// Signs the worker out of every app because their session ended; nobody signed in is no error.
    @discardableResult
    private func signOutForSessionEnd() -> AccountManager.SignOutOutcome? {
        do {
            return try accounts.signOut(app: nil, reason: .sessionEnd, actor: Self.loginSessionActor)
        } catch  where error.code == .noCurrentAccount {
            return nil
        } catch {
            logger.error(
                "login session: the worker could not be signed out at the session's end",
                metadata: ["error.code": "\(error.code)"]
            )
            return nil
        }
    }

    /// The login session of the worker signed in with `correlationId` opened: it becomes the shift's.
    public func openLoginSession(
        _ parameters: Broker1.OpenLoginSession.Parameters,
        context caller: BrokerCaller
    ) async throws(BrokerFailure) -> Broker1.OpenLoginSession.Reply {
        try requireAdministrator(caller, method: "OpenLoginSession")
        let (_, policy) = try loginScreenPolicy()
        let sessionID = try ParameterCheck.sessionID(parameters.sessionId)
        guard parameters.correlationId.count <= 128 else { throw .invalidParameter("correlationId") }
        let place = try ParameterCheck.loginScreen(parameters.loginScreen)
        guard let user = policy.session.user, let uid = policy.session.userUID else {
            throw Self.loginScreenNotConfigured
        }
        if let record = shiftSessions.record, record.sessionId == sessionID,
            record.correlationID == parameters.correlationId
        {
            // PAM opened the same session twice: the record stands.
            return Broker1.OpenLoginSession.Reply(session: shiftSession(record), resetHome: policy.session.resetHome)
        }
        guard let expected = shiftSessions.expected(parameters.correlationId),
            let current = try? accounts.accounts().first(where: \.signedIn)?.account,
            current.isSameWorker(as: expected.account)
        else {
            throw BrokerFailure(
                Broker1.AccountError(
                    code: "noCurrentAccount",
                    message:
                        "the worker signed in with that correlation id is no longer signed in (signed out, or their session did not open within the policy's session.openGraceSeconds); sign in again",
                    msalStatus: nil,
                    identityCode: nil
                )
            )
        }
        let owner: UInt32?
        do {
            owner = try await loginSessions.sessionUser(sessionID)
        } catch {
            throw Self.loginSessionFailure(error)
        }
        guard let owner else {
            throw BrokerFailure(
                Broker1.AccountError(
                    code: "sessionNotFound",
                    message:
                        "logind has no session \(sessionID); open the session with pam_systemd before pam_sharedmode in the PAM stack",
                    msalStatus: nil,
                    identityCode: nil
                )
            )
        }
        guard owner == uid else {
            throw BrokerFailure(
                Broker1.AccountError(
                    code: "sessionUserMismatch",
                    message:
                        "logind's session \(sessionID) runs as uid \(owner), not as the policy's session.user \(user) (uid \(uid)); the PAM module sets PAM_USER to session.user",
                    msalStatus: nil,
                    identityCode: nil
                )
            )
        }
        var details = [
            "sessionId": sessionID, "user": user, "service": place.service,
            "onSignOut": policy.session.onSignOut.rawValue,
        ]
        details["tty"] = place.tty
        details["seat"] = place.seat
        details["remoteHost"] = place.remoteHost
        let opened: AuditEvent?
        do throws(SharedDeviceError) {
            opened = try device.record(
                AuditEntry(
                    type: AuditEventType("session.opened"),
                    actor: caller.actor,
                    account: current.auditName,
                    reason: "login session opened",
                    correlationID: parameters.correlationId,
                    details: details
                )
            )
        } catch {
            throw BrokerFailure(error)
        }
        let record = ShiftSessionRecord(
            sessionId: sessionID,
            user: user,
            uid: uid,
            account: current,
            correlationID: parameters.correlationId,
            openedAt: sessionClock.now(),
            place: place,
            onSignOut: policy.session.onSignOut,
            terminateGraceSeconds: policy.session.terminateGraceSeconds,
            openedSequence: opened?.sequence ?? 0
        )
        // One shift session at a time: an earlier one (the previous worker's, whose sign-out the watch has
        // not reached yet; or this worker's before) ends as a sign-out would end it.
        if let earlier = shiftSessions.take(where: { $0.sessionId != sessionID }) {
            Task { [self] in await endSession(earlier, correlationID: parameters.correlationId) }
        }
        shiftSessions.open(record)
        return Broker1.OpenLoginSession.Reply(session: shiftSession(record), resetHome: policy.session.resetHome)
    }

    /// The login session `sessionId` ended (PAM's close_session): when it is the shift's, its worker is
    /// signed out of every app (reason `session-end`); any other changes nothing.
    public func closeLoginSession(
        _ parameters: Broker1.CloseLoginSession.Parameters,
        context caller: BrokerCaller
    ) async throws(BrokerFailure) -> Broker1.CloseLoginSession.Reply {
        try requireAdministrator(caller, method: "CloseLoginSession")
        let sessionID = try ParameterCheck.sessionID(parameters.sessionId)
        let resetHome = (try? currentPolicy())?.policy?.session.resetHome ?? false
        guard let record = shiftSessions.take(where: { $0.sessionId == sessionID }) else {
            return Broker1.CloseLoginSession.Reply(account: nil, itemsRemoved: 0, resetHome: resetHome)
        }
        // The session is closing: it is not terminated, only its worker signed out (if still signed in).
        let current = try? accounts.accounts().first(where: \.signedIn)?.account
        guard let current, current.isSameWorker(as: record.account) else {
            return Broker1.CloseLoginSession.Reply(account: nil, itemsRemoved: 0, resetHome: resetHome)
        }
        let outcome = signOutForSessionEnd()
        return Broker1.CloseLoginSession.Reply(
            account: outcome?.account.map(Broker1.Account.init),
            itemsRemoved: outcome?.itemsRemoved ?? 0,
            resetHome: resetHome
        )
    }

    /// The shift's session for GetStatus.
    var shiftSessionStatus: Broker1.ShiftSession? { shiftSessions.record.map(shiftSession) }

    private func shiftSession(_ record: ShiftSessionRecord) -> Broker1.ShiftSession {
        Broker1.ShiftSession(
            sessionId: record.sessionId,
            user: record.user,
            account: Broker1.Account(record.account),
            openedAt: record.openedAt.timeIntervalSince1970,
            onSignOut: Broker1.SessionEndAction(rawValue: record.onSignOut.rawValue),
            loginScreen: Broker1.LoginScreen(
                service: record.place.service,
                tty: record.place.tty,
                seat: record.place.seat,
                remoteHost: record.place.remoteHost
            )
        )
    }

    private static func loginSessionFailure(_ error: LoginSessionError) -> BrokerFailure {
        BrokerFailure(
            Broker1.AccountError(
                code: "loginSessionsUnavailable",
                message: "logind could not be asked about the session: \(error.message)",
                msalStatus: nil,
                identityCode: nil
            )
        )
    }

    // MARK: - Ending the session

    /// Starts the watch of the shift's session: every global sign-out ends it (`session.onSignOut`), and
    /// logind's removal of it signs its worker out. Subscribes before it returns, so that a sign-out
    /// after this call is seen; the task runs until cancelled. The start-up reconciliation runs first.
    public func startLoginSessionWatch() -> Task<Void, Never> {
        let changes = events.subscribe()
        let removed = loginSessions.removedSessions()
        return Task { [self] in
            await reconcileLoginSession()
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await event in changes {
                        guard case .account(let change) = event,
                            change.kind == .signedOutGlobally || change.kind == .deviceModeChanged
                        else { continue }
                        await self.signedOut(change)
                    }
                }
                group.addTask {
                    for await id in removed { self.sessionRemoved(id) }
                }
                await group.waitForAll()
            }
        }
    }

    /// A global sign-out committed: the recorded session (opened before it) ends as the record says.
    private func signedOut(_ change: AccountChange) async {
        guard let record = shiftSessions.take(where: { $0.openedSequence < change.sequence }) else { return }
        await endSession(record, correlationID: change.correlationID ?? CorrelationID.make())
    }

    /// logind removed session `id`: when it was the shift's, its worker is signed out.
    private func sessionRemoved(_ id: String) {
        guard let record = shiftSessions.take(where: { $0.sessionId == id }) else { return }
        logger.notice("login session: the shift's session was removed", metadata: ["session.id": "\(id)"])
        if let current = try? accounts.accounts().first(where: \.signedIn)?.account,
            current.isSameWorker(as: record.account)
        {
            signOutForSessionEnd()
        }
    }

    /// At start: a recorded session that is gone signs its worker out; a worker no longer signed in (a
    /// sign-out while the broker was down) has their session ended. Either way the record is cleared. A
    /// worker signed in at the login screen whose session had not opened gets the rest of their grace.
    public func reconcileLoginSession() async {
        // The graces of workers signed in before a restart whose session had not opened yet run on (one
        // already past its deadline ends at once).
        for (correlationID, expected) in shiftSessions.allExpected {
            armOpenGrace(correlationID, deadline: expected.deadline)
        }
        guard let record = shiftSessions.record else { return }
        let exists: Bool
        do {
            exists = try await loginSessions.sessionExists(record.sessionId)
        } catch {
            logger.warning(
                "login session: logind cannot be asked whether the shift's session still runs; its record stays",
                metadata: ["session.id": "\(record.sessionId)", "error": "\(error.message)"]
            )
            return
        }
        let current = try? accounts.accounts().first(where: \.signedIn)?.account
        let signedIn = current.map { $0.isSameWorker(as: record.account) } ?? false
        guard !exists || !signedIn, shiftSessions.take(where: { $0 == record }) != nil else { return }
        if signedIn {
            logger.notice(
                "login session: the shift's session ended while the broker was down; signing the worker out",
                metadata: ["session.id": "\(record.sessionId)"]
            )
            signOutForSessionEnd()
        } else if exists {
            await endSession(record, correlationID: CorrelationID.make())
        }
    }

    /// Ends `record`'s session as it says (terminate, then SIGKILL after the grace; lock; nothing) and
    /// audits `session.terminated` under `correlationID` (the sign-out's).
    private func endSession(_ record: ShiftSessionRecord, correlationID: String) async {
        var details = ["sessionId": record.sessionId, "action": record.onSignOut.rawValue, "sigkill": "false"]
        do throws(LoginSessionError) {
            switch record.onSignOut {
            case .terminate:
                let deadline = sessionClock.now().addingTimeInterval(TimeInterval(record.terminateGraceSeconds))
                try await loginSessions.terminateSession(record.sessionId)
                do {
                    try await sessionClock.sleep(until: deadline)
                } catch {
                    // Cancelled (the daemon stops): the kill is not skipped.
                }
                if try await loginSessions.sessionExists(record.sessionId) {
                    try await loginSessions.killSession(record.sessionId, signal: SIGKILL)
                    details["sigkill"] = "true"
                }
            case .lock:
                try await loginSessions.lockSession(record.sessionId)
            case .none:
                break
            }
        } catch {
            details["error"] = error.message
            logger.error(
                "login session: the shift's session could not be ended",
                metadata: ["session.id": "\(record.sessionId)", "error": "\(error.message)"]
            )
        }
        do throws(SharedDeviceError) {
            _ = try device.record(
                AuditEntry(
                    type: AuditEventType("session.terminated"),
                    actor: Self.loginSessionActor,
                    account: record.account.auditName,
                    reason: details["error"] == nil ? "signed out" : "signed out; ending the session failed",
                    correlationID: correlationID,
                    details: details
                )
            )
        } catch {
            logger.error(
                "login session: the session's end could not be audited",
                metadata: ["error.code": "\(error.code)"]
            )
        }
    }
}

extension ParameterCheck {
    /// A logind session id: 1 to 64 letters, digits, '_' or '-'.
    static func sessionID(_ id: String) throws(BrokerFailure) -> String {
        guard !id.isEmpty, id.count <= 64,
            id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "_-".contains($0)) })
        else { throw .invalidParameter("sessionId") }
        return id
    }
}
