import BrokerAPIPageSupport
import BrokerServer
import Foundation
import IdentityTestSupport
import Logging
import ProcessTestSupport
import StoreTestSupport
import Testing
@_spi(Testing) import VarlinkServer

/// broker-api.md's exchanges that need a Microsoft Entra External ID authority (`<!-- replay: …; native
/// authority -->`), sent as written by the independent raw client (`Tests/Python/wire_replay.py`) over a real
/// socket to the broker served as deviced serves it, in this process: its authority is the scripted stand-in
/// of Microsoft's native authentication API (`NativeAuthBrokerTests.Kiosk`), which is what it cannot reach
/// from here. The caller is the scanner app's uid through the server's tests-only identity hook.
@Suite struct NativeAuthPageReplayTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Python/wire_replay.py")

    @Test func theNativeSignInExchangesReplayAsRecorded() async throws {
        let exchanges = try BrokerAPIPage.exchanges().filter(\.note.nativeAuthority)
        try #require(!exchanges.isEmpty, "broker-api.md has no exchange marked `native authority`")
        for exchange in exchanges {
            try await replay(exchange)
        }
    }

    private func replay(_ exchange: BrokerAPIPage.Exchange) async throws {
        try #require(
            exchange.note.caller == "scanner",
            "line \(exchange.line): only the scanner replays against the stand-in"
        )
        let kiosk = try NativeAuthBrokerTests.Kiosk()
        // The sign-in of the page: the code goes to Ana's mail, the code typed is taken.
        kiosk.transport.enqueue(NativeAuthBrokerTests.initiatePath, .json(["continuation_token": "ct-1"]))
        kiosk.transport.enqueue(NativeAuthBrokerTests.challengePath, .json(NativeAuthBrokerTests.codeSent))
        kiosk.transport.enqueue(NativeAuthBrokerTests.tokenPath, try await kiosk.tokens())

        let directory = TemporaryStateDirectory("native-page")
        let socket = directory.url.appendingPathComponent("broker.sock").path
        var configuration = VarlinkServerConfiguration.broker(kiosk.broker)
        configuration.callerIdentity = { kernel in
            PeerCredentials(
                pid: kernel.pid,
                uid: NativeAuthBrokerTests.scannerUID,
                gid: NativeAuthBrokerTests.scannerUID
            )
        }
        let (running, started) = AsyncStream<Void>.makeStream()
        let server = VarlinkServer(
            listener: .path(socket),
            configuration: configuration,
            info: .broker,
            handler: BrokerMethodHandler(broker: kiosk.broker),
            onServerRunning: { started.yield() },
            logger: .init(label: "native-page", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { started.finish() }
                try await server.run()
            }
            var iterator = running.makeAsyncIterator()
            try #require(await iterator.next() != nil, "the server ended before it served")
            defer { server.shutdown() }
            for messages in exchange.connections {
                try await replayConnection(messages, at: socket, in: directory.url, line: exchange.line)
            }
            server.shutdown()
            try await group.waitForAll()
        }
    }

    private func replayConnection(
        _ messages: [BrokerAPIPage.Message],
        at socket: String,
        in directory: URL,
        line: Int
    ) async throws {
        let file = directory.appendingPathComponent("replay-\(UUID().uuidString).json")
        let script: [String: Any] = [
            "hold": 0,
            "messages": messages.map { ["send": $0.send ?? NSNull(), "replies": $0.replies.count] as [String: Any] },
        ]
        try JSONSerialization.data(withJSONObject: script).write(to: file)
        let client = try ChildProcess(URL(fileURLWithPath: "/usr/bin/python3"), [Self.script.path, socket, file.path])
        defer { _ = client.killIfRunning() }
        try #require(
            await client.waitForExit(timeout: 120) && client.status == 0,
            "line \(line): the raw client did not finish: \(client.lines) \(client.standardError)"
        )
        let replies = client.lines.compactMap { line -> String? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                return nil
            }
            return object["reply"] as? String ?? (object["closed"] != nil ? "closed" : nil)
        }
        let expected = messages.flatMap(\.replies)
        try #require(
            replies.count == expected.count,
            "line \(line): \(replies.count) replies came, the page shows \(expected.count): \(replies)"
        )
        for (page, wire) in zip(expected, replies) {
            guard let recorded = try? WireComparison.expected(page, host: "127.0.0.1:4593") else {
                Issue.record(
                    "broker-api.md line \(line): a recorded reply that is not JSON: \(page) — the wire's: \(wire)"
                )
                continue
            }
            let difference = WireComparison.difference(recorded, try WireJSON.parse(wire))
            #expect(difference == nil, "broker-api.md line \(line): \(difference ?? "") — the wire's reply: \(wire)")
        }
    }
}
