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
            throw KeychainError(.missingEntitlement,
                "app \(caller.appID) has no keychain access groups; entitle it to one in the device policy")
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

    private static func denied(_ group: String, _ caller: AppIdentity) -> KeychainError {
        KeychainError(.missingEntitlement,
            "app \(caller.appID) is not entitled to access group \(group); add the group to the app's entitlements in the device policy")
    }
}
