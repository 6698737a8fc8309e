#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import Testing
import Varlink
import VarlinkServer

/// The varlink server alone, on a real Unix socket with a small handler: who calls comes from the
/// kernel, org.varlink.service is answered by the server, `more` calls stream, and a frame over the limit
/// is refused with the interface's ProtocolError before the connection closes. The blocking client runs
/// on a thread of its own (`blocking`), never on the cooperative pool the server's handler needs.
@Suite struct VarlinkServerTests {
    /// Runs `body` (blocking socket calls) on a thread of its own and returns what it returned.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }

    /// `org.example.Echo.Echo(text)` → `(text, uid)` (the caller's uid as the server was told by the kernel);
    /// `Count(n)` with `more` → n replies.
    struct EchoHandler: VarlinkMethodHandler {
        func handle(_ call: VarlinkCall, context: VarlinkCallContext, replies: VarlinkReplies) async {
            switch call.member {
            case "Echo":
                await replies.send(VarlinkReply(parameters: ["text": call.parameters["text"] ?? .null, "uid": .int(Int64(context.peer.uid))]))
            case "Count":
                let count = Int(call.parameters["n"]?.int ?? 0)
                for index in 1...max(count, 1) {
                    await replies.send(VarlinkReply(parameters: ["index": .int(Int64(index))], continues: replies.more && index < count))
                }
            default:
                await replies.send(.methodNotFound(call.method))
            }
        }
    }

    static let interface = """
        interface org.example.Echo
        method Echo(text: string) -> (text: string, uid: int)
        method Count(n: int) -> (index: int)
        """

    /// A server on a socket in a directory of its own, stopped and removed after `body`.
    static func withServer(maximumMessageBytes: Int = 1 << 20, _ body: (String) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("varlink-server-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = VarlinkServerConfiguration(errorInterface: "org.example.Echo")
        configuration.maximumMessageBytes = maximumMessageBytes
        let info = VarlinkServiceInfo(vendor: "test", product: "echo", version: "1", url: "https://example.org",
                                      interfaces: [(name: "org.example.Echo", description: interface)])
        let server = VarlinkServer(configuration: configuration, info: info, handler: EchoHandler(),
                                   logger: Logger(label: "varlink-server-test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let socket = directory.appendingPathComponent("echo.sock").path
        try await server.start(.path(socket))
        do {
            try await body(socket)
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
    }

    @Test func aCallIsAnsweredWithTheCallersUidFromTheKernel() async throws {
        try await Self.withServer { socket in
            let reply = try await Self.blocking {
                try VarlinkConnection(unixSocketPath: socket).call(VarlinkCall(method: "org.example.Echo.Echo",
                                                                               parameters: ["text": .string("hi"), "uid": .int(4242)]))
            }
            #expect(reply.error == nil && reply.parameters["text"]?.string == "hi")
            // The uid a caller sends is a parameter like any other; the server's is the kernel's.
            #expect(reply.parameters["uid"]?.int == Int64(getuid()))
        }
    }

    @Test func theServiceInterfaceIsTheServersOwn() async throws {
        try await Self.withServer { socket in
            let (info, description, unknown) = try await Self.blocking {
                let connection = try VarlinkConnection(unixSocketPath: socket)
                return (try connection.call(VarlinkCall(method: "org.varlink.service.GetInfo")),
                        try connection.call(VarlinkCall(method: "org.varlink.service.GetInterfaceDescription",
                                                        parameters: ["interface": .string("org.example.Echo")])),
                        try connection.call(VarlinkCall(method: "org.example.Other.Call")))
            }
            #expect(info.parameters["product"]?.string == "echo")
            #expect(description.parameters["description"]?.string == Self.interface)
            #expect(unknown.error == "org.varlink.service.InterfaceNotFound", "\(unknown)")
        }
    }

    @Test func aMoreCallStreamsItsRepliesInOrder() async throws {
        try await Self.withServer { socket in
            let indexes = try await Self.blocking {
                let connection = try VarlinkConnection(unixSocketPath: socket)
                var last = try connection.call(VarlinkCall(method: "org.example.Echo.Count", parameters: ["n": .int(3)], more: true))
                var indexes = [last.parameters["index"]?.int]
                while last.continues {
                    last = try connection.nextReply(timeout: .seconds(5))
                    indexes.append(last.parameters["index"]?.int)
                }
                return indexes
            }
            #expect(indexes == [1, 2, 3])
        }
    }

    @Test func aFrameOverTheLimitGetsTheProtocolErrorAndTheConnectionCloses() async throws {
        try await Self.withServer(maximumMessageBytes: 4096) { socket in
            let (reply, closed, other) = try await Self.blocking {
                let connection = try VarlinkConnection(unixSocketPath: socket)
                let reply = try connection.call(VarlinkCall(method: "org.example.Echo.Echo",
                                                            parameters: ["text": .string(String(repeating: "x", count: 8192))]))
                let closed = (try? connection.nextReply(timeout: .seconds(5))) == nil
                // Everyone else is still served.
                let other = try VarlinkConnection(unixSocketPath: socket).call(VarlinkCall(method: "org.example.Echo.Echo",
                                                                                           parameters: ["text": .string("still")]))
                return (reply, closed, other)
            }
            #expect(reply.error == "org.example.Echo.ProtocolError", "\(reply)")
            #expect(reply.parameters["reason"]?.string?.contains("4096") == true, "\(reply)")
            #expect(closed, "the refused connection stayed open")
            #expect(other.parameters["text"]?.string == "still")
        }
    }
}
