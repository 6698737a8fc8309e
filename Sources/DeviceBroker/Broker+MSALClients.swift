import BrokerContract
import Foundation
import KeychainStore
import Logging
import SharedDevice

// Calls that come through Microsoft's broker protocol (the MSAL bridge) name the MSAL client id of the
// app's request; the policy lists the ids each app may use (`apps[].msalClientIds`).
extension Broker {
    /// The longest MSAL client id the broker accepts (a GUID is 36 characters; names are short too).
    static let maximumMSALClientIDLength = 256

    /// The caller's app, after checking the MSAL client id the call names (when it names one) against the
    /// app's `msalClientIds`.
    /// - Throws: `CallerNotInPolicy`; `InvalidParameter` for an id that is empty, too long or not printable;
    ///   `AccountError` `msalClientNotAllowed` (audited, coalesced) for an id the policy does not list.
    func application(
        for caller: BrokerCaller,
        msalClientID: String?,
        method: String,
        authority: String? = nil
    ) throws(BrokerFailure) -> ApplicationEngine {
        let application = try application(for: caller, authority: authority)
        guard let msalClientID else { return application }
        guard !msalClientID.isEmpty, msalClientID.count <= Self.maximumMSALClientIDLength,
            msalClientID.unicodeScalars.allSatisfy({ $0.properties.generalCategory != .control && $0 != " " })
        else {
            throw .invalidParameter("msalClientId")
        }
        let appID = application.app.appID
        let listed = (try? currentPolicy())?.policy?.app(uid: caller.uid, sandbox: caller.sandbox)?.msalClientIds ?? []
        let allowed = listed.contains { $0.caseInsensitiveCompare(msalClientID) == .orderedSame }
        msalClients.record(uid: caller.uid, appID: appID, clientID: msalClientID, allowed: allowed)
        guard allowed else {
            let reason = "MSAL client id not in the policy's msalClientIds"
            logger.debug(
                "MSAL client id refused",
                metadata: ["peer.uid": "\(caller.uid)", "msal.client_id": "\(msalClientID)"]
            )
            refusals.refused(
                RefusalAudit.Kind(
                    uid: caller.uid,
                    method: method,
                    reason: "\(reason): \(msalClientID.lowercased())",
                    app: caller.appKey
                ),
                AuditEntry(
                    type: .keychainAccessDenied,
                    actor: appID,
                    reason: reason,
                    details: [
                        "method": method, "msalClientId": msalClientID, "uid": "\(caller.uid)", "pid": "\(caller.pid)",
                    ].merging(caller.sandboxDetails) { first, _ in first }
                )
            )
            throw BrokerFailure(
                Broker1.AccountError(
                    code: "msalClientNotAllowed",
                    message:
                        "MSAL client id \(msalClientID) is not among app \(appID)'s msalClientIds in the device policy; add it there and run `devicectl provision` again",
                    msalStatus: nil,
                    identityCode: nil
                )
            )
        }
        return application
    }

    /// The contract's result of `result`; with an MSAL client id it carries the ID token, which MSAL needs.
    /// - Throws: `AccountError` `noIdToken` when the call names an MSAL client id and the provider issued no ID token.
    static func result(
        _ result: SharedDevice.AuthenticationResult,
        msalClientID: String?
    ) throws(BrokerFailure) -> Broker1.AuthenticationResult {
        var reply = Broker1.AuthenticationResult(result)
        guard msalClientID != nil else { return reply }
        guard let idToken = result.idToken else {
            throw BrokerFailure(
                Broker1.AccountError(
                    code: "noIdToken",
                    message:
                        "the identity provider issued no ID token for \(result.account.username ?? result.account.homeAccountID), and MSAL apps need one; configure the provider to issue ID tokens (scope openid) and sign the worker in again",
                    msalStatus: nil,
                    identityCode: nil
                )
            )
        }
        reply.idToken = idToken
        return reply
    }

    /// The MSAL clients seen, for `GetStatus`.
    var msalClientsStatus: [Broker1.MsalClient] {
        msalClients.entriesByLastCall.map { entry in
            Broker1.MsalClient(
                appId: entry.appID,
                uid: Int(entry.uid),
                clientId: entry.clientID,
                calls: entry.calls,
                refused: entry.refused,
                lastCall: entry.lastCall.timeIntervalSince1970
            )
        }
    }
}
