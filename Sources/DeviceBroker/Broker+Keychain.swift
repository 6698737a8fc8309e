import Foundation
import KeychainStore
import SharedDevice
import Varlink

// The keychain's generic passwords, within the caller's own access groups.
extension Broker {
    func addGenericPassword(_ parameters: BrokerParameters, caller: BrokerCaller) throws(BrokerFailure) -> VarlinkReply {
        let item = NewItem(accessGroup: try parameters.optionalString("accessGroup"), service: try parameters.string("service"),
                           account: try parameters.string("account"), secret: try required(parameters.optionalBytes("secret"), "secret"),
                           label: try parameters.optionalString("label"),
                           type: try parameters.optionalInt("type", in: 0...Int64(UInt32.max)).map(UInt32.init),
                           generic: try parameters.optionalBytes("generic"))
        let metadata = try keychain(caller, group: item.accessGroup, type: item.type) { store, app throws(KeychainError) in try store.add(item, as: app, quota: quota) }
        return VarlinkReply(parameters: ["item": .item(metadata)])
    }

    func findGenericPassword(_ parameters: BrokerParameters, caller: BrokerCaller) throws(BrokerFailure) -> VarlinkReply {
        let query = try itemQuery(parameters)
        let all = try parameters.optionalBool("all") ?? false
        let items = try keychain(caller, group: query.accessGroup, type: query.type) { store, app throws(KeychainError) in
            all ? try store.findAll(query, as: app) : [try store.find(query, as: app)]
        }
        let values = items.map { VarlinkValue.item($0.metadata, secret: $0.secret) }
        return VarlinkReply(parameters: ["item": values[0], "items": .array(values)])
    }

    func updateGenericPassword(_ parameters: BrokerParameters, caller: BrokerCaller) throws(BrokerFailure) -> VarlinkReply {
        let query = try itemQuery(parameters)
        let changes = ItemChanges(service: try parameters.optionalString("setService"), account: try parameters.optionalString("setAccount"),
                                  label: try parameters.optionalString("setLabel"),
                                  type: try parameters.optionalInt("setType", in: 0...Int64(UInt32.max)).map(UInt32.init),
                                  generic: try parameters.optionalBytes("setGeneric"), secret: try parameters.optionalBytes("secret"))
        guard changes.service != nil || changes.account != nil || changes.label != nil || changes.type != nil || changes.generic != nil
                || changes.secret != nil else { throw .invalidParameter("secret") }
        let updated = try keychain(caller, group: query.accessGroup, type: changes.type.flatMap { TokenCache.itemTypes.contains($0) ? $0 : nil } ?? query.type) { store, app throws(KeychainError) in
            try store.update(query, with: changes, as: app, quota: quota)
        }
        return VarlinkReply(parameters: ["updated": .int(Int64(updated))])
    }

    func deleteGenericPassword(_ parameters: BrokerParameters, caller: BrokerCaller) throws(BrokerFailure) -> VarlinkReply {
        let query = try itemQuery(parameters)
        let deleted = try keychain(caller, group: query.accessGroup, type: query.type) { store, app throws(KeychainError) in try store.delete(query, as: app) }
        return VarlinkReply(parameters: ["deleted": .int(Int64(deleted))])
    }

    func listGenericPasswords(_ parameters: BrokerParameters, caller: BrokerCaller) throws(BrokerFailure) -> VarlinkReply {
        let query = try itemQuery(parameters)
        let items = try keychain(caller, group: query.accessGroup, type: query.type) { store, app throws(KeychainError) in
            try store.metadata(matching: query, as: app)
        }
        return VarlinkReply(parameters: ["items": .array(items.map { .item($0) })])
    }

    private func itemQuery(_ parameters: BrokerParameters) throws(BrokerFailure) -> ItemQuery {
        ItemQuery(accessGroup: try parameters.optionalString("accessGroup"), service: try parameters.optionalString("service"),
                  account: try parameters.optionalString("account"), label: try parameters.optionalString("label"),
                  type: try parameters.optionalInt("type", in: 0...Int64(UInt32.max)).map(UInt32.init))
    }

    /// The caller's share of the store (the policy's `limits.itemsPerApp` and `limits.bytesPerApp`).
    private var quota: ItemQuota {
        let limits = self.limits
        return ItemQuota(items: limits.itemsPerApp, bytes: limits.bytesPerApp)
    }

    private func required<T>(_ value: T?, _ name: String) throws(BrokerFailure) -> T {
        guard let value else { throw .invalidParameter(name) }
        return value
    }

    /// Runs a store operation as the caller's app, to which the token cache's item types are invisible
    /// (the broker keeps them: `TokenCache.itemTypes`). A group the app is not entitled to is the keychain's
    /// missing-entitlement error (-34018), and so is adding an item of a token-cache type or giving an item
    /// one; a query for such a type finds nothing. Each is audited as `keychain.access_denied` (coalesced).
    private func keychain<T>(_ caller: BrokerCaller, group: String?, type: UInt32?,
                             _ body: (KeychainStore, AppIdentity) throws(KeychainError) -> T) throws(BrokerFailure) -> T {
        let app = try application(for: caller).app.hidingItemTypes(TokenCache.itemTypes)
        let tokenCacheType = type.map(TokenCache.itemTypes.contains) ?? false
        do {
            return try body(device.store, app)
        } catch {
            if error.code == .missingEntitlement || error.code == .quotaExceeded || (tokenCacheType && error.code == .itemNotFound) {
                let reason = error.code == .quotaExceeded ? "quota exceeded" : tokenCacheType ? "token cache item type" : "missing entitlement"
                var details = ["pid": "\(caller.pid)", "app": app.appID]
                details["group"] = group
                details["type"] = type.map { "\($0)" }
                details["executable"] = caller.executable
                refusals.refused(RefusalAudit.Kind(uid: caller.uid, method: "keychain", reason: reason),
                                 AuditEntry(type: .keychainAccessDenied, actor: caller.actor, reason: reason, details: details))
            }
            throw BrokerFailure(error)
        }
    }
}
