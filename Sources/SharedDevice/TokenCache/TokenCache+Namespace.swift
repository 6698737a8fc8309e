import Foundation
public import KeychainStore

extension TokenCache {
    /// Moves the token-cache items a store kept before the token cache had a namespace of its own (0.3.0 and
    /// earlier: services `refreshtoken-…` beside apps' items) into it, in one transaction: each item of a
    /// token-cache type in `groups` whose service lacks `serviceNamespace` gets it. An item already at the
    /// namespaced key (newer) wins and the old one is deleted. Running it again changes nothing.
    /// - Returns: how many items moved.
    @discardableResult
    public func moveIntoNamespace(groups: [String], in store: KeychainStore) throws(TokenCacheError) -> Int {
        guard !groups.isEmpty else { return 0 }
        let caller: AppIdentity
        do {
            caller = try AppIdentity(appID: "devicectl", accessGroups: groups)
        } catch {
            throw TokenCacheError(
                .store,
                "cannot move the token cache's items into its namespace: \(error.message)",
                storeError: error
            )
        }
        return try writing(store) { transaction in
            var moved = 0
            // The attributes only (no secret opened), of every item in one pass.
            for item in try transaction.metadata(matching: .all, as: caller)
            where item.type.map(TokenCache.itemTypes.contains) == true && !Self.isInNamespace(item.service) {
                let old = ItemQuery(
                    accessGroup: item.accessGroup,
                    service: item.service,
                    account: item.account,
                    type: item.type
                )
                let newer = ItemQuery(
                    accessGroup: item.accessGroup,
                    service: Self.namespaced(item.service),
                    account: item.account
                )
                if (try? transaction.metadata(matching: newer, as: caller))?.isEmpty == false {
                    moved += try transaction.delete(old, as: caller) > 0 ? 1 : 0
                } else {
                    moved += try transaction.update(
                        old,
                        with: ItemChanges(service: Self.namespaced(item.service)),
                        as: caller
                    )
                }
            }
            return moved
        }
    }
}
