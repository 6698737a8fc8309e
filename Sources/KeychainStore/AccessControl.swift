/// The keychain's entitlement rules, in one place.
enum AccessControl {
    /// The group an item is added to: the named one if the caller is entitled to it, else the caller's first.
    static func groupForAdd(_ requested: String?, caller: AppIdentity) throws(KeychainError) -> String {
        if let requested {
            try AccessGroup.validate(requested)
            guard caller.isEntitled(to: requested) else { throw denied(requested, caller) }
            return requested
        }
        guard let first = caller.accessGroups.first else {
            throw KeychainError(
                .missingEntitlement,
                "app \(caller.appID) has no keychain access groups; entitle it to one in the device policy"
            )
        }
        return first
    }

    /// The groups a query searches: the named one if entitled, else all of the caller's groups in order.
    static func groupsToSearch(_ requested: String?, caller: AppIdentity) throws(KeychainError) -> [String] {
        guard let requested else { return caller.accessGroups }
        guard caller.isEntitled(to: requested) else {
            try AccessGroup.validate(requested)  // a malformed name is that, rather than an unentitled one
            throw denied(requested, caller)
        }
        return [requested]  // valid: `AppIdentity` validated every group it is entitled to
    }

    /// Refuses names no keychain item may have: an empty service or account, and a NUL in a service,
    /// account or label (C strings, the terminal and other tools would cut them there, so two different
    /// names would look the same).
    static func checkNames(service: String?, account: String?, label: String?) throws(KeychainError) {
        for (name, value) in [("service", service), ("account", account)] {
            guard let value else { continue }
            guard !value.isEmpty else {
                throw KeychainError(
                    .invalidParameter,
                    "the \(name) name is empty; give the item a \(name) (e.g. the server or user it is for)"
                )
            }
        }
        for (name, value) in [("service", service), ("account", account), ("label", label)] {
            guard let value, value.utf8.contains(0) else { continue }
            throw KeychainError(
                .invalidParameter,
                "the \(name) contains a NUL character, which no keychain name may hold; remove it"
            )
        }
    }

    /// Refuses a type the caller may not give an item (one a broker keeps for itself).
    static func checkType(_ type: UInt32?, caller: AppIdentity) throws(KeychainError) {
        guard caller.hides(type), let type else { return }
        throw KeychainError(
            .missingEntitlement,
            "item type \(type) is reserved for the broker's token cache; apps get tokens through the broker's token methods (AcquireTokenSilent), never as keychain items"
        )
    }

    private static func denied(_ group: String, _ caller: AppIdentity) -> KeychainError {
        KeychainError(
            .missingEntitlement,
            "app \(caller.appID) is not entitled to access group \(group); add the group to the app's entitlements in the device policy"
        )
    }
}
