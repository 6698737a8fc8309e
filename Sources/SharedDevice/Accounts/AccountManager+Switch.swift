import Foundation
public import KeychainStore
import Logging

extension AccountManager {
    /// What a shift switch did.
    public struct SwitchOutcome: Sendable {
        /// The sign-out of the worker whose shift ended (`nil` when nobody was signed in).
        public var signedOut: SignOutOutcome?
        /// The next worker, when the sign-in succeeded.
        public var signedIn: DeviceAccount?
        /// Why the sign-in failed; the sign-out stands.
        public var signInError: SharedDeviceError?
        /// The correlation id shared by the switch's audit events.
        public var correlationID: String
    }

    /// A shift switch under way: the previous worker is signed out (committed), the next one not yet in.
    public struct ShiftSwitch: Sendable {
        /// The id the switch's three audit events share.
        public let correlationID: String
        /// Why the previous worker left.
        public let reason: SignOutReason
        /// The sign-out of the previous worker (`nil` when nobody was signed in).
        public let signedOut: SignOutOutcome?
    }

    /// Ends the current worker's shift and signs the next one in as one audited step: `account.signed_out`,
    /// `account.signed_in` and `account.switched` share a correlation id. The sign-out commits first; if
    /// the sign-in then fails, the sign-out stands and the failure is returned in `signInError`.
    public func switchAccount(
        to response: TokenResponse,
        context: TokenRequestContext,
        app: AppIdentity,
        reason: SignOutReason = .shiftEnd
    ) throws(SharedDeviceError) -> SwitchOutcome {
        let shift = try beginSwitch(app: app, reason: reason)
        var outcome = SwitchOutcome(signedOut: shift.signedOut, correlationID: shift.correlationID)
        do {
            outcome.signedIn = try completeSwitch(shift, response: response, context: context, app: app)
        } catch {
            outcome.signInError = error
        }
        return outcome
    }

    /// The first half of a shift switch, for a sign-in that takes time (device code, browser): signs the
    /// current worker out globally and commits, so the device is never left with the previous worker while
    /// the next one signs in. Nobody signed in is no error (`signedOut` is `nil`).
    public func beginSwitch(
        app: AppIdentity?,
        reason: SignOutReason = .shiftEnd,
        actor: String? = nil
    ) throws(SharedDeviceError) -> ShiftSwitch {
        let correlationID = Self.newCorrelationID()
        let signedOut: SignOutOutcome?
        do {
            signedOut = try signOut(app: app, reason: reason, actor: actor, correlationID: correlationID)
        } catch  where error.code == .noCurrentAccount {
            signedOut = nil
        }
        return ShiftSwitch(correlationID: correlationID, reason: reason, signedOut: signedOut)
    }

    /// The second half: signs the next worker in and audits `account.switched`, in one transaction, under
    /// the switch's correlation id. If it fails nothing is cached and the device stays signed out.
    /// `auditDetails` go into the sign-in's audit event (the flow).
    public func completeSwitch(
        _ shift: ShiftSwitch,
        response: TokenResponse,
        context: TokenRequestContext,
        app: AppIdentity,
        accessGroup: String? = nil,
        auditDetails: [String: String] = [:]
    ) throws(SharedDeviceError) -> DeviceAccount {
        let from = shift.signedOut?.account?.auditName ?? "(nobody)"
        do {
            let account = try write { tx -> DeviceAccount in
                let (account, _) = try self.signIn(
                    response,
                    context: context,
                    app: app,
                    accessGroup: accessGroup,
                    correlationID: shift.correlationID,
                    auditDetails: auditDetails,
                    in: tx
                )
                try self.device.append(
                    AuditEntry(
                        type: .accountSwitched,
                        actor: app.appID,
                        account: account.auditName,
                        reason: shift.reason.rawValue,
                        correlationID: shift.correlationID,
                        details: ["from": from, "to": account.auditName]
                    ),
                    in: tx
                )
                return account
            }
            signal.notify()
            logger.debug(
                "shift switch",
                metadata: [
                    "app": "\(app.appID)", "from": "\(from)", "to": "\(account.auditName)",
                    "correlation.id": "\(shift.correlationID)",
                ]
            )
            return account
        } catch {
            logger.debug(
                "shift switch: sign-in refused; the device stays signed out",
                metadata: [
                    "app": "\(app.appID)", "from": "\(from)", "error.code": "\(error.code)",
                    "correlation.id": "\(shift.correlationID)",
                ]
            )
            throw error
        }
    }
}
