import Foundation
public import KeychainStore
import Logging

extension AccountManager {
    /// Signs an account in for `app` from a token response (the flows that obtain one validate it; this
    /// trusts it): caches the tokens in the app's token group, makes the account current (shared mode)
    /// and the app's principal, and audits `account.signed_in` when the device's account changes.
    /// `auditDetails` are added to that event's details (never a secret: e.g. the MSAL client id).
    ///
    /// In shared mode, the signed-in worker signing in through another Azure AD B2C user flow (an account
    /// that differs only by policy: `DeviceAccount.isSameWorker`) is no new worker: the tokens are cached
    /// under that flow's account, and the current account, its status and the audit log stay as they are.
    ///
    /// - Throws: `accountAlreadySignedIn` in shared mode while another worker is signed in;
    ///   `tokenCache` for an unusable response. A failure changes nothing.
    @discardableResult
    public func signIn(
        _ response: TokenResponse,
        context: TokenRequestContext,
        app: AppIdentity,
        accessGroup: String? = nil,
        correlationID: String? = nil,
        auditDetails: [String: String] = [:]
    ) throws(SharedDeviceError) -> DeviceAccount {
        let (account, isNew): (DeviceAccount, Bool)
        do {
            (account, isNew) = try write { tx -> (DeviceAccount, Bool) in
                try self.signIn(
                    response,
                    context: context,
                    app: app,
                    accessGroup: accessGroup,
                    correlationID: correlationID ?? Self.newCorrelationID(),
                    auditDetails: auditDetails,
                    in: tx
                )
            }
        } catch {
            logger.debug("sign-in refused", metadata: ["app": "\(app.appID)", "error.code": "\(error.code)"])
            throw error
        }
        if isNew { signal.notify() }
        logger.debug(
            isNew ? "account signed in" : "account signed in again (single sign-on)",
            metadata: [
                "app": "\(app.appID)", "account": "\(account.auditName)", "scopes": "\(response.scope ?? "")",
            ]
        )
        return account
    }

    func signIn(
        _ response: TokenResponse,
        context: TokenRequestContext,
        app: AppIdentity,
        accessGroup: String?,
        correlationID: String,
        auditDetails: [String: String] = [:],
        in tx: StoreTransaction
    ) throws -> (DeviceAccount, Bool) {
        // The device record is read (decrypted) once: for the mode here and for the audit event below.
        let deviceRecord = try device.record(in: tx)
        let shared = deviceRecord?.mode == .shared
        let current = shared ? try AccountRecords.current(in: tx) : nil
        let group = accessGroup ?? Self.tokenGroup(of: app)
        let record = try tokenCache.save(response, context: context, as: app, accessGroup: group, in: tx)
        let homeAccountID = record.accessToken.homeAccountID
        let environment = record.accessToken.environment
        let account =
            try tokenCache.account(
                homeAccountID: homeAccountID,
                environment: environment,
                as: app,
                accessGroup: group,
                in: tx
            )
            .map(DeviceAccount.init)
            ?? DeviceAccount(
                homeAccountID: homeAccountID,
                environment: environment,
                realm: record.accessToken.realm,
                username: nil,
                name: nil,
                localAccountID: nil
            )
        if let current, !current.isSameWorker(as: account) {
            throw SharedDeviceError(
                .accountAlreadySignedIn,
                "an account is already signed in on this shared device (\(current.auditName)); end the shift with `devicectl signout` or `devicectl switch` first"
            )
        }
        // The signed-in worker through another B2C user flow (edit profile): that flow's tokens are cached
        // under its own account, and the device's worker stays as they are.
        if let current, !current.isSameAccount(as: account) { return (account, false) }
        let previousStatus = try AccountRecords.status(of: account, in: tx)
        let isNew = shared ? current == nil : !(previousStatus?.signedIn ?? false)
        try AccountRecords.setStatus(
            AccountStatus(
                account: account,
                signedIn: true,
                signedInBy: app.appID,
                signedInAt: isNew ? tx.now : previousStatus?.signedInAt ?? tx.now,
                signedOutAt: nil,
                signOutReason: nil
            ),
            in: tx
        )
        if shared { try AccountRecords.setCurrent(account, in: tx) }
        try AccountRecords.setPrincipal(account, of: app.appID, in: tx)
        if isNew {
            try device.append(
                AuditEntry(
                    type: .accountSignedIn,
                    actor: app.appID,
                    account: account.auditName,
                    reason: "sign-in",
                    correlationID: correlationID,
                    details: [
                        "homeAccountId": account.homeAccountID, "environment": account.environment,
                        "mode": shared ? "shared" : "private",
                    ].merging(auditDetails) { own, _ in own }
                ),
                in: tx,
                record: deviceRecord,
                checkpoint: false
            )
        }
        return (account, isNew)
    }
}
