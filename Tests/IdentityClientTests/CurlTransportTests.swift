import Foundation
import ProcessTestSupport
import Testing

@testable import IdentityClient

/// The identity client's HTTP transport (libcurl, loaded on the first request) against a real loopback server.
@Suite struct CurlTransportTests {
    /// `Tests/Python/http_echo_server.py`, running until the value goes away.
    final class EchoServer: @unchecked Sendable {
        let process = Process()
        let port: Int

        init() throws {
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Python/http_echo_server.py")
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = [script.path]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            // Killed with the test process should a test end before its server goes away (a task still holding it).
            ChildWatchdog.watch(process.processIdentifier)
            var line = Data()
            while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8)
            { line += byte }
            guard let port = Int(String(decoding: line, as: UTF8.self)) else { throw CocoaError(.fileReadCorruptFile) }
            self.port = port
        }

        func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

        deinit {
            kill(process.processIdentifier, SIGKILL)  // SIGTERM may be blocked in what the test runner spawns
            process.waitUntilExit()
            ChildWatchdog.release(process.processIdentifier)
        }
    }

    @Test func aFormPostArrivesWithItsHeadersAndTheAnswerComesBackWhole() async throws {
        let server = try EchoServer()
        let fields = [
            ("grant_type", "refresh_token"), ("scope", "openid User.Read"),
            ("padding", String(repeating: "x", count: 3000)),
        ]
        let response = try await CurlTransport(timeout: 10).send(.form(server.url("/echo"), fields))
        #expect(response.status == 201 && response.isSuccess)
        #expect(
            response.headers["x-echo-method"] == "POST" && response.headers["content-type"] == "application/json",
            "\(response.headers)"
        )
        let echo = try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
        #expect(echo["body"] as? String == FormEncoding.encode(fields))
        let headers = try #require(echo["headers"] as? [String: String])
        #expect(
            headers["Content-Type"] == "application/x-www-form-urlencoded" && headers["Accept"] == "application/json"
        )
        #expect(headers["Expect"] == nil, "a form body went out behind Expect: 100-continue")

        let get = try await CurlTransport(timeout: 10).send(
            HTTPRequest(url: server.url("/echo?x=1"), headers: ["Authorization": "Bearer t"])
        )
        let getEcho = try #require(try JSONSerialization.jsonObject(with: get.body) as? [String: Any])
        #expect(getEcho["method"] as? String == "GET" && getEcho["path"] as? String == "/echo?x=1")
        #expect((getEcho["headers"] as? [String: String])?["Authorization"] == "Bearer t")
    }

    /// The server never answers `/slow`: only the timeout ends the request (the time limit catches a hang).
    @Test(.timeLimit(.minutes(3))) func aSlowAuthorityTimesOutAsUnreachable() async throws {
        let server = try EchoServer()
        do {
            _ = try await CurlTransport(timeout: 1).send(HTTPRequest(url: server.url("/slow")))
            Issue.record("an answer arrived from a server that never answers")
        } catch {
            #expect(error.code == .authorityUnreachable && error.message.contains("timed out"), "\(error.message)")
            #expect(error.message.contains("127.0.0.1:\(server.port)") && !error.message.contains("/slow"))
        }
    }

    /// The server never answers `/slow` and the timeout is an hour: only the cancellation ends the request.
    @Test(.timeLimit(.minutes(3))) func cancelingTheTaskStopsTheRequestAsUserCanceled() async throws {
        let server = try EchoServer()
        let request = Task { () async throws(IdentityError) -> HTTPResponse in
            try await CurlTransport(timeout: 3600).send(HTTPRequest(url: server.url("/slow")))
        }
        try await Task.sleep(for: .milliseconds(300))
        request.cancel()
        let result = await request.result
        guard case .failure(let failure) = result, let error = failure as? IdentityError else {
            Issue.record("the canceled request answered or failed otherwise: \(result)")
            return
        }
        #expect(error.code == .userCanceled, "\(error.message)")
    }

    @Test func exchangesBeyondTheSlotsWaitTheirTurnInsteadOfBeingRefused() async throws {
        let server = try EchoServer()
        let slots = CurlExchangeSlots(maximum: 1)
        let slow = Task { () async throws(IdentityError) -> HTTPResponse in
            try await CurlTransport(timeout: 60, slots: slots).send(HTTPRequest(url: server.url("/slow")))
        }
        try #require(await Self.until { slots.inUse == 1 }, "the first exchange never took its slot")
        let next = Task { () async throws(IdentityError) -> HTTPResponse in
            try await CurlTransport(timeout: 30, slots: slots).send(HTTPRequest(url: server.url("/echo?x=2")))
        }
        try #require(await Self.until { slots.waiting == 1 }, "the second exchange did not wait for a slot")
        #expect(slots.inUse == 1, "two exchanges ran at once on one slot")
        // The slot comes free: the waiting exchange runs, and is answered.
        slow.cancel()
        let response = try await next.value
        #expect(response.isSuccess, "\(response.status)")
        #expect(slots.inUse == 0 && slots.waiting == 0)
    }

    @Test func aCallerCanceledWhileWaitingForASlotLeavesTheLine() async throws {
        let server = try EchoServer()
        let slots = CurlExchangeSlots(maximum: 1)
        let slow = Task { () async throws(IdentityError) -> HTTPResponse in
            try await CurlTransport(timeout: 60, slots: slots).send(HTTPRequest(url: server.url("/slow")))
        }
        try #require(await Self.until { slots.inUse == 1 })
        let waiting = Task { () async throws(IdentityError) -> HTTPResponse in
            try await CurlTransport(timeout: 30, slots: slots).send(HTTPRequest(url: server.url("/echo")))
        }
        try #require(await Self.until { slots.waiting == 1 })
        waiting.cancel()
        guard case .failure(let failure) = await waiting.result, let error = failure as? IdentityError else {
            Issue.record("the canceled waiting exchange ran")
            slow.cancel()
            return
        }
        #expect(error.code == .userCanceled, "\(error.message)")
        #expect(slots.waiting == 0 && slots.inUse == 1)
        slow.cancel()
        _ = await slow.result
        #expect(slots.inUse == 0)
    }

    @Test func anAppHoldingEverySlotGivesTheNextFreeOneToAnotherAppThatWaits() async throws {
        let server = try EchoServer()
        let slots = CurlExchangeSlots(maximum: 4)
        let attacker: UInt32 = 1001
        let victim: UInt32 = 1002
        /// A task of `owner`'s sending one request to `path` (`/slow` answers when canceled only).
        func exchange(_ owner: UInt32, _ path: String) -> Task<HTTPResponse, any Error> {
            Task {
                try await CurlExchangeSlots.Owner.$current.withValue(owner) {
                    try await CurlTransport(timeout: 60, slots: slots).send(HTTPRequest(url: server.url(path)))
                }
            }
        }
        // Nobody else calls: one app may take every slot, and queue more.
        var attackers = (0..<4).map { _ in exchange(attacker, "/slow") }
        try #require(await Self.until { slots.inUse(by: attacker) == 4 }, "the app did not get the free slots")
        attackers.append(exchange(attacker, "/slow"))
        try #require(await Self.until { slots.waiting == 1 })
        // Another app asks: it waits behind the app's queued exchange, but takes the first slot given back.
        let other = exchange(victim, "/slow")
        try #require(await Self.until { slots.waiting == 2 })
        attackers.removeFirst().cancel()
        #expect(
            await Self.until { slots.inUse(by: victim) == 1 },
            "the slot given back went to the app that held them all"
        )
        #expect(slots.inUse(by: attacker) == 3 && slots.waiting == 1, "\(slots.inUse(by: attacker)) \(slots.waiting)")
        // The victim done, nobody else waits: the app's queued exchange takes the slot.
        other.cancel()
        _ = await other.result
        #expect(await Self.until { slots.inUse(by: attacker) == 4 && slots.waiting == 0 })
        for task in attackers { task.cancel() }
        for task in attackers { _ = await task.result }
        #expect(slots.inUse == 0 && slots.waiting == 0)
    }

    /// Polls `condition` until it holds (true) or 120 seconds passed (false: a bound for a hang, not a speed).
    static func until(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<12_000 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }

    @Test func onlyTheLastResponsesHeadersCount() {
        let raw =
            "HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control:  no-store \r\n\r\n"
        #expect(CurlTransport.parseHeaders(raw) == ["content-type": "application/json", "cache-control": "no-store"])
    }
}
