public import SystemPackage

/// A directory could not be reached safely: a component of its path could be swapped by someone other
/// than root and this process's user, or the file system refused the walk.
public struct PathSafetyError: Error, Sendable, CustomStringConvertible {
    /// Why the walk stopped.
    public enum Reason: Sendable, Equatable {
        /// A component is owned by another user, writable by others without the sticky bit, or a symbolic
        /// link owned by another user: whoever controls it could swap what is below it.
        case unsafe
        /// A component is not a directory (nor a link to one).
        case notDirectory
        /// A system call failed (`noSuchFileOrDirectory` for a missing directory, `permissionDenied`, …).
        case system(Errno)
    }

    /// Why the walk stopped.
    public let reason: Reason
    /// The component (an absolute path) the walk stopped at.
    public let component: String
    /// What happened at `component` and what to do about it.
    public let message: String

    init(_ reason: Reason, at component: String, _ message: String) {
        self.reason = reason
        self.component = component
        self.message = message
    }

    /// Whether the directory is refused as unsafe (as opposed to missing or unreadable).
    public var isUnsafe: Bool { reason == .unsafe || reason == .notDirectory }

    public var description: String { message }
}
