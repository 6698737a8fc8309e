public import Foundation
public import KeychainStore

extension TokenCache {
    /// The caller's cache as MSAL unified-cache JSON (what MSAL libraries load with their
    /// `deserialize`/`SerializableTokenCache`): all five sections, keys sorted, four-space indent, a final
    /// newline. Entries keep the fields MSAL did not define. The same cache always gives the same bytes.
    /// - Parameter accessGroup: the group to export; `nil` exports every group of the caller, the first
    ///   group in the caller's order winning when two hold the same key.
    public func exportJSON(
        as caller: AppIdentity,
        accessGroup: String? = nil,
        in transaction: StoreTransaction
    ) throws(TokenCacheError) -> Data {
        try tokenCacheErrors {
            let items = CacheItems(transaction: transaction, caller: caller)
            var document = UnifiedCacheDocument()
            for kind in UnifiedCacheDocument.kinds {
                try add(kind, from: items, group: accessGroup, to: &document)
            }
            return document.data
        }
    }

    /// `exportJSON(as:accessGroup:in:)` in one read transaction.
    public func exportJSON(
        as caller: AppIdentity,
        accessGroup: String? = nil,
        in store: KeychainStore
    ) throws(TokenCacheError) -> Data {
        try reading(store) { transaction in try self.exportJSON(as: caller, accessGroup: accessGroup, in: transaction) }
    }

    /// Loads a unified-cache JSON document into `accessGroup`: every entry replaces the item with the
    /// same key (keys are recomputed from the entries, as MSAL does on load). The whole document is
    /// checked before anything is written, and the import is one transaction.
    /// - Returns: how many entries were imported.
    /// - Throws: `invalidCacheDocument` with the JSON path of the problem, or for a document over
    ///   `InputLimits.cacheDocumentBytes` (refused before it is parsed); `store`.
    @discardableResult
    public func importJSON(
        _ data: Data,
        as caller: AppIdentity,
        accessGroup: String = TokenCache.defaultAccessGroup,
        in transaction: StoreTransaction
    ) throws(TokenCacheError) -> Int {
        guard data.count <= InputLimits.cacheDocumentBytes else { throw TokenCacheError.documentTooLarge }
        let entries = try UnifiedCacheDocument.entries(of: data)
        try tokenCacheErrors {
            let items = CacheItems(transaction: transaction, caller: caller)
            for entry in entries { try write(entry, to: items, group: accessGroup) }
        }
        return entries.count
    }

    /// `importJSON(_:as:accessGroup:in:)` in one transaction of its own.
    @discardableResult
    public func importJSON(
        _ data: Data,
        as caller: AppIdentity,
        accessGroup: String = TokenCache.defaultAccessGroup,
        in store: KeychainStore
    ) throws(TokenCacheError) -> Int {
        try writing(store) { transaction in
            try self.importJSON(data, as: caller, accessGroup: accessGroup, in: transaction)
        }
    }

    private func add<E: CacheEntry>(
        _ kind: E.Type,
        from items: CacheItems,
        group: String?,
        to document: inout UnifiedCacheDocument
    ) throws {
        for (entry, _) in try items.entries(kind, group: group) { document.add(entry) }
    }

    private func write<E: CacheEntry>(_ entry: E, to items: CacheItems, group: String) throws {
        try items.write(entry, group: group)
    }
}
