/// A varlink enum `type` (`type Mode (shared, private)`) as generated contract code declares it: a case
/// per declared value and `unknown(String)` for any other string, so a peer that knows values this
/// contract does not (a newer interface's) is still understood. On the wire a value is its JSON string.
public protocol VarlinkEnum: RawRepresentable, Sendable, Hashable where RawValue == String {
    /// The value for `rawValue`: a declared case, else `unknown(rawValue)`.
    init(rawValue: String)

    /// Whether the interface declares the value (false for `unknown`).
    var isKnown: Bool { get }
}

/// An error a generated service's methods throw: the error reply the caller gets for it.
public protocol VarlinkServiceError: Error {
    /// The error reply.
    var reply: VarlinkReply { get }

    /// The error that sends `reply` (the generated dispatch makes `org.varlink.service.ExpectedMore`).
    init(reply: VarlinkReply)
}

/// Where the replies of a method that streams go (a method called with `more`): all but the last with
/// `continues`. Optional fields left `nil` are left out, since each reply carries some of the fields.
public struct VarlinkReplyStream<Reply: VarlinkStruct>: Sendable {
    private let send: @Sendable (VarlinkReply) async -> Bool

    /// A stream whose replies go to `send`, which returns false once the caller is gone.
    public init(_ send: @escaping @Sendable (VarlinkReply) async -> Bool) { self.send = send }

    /// Sends a reply more will follow; false once the caller is gone.
    @discardableResult
    public func next(_ reply: Reply) async -> Bool {
        await send(VarlinkReply(reply, continues: true, omittingAbsent: true))
    }

    /// Sends the last reply.
    public func last(_ reply: Reply) async { _ = await send(VarlinkReply(reply, omittingAbsent: true)) }
}
