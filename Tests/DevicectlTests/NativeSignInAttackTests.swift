import Foundation
import ProcessTestSupport
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Native sign-in (StartNativeSignIn) attacked by real processes against a real deviced on a kiosk whose
/// authority is a Microsoft Entra External ID tenant. deviced reaches that authority through `https_proxy`,
/// here a listener of the test's on loopback: every exchange deviced starts with the authority shows as a
/// connection to it, and none is ever answered.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct NativeSignInAttackTests {
    typealias Daemon = BrokerDaemon
    static let tenantID = "aaaabbbb-0000-cccc-1111-dddd2222eeee"

    /// A TCP listener on 127.0.0.1 that only counts and reads what connects (the proxy deviced is given).
    final class Listener {
        let descriptor: Int32
        let port: UInt16

        init() throws {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            try #require(descriptor >= 0)
            self.descriptor = descriptor
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    bind(descriptor, pointer, length) == 0 && listen(descriptor, 16) == 0
                        && getsockname(descriptor, pointer, &length) == 0
                }
            }
            try #require(bound, "cannot listen on loopback: \(errno)")
            port = UInt16(bigEndian: address.sin_port)
        }

        deinit { close(descriptor) }

        /// A connection waiting to be taken now, if any: its first bytes (the proxy request), then closed.
        func take() -> String? {
            let connection = accept(descriptor, nil, nil)
            guard connection >= 0 else { return nil }
            defer { close(connection) }
            var buffer = [UInt8](repeating: 0, count: 512)
            let count = read(connection, &buffer, buffer.count)
            return String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self)
        }

        /// The first connection within `timeout` (a bound for a hang, not a speed).
        func waitForConnection(timeout: TimeInterval = ChildProcess.shortestWait) async -> String? {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if let request = take() { return request }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return nil
        }
    }

    /// policies/kiosk.json with a native-auth tenant as its authority.
    static func nativeAuthPolicy() throws -> URL {
        var policy = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: DevicectlRunner.policy("kiosk.json")))
            ) as? [String: Any]
        )
        var authority = try #require(policy["authority"] as? [String: Any])
        authority["issuer"] = "https://contoso.ciamlogin.com/\(tenantID)"
        authority["flows"] = ["nativeAuth"]
        policy["authority"] = authority
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("native-policy-\(UUID()).json")
        try JSONSerialization.data(withJSONObject: policy).write(to: file)
        return file
    }

    @Test func aUsernameWithControlCharactersFromAnAppIsRefusedBeforeTheAuthorityOrTheAuditLogSeesIt() async throws {
        let policy = try Self.nativeAuthPolicy()
        defer { try? FileManager.default.removeItem(at: policy) }
        let daemon = try await Daemon(policy: policy.path)
        let proxy = try Listener()
        try await daemon.start(
            ["--log-level", "debug"],
            environment: ["https_proxy": "http://127.0.0.1:\(proxy.port)", "no_proxy": "", "NO_PROXY": ""]
        )
        let client = daemon.publicDirectory.appendingPathComponent("varlink-call")
        try VarlinkCallClient.build(at: client, scratch: daemon.publicDirectory)
        let before = try await daemon.auditEvents().count

        // The scanner's own client sends usernames no library of ours would: each refused as invalid, at once.
        let usernames = [
            "worker1@contoso.example\nSHAREDMODE_AUDIT_TYPE=device.deprovisioned\nPRIORITY=0",
            "\u{1b}[2Jworker1@contoso.example", "worker1\u{0}@contoso.example", "worker1\r@contoso.example",
        ]
        var calls: [String] = []
        for username in usernames {
            calls.append(try VarlinkCallClient.call("StartNativeSignIn", ["username": username]))
            calls.append(
                try VarlinkCallClient.call("StartNativeSignIn", ["username": username, "switchReason": "shift-end"])
            )
        }
        let refused = try await Command.run(
            Daemon.setpriv,
            Daemon.asUser(Daemon.scannerUID) + [client.path, daemon.socketPath] + calls
        )
        let replies = VarlinkCallClient.replies(refused.stdout)
        #expect(replies.count == calls.count, "\(refused.stdout) \(refused.stderr)")
        for reply in replies {
            #expect(reply["error"] as? String == "org.varlink.service.InvalidParameter", "\(reply)")
            #expect((reply["parameters"] as? [String: Any])?["parameter"] as? String == "username", "\(reply)")
        }
        #expect(proxy.take() == nil, "a refused username reached the authority")
        let events = try await daemon.auditEvents()
        #expect(events.count == before, "\(events.suffix(events.count - before))")

        // The same call with a plain username does go to the authority (through the proxy, never answered):
        // what the refusals above did not.
        let plain = try ChildProcess(
            Daemon.setpriv,
            Daemon.asUser(Daemon.scannerUID) + [
                client.path, daemon.socketPath,
                try VarlinkCallClient.call("StartNativeSignIn", ["username": "worker1@contoso.example"]),
            ]
        )
        let request = await proxy.waitForConnection()
        #expect(request?.contains("contoso.ciamlogin.com") == true, "\(String(describing: request))")
        #expect(await plain.waitForExit(timeout: ChildProcess.shortestWait), "\(plain.standardError)")
        await daemon.cleanUp()
    }
}
