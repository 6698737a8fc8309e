import BrokerServer
import DeviceBroker
import Foundation
import KeychainStore
import Logging
import SharedDevice
import SharedDeviceClient
import StoreTestSupport
@_spi(Testing) import VarlinkServer

/// The real broker served in the test's own process: a fresh store provisioned from `policies/kiosk.json`,
/// the daemon's handler, admission and registry in front of it, on a socket in a directory of its own. The
/// server takes every caller for `caller` (the scanner app's uid by default) through its tests-only identity
/// hook, so the client runs as the app without another uid or a daemon process.
final class InProcessBroker: Sendable {
    static let scannerUID: UInt32 = 1001
    static let quiet = Logger(label: "in-process-broker", factory: { _ in SwiftLogNoOpLogHandler() })

    let state = TemporaryStateDirectory("client-broker")
    let socketDirectory = TemporaryStateDirectory("client-socket")
    let connections = VarlinkConnectionRegistry()
    let broker: Broker
    let server: VarlinkServer
    let socket: String

    private init(
        caller uid: UInt32,
        configure: (inout VarlinkServerConfiguration) -> Void,
        onServerRunning: @escaping @Sendable () -> Void
    ) throws {
        var options = StoreOptions(synchronous: .normal)
        options.clock = FakeClock().function
        let device = ManagedDevice(
            store: try KeychainStore(directory: state.url, options: options, logger: Self.quiet),
            logger: Self.quiet
        )
        let policy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("policies/kiosk.json")
        _ = try device.provision(policyDocument: try Data(contentsOf: policy), actor: "test")
        broker = Broker(device: device, connections: BrokerServerConnections(connections), logger: Self.quiet)
        var configuration = VarlinkServerConfiguration.broker(broker)
        configuration.callerIdentity = { kernel in PeerCredentials(pid: kernel.pid, uid: uid, gid: uid) }
        configure(&configuration)
        socket = socketDirectory.url.appendingPathComponent("broker.sock").path
        server = VarlinkServer(
            listener: .path(socket),
            configuration: configuration,
            info: .broker,
            handler: BrokerMethodHandler(broker: broker),
            connections: connections,
            onServerRunning: onServerRunning,
            logger: Self.quiet
        )
    }

    /// A client of this broker, as an app makes one (it trusts the broker: this process's uid runs it).
    func client() -> PublicClientApplication {
        PublicClientApplication(endpoint: BrokerEndpoint(socketPath: socket), logger: Self.quiet)
    }

    /// Runs `body` while the broker serves (its server's `run()` in a child task, awaited until it accepts),
    /// then shuts the server down gracefully.
    static func with(
        caller uid: UInt32 = scannerUID,
        configure: (inout VarlinkServerConfiguration) -> Void = { _ in },
        _ body: (InProcessBroker) async throws -> Void
    ) async throws {
        let (running, continuation) = AsyncStream<Void>.makeStream()
        let fixture = try InProcessBroker(caller: uid, configure: configure, onServerRunning: { continuation.yield() })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { continuation.finish() }
                try await fixture.server.run()
            }
            var hook = running.makeAsyncIterator()
            guard await hook.next() != nil else {
                try await group.next()
                throw InProcessBrokerError.serverEndedBeforeRunning
            }
            // A failing body leaves the group by throwing: the server's task is cancelled and closes everything.
            try await body(fixture)
            fixture.server.shutdown()
            try await group.waitForAll()
        }
    }

    /// Waits until the server holds `count` connections (each of the client's connections is a connection
    /// of the server); false when it still does not after two minutes (a hang, never a speed: a busy machine
    /// gets there sooner).
    func waitForConnections(_ count: Int) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(120)
        while connections.peers.count != count {
            guard clock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }
}

enum InProcessBrokerError: Error { case serverEndedBeforeRunning }
