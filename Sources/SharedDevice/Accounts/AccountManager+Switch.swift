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

    /// Ends the current worker's shift and signs the next one in as one audited step: `account.signed_out`,
    /// `account.signed_in` and `account.switched` share a correlation id. The sign-out commits first; if
    /// the sign-in then fails, the sign-out stands and the failure is returned in `signInError`.
    public func switchAccount(to response: TokenResponse, context: TokenRequestContext, app: AppIdentity,
                              reason: SignOutReason = .shiftEnd) throws(SharedDeviceError) -> SwitchOutcome {
        let correlationID = Self.newCorrelationID()
        var outcome = SwitchOutcome(correlationID: correlationID)
        do {
            outcome.signedOut = try signOut(app: app, reason: reason, correlationID: correlationID)
        } catch where error.code == .noCurrentAccount {
            outcome.signedOut = nil
        }
        do {
            outcome.signedIn = try write { tx -> DeviceAccount in
                let (account, _) = try self.signIn(response, context: context, app: app, accessGroup: nil, correlationID: correlationID, in: tx)
                try self.device.append(AuditEntry(type: .accountSwitched, actor: app.appID, account: account.auditName, reason: reason.rawValue,
                                                  correlationID: correlationID,
                                                  details: ["from": outcome.signedOut?.account?.auditName ?? "(nobody)", "to": account.auditName]),
                                       in: tx)
                return account
            }
            signal.notify()
        } catch {
            outcome.signInError = error
        }
        logger.debug("shift switch", metadata: [
            "app": "\(app.appID)", "from": "\(outcome.signedOut?.account?.auditName ?? "(nobody)")",
            "to": "\(outcome.signedIn?.auditName ?? "(nobody: sign-in failed)")", "correlation.id": "\(correlationID)"])
        return outcome
    }
}
