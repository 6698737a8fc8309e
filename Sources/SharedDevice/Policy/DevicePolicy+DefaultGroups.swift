extension DevicePolicy {
    /// An app whose default access group (its first: where an item goes when the app names no group, as
    /// on iOS) is one another app of the policy is entitled to too: an item the app stores without naming
    /// its group is readable, and deletable, by those other apps.
    public struct SharedDefaultGroup: Sendable, Equatable {
        /// The app whose first group is shared.
        public var appID: String
        /// That group.
        public var group: String
        /// The other apps entitled to it, in policy order.
        public var sharedWith: [String]
        /// The app's first group no other app is entitled to (the one to list first), if it has one.
        public var privateGroup: String?

        /// A finding: `appID`'s first group `group`, which `sharedWith` list too; `privateGroup` its own.
        public init(appID: String, group: String, sharedWith: [String], privateGroup: String?) {
            self.appID = appID
            self.group = group
            self.sharedWith = sharedWith
            self.privateGroup = privateGroup
        }

        /// What happens and what to do, naming the app, the group and the fix (no secrets: a policy's
        /// ids and groups only).
        public var message: String {
            let others = sharedWith.joined(separator: ", ")
            let fix =
                privateGroup.map { "list its own group \"\($0)\" first in apps[].accessGroups" }
                ?? "give it a group of its own (e.g. \"\(appID)\") and list that first in apps[].accessGroups"
            return """
                app \(appID)'s first access group "\(group)" is shared with \(others): an item \(appID) stores without \
                naming a group goes there, where \(others) can read and delete it; \(fix) (an app that means to share \
                an item names the shared group)
                """
        }
    }

    /// The apps whose first access group another app shares, in policy order: provisioning warns of each.
    public var sharedDefaultGroups: [SharedDefaultGroup] {
        apps.compactMap { app -> SharedDefaultGroup? in
            guard let first = app.accessGroups.first else { return nil }
            let others = apps.filter { $0.id != app.id && $0.accessGroups.contains(first) }.map(\.id)
            guard !others.isEmpty else { return nil }
            let own = app.accessGroups.first { group in
                !apps.contains { $0.id != app.id && $0.accessGroups.contains(group) }
            }
            return SharedDefaultGroup(appID: app.id, group: first, sharedWith: others, privateGroup: own)
        }
    }
}
