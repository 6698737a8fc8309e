import Foundation
import NIOCore
import Synchronization
import Testing
import Varlink
import VarlinkServer

#if canImport(Glibc)
import Glibc
#endif

/// What peers can make the server hold: calls as decoded values (a message over the value limit is refused),
/// calls queued by every peer together (privileged peers still served), and replies a peer leaves unread
/// (bounded per uid: over it, the connection is closed instead of the reply held).
@Suite struct VarlinkServerMemoryTests {
    typealias Server = VarlinkServerTests

    /// Peers are privileged or not as the test says, whoever they are (the tests all run as one uid).
    final class SwitchableAdmission: VarlinkConnectionAdmission {
        let privileged = Mutex(false)

        func allowance(for peer: PeerCredentials) async -> VarlinkConnectionAllowance {
            VarlinkConnectionAllowance(
                connectionsPerUser: 64,
                privileged: privileged.withLock { $0 },
                reservedConnections: 0
            )
        }
    }

    /// Sends `call` whole on a raw socket.
    static func send(_ call: VarlinkCall, on descriptor: Int32) -> Bool {
        let bytes = [UInt8](call.encoded())
        var sent = 0
        while sent < bytes.count {
            let written = bytes[sent...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            guard written > 0 else { return false }
            sent += written
        }
        return true
    }

    /// Waits (up to `timeout` seconds) until `descriptor` has bytes to read or was closed.
    static func readable(_ descriptor: Int32, timeout: Int32) -> Bool {
        var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&ready, 1, timeout * 1000) == 1
    }

    @Test func aMessageOverTheValueLimitGetsTheProtocolErrorAndOthersAreStillServed() async throws {
        let limits: (inout VarlinkServerConfiguration) -> Void = { $0.maximumMessageValues = 100 }
        try await Self.Server.withServer(configure: limits) { socket in
            let (reply, closed, other) = try await Self.Server.blocking {
                let connection = try VarlinkConnection(unixSocketPath: socket)
                let values = VarlinkValue.array(Array(repeating: .object(["": .int(0)]), count: 60))
                let reply = try connection.call(
                    VarlinkCall(method: "org.example.Echo.Echo", parameters: ["text": values])
                )
                let closed = (try? connection.nextReply(timeout: .seconds(120))) == nil
                let other = try VarlinkConnection(unixSocketPath: socket).call(
                    VarlinkCall(
                        method: "org.example.Echo.Echo",
                        parameters: ["text": .string("still")]
                    )
                )
                return (reply, closed, other)
            }
            #expect(reply.error == "org.example.Echo.ProtocolError", "\(reply)")
            #expect(
                reply.parameters["reason"]?.string?.hasPrefix("the message holds more than 100 values (the limit")
                    == true,
                "\(reply)"
            )
            #expect(closed, "the refused connection stayed open")
            #expect(other.parameters["text"]?.string == "still")
        }
    }

    @Test func callsQueuedByEveryPeerTogetherAreBoundedAndAPrivilegedPeerIsStillServed() async throws {
        let handler = VarlinkServerTests.GateHandler()
        let admission = SwitchableAdmission()
        // 3000 bytes in total: one call of 1.5 KB and its four values (128 bytes each) fits, a second does not
        // (every peer here has the same uid: none is guaranteed a share of its own).
        let limits: (inout VarlinkServerConfiguration) -> Void = {
            $0.maximumQueuedBytesInTotal = 3000
            $0.guaranteedQueuedBytesPerUser = 0
            $0.admission = admission
        }
        try await Self.Server.withServer(handler: handler, configure: limits) { socket in
            let padding = VarlinkValue.string(String(repeating: "x", count: 1500))
            let (refused, privileged, released) = try await Self.Server.blocking {
                () throws -> (VarlinkReply, VarlinkReply, VarlinkReply) in
                defer { handler.gate.signal() }
                // A call held (it blocks until the gate opens) by one peer…
                let holder = try VarlinkConnection(unixSocketPath: socket)
                try holder.send(VarlinkCall(method: "org.example.Echo.Block", parameters: ["padding": padding]))
                while handler.entered.load(ordering: .relaxed) == 0 { usleep(1000) }
                // …leaves no room for another peer's,
                let refused = try VarlinkConnection(unixSocketPath: socket).call(
                    VarlinkCall(
                        method: "org.example.Echo.Echo",
                        parameters: ["text": padding]
                    )
                )
                // but an administrator is counted, never refused.
                admission.privileged.withLock { $0 = true }
                let privileged = try VarlinkConnection(unixSocketPath: socket).call(
                    VarlinkCall(
                        method: "org.example.Echo.Echo",
                        parameters: ["text": padding]
                    )
                )
                admission.privileged.withLock { $0 = false }
                handler.gate.signal()
                _ = try holder.nextReply(timeout: .seconds(10))
                // The held call ended: its bytes are free again.
                let released = try VarlinkConnection(unixSocketPath: socket).call(
                    VarlinkCall(
                        method: "org.example.Echo.Echo",
                        parameters: ["text": padding]
                    )
                )
                return (refused, privileged, released)
            }
            #expect(refused.error == "org.example.Echo.ProtocolError", "\(refused)")
            #expect(
                refused.parameters["reason"]?.string
                    == "calls queued by all callers together exceed 3000 bytes (the server's limit); wait for replies before sending more, or try again later"
            )
            #expect(privileged.error == nil && privileged.parameters["text"] == padding, "\(privileged)")
            #expect(released.error == nil && released.parameters["text"] == padding, "\(released)")
        }
    }

    /// Replies a handler gives at once (written inside the read) are held to the same limit.
    @Test(arguments: [false, true])
    func aUidLeavingRepliesUnreadOverItsLimitHasItsNextReplyClosedInsteadOfHeld(atOnce: Bool) async throws {
        let limits: (inout VarlinkServerConfiguration) -> Void = { $0.maximumUnreadReplyBytesPerUser = 64 << 10 }
        let handler: any VarlinkMethodHandler = atOnce ? AtOnceCallTests.AtOnceHandler() : Self.Server.EchoHandler()
        try await Self.Server.withServer(handler: handler, configure: limits) { socket in
            let (closedUnanswered, whole, servedAfter) = try await Self.Server.blocking {
                () throws -> (Bool, Bool, VarlinkReply) in
                // A reply of 600 KB the peer does not read: beyond what the kernel takes, the server holds it.
                let unread = socket_unix(path: socket)
                defer { close(unread) }
                let text = VarlinkValue.string(String(repeating: "x", count: 600_000))
                guard Self.send(VarlinkCall(method: "org.example.Echo.Echo", parameters: ["text": text]), on: unread),
                    Self.readable(unread, timeout: 30)
                else { return (false, false, VarlinkReply(parameters: [:])) }
                // The same uid's next reply is not held: its connection is closed.
                let next = try VarlinkConnection(unixSocketPath: socket)
                let closedUnanswered =
                    (try? next.call(VarlinkCall(method: "org.example.Echo.Echo", parameters: ["text": .string("hi")])))
                    == nil
                // The unread reply is read after all: it comes whole, and the uid is served again.
                let whole = readReplies(unread, count: 1, timeout: 120) == (1, false)
                let servedAfter = try VarlinkConnection(unixSocketPath: socket).call(
                    VarlinkCall(
                        method: "org.example.Echo.Echo",
                        parameters: ["text": .string("again")]
                    )
                )
                return (closedUnanswered, whole, servedAfter)
            }
            #expect(closedUnanswered, "a reply was held for a uid over its unread limit")
            #expect(whole, "the unread reply did not come whole")
            #expect(servedAfter.parameters["text"]?.string == "again", "\(servedAfter)")
        }
    }
}
