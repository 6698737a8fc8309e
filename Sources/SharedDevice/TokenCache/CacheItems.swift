import Foundation
import KeychainStore

/// Cache entries as keychain items, inside one store transaction: each entry's JSON is the item's
/// secret, its keychain key the item's account, service (in the token cache's namespace,
/// `TokenCache.serviceNamespace` + MSAL's service), type and generic attributes.
struct CacheItems {
    let transaction: StoreTransaction
    let caller: AppIdentity

    /// The decodable entries of kind `E` with the given account attribute and service, in `group` or
    /// else in every group of the caller (in the caller's order). Items whose JSON is not a valid entry
    /// are skipped, as MSAL skips keychain items it cannot deserialize.
    func entries<E: CacheEntry>(
        _ kind: E.Type,
        account: String? = nil,
        service: String? = nil,
        group: String? = nil
    ) throws -> [(entry: E, group: String)] {
        let query = ItemQuery(
            accessGroup: group,
            service: service.map(TokenCache.namespaced),
            account: account,
            type: E.itemType
        )
        let items: [KeychainItem]
        do {
            items = try transaction.findAll(query, as: caller)
        } catch KeychainError.Code.itemNotFound {
            return []
        }
        return items.compactMap { item in
            var secret = item.secret
            defer { SecureMemory.wipe(&secret) }
            guard let object = CacheJSON.object(secret), let entry = try? E(json: object) else { return nil }
            return (entry, item.accessGroup)
        }
    }

    /// Writes `entry` into `group`, replacing the item with the same keychain key.
    func write<E: CacheEntry>(_ entry: E, group: String) throws {
        let key = entry.keychainKey
        try delete(ItemQuery(accessGroup: group, service: key.service, account: key.account, type: key.type))
        var secret = CacheJSON.compact(entry.json)
        defer { SecureMemory.wipe(&secret) }
        try transaction.add(
            NewItem(
                accessGroup: group,
                service: TokenCache.namespaced(key.service),
                account: key.account,
                secret: secret,
                type: key.type,
                generic: key.generic.map { Data($0.utf8) }
            ),
            as: caller
        )
    }

    /// Deletes every item matching `query` (its service, if any, is MSAL's: the namespace is added here).
    /// - Returns: how many.
    @discardableResult
    func delete(_ query: ItemQuery) throws -> Int {
        var query = query
        query.service = query.service.map(TokenCache.namespaced)
        do {
            return try transaction.delete(query, as: caller)
        } catch KeychainError.Code.itemNotFound {
            return 0
        }
    }
}
