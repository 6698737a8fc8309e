import Foundation
import KeychainStore

/// The account manager's own records, sealed as items in the device's group (`AccessGroup.device`),
/// which only the broker (this library, `devicectl`) can reach:
/// - `account-state` / `<home>-<env>`: every account the device knows and whether it is signed in;
/// - `current-account` / `device`: who is signed in on a shared device;
/// - `app-principal` / `<app id>`: the account each app saw last (MSAL's account metadata, 5001);
/// - `wipe-tombstone` / `<home>-<env>`: when and why an account's credentials were wiped.
enum AccountRecords {
    static let stateService = "account-state"
    static let currentService = "current-account"
    static let principalService = "app-principal"
    static let tombstoneService = "wipe-tombstone"
    static let deviceAccount = "device"

    /// A wipe tombstone's content.
    struct Tombstone: Codable {
        var homeAccountID: String
        var environment: String
        var wipedAt: Date
        var reason: String
        var actor: String
        var itemsRemoved: Int
    }

    static func current(in tx: StoreTransaction) throws -> DeviceAccount? {
        try read(DeviceAccount.self, service: currentService, account: deviceAccount, in: tx)
    }

    static func setCurrent(_ account: DeviceAccount?, in tx: StoreTransaction) throws {
        try write(account, service: currentService, account: deviceAccount, in: tx)
    }

    static func principal(of appID: String, in tx: StoreTransaction) throws -> DeviceAccount? {
        try read(DeviceAccount.self, service: principalService, account: appID, in: tx)
    }

    static func setPrincipal(_ account: DeviceAccount, of appID: String, in tx: StoreTransaction) throws {
        try write(account, service: principalService, account: appID, in: tx)
    }

    static func status(of account: DeviceAccount, in tx: StoreTransaction) throws -> AccountStatus? {
        try read(AccountStatus.self, service: stateService, account: account.cacheAccountAttribute, in: tx)
    }

    static func setStatus(_ status: AccountStatus, in tx: StoreTransaction) throws {
        try write(status, service: stateService, account: status.account.cacheAccountAttribute, in: tx)
    }

    static func allStatuses(in tx: StoreTransaction) throws -> [AccountStatus] {
        let items: [KeychainItem]
        do {
            items = try tx.findAll(
                ItemQuery(accessGroup: AccessGroup.device, service: stateService),
                as: .deviceAdministrator
            )
        } catch KeychainError.Code.itemNotFound {
            return []
        }
        return try items.map { item in
            var secret = item.secret
            defer { SecureMemory.wipe(&secret) }
            return try DeviceItems.decoder.decode(AccountStatus.self, from: secret)
        }
    }

    static func addTombstone(_ tombstone: Tombstone, in tx: StoreTransaction) throws {
        try write(
            tombstone,
            service: tombstoneService,
            account: "\(tombstone.homeAccountID)-\(tombstone.environment)".lowercased(),
            in: tx
        )
    }

    // MARK: - Items

    private static func read<T: Decodable>(
        _ type: T.Type,
        service: String,
        account: String,
        in tx: StoreTransaction
    ) throws -> T? {
        var item: KeychainItem
        do {
            item = try tx.find(
                ItemQuery(accessGroup: AccessGroup.device, service: service, account: account),
                as: .deviceAdministrator
            )
        } catch KeychainError.Code.itemNotFound {
            return nil
        }
        defer { SecureMemory.wipe(&item.secret) }
        do {
            return try DeviceItems.decoder.decode(T.self, from: item.secret)
        } catch {
            throw SharedDeviceError(
                .deviceRecordDamaged,
                "the device's \(service) record cannot be read; sign everyone out with `devicectl signout --reason admin`"
            )
        }
    }

    /// Writes (or with `nil`, deletes) one record.
    private static func write(
        _ value: (some Encodable)?,
        service: String,
        account: String,
        in tx: StoreTransaction
    ) throws {
        let query = ItemQuery(accessGroup: AccessGroup.device, service: service, account: account)
        guard let value else {
            do { try tx.delete(query, as: .deviceAdministrator) } catch KeychainError.Code.itemNotFound {}
            return
        }
        var secret = try DeviceItems.encoder.encode(value)
        defer { SecureMemory.wipe(&secret) }
        do {
            try tx.update(query, with: ItemChanges(secret: secret), as: .deviceAdministrator)
        } catch KeychainError.Code.itemNotFound {
            try tx.add(
                NewItem(accessGroup: AccessGroup.device, service: service, account: account, secret: secret),
                as: .deviceAdministrator
            )
        }
    }
}

extension AccountRecords {
    /// Marks every signed-in account signed out and clears the current account: what a forced mode
    /// change does after crypto-shredding the apps' groups. App principals stay (the apps' "previous").
    /// - Returns: the accounts that were signed in.
    @discardableResult
    static func signOutEveryone(in tx: StoreTransaction, reason: SignOutReason) throws -> [DeviceAccount] {
        var signedOut: [DeviceAccount] = []
        for var status in try allStatuses(in: tx) where status.signedIn {
            status.signedIn = false
            status.signedOutAt = tx.now
            status.signOutReason = reason
            try setStatus(status, in: tx)
            signedOut.append(status.account)
        }
        try setCurrent(nil, in: tx)
        return signedOut
    }
}
