import Foundation
public import KeychainStore
import Logging

extension AccountManager {
    /// What a sign-out did.
    public struct SignOutOutcome: Sendable, Encodable {
        /// The account signed out, `nil` when nobody was signed in.
        public var account: DeviceAccount?
        /// Whether every app's credentials were removed (shared mode, or a wipe everywhere).
        public var global: Bool
        /// Keychain items removed.
        public var itemsRemoved: Int
        /// Access groups searched.
        public var accessGroups: Int
    }

    /// Signs out (MSAL's `signout`). Shared mode: the device's current worker, globally — in one
    /// transaction their credentials leave every access group of every app in the policy, the account is
    /// marked signed out, a wipe tombstone is recorded and `account.signed_out` is audited with a signed
    /// checkpoint. Private mode: `app`'s account, only from `app`'s groups unless `wipeEverywhere`; with no
    /// `app` (an administrator), the most recently signed-in account, from every app.
    ///
    /// - Parameters:
    ///   - app: the acting app; `nil` for an administrator (`devicectl signout` without `--app`). In private
    ///     mode the account signed out is the app's principal (its current account).
    /// - Throws: `noCurrentAccount` when there is nobody to sign out.
    @discardableResult
    public func signOut(
        app: AppIdentity?,
        reason: SignOutReason,
        wipeEverywhere: Bool = false,
        actor: String? = nil,
        correlationID: String? = nil
    ) throws(SharedDeviceError) -> SignOutOutcome {
        let outcome: SignOutOutcome
        do {
            outcome = try essentialWrite { tx in
                try self.signOut(
                    app: app,
                    reason: reason,
                    wipeEverywhere: wipeEverywhere,
                    actor: actor ?? app?.appID ?? "devicectl",
                    correlationID: correlationID ?? Self.newCorrelationID(),
                    in: tx
                )
            }
        } catch {
            logger.debug(
                "sign-out refused",
                metadata: ["app": "\(app?.appID ?? "(administrator)")", "error.code": "\(error.code)"]
            )
            throw error
        }
        signal.notify()
        logger.debug(
            "account signed out",
            metadata: [
                "app": "\(app?.appID ?? "(administrator)")", "account": "\(outcome.account?.auditName ?? "(nobody)")",
                "scope": "\(outcome.global ? "global" : "local")", "reason": "\(reason.rawValue)",
                "items.removed": "\(outcome.itemsRemoved)", "access.groups": "\(outcome.accessGroups)",
            ]
        )
        return outcome
    }

    private func signOut(
        app: AppIdentity?,
        reason: SignOutReason,
        wipeEverywhere: Bool,
        actor: String,
        correlationID: String,
        in tx: StoreTransaction
    ) throws -> SignOutOutcome {
        let record = try device.record(in: tx)
        let shared = record?.mode == .shared
        let mode: SignOutMode =
            shared
            ? .sharedDevice : app.map { .privateApp($0, wipeEverywhere: wipeEverywhere) } ?? .privateAdministrator
        let account = try mode.account(manager: self, in: tx)
        let global = mode.isGlobal
        let groups = global ? try allAppGroups(record: record, app: app) : app?.accessGroups ?? []
        let wiper = try AppIdentity(appID: "devicectl", accessGroups: groups)
        var removed = try tokenCache.removeCredentials(
            homeAccountID: account.homeAccountID,
            environment: account.environment,
            as: wiper,
            in: tx
        )
        // The worker's accounts of other B2C user flows (edit profile) leave with them.
        for other in try userFlowAccounts(of: account, as: wiper, in: tx) {
            removed += try tokenCache.removeCredentials(
                homeAccountID: other.homeAccountID,
                environment: other.environment,
                as: wiper,
                in: tx
            )
        }
        // After a local sign-out the account stays signed in while another app's groups still hold it.
        let stillSignedIn =
            try !global
            && tokenCache.account(
                homeAccountID: account.homeAccountID,
                environment: account.environment,
                as: try AppIdentity(appID: "devicectl", accessGroups: allAppGroups(record: record, app: app)),
                in: tx
            ) != nil
        if !stillSignedIn {
            var status =
                try AccountRecords.status(of: account, in: tx)
                ?? AccountStatus(
                    account: account,
                    signedIn: true,
                    signedInBy: nil,
                    signedInAt: nil,
                    signedOutAt: nil,
                    signOutReason: nil
                )
            status.signedIn = false
            status.signedOutAt = tx.now
            status.signOutReason = reason
            try AccountRecords.setStatus(status, in: tx)
        }
        if shared { try AccountRecords.setCurrent(nil, in: tx) }
        if global {
            try AccountRecords.addTombstone(
                .init(
                    homeAccountID: account.homeAccountID,
                    environment: account.environment,
                    wipedAt: tx.now,
                    reason: reason.rawValue,
                    actor: actor,
                    itemsRemoved: removed
                ),
                in: tx
            )
        }
        try device.append(
            AuditEntry(
                type: .accountSignedOut,
                actor: actor,
                account: account.auditName,
                reason: reason.rawValue,
                correlationID: correlationID,
                details: [
                    "scope": global ? "global" : "local", "itemsRemoved": "\(removed)",
                    "accessGroups": "\(groups.count)", "homeAccountId": account.homeAccountID,
                ]
            ),
            in: tx,
            record: record,
            checkpoint: true
        )
        return SignOutOutcome(account: account, global: global, itemsRemoved: removed, accessGroups: groups.count)
    }

    /// The accounts `caller` can see that are `account`'s worker through another B2C user flow
    /// (`DeviceAccount.isSameWorker`); none unless `account` is a B2C account.
    func userFlowAccounts(
        of account: DeviceAccount,
        as caller: AppIdentity,
        in tx: StoreTransaction
    ) throws -> [DeviceAccount] {
        guard account.b2cPolicy != nil else { return [] }
        return try tokenCache.accounts(as: caller, in: tx).map(DeviceAccount.init)
            .filter { $0.isSameWorker(as: account) && !$0.isSameAccount(as: account) }
    }
}
