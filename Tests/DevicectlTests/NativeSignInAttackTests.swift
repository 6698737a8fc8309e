import Foundation
import ProcessTestSupport
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Native sign-in attacked by real processes under the apps' uids against a real deviced on a kiosk whose
/// authority is a Microsoft Entra External ID tenant, reached through `https_proxy`: a listener of the test's
/// that answers nothing (every exchange deviced starts shows as a connection to it), or
/// Tests/Python/native_auth_standin.py, which stands in for the tenant over TLS (deviced trusts its CA in a
/// mount namespace of its own).
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

    /// Tests/Python/native_auth_standin.py in `directory` with `script` (its answers per path), as root; its
    /// port once it listens.
    static func standIn(_ directory: URL, script: [String: [[String: Any]]]) async throws -> (ChildProcess, Int) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try JSONSerialization.data(withJSONObject: script).write(to: directory.appendingPathComponent("script.json"))
        let program = VarlinkCallClient.source.deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Python/native_auth_standin.py")
        let process = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/python3"),
            [program.path, directory.path, tenantID]
        )
        let line = await process.waitForLine(timeout: ChildProcess.shortestWait) { $0.hasPrefix("port ") }
        let port = try #require(line.flatMap { Int($0.dropFirst("port ".count)) }, "\(process.standardError)")
        return (process, port)
    }

    /// The requests the stand-in got, by path.
    static func requests(_ directory: URL) -> [String] {
        let text = (try? String(contentsOf: directory.appendingPathComponent("requests.jsonl"), encoding: .utf8)) ?? ""
        return VarlinkCallClient.replies(text).compactMap { $0["path"] as? String }
    }

    @Test func anotherAppsSubmitOrResendOfANativeSignInIsNotFoundAndTheSignInStillCompletes() async throws {
        let policy = try Self.nativeAuthPolicy()
        defer { try? FileManager.default.removeItem(at: policy) }
        let daemon = try await Daemon(policy: policy.path)
        let directory = daemon.publicDirectory.appendingPathComponent("standin")
        let tenant = Self.tenantID
        let oid = "00000000-0000-0000-66f3-3332eca7ea81"
        let codeSent: [String: Any] = [
            "continuation_token": "ct-2", "challenge_type": "oob", "binding_method": "prompt",
            "challenge_channel": "email", "challenge_target_label": "a***@co**o.com", "code_length": 8,
        ]
        let clientInfo = Data("{\"uid\":\"\(oid)\",\"utid\":\"\(tenant)\"}".utf8).base64EncodedString()
            .replacingOccurrences(of: "=", with: "")
        let tokens: [String: Any] = [
            "token_type": "Bearer", "scope": "User.Read Files.Read openid profile offline_access", "expires_in": 4783,
            "access_token": "at-native", "refresh_token": "rt-native", "client_info": clientInfo,
            "id_token": [
                "claims": [
                    "aud": "kiosk-apps", "iss": "https://login.microsoftonline.com/\(tenant)/v2.0",
                    "name": "Ana Shift", "oid": oid, "preferred_username": "ana@contoso.com", "sub": "sub-of-\(oid)",
                    "tid": tenant, "ver": "2.0",
                ]
            ],
        ]
        let (standIn, port) = try await Self.standIn(
            directory,
            script: [
                "/\(tenant)/oauth2/v2.0/initiate": [["body": ["continuation_token": "ct-1"]]],
                "/\(tenant)/oauth2/v2.0/challenge": [["body": codeSent]],
                "/\(tenant)/oauth2/v2.0/token": [["body": tokens]],
            ]
        )
        defer { _ = standIn.killIfRunning() }
        // deviced trusts the stand-in's CA (in its own mount namespace, over the system's bundle) and reaches
        // the tenant through it.
        let bundle = directory.appendingPathComponent("bundle.pem")
        let system = try Data(contentsOf: URL(fileURLWithPath: "/etc/ssl/certs/ca-certificates.crt"))
        try (system + Data(contentsOf: directory.appendingPathComponent("ca.pem"))).write(to: bundle)
        try await daemon.start(
            ["--log-level", "debug"],
            environment: ["https_proxy": "http://127.0.0.1:\(port)", "no_proxy": "", "NO_PROXY": ""],
            wrapper: [
                "/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
                "mount --bind \"$0\" /etc/ssl/certs/ca-certificates.crt && exec \"$@\"", bundle.path,
            ]
        )
        let client = daemon.publicDirectory.appendingPathComponent("varlink-call")
        try VarlinkCallClient.build(at: client, scratch: daemon.publicDirectory)
        func call(as uid: UInt32, _ method: String, _ parameters: [String: Any]) async throws -> [String: Any] {
            let run = try await Command.run(
                Daemon.setpriv,
                Daemon.asUser(uid) + [client.path, daemon.socketPath, try VarlinkCallClient.call(method, parameters)]
            )
            return try #require(VarlinkCallClient.replies(run.stdout).first, "\(run.stderr) \(daemon.logTail())")
        }

        // The scanner starts a sign-in: the code went by mail.
        let started = try await call(as: Daemon.scannerUID, "StartNativeSignIn", ["username": "ana@contoso.com"])
        let next = try #require(
            (started["parameters"] as? [String: Any])?["next"] as? [String: Any],
            "\(started) \(daemon.logTail())"
        )
        let id = try #require(next["signInId"] as? String, "\(next)")
        // The timeclock, a process under another app's uid, holding the id: neither its submit nor its resend
        // finds the sign-in, and neither reaches the tenant.
        let stolen = try await call(
            as: Daemon.timeclockUID,
            "SubmitNativeSignIn",
            ["signInId": id, "scopes": ["User.Read"], "code": "12345678"]
        )
        let resent = try await call(as: Daemon.timeclockUID, "ResendNativeSignInCode", ["signInId": id])
        for refused in [stolen, resent] {
            #expect(refused["error"] as? String == "org.sharedmode.Broker1.AccountError", "\(refused)")
            #expect((refused["parameters"] as? [String: Any])?["code"] as? String == "signInNotFound", "\(refused)")
        }
        #expect(
            Self.requests(directory).filter { $0.hasSuffix("/challenge") || $0.hasSuffix("/token") }.count == 1,
            "\(Self.requests(directory))"
        )
        #expect(try await daemon.auditEvents().filter { $0["type"] as? String == "account.signed_in" }.isEmpty)

        // The scanner finishes its own sign-in.
        let done = try await call(
            as: Daemon.scannerUID,
            "SubmitNativeSignIn",
            ["signInId": id, "scopes": ["User.Read"], "code": "22222222"]
        )
        let result = (done["parameters"] as? [String: Any])?["result"] as? [String: Any]
        let account = result?["account"] as? [String: Any]
        #expect(account?["username"] as? String == "ana@contoso.com", "\(done) \(daemon.logTail())")
        let signedIn = try await daemon.auditEvents().filter { $0["type"] as? String == "account.signed_in" }
        #expect(signedIn.count == 1, "\(signedIn)")
        let exchanges = Self.requests(directory).filter { $0.contains("/oauth2/v2.0/") }
        #expect(exchanges == ["initiate", "challenge", "token"].map { "/\(tenant)/oauth2/v2.0/\($0)" }, "\(exchanges)")
        await daemon.cleanUp()
    }
}
