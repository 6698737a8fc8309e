import NIOCore
public import ProcessSandbox
import Synchronization

/// The connections one server holds open, by connection id, and who holds each (as the kernel said when it
/// connected). The service makes it before its logic and its server, hands it to both, and the server fills
/// it: the service's logic sees who is connected (the broker's status) without being told after the fact.
public final class VarlinkConnectionRegistry: Sendable {
    private let open = Mutex<[UInt64: OpenConnection]>([:])
    private let nextID = Atomic<UInt64>(1)

    /// An empty registry, for one server.
    public init() {}

    /// The peers of the connections open now, by connection id, in the order they connected.
    public var peers: [(connectionID: UInt64, peer: PeerCredentials)] {
        open.withLock { open in
            open.map { ($0.key, $0.value.peer) }.sorted { $0.connectionID < $1.connectionID }
        }
    }

    /// A new connection's id (never reused while the server runs).
    func makeID() -> UInt64 {
        nextID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    /// Runs `body` on the open connections, under the registry's lock.
    func withOpen<Result>(_ body: (inout [UInt64: OpenConnection]) -> Result) -> Result {
        open.withLock { body(&$0) }
    }

    /// Connection `id` now counts as the app `sandbox` of its uid (the service learned it acts for another
    /// process of that uid): later admissions count it against that app's connections, and `peers` show it so.
    public func reassign(_ id: UInt64, to sandbox: PeerSandbox) {
        open.withLock { $0[id]?.peer.sandbox = sandbox }
    }

    /// Forgets connection `id` (it closed).
    func remove(_ id: UInt64) {
        _ = open.withLock { $0.removeValue(forKey: id) }
    }

    /// The channels of the connections open now.
    var channels: [any Channel] {
        open.withLock { $0.values.map(\.channel) }
    }
}

/// A connection holding one of the server's slots.
struct OpenConnection: Sendable {
    var channel: any Channel
    var peer: PeerCredentials
}
