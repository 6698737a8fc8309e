import Foundation
import KeychainStore

/// The three ways a sign-out picks its account and reach (MSAL's shared-device global sign-out, a
/// private-mode app's sign-out, and an administrator's sign-out on a private device).
enum SignOutMode {
    /// Shared mode: the device's current worker, from every app.
    case sharedDevice
    /// Private mode, an administrator (no app): the most recently signed-in account, from every app
    /// (repeat to sign out the others).
    case privateAdministrator
    /// Private mode, an app: its principal account, from its own groups unless `wipeEverywhere`.
    case privateApp(AppIdentity, wipeEverywhere: Bool)

    /// Whether the account's credentials leave every app's groups.
    var isGlobal: Bool {
        switch self {
        case .sharedDevice, .privateAdministrator: true
        case .privateApp(_, let wipeEverywhere): wipeEverywhere
        }
    }

    /// The account this sign-out acts on.
    /// - Throws: `noCurrentAccount` when there is nobody to sign out.
    func account(manager: AccountManager, in tx: StoreTransaction) throws -> DeviceAccount {
        switch self {
        case .sharedDevice:
            guard let current = try AccountRecords.current(in: tx) else {
                throw SharedDeviceError(.noCurrentAccount, "nobody is signed in on this device; nothing to sign out")
            }
            return current
        case .privateAdministrator:
            guard
                let latest = try AccountRecords.allStatuses(in: tx).filter(\.signedIn)
                    .max(by: { ($0.signedInAt ?? .distantPast) < ($1.signedInAt ?? .distantPast) })?.account
            else {
                throw SharedDeviceError(
                    .noCurrentAccount,
                    "no account is signed in on this device; nothing to sign out"
                )
            }
            return latest
        case .privateApp(let app, let wipeEverywhere):
            // The app's principal, while the app still holds it (after a local sign-out it is only the
            // app's "previous"); a wipe everywhere may still name it.
            guard let principal = try AccountRecords.principal(of: app.appID, in: tx),
                try wipeEverywhere || manager.current(for: app, previous: principal, in: tx) != nil
            else {
                throw SharedDeviceError(.noCurrentAccount, "no account is signed in for this app; nothing to sign out")
            }
            return principal
        }
    }
}
