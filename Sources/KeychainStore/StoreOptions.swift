public import Foundation

/// How a store opens its database.
public struct StoreOptions: Sendable {
    /// SQLite's `synchronous` setting in WAL mode.
    public enum Synchronous: String, Sendable {
        /// Every commit reaches the disk before it returns: survives power loss (the default).
        case full = "FULL"
        /// Commits survive a process crash but the latest may be lost on power loss; much faster.
        case normal = "NORMAL"
    }

    /// Durability of commits.
    public var synchronous: Synchronous
    /// How long an operation waits for another process's write lock before failing with `storeBusy`.
    public var busyTimeout: TimeInterval
    /// The clock for creation and modification dates (tests inject a fake one).
    public var clock: @Sendable () -> Date
    /// Write-ahead-log size, in pages, from which a commit has a background queue copy the log back into the
    /// database file (SQLite's automatic checkpoint size, 1,000, by default). At least 1.
    public var backgroundCheckpointPages: Int = 1000
    /// Write-ahead-log size, in pages, from which the committing call checkpoints itself and starts the log
    /// over: how far the log may grow while the background cannot keep up (4,000 by default). At least
    /// `backgroundCheckpointPages`.
    public var checkpointLimitPages: Int = 4000

    public init(
        synchronous: Synchronous = .full,
        busyTimeout: TimeInterval = 30,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.synchronous = synchronous
        self.busyTimeout = busyTimeout
        self.clock = clock
    }
}
