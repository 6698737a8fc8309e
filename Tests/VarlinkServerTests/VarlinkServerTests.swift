import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing
import Varlink
import VarlinkServer

#if canImport(Glibc)
import Glibc
#endif

/// The varlink server alone, on a real Unix socket with a small handler: who calls comes from the
/// kernel, org.varlink.service is answered by the server, `more` calls stream, and a frame over the limit
/// is refused with the interface's ProtocolError before the connection closes, a peer that half-closes
/// still gets its replies, a graceful shutdown lets the call in progress finish, and handlers that block
/// their threads leave the cooperative pool to everyone else. The blocking client runs on a thread of its
/// own (`blocking`), never on the cooperative pool the server needs.
@Suite struct VarlinkServerTests {
    /// Runs `body` (blocking socket calls) on a thread of its own and returns what it returned.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }

    /// Whether a connection to `path` is refused now (nothing listens there). Never waits: a listener that no
    /// longer accepts but is not closed yet fills its backlog, and a blocking connect would wait on it for ever.
    static func connectionRefused(_ path: String) -> Bool {
        let (descriptor, error) = connectUnix(path: path, flags: Int32(SOCK_NONBLOCK.rawValue))
        if descriptor >= 0 { close(descriptor) }
        return error == ECONNREFUSED || error == ENOENT
    }

    /// `org.example.Echo.Echo(text)` → `(text, uid)` (the caller's uid as the server was told by the kernel);
    /// `Count(n)` with `more` → n replies.
    struct EchoHandler: VarlinkMethodHandler {
        func handle(_ call: VarlinkCall, context: VarlinkCallContext, replies: VarlinkReplies) async {
            switch call.member {
            case "Echo":
                await replies.send(
                    VarlinkReply(parameters: [
                        "text": call.parameters["text"] ?? .null, "uid": .int(Int64(context.peer.uid)),
                    ])
                )
            case "Count":
                let count = Int(call.parameters["n"]?.int ?? 0)
                for index in 1...max(count, 1) {
                    await replies.send(
                        VarlinkReply(
                            parameters: ["index": .int(Int64(index))],
                            continues: replies.more && index < count
                        )
                    )
                }
            default:
                await replies.send(.methodNotFound(call.method))
            }
        }
    }

    /// `org.example.Echo.Block` blocks its thread (as a store call waiting for SQLite's write lock does)
    /// until the test opens the gate, and counts the calls that got that far; the other methods are
    /// `EchoHandler`'s.
    final class GateHandler: VarlinkMethodHandler {
        let entered = Atomic<Int>(0)
        let gate = DispatchSemaphore(value: 0)

        func handle(_ call: VarlinkCall, context: VarlinkCallContext, replies: VarlinkReplies) async {
            guard call.member == "Block" else {
                return await EchoHandler().handle(call, context: context, replies: replies)
            }
            entered.add(1, ordering: .relaxed)
            blockUntilOpened()
            await replies.send(VarlinkReply(parameters: [:]))
        }

        /// A synchronous wait, like a blocking store call made from async code.
        private func blockUntilOpened() { gate.wait() }
    }

    static let interface = """
        interface org.example.Echo
        method Echo(text: string) -> (text: string, uid: int)
        method Count(n: int) -> (index: int)
        method Block() -> ()
        """

    /// A server (not yet running) on a socket in a directory of its own: the server, its socket, the
    /// directory to remove afterwards, and what its `onServerRunning` hook says (once it accepts connections;
    /// the stream ends when `run()` returns, through `running(_:)`).
    static func makeServer(
        maximumMessageBytes: Int = 1 << 20,
        messageTimeout: TimeAmount = .seconds(10),
        handler: any VarlinkMethodHandler = EchoHandler(),
        handlerThreads: Int = 4,
        configure: (inout VarlinkServerConfiguration) -> Void = { _ in }
    ) throws -> (VarlinkServer, String, URL, Running) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "varlink-server-\(UUID().uuidString.prefix(8))"
        )
        try FileManager.default.createDirectory(
            at: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        var configuration = VarlinkServerConfiguration(errorInterface: "org.example.Echo")
        configuration.maximumMessageBytes = maximumMessageBytes
        configuration.messageTimeout = messageTimeout
        configure(&configuration)
        let info = VarlinkServiceInfo(
            vendor: "test",
            product: "echo",
            version: "1",
            url: "https://example.org",
            interfaces: [(name: "org.example.Echo", description: interface)]
        )
        let socket = directory.appendingPathComponent("echo.sock").path
        let running = Running()
        let server = VarlinkServer(
            listener: .path(socket),
            configuration: configuration,
            info: info,
            handler: handler,
            handlerThreads: handlerThreads,
            onServerRunning: { running.continuation.yield() },
            logger: Logger(label: "varlink-server-test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        return (server, socket, directory, running)
    }

    /// What a server's `onServerRunning` hook said: waited for by the test before it connects.
    struct Running: Sendable {
        let stream: AsyncStream<Void>
        let continuation: AsyncStream<Void>.Continuation

        init() {
            (stream, continuation) = AsyncStream<Void>.makeStream()
        }

        /// Runs `server` (in `group`) and returns once it accepts connections.
        /// - Throws: what `run()` threw, when it returned before it ran.
        func start(_ server: VarlinkServer, in group: inout ThrowingTaskGroup<Void, any Error>) async throws {
            group.addTask { [continuation] in
                defer { continuation.finish() }
                try await server.run()
            }
            var iterator = stream.makeAsyncIterator()
            if await iterator.next() == nil {
                try await group.next()
                throw VarlinkServerTestError.serverEndedBeforeRunning
            }
        }
    }

    enum VarlinkServerTestError: Error { case serverEndedBeforeRunning }

    /// A server on a socket in a directory of its own, running (its `run()` in a child task) while `body`
    /// runs, then shut down gracefully and removed.
    static func withServer(
        maximumMessageBytes: Int = 1 << 20,
        messageTimeout: TimeAmount = .seconds(10),
        handler: any VarlinkMethodHandler = EchoHandler(),
        handlerThreads: Int = 4,
        configure: (inout VarlinkServerConfiguration) -> Void = { _ in },
        _ body: (String) async throws -> Void
    ) async throws {
        let (server, socket, directory, running) = try makeServer(
            maximumMessageBytes: maximumMessageBytes,
            messageTimeout: messageTimeout,
            handler: handler,
            handlerThreads: handlerThreads,
            configure: configure
        )
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            try await running.start(server, in: &group)
            // A failing body leaves the group by throwing: the server's task is cancelled and closes everything.
            try await body(socket)
            server.shutdown()
            try await group.waitForAll()
        }
        #expect(!FileManager.default.fileExists(atPath: socket), "the socket was left behind")
    }

    @Test func aCallIsAnsweredWithTheCallersUidFromTheKernel() async throws {
        try await Self.withServer { socket in
            let reply = try await Self.blocking {
                try VarlinkConnection(unixSocketPath: socket).call(
                    VarlinkCall(
                        method: "org.example.Echo.Echo",
                        parameters: ["text": .string("hi"), "uid": .int(4242)]
                    )
                )
            }
            #expect(reply.error == nil && reply.parameters["text"]?.string == "hi")
            // The uid a caller sends is a parameter like any other; the server's is the kernel's.
            #expect(reply.parameters["uid"]?.int == Int64(getuid()))
        }
    }

    /// `org.example.Echo.Count` to 3 with `more` on `connection`: the indexes of its replies, in order.
    static func countToThree(on connection: VarlinkConnection) throws -> [Int64?] {
        var last = try connection.call(
            VarlinkCall(method: "org.example.Echo.Count", parameters: ["n": .int(3)], more: true)
        )
        var indexes = [last.parameters["index"]?.int]
        while last.continues {
            last = try connection.nextReply(timeout: .seconds(120))
            indexes.append(last.parameters["index"]?.int)
        }
        return indexes
    }

    /// Answers `org.example.Echo.Where` with whether the call runs on an event loop's thread.
    struct WhereHandler: VarlinkMethodHandler {
        func handle(_ call: VarlinkCall, context: VarlinkCallContext, replies: VarlinkReplies) async {
            guard call.member == "Where" else {
                return await EchoHandler().handle(call, context: context, replies: replies)
            }
            await replies.send(
                VarlinkReply(parameters: ["onEventLoop": .bool(MultiThreadedEventLoopGroup.currentEventLoop != nil)])
            )
        }
    }

    @Test(arguments: [false, true])
    func callsRunOnTheHandlersThreadsUnlessTheConfigurationPutsThemOnTheEventLoop(onEventLoop: Bool) async throws {
        func configure(_ configuration: inout VarlinkServerConfiguration) {
            configuration.runsCallsOnEventLoop = onEventLoop
        }
        try await Self.withServer(handler: WhereHandler(), configure: configure) { socket in
            let (place, indexes) = try await Self.blocking {
                let connection = try VarlinkConnection(unixSocketPath: socket)
                let place = try connection.call(VarlinkCall(method: "org.example.Echo.Where"))
                return (place, try Self.countToThree(on: connection))
            }
            #expect(place.parameters["onEventLoop"]?.bool == onEventLoop, "\(place)")
            #expect(indexes == [1, 2, 3])
        }
    }

    @Test func theServiceInterfaceIsTheServersOwn() async throws {
        try await Self.withServer { socket in
            let (info, description, unknown) = try await Self.blocking {
                let connection = try VarlinkConnection(unixSocketPath: socket)
                return (
                    try connection.call(VarlinkCall(method: "org.varlink.service.GetInfo")),
                    try connection.call(
                        VarlinkCall(
                            method: "org.varlink.service.GetInterfaceDescription",
                            parameters: ["interface": .string("org.example.Echo")]
                        )
                    ),
                    try connection.call(VarlinkCall(method: "org.example.Other.Call"))
                )
            }
            #expect(info.parameters["product"]?.string == "echo")
            #expect(description.parameters["description"]?.string == Self.interface)
            #expect(unknown.error == "org.varlink.service.InterfaceNotFound", "\(unknown)")
        }
    }

    @Test func aMoreCallStreamsItsRepliesInOrder() async throws {
        try await Self.withServer { socket in
            let indexes = try await Self.blocking {
                try Self.countToThree(on: VarlinkConnection(unixSocketPath: socket))
            }
            #expect(indexes == [1, 2, 3])
        }
    }

    @Test func aFrameOverTheLimitGetsTheProtocolErrorAndTheConnectionCloses() async throws {
        try await Self.withServer(maximumMessageBytes: 4096) { socket in
            let (reply, closed, other) = try await Self.blocking {
                let connection = try VarlinkConnection(unixSocketPath: socket)
                let reply = try connection.call(
                    VarlinkCall(
                        method: "org.example.Echo.Echo",
                        parameters: ["text": .string(String(repeating: "x", count: 8192))]
                    )
                )
                let closed = (try? connection.nextReply(timeout: .seconds(120))) == nil
                // Everyone else is still served.
                let other = try VarlinkConnection(unixSocketPath: socket).call(
                    VarlinkCall(
                        method: "org.example.Echo.Echo",
                        parameters: ["text": .string("still")]
                    )
                )
                return (reply, closed, other)
            }
            #expect(reply.error == "org.example.Echo.ProtocolError", "\(reply)")
            #expect(reply.parameters["reason"]?.string?.contains("4096") == true, "\(reply)")
            #expect(closed, "the refused connection stayed open")
            #expect(other.parameters["text"]?.string == "still")
        }
    }

    @Test func handlersBlockingTheirThreadsLeaveTheCooperativePoolFree() async throws {
        // More blocked calls than Swift's cooperative pool has threads (one per core): on that pool they
        // would park it, and with it everything else of the process.
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let blockers = cores + 2
        let handler = GateHandler()
        // Every blocked call gets as far as blocking on a handler thread of its own; one thread is spare.
        try await Self.withServer(handler: handler, handlerThreads: blockers + 1) { socket in
            let (poolRan, product) = try await Self.blocking { () throws -> (Bool, String?) in
                var connections: [VarlinkConnection] = []
                // The gate opens whatever happens, so that the server can stop.
                defer { for _ in 0..<blockers { handler.gate.signal() } }
                for _ in 0..<blockers {
                    let connection = try VarlinkConnection(unixSocketPath: socket)
                    try connection.send(VarlinkCall(method: "org.example.Echo.Block"))
                    connections.append(connection)
                }
                // (Every bound below catches a hang, never a speed: a parked pool never runs anything again.)
                let deadline = Date().addingTimeInterval(120)
                while handler.entered.load(ordering: .relaxed) < blockers && Date() < deadline { usleep(10_000) }
                // A task of this process (the server's process) still runs on the cooperative pool...
                let ran = DispatchSemaphore(value: 0)
                Task.detached { ran.signal() }
                let poolRan = ran.wait(timeout: .now() + 120) == .success
                // ...and another connection is served.
                let other = try VarlinkConnection(unixSocketPath: socket)
                try other.send(VarlinkCall(method: "org.varlink.service.GetInfo"))
                return (poolRan, try? other.nextReply(timeout: .seconds(120)).parameters["product"]?.string)
            }
            #expect(handler.entered.load(ordering: .relaxed) >= blockers, "not every call reached its handler")
            #expect(poolRan, "the cooperative pool was parked by handlers blocking their threads")
            #expect(
                product == "echo",
                "another connection's GetInfo was not answered while handlers blocked their threads"
            )
        }
    }

    @Test func callsPipelinedBeyondTheQueueLimitGetTheProtocolErrorAheadOfTheCallRunning() async throws {
        let handler = GateHandler()
        try await Self.withServer(handler: handler) { socket in
            let (first, closed) = try await Self.blocking { () throws -> (VarlinkReply?, Bool) in
                defer { handler.gate.signal() }
                let connection = try VarlinkConnection(unixSocketPath: socket)
                // A call that does not end, then 64 more behind it: one more than the 64 a connection may queue.
                try connection.send(VarlinkCall(method: "org.example.Echo.Block"))
                for index in 0..<64 {
                    try connection.send(
                        VarlinkCall(method: "org.example.Echo.Echo", parameters: ["text": .string("\(index)")])
                    )
                }
                let first = try? connection.nextReply(timeout: .seconds(120))
                return (first, (try? connection.nextReply(timeout: .seconds(120))) == nil)
            }
            #expect(first?.error == "org.example.Echo.ProtocolError", "\(String(describing: first))")
            #expect(
                first?.parameters["reason"]?.string
                    == "more than 64 calls queued on one connection (the limit); wait for replies before sending more"
            )
            #expect(closed, "the connection over its queue limit stayed open")
        }
    }

    @Test func aPeerThatStopsSendingGetsEveryReplyThenTheClose() async throws {
        try await Self.withServer { socket in
            let received = try await Self.blocking { () throws -> [UInt8] in
                let descriptor = socket_unix(path: socket)
                try #require(descriptor >= 0, "cannot connect: \(errno)")
                defer { close(descriptor) }
                // Three pipelined calls, then the write side shut (`printf … | socat`).
                var calls: [UInt8] = []
                for text in ["one", "two", "three"] {
                    calls += VarlinkCall(method: "org.example.Echo.Echo", parameters: ["text": .string(text)]).encoded()
                }
                _ = calls.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                _ = shutdown(descriptor, Int32(SHUT_WR))
                // A bound on a hang, never on a speed: the replies and the close end the read long before.
                var timeout = timeval(tv_sec: 120, tv_usec: 0)
                setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                var received: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                    if count <= 0 { return count == 0 ? received : [] }
                    received += chunk[..<count]
                }
            }
            let replies = try received.split(separator: 0).map { try VarlinkReply.decode(Data($0)) }
            #expect(
                replies.map { $0.parameters["text"]?.string } == ["one", "two", "three"],
                "the replies before the close: \(replies)"
            )
        }
    }

    /// On a real socket, a message left unfinished is told why and cut off (that streamed messages are not, and
    /// exactly when the deadline falls, `MessageDeadlineTests` show on a clock they move).
    @Test func aMessageLeftUnfinishedIsToldWhyAndCutOff() async throws {
        try await Self.withServer(messageTimeout: .milliseconds(600)) { socket in
            let trickledClosed = try await Self.blocking { () throws -> Bool in
                let call = VarlinkCall(
                    method: "org.example.Echo.Echo",
                    parameters: ["text": .string(String(repeating: "x", count: 64))]
                ).encoded()
                // One call's first half, and nothing more: told why (a protocolError) and cut off after the deadline.
                let trickling = socket_unix(path: socket)
                try #require(trickling >= 0, "cannot connect: \(errno)")
                defer { close(trickling) }
                _ = Array(call[..<(call.count / 2)]).withUnsafeBytes { write(trickling, $0.baseAddress, $0.count) }
                // (A bound on a hang: the reply and the close end the read long before.)
                let cutOff = readReplies(trickling, count: 2, timeout: 120)
                return cutOff.closed && cutOff.replies == 1
            }
            #expect(
                trickledClosed,
                "a message left unfinished past the deadline kept its connection open, or was not told why"
            )
        }
    }

    @Test func aGracefulShutdownLetsTheCallInProgressFinishAndStopsAccepting() async throws {
        let handler = GateHandler()
        let (server, socket, directory, running) = try Self.makeServer(handler: handler)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            try await running.start(server, in: &group)
            let (reply, refusedDuringShutdown) = try await Self.blocking { () throws -> (VarlinkReply?, Bool) in
                defer { handler.gate.signal() }
                let connection = try VarlinkConnection(unixSocketPath: socket)
                try connection.send(VarlinkCall(method: "org.example.Echo.Block"))
                let deadline = Date().addingTimeInterval(120)
                while handler.entered.load(ordering: .relaxed) < 1 && Date() < deadline { usleep(10_000) }
                server.shutdown()
                // The listener closes soon after (however long a loaded machine takes), while the call is in progress.
                var refused = false
                while !refused && Date() < deadline.addingTimeInterval(120) {
                    refused = Self.connectionRefused(socket)
                    if !refused { usleep(10_000) }
                }
                handler.gate.signal()
                return (try? connection.nextReply(timeout: .seconds(120)), refused)
            }
            #expect(
                reply != nil && reply?.error == nil,
                "the call in progress was cut off: \(String(describing: reply))"
            )
            #expect(refusedDuringShutdown, "a connection was accepted after the shutdown began")
            try await group.waitForAll()
        }
    }
}

/// Reads replies from `descriptor` until `count` arrived, the peer closed, or `timeout` seconds passed.
func readReplies(_ descriptor: Int32, count: Int, timeout: Int) -> (replies: Int, closed: Bool) {
    var wait = timeval(tv_sec: timeout, tv_usec: 0)
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
    var replies = 0
    var chunk = [UInt8](repeating: 0, count: 4096)
    while replies < count {
        let read = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        if read == 0 { return (replies, true) }
        if read < 0 { return (replies, false) }
        replies += chunk[..<read].filter { $0 == 0 }.count
    }
    return (replies, false)
}

/// A blocking Unix stream socket connected to `path`, or -1.
func socket_unix(path: String) -> Int32 {
    connectUnix(path: path).descriptor
}

/// A Unix stream socket (with `flags`, e.g. SOCK_NONBLOCK) connected to `path`, or -1 and connect's errno.
func connectUnix(path: String, flags: Int32 = 0) -> (descriptor: Int32, error: Int32) {
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | flags, 0)
    guard descriptor >= 0 else { return (-1, errno) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { bytes in
        for (index, byte) in path.utf8.prefix(bytes.count - 1).enumerated() { bytes[index] = byte }
    }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard connected == 0 else {
        let error = errno
        close(descriptor)
        return (-1, error)
    }
    return (descriptor, 0)
}
