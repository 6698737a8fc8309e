import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing
import Varlink
@_spi(Testing) import VarlinkServer

#if canImport(Glibc)
import Glibc
#endif

/// The server's life as a service sees it: its event loops given, the hook called once it accepts, the
/// connection registry it fills, a shutdown before it runs, and the tests' identity hook (with the check
/// that no product code can reach it).
@Suite struct VarlinkServerLifecycleTests {
    typealias Server = VarlinkServerTests

    static let quiet = Logger(label: "varlink-server-test", factory: { _ in SwiftLogNoOpLogHandler() })

    static func scratchDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "varlink-life-\(UUID().uuidString.prefix(8))"
        )
        try FileManager.default.createDirectory(
            at: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        return directory
    }

    @Test func theServerRunsOnTheEventLoopGroupItIsGivenAndLeavesItRunning() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let directory = try Self.scratchDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = directory.appendingPathComponent("echo.sock").path
        let running = Server.Running()
        let connections = VarlinkConnectionRegistry()
        let server = VarlinkServer(
            listener: .path(socket),
            configuration: VarlinkServerConfiguration(errorInterface: "org.example.Echo"),
            info: VarlinkServiceInfo(
                vendor: "test",
                product: "echo",
                version: "1",
                url: "https://example.org",
                interfaces: [(name: "org.example.Echo", description: Server.interface)]
            ),
            handler: Server.EchoHandler(),
            connections: connections,
            eventLoopGroup: group,
            onServerRunning: { running.continuation.yield() },
            logger: Self.quiet
        )
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            try await running.start(server, in: &tasks)
            // The hook ran once the socket accepts: a connection made now is served.
            let (reply, peers) = try await Server.blocking { () throws -> (VarlinkReply, [UInt32]) in
                let connection = try VarlinkConnection(unixSocketPath: socket)
                let reply = try connection.call(
                    VarlinkCall(method: "org.example.Echo.Echo", parameters: ["text": .string("hi")])
                )
                // The registry has the connection while it is open, as the kernel identified it.
                return (reply, connections.peers.map(\.peer.uid))
            }
            #expect(reply.parameters["text"]?.string == "hi")
            #expect(peers == [getuid()], "the registry listed \(peers)")
            server.shutdown()
            try await tasks.waitForAll()
        }
        #expect(connections.peers.isEmpty, "a closed connection stayed in the registry")
        // The group is the caller's: the server left it running.
        #expect(try await group.next().submit { 42 }.get() == 42)
        try await group.shutdownGracefully()
    }

    @Test func aServerShutDownBeforeItRunsNeverListens() async throws {
        let directory = try Self.scratchDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = directory.appendingPathComponent("echo.sock").path
        let ran = Server.Running()
        let server = VarlinkServer(
            listener: .path(socket),
            configuration: VarlinkServerConfiguration(errorInterface: "org.example.Echo"),
            info: VarlinkServiceInfo(
                vendor: "test",
                product: "echo",
                version: "1",
                url: "https://example.org",
                interfaces: []
            ),
            handler: Server.EchoHandler(),
            onServerRunning: { ran.continuation.yield() },
            logger: Self.quiet
        )
        server.shutdown()
        try await server.run()
        ran.continuation.finish()
        var hook = ran.stream.makeAsyncIterator()
        #expect(await hook.next() == nil, "onServerRunning was called")
        #expect(!FileManager.default.fileExists(atPath: socket), "a server shut down before it ran took its socket")
    }

    @Test func aSecondRunOfARunningServerIsRefused() async throws {
        let (server, _, directory, running) = try Server.makeServer()
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            try await running.start(server, in: &tasks)
            await #expect(throws: VarlinkServerError.self) { try await server.run() }
            server.shutdown()
            try await tasks.waitForAll()
        }
    }

    @Test func theTestsIdentityHookNamesTheCaller() async throws {
        let directory = try Self.scratchDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = directory.appendingPathComponent("echo.sock").path
        let running = Server.Running()
        let kernel = Mutex<PeerCredentials?>(nil)
        var configuration = VarlinkServerConfiguration(errorInterface: "org.example.Echo")
        configuration.callerIdentity = { peer in
            kernel.withLock { $0 = peer }
            return PeerCredentials(pid: peer.pid, uid: 4242, gid: 4242)
        }
        let server = VarlinkServer(
            listener: .path(socket),
            configuration: configuration,
            info: VarlinkServiceInfo(
                vendor: "test",
                product: "echo",
                version: "1",
                url: "https://example.org",
                interfaces: [(name: "org.example.Echo", description: Server.interface)]
            ),
            handler: Server.EchoHandler(),
            onServerRunning: { running.continuation.yield() },
            logger: Self.quiet
        )
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            try await running.start(server, in: &tasks)
            let reply = try await Server.blocking {
                try VarlinkConnection(unixSocketPath: socket).call(
                    VarlinkCall(method: "org.example.Echo.Echo", parameters: ["text": .string("hi")])
                )
            }
            #expect(reply.parameters["uid"]?.int == 4242, "\(reply)")
            // The hook is handed what the kernel said.
            #expect(kernel.withLock { $0 }?.uid == getuid() && kernel.withLock { $0 }?.pid == getpid())
            server.shutdown()
            try await tasks.waitForAll()
        }
    }

    @Test func noProductCodeImportsTheTestingInterfaceOfTheServer() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let sources = root.appendingPathComponent("Sources")
        let files = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        var swiftFiles = 0
        for case let file as URL in files where file.pathExtension == "swift" {
            swiftFiles += 1
            let text = try String(contentsOf: file, encoding: .utf8)
            #expect(!text.contains("@_spi(Testing) import"), "\(file.path) imports a module's testing interface")
        }
        #expect(swiftFiles > 50, "the sources were not found at \(sources.path)")
    }
}
