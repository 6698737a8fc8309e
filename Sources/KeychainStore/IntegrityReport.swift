/// The result of `KeychainStore.verify()`: every group key and every item authenticated.
public struct IntegrityReport: Sendable, Codable, Hashable {
    /// Items read.
    public var checkedItems: Int
    /// Access groups read.
    public var checkedGroups: Int
    /// Items that failed authentication, were moved, or whose lookup columns were edited.
    public var damagedItems: [DamagedItem]
    /// Access groups whose key record failed authentication (all their items are unreadable).
    public var damagedGroups: Int
    /// Problems SQLite's own `quick_check` found in the file.
    public var databaseProblems: [String]

    /// Whether nothing is wrong.
    public var isIntact: Bool { damagedItems.isEmpty && damagedGroups == 0 && databaseProblems.isEmpty }
}
