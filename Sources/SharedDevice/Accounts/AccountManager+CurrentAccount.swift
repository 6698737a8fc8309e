import Foundation
public import KeychainStore
import Logging
import Synchronization

extension AccountManager {
    /// The current and previous account for `app` (MSAL's `getCurrentAccount`).
    ///
    /// Shared mode: current is the device's signed-in worker. Private mode: the account this app last
    /// signed in, while its credentials are still cached. Previous is the account the app saw at its
    /// last call (rebuilt from stored ids even after a global wipe); it is updated whenever the app sees
    /// a new account, never cleared.
    public func currentAccount(for app: AppIdentity) throws(SharedDeviceError) -> CurrentAccount {
        // Without a stamp to hold to, the call always answers.
        try currentAccount(for: app, ifUnchangedSince: nil)!
    }

    /// `currentAccount(for:)`, when nothing was committed to the store since `known` (when given; checked in
    /// its read transaction first): `nil` when something was, and nothing else was read or written. With
    /// `readOnly`, also `nil` (nothing written) when the app's previous account must be updated first.
    package func currentAccount(
        for app: AppIdentity,
        ifUnchangedSince known: StoreChangeStamp?,
        readOnly: Bool = false
    ) throws(SharedDeviceError) -> CurrentAccount? {
        // Nothing committed since a read transaction last took the stamp, seen without one: the last answer for
        // this app stands, and the store's connection is not waited for.
        if let stamp = store.changeStampIfUnchanged(), known.map({ $0 == stamp }) ?? true,
            let cached = cache.withLock({ $0[app] }), cached.stamp == stamp
        {
            return cached.answer
        }
        let found = try read { tx -> (CurrentAccount, Bool)? in
            let stamp = try tx.changeStamp()
            if let known, stamp != known { return nil }
            // Nothing committed since the last answer for this app: the answer stands (no decryption).
            if let cached = self.cache.withLock({ $0[app] }), cached.stamp == stamp { return (cached.answer, false) }
            let previous = try AccountRecords.principal(of: app.appID, in: tx)
            let current = try self.current(for: app, previous: previous, in: tx)
            let needsUpdate =
                current.map { current in previous.map { !$0.isSameAccount(as: current) || $0 != current } ?? true }
                ?? false
            let answer = CurrentAccount(current: current, previous: previous)
            if !needsUpdate { self.cache.withLock { $0[app] = (stamp, answer) } }
            return (answer, needsUpdate)
        }
        guard let seen = found, !(readOnly && seen.1) else { return nil }
        if seen.1, let current = seen.0.current {
            try write { tx in try AccountRecords.setPrincipal(current, of: app.appID, in: tx) }
        }
        return seen.0
    }

    func current(for app: AppIdentity, previous: DeviceAccount?, in tx: StoreTransaction) throws -> DeviceAccount? {
        if try mode(in: tx) == .shared { return try AccountRecords.current(in: tx) }
        guard let previous else { return nil }
        let cached = try tokenCache.account(
            homeAccountID: previous.homeAccountID,
            environment: previous.environment,
            as: app,
            in: tx
        )
        return cached.map(DeviceAccount.init)
    }

    /// Every account the device knows, with its sign-in state (no secrets).
    public func accounts() throws(SharedDeviceError) -> [AccountStatus] {
        try read { tx in try AccountRecords.allStatuses(in: tx) }
            .sorted {
                ($0.account.username ?? $0.account.homeAccountID) < ($1.account.username ?? $1.account.homeAccountID)
            }
    }
}

extension CurrentAccount {
    /// `(current, previous)`, as MSAL's completion block passes them.
    public var pair: (current: DeviceAccount?, previous: DeviceAccount?) { (current, previous) }
}
