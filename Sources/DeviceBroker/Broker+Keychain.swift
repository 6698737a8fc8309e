public import BrokerContract
import Foundation
import KeychainStore
import SharedDevice
import Varlink

// The keychain's generic passwords, within the caller's own access groups.
extension Broker {
    /// Adds a generic password to one of the caller's access groups.
    public func addGenericPassword(
        _ parameters: Broker1.AddGenericPassword.Parameters,
        context caller: BrokerCaller
    ) throws(BrokerFailure)
        -> Broker1.AddGenericPassword.Reply
    {
        guard let secret = try ParameterCheck.bytes(parameters.secret, "secret") else {
            throw .invalidParameter("secret")
        }
        let item = NewItem(
            accessGroup: parameters.accessGroup,
            service: parameters.service,
            account: parameters.account,
            secret: secret,
            label: parameters.label,
            type: try ParameterCheck.itemType(parameters.type, "type"),
            generic: try ParameterCheck.bytes(parameters.generic, "generic")
        )
        let metadata = try keychain(caller, group: item.accessGroup, type: item.type, services: [item.service]) {
            store,
            app throws(KeychainError) in
            try store.add(item, as: app, quota: quota)
        }
        return Broker1.AddGenericPassword.Reply(item: Broker1.KeychainItem(metadata))
    }

    /// The first matching item with its secret, or every match.
    public func findGenericPassword(
        _ parameters: Broker1.FindGenericPassword.Parameters,
        context caller: BrokerCaller
    ) throws(BrokerFailure)
        -> Broker1.FindGenericPassword.Reply
    {
        let query = try itemQuery(
            accessGroup: parameters.accessGroup,
            service: parameters.service,
            account: parameters.account,
            label: parameters.label,
            type: parameters.type
        )
        let all = parameters.all ?? false
        let items = try keychain(caller, group: query.accessGroup, type: query.type, services: [query.service]) {
            store,
            app throws(KeychainError) in
            all ? try store.findAll(query, as: app) : [try store.find(query, as: app)]
        }
        let found = items.map { Broker1.KeychainItem($0.metadata, secret: $0.secret) }
        return Broker1.FindGenericPassword.Reply(item: found[0], items: found)
    }

    /// Changes every matching item.
    public func updateGenericPassword(
        _ parameters: Broker1.UpdateGenericPassword.Parameters,
        context caller: BrokerCaller
    ) throws(BrokerFailure)
        -> Broker1.UpdateGenericPassword.Reply
    {
        let query = try itemQuery(
            accessGroup: parameters.accessGroup,
            service: parameters.service,
            account: parameters.account,
            label: parameters.label,
            type: parameters.type
        )
        let changes = ItemChanges(
            service: parameters.setService,
            account: parameters.setAccount,
            label: parameters.setLabel,
            type: try ParameterCheck.itemType(parameters.setType, "setType"),
            generic: try ParameterCheck.bytes(parameters.setGeneric, "setGeneric"),
            secret: try ParameterCheck.bytes(parameters.secret, "secret")
        )
        guard
            changes.service != nil || changes.account != nil || changes.label != nil || changes.type != nil
                || changes.generic != nil
                || changes.secret != nil
        else { throw .invalidParameter("secret") }
        let updated = try keychain(
            caller,
            group: query.accessGroup,
            type: changes.type.flatMap { TokenCache.itemTypes.contains($0) ? $0 : nil } ?? query.type,
            services: [query.service, changes.service]
        ) { store, app throws(KeychainError) in
            try store.update(query, with: changes, as: app, quota: quota)
        }
        return Broker1.UpdateGenericPassword.Reply(updated: updated)
    }

    /// Deletes every matching item.
    public func deleteGenericPassword(
        _ parameters: Broker1.DeleteGenericPassword.Parameters,
        context caller: BrokerCaller
    ) throws(BrokerFailure)
        -> Broker1.DeleteGenericPassword.Reply
    {
        let query = try itemQuery(
            accessGroup: parameters.accessGroup,
            service: parameters.service,
            account: parameters.account,
            label: parameters.label,
            type: parameters.type
        )
        let deleted = try keychain(caller, group: query.accessGroup, type: query.type, services: [query.service]) {
            store,
            app throws(KeychainError) in
            try store.delete(query, as: app)
        }
        return Broker1.DeleteGenericPassword.Reply(deleted: deleted)
    }

    /// The attributes of every matching item.
    public func listGenericPasswords(
        _ parameters: Broker1.ListGenericPasswords.Parameters,
        context caller: BrokerCaller
    ) throws(BrokerFailure)
        -> Broker1.ListGenericPasswords.Reply
    {
        let query = try itemQuery(
            accessGroup: parameters.accessGroup,
            service: parameters.service,
            account: parameters.account,
            label: parameters.label,
            type: parameters.type
        )
        let items = try keychain(caller, group: query.accessGroup, type: query.type, services: [query.service]) {
            store,
            app throws(KeychainError) in
            try store.metadata(matching: query, as: app)
        }
        return Broker1.ListGenericPasswords.Reply(items: items.map { Broker1.KeychainItem($0) })
    }

    private func itemQuery(
        accessGroup: String?,
        service: String?,
        account: String?,
        label: String?,
        type: Int?
    ) throws(BrokerFailure) -> ItemQuery {
        ItemQuery(
            accessGroup: accessGroup,
            service: service,
            account: account,
            label: label,
            type: try ParameterCheck.itemType(type, "type")
        )
    }

    /// The caller's share of the store (the policy's `limits.itemsPerApp` and `limits.bytesPerApp`).
    private var quota: ItemQuota {
        let limits = self.limits
        return ItemQuota(items: limits.itemsPerApp, bytes: limits.bytesPerApp)
    }

    /// Runs a store operation as the caller's app, to which the token cache's item types are invisible
    /// (the broker keeps them: `TokenCache.itemTypes`). A group the app is not entitled to is the keychain's
    /// missing-entitlement error (-34018), and so is adding an item of a token-cache type or giving an item
    /// one, or naming a service in the token cache's namespace (`TokenCache.serviceNamespace`: the token
    /// cache's keys, which no app item may take); a query for such a type finds nothing. Each is audited
    /// as `keychain.access_denied` (coalesced).
    private func keychain<T>(
        _ caller: BrokerCaller,
        group: String?,
        type: UInt32?,
        services: [String?],
        _ body: (KeychainStore, AppIdentity) throws(KeychainError) -> T
    ) throws(BrokerFailure) -> T {
        let app = try application(for: caller).app.hidingItemTypes(TokenCache.itemTypes)
        let tokenCacheType = type.map(TokenCache.itemTypes.contains) ?? false
        do throws(KeychainError) {
            if services.contains(where: { $0.map(TokenCache.isInNamespace) ?? false }) {
                throw KeychainError(
                    .missingEntitlement,
                    """
                    services starting with \(TokenCache.serviceNamespace) are the token cache's, which only the broker keeps; \
                    name your item's service otherwise, and get tokens with AcquireTokenSilent
                    """
                )
            }
            return try body(device.store, app)
        } catch {
            if error.code == .missingEntitlement || error.code == .quotaExceeded
                || (tokenCacheType && error.code == .itemNotFound)
            {
                let namespace = services.contains { $0.map(TokenCache.isInNamespace) ?? false }
                let reason =
                    error.code == .quotaExceeded
                    ? "quota exceeded"
                    : namespace
                        ? "token cache namespace"
                        : tokenCacheType ? "token cache item type" : "missing entitlement"
                var details = ["pid": "\(caller.pid)", "app": app.appID]
                details["group"] = group
                details["type"] = type.map { "\($0)" }
                details["executable"] = caller.executable
                refusals.refused(
                    RefusalAudit.Kind(uid: caller.uid, method: "keychain", reason: reason, app: caller.appKey),
                    AuditEntry(type: .keychainAccessDenied, actor: caller.actor, reason: reason, details: details)
                )
            }
            throw BrokerFailure(error)
        }
    }
}
