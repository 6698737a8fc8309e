/// Which app of its user a process is, as the sandbox it runs in says: the uid is the boundary between users,
/// the sandbox the boundary between the apps of one user (xdg-desktop-portal's rule).
public enum PeerSandbox: Sendable, Hashable, CustomStringConvertible {
    /// Not in a sandbox (its root holds no `/.flatpak-info`): a host process of its uid.
    case host
    /// A Flatpak app, by its sandbox's `/.flatpak-info`, which the app inside cannot change.
    case flatpak(FlatpakApp)
    /// Not looked at: the kernel cannot pin the process (no `SO_PEERPIDFD`, Linux before 6.5), so a sandbox
    /// could not be told apart from a recycled pid; the caller is known by its uid only, as before sandboxes.
    case unpinned
    /// Looked at and not known: the process was gone before it could be read, its root could not be
    /// opened, or its `/.flatpak-info` is not one a sandbox has. Such a caller is no app at all (fail closed).
    case unidentified(reason: String)

    /// The Flatpak app id, when the caller is a Flatpak app.
    public var flatpakAppID: String? {
        if case .flatpak(let app) = self { return app.appID }
        return nil
    }

    /// Whether two peers of one uid are the same app: both outside a sandbox (or not told apart), both the
    /// same Flatpak app (whatever its instance), or both unidentified (counted together).
    public func isSameApp(as other: PeerSandbox) -> Bool {
        switch (self, other) {
        case (.host, .host), (.unpinned, .unpinned), (.unidentified, .unidentified): true
        case (.flatpak(let one), .flatpak(let another)): one.appID == another.appID
        default: false
        }
    }

    /// Whether the caller runs in a sandbox.
    public var isSandboxed: Bool { flatpakAppID != nil }

    public var description: String {
        switch self {
        case .host: "host"
        case .flatpak(let app): "flatpak \(app.appID)"
        case .unpinned: "unpinned"
        case .unidentified(let reason): "unidentified (\(reason))"
        }
    }
}

/// A Flatpak app as its sandbox describes it (`/.flatpak-info`).
public struct FlatpakApp: Sendable, Hashable {
    /// `[Application] name`: the app id, reverse DNS (`com.contoso.Scanner`).
    public var appID: String
    /// `[Instance] instance-id`: this run of the app (for the audit record; not part of its identity).
    public var instanceID: String?

    /// An app as given.
    public init(appID: String, instanceID: String? = nil) {
        self.appID = appID
        self.instanceID = instanceID
    }
}
