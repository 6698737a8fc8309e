/// The broker's idle sign-out clock (the policy's `session`), in the policy's seconds.
public struct IdleState: Sendable, Equatable, Encodable {
    public var idleSignOutSeconds: Int
    public var warningSeconds: Int
    /// Seconds since the worker's last activity (`nil`: nobody is signed in).
    public var idleSeconds: Double?
    /// Seconds until the idle sign-out (`nil`: nobody is signed in).
    public var signOutIn: Double?
    /// Whether a warning is out.
    public var warning: Bool

    public init(
        idleSignOutSeconds: Int,
        warningSeconds: Int,
        idleSeconds: Double? = nil,
        signOutIn: Double? = nil,
        warning: Bool = false
    ) {
        self.idleSignOutSeconds = idleSignOutSeconds
        self.warningSeconds = warningSeconds
        self.idleSeconds = idleSeconds
        self.signOutIn = signOutIn
        self.warning = warning
    }
}
