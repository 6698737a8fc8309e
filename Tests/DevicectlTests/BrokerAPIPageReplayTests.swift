import BrokerAPIPageSupport
import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// Every recorded exchange of broker-api.md, sent as written to a real `deviced` on a real socket by an
/// independent raw client (`Tests/Python/wire_replay.py`) under the uid of the app the page names, its
/// replies compared with the page's by structure (`WireComparison`). The wire is the truth: a reply that
/// differs means the page is wrong. The exchanges that need no identity provider run here, with the
/// kiosk policy's provider at an address where nothing listens; the others in `BrokerAPIPageSignInReplayTests`.
@Suite(.serialized, .tags(.needsRoot)) struct BrokerAPIPageReplayTests {
    typealias Daemon = BrokerDaemon

    @Test func everyNoteOnThePageIsOneTheReplayReads() throws {
        let exchanges = try BrokerAPIPage.exchanges()
        #expect(exchanges.count > 40, "\(exchanges.count) exchanges")
        // Most of the page is replayed; what is not says why.
        let skipped = exchanges.filter { $0.note.notReplayed != nil }
        #expect(skipped.isEmpty, "\(skipped.map(\.line))")
        #expect(skipped.allSatisfy { !($0.note.notReplayed ?? "").isEmpty })
        // The fields compared by type only are the ones the page lists.
        let page = try String(contentsOf: BrokerAPIPage.path, encoding: .utf8)
        let paragraph = try #require(
            page.components(separatedBy: "\n\n").first { $0.contains("compared by type only") }
        )
        let start = try #require(paragraph.range(of: "versions ("))
        let listed = paragraph[start.upperBound...].prefix { $0 != ")" }
        let names = Set(listed.components(separatedBy: "`").enumerated().filter { $0.offset % 2 == 1 }.map(\.element))
        #expect(
            names == WireComparison.variableFields,
            "the page lists \(names.symmetricDifference(WireComparison.variableFields).sorted()) differently"
        )
    }

    @Test func theExchangesWithoutTheIdentityProviderReplayAsRecorded() async throws {
        let scratch = DevicectlRunner()
        defer { scratch.cleanUp() }
        // The kiosk policy with its provider where nothing listens (port 1): "authority unreachable" is the wire's.
        let policy = try IdentityCLITests.Provider.kioskPolicy(issuer: "http://127.0.0.1:1/api/oidc", in: scratch)
        let daemon = try await Daemon(policy: policy)
        try await daemon.start()
        let replay = BrokerAPIReplay(daemon: daemon, host: "127.0.0.1:1")
        var replayed = 0
        for exchange in try BrokerAPIPage.exchanges()
        where exchange.note.notReplayed == nil && !exchange.note.identityProvider
            && !exchange.note.nativeAuthority
        {
            try #require(
                exchange.note.signedIn == nil || exchange.note.signedIn == "",
                "line \(exchange.line) needs a worker signed in: mark it `identity provider`"
            )
            try #require(
                exchange.note.policy == nil,
                "line \(exchange.line) names a policy with the identity provider's issuer: mark it `identity provider`"
            )
            if exchange.note.daemonArguments.isEmpty {
                await replay.replay(exchange)
            } else {
                let own = try await Daemon(policy: policy)
                try await own.start(exchange.note.daemonArguments)
                await BrokerAPIReplay(daemon: own, host: replay.host).replay(exchange)
                await own.cleanUp()
            }
            replayed += 1
        }
        #expect(replayed >= 25)
        await daemon.cleanUp()
    }
}

/// The exchanges of broker-api.md that need the identity provider (sign-ins, silent tokens, a signed-in
/// worker), replayed in the page's order against a broker whose authority is the local provider
/// (`tools/idp`), the workers approving device codes and signing in at the browser as the notes say.
@Suite(.serialized, .tags(.integration, .needsRoot, .needsIdentityProvider)) struct BrokerAPIPageSignInReplayTests {
    @Test func theExchangesWithTheIdentityProviderReplayAsRecorded() async throws {
        let daemon = try await BrokerSignInTests.daemon()
        let replay = BrokerAPIReplay(daemon: daemon, host: "127.0.0.1:\(IdentityCLITests.port)")
        var replayed = 0
        for exchange in try BrokerAPIPage.exchanges()
        where exchange.note.notReplayed == nil && exchange.note.identityProvider
            && !exchange.note.nativeAuthority
        {
            if exchange.note.policy == "kiosk-password.json" {
                // The password flow's policy, with the provider's issuer (as PasswordSignInTests runs it).
                let own = try await PasswordSignInTests.daemon()
                await BrokerAPIReplay(daemon: own, host: replay.host).replay(exchange)
                await own.cleanUp()
                continue
            }
            if exchange.note.testClock {
                // A broker of its own on a clock the replay moves (the idle sign-out's minutes in no time).
                let own = try await BrokerSignInTests.daemon(onATestClock: true)
                let ownReplay = BrokerAPIReplay(daemon: own, host: replay.host)
                try await ownReplay.arrange(signedIn: exchange.note.signedIn)
                try await BrokerIdleTests.waitForIdleRecord(own)  // the broker times the worker from the sign-in on
                await ownReplay.replay(exchange)
                await own.cleanUp()
                replayed += 1
                continue
            }
            try await replay.arrange(signedIn: exchange.note.signedIn)
            if exchange.note.refreshTokenRevoked {
                // Only worker3 is revoked: the other tests' workers keep their refresh tokens.
                let worker = try #require(exchange.note.signedIn, "line \(exchange.line): whose refresh token?")
                try #require(
                    worker == "worker3",
                    "line \(exchange.line): revoke only worker3's refresh tokens, no other test uses them"
                )
                let revoke = try await IdentityCLITests.Provider.tool([
                    "revoke", "--port", "\(IdentityCLITests.port)", "--user", worker,
                ])
                try #require(revoke.status == 0, "\(revoke.stdout) \(revoke.stderr)")
            }
            await replay.replay(exchange)
            replayed += 1
        }
        #expect(replayed >= 8)
        await daemon.cleanUp()
    }
}

/// Replays the page's exchanges against `daemon`.
struct BrokerAPIReplay {
    typealias Daemon = BrokerDaemon
    typealias Provider = IdentityCLITests.Provider

    let daemon: Daemon
    /// Where the page's identity provider (127.0.0.1:4593) is in this run.
    let host: String

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Python/wire_replay.py")

    static func uid(_ caller: String) -> UInt32 {
        switch caller {
        case "timeclock": Daemon.timeclockUID
        case "stranger": Daemon.strangerUID
        case "root": 0
        default: Daemon.scannerUID
        }
    }

    /// Starts the raw client as `uid` on one connection sending `messages` (dies with the test process).
    func start(_ messages: [BrokerAPIPage.Message], as uid: UInt32, held: Int = 0) throws -> ChildProcess {
        let copy = daemon.publicDirectory.appendingPathComponent("wire_replay.py").path
        if !FileManager.default.fileExists(atPath: copy) {
            try ExecutableCopy.copy(from: Self.script.path, to: copy, mode: 0o644)
        }
        let script: [String: Any] = [
            "hold": held,
            "messages": messages.map { ["send": $0.send ?? NSNull(), "replies": $0.replies.count] as [String: Any] },
        ]
        // In a file the client's uid can read: a block's messages may be larger than the argument list may.
        let file = daemon.publicDirectory.appendingPathComponent("replay-\(UUID().uuidString).json")
        try JSONSerialization.data(withJSONObject: script).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.path)
        return try ChildProcess(
            Daemon.setpriv,
            ["--pdeathsig", "KILL"] + Daemon.asUser(uid) + ["/usr/bin/python3", copy, daemon.socketPath, file.path]
        )
    }

    /// The replies the client printed, as text (`closed` when the broker closed the connection first; a
    /// line saying so when a connection to hold open was refused).
    static func replies(_ client: ChildProcess) -> [String] {
        client.lines.compactMap { line in
            guard let object = try? parseJSON(line) as? [String: Any] else { return nil }
            if let reply = object["reply"] as? String { return reply }
            if let refused = object["held_refused"] { return "a held connection was refused: \(refused)" }
            return object["closed"] != nil ? "closed" : nil
        }
    }

    /// The first reply carrying `field` (in its parameters, at any depth), once the client printed it.
    static func waitForReply(carrying field: String, of client: ChildProcess) async -> WireJSON? {
        func find(_ value: WireJSON) -> WireJSON? {
            switch value {
            case .object(let fields):
                if let found = fields[field], found != .null { return found }
                return fields.values.lazy.compactMap(find).first
            case .array(let values): return values.lazy.compactMap(find).first
            default: return nil
            }
        }
        let line = await client.waitForLine(timeout: 60) { line in
            (try? parseJSON(line) as? [String: Any])?["reply"].flatMap { $0 as? String }.flatMap {
                try? WireJSON.parse($0)
            }.flatMap(find) != nil
        }
        return line.flatMap { (try? parseJSON($0) as? [String: Any])?["reply"] as? String }.flatMap {
            try? WireJSON.parse($0)
        }.flatMap(find)
    }

    /// Sends one block's connections as its note says and compares every reply with the page's.
    func replay(_ exchange: BrokerAPIPage.Exchange) async {
        let note = exchange.note
        if let given = note.given {
            // The caller's items the block needs, added one call at a time (each under the message limit),
            // and deleted after it.
            let secret = Data(repeating: UInt8(ascii: "x"), count: given.bytes).base64EncodedString()
            let adds = (1...given.count).map { index in
                BrokerAPIPage.Message(
                    send:
                        #"{"method":"org.sharedmode.Broker1.AddGenericPassword","parameters":{"service":"page-\#(given.label)-\#(index)","account":"a","label":"\#(given.label)","secret":"\#(secret)"}}"#,
                    replies: ["?"]
                )
            }
            do {
                let client = try start(adds, as: Self.uid(note.caller))
                defer { _ = client.killIfRunning() }
                let added = await client.waitForExit(timeout: 120)
                #expect(
                    added && Self.replies(client).allSatisfy { !$0.contains("\"error\"") }
                        && Self.replies(client).count == given.count,
                    "line \(exchange.line): adding the items failed: \(Self.replies(client).map { $0.prefix(300) }) \(client.standardError)"
                )
            } catch {
                Issue.record("line \(exchange.line): cannot add the items: \(error)")
            }
        }
        await replayConnections(exchange)
        if let given = note.given {
            let deleted = try? await call(
                "DeleteGenericPassword",
                #"{"label":"\#(given.label)"}"#,
                as: Self.uid(note.caller)
            )
            #expect(
                deleted.map { "\($0)".contains("\"deleted\":\(given.count)") } == true,
                "line \(exchange.line): the items stayed: \(String(describing: deleted))"
            )
        }
    }

    /// Sends each connection of a block and compares its replies with the page's.
    private func replayConnections(_ exchange: BrokerAPIPage.Exchange) async {
        let note = exchange.note
        for messages in exchange.connections {
            let expected = messages.flatMap(\.replies)
            // The device authorization request is made under the provider's lock (see BrokerSignInTests).
            var lock: IdentityCLITests.ProviderLock?
            if note.approve != nil { lock = try? await IdentityCLITests.ProviderLock.acquire(timeout: 120) }
            let client: ChildProcess
            do {
                client = try start(messages, as: Self.uid(note.caller), held: note.held)
            } catch {
                lock?.release()
                Issue.record("line \(exchange.line): cannot start the raw client: \(error)")
                return
            }
            defer { _ = client.killIfRunning() }
            if let worker = note.approve {
                if case .string(let code) = await Self.waitForReply(carrying: "userCode", of: client) {
                    let approval = try? await Provider.tool([
                        "approve", "--port", "\(IdentityCLITests.port)", "--code", code, "--user", worker,
                    ])
                    #expect(
                        approval?.status == 0,
                        "line \(exchange.line): \(approval?.stderr ?? "tools/idp approve did not run")"
                    )
                } else {
                    Issue.record("line \(exchange.line): no device code came: \(client.lines) \(client.standardError)")
                }
            }
            lock?.release()
            if let worker = note.browse {
                if case .string(let url) = await Self.waitForReply(carrying: "authorizationUrl", of: client) {
                    let browse = try? await Provider.tool(["browse", "--user", worker, "--", url])
                    #expect(
                        browse?.status == 0,
                        "line \(exchange.line): \(browse?.stderr ?? "tools/idp browse did not run")"
                    )
                } else {
                    Issue.record(
                        "line \(exchange.line): no authorization URL came: \(client.lines) \(client.standardError)"
                    )
                }
            }
            if note.decline {
                if case .string(let url) = await Self.waitForReply(carrying: "authorizationUrl", of: client) {
                    do {
                        try await decline(url)
                    } catch {
                        Issue.record("line \(exchange.line): declining failed: \(error)")
                    }
                } else {
                    Issue.record(
                        "line \(exchange.line): no authorization URL came: \(client.lines) \(client.standardError)"
                    )
                }
            }
            await act(note.meanwhile, onATestClock: note.testClock, whileRunning: client, line: exchange.line)
            let finished = await client.waitForExit(timeout: 120)
            let replies = Self.replies(client)
            guard finished, client.status == 0 else {
                Issue.record(
                    "line \(exchange.line): the raw client did not finish: \(replies) \(client.standardError); the daemon's log ends: \(daemon.logTail(1500))"
                )
                continue
            }
            guard replies.count == expected.count else {
                Issue.record(
                    "line \(exchange.line): \(replies.count) replies came, the page shows \(expected.count): \(replies)"
                )
                continue
            }
            for (page, wire) in zip(expected, replies) {
                do {
                    let difference = WireComparison.difference(
                        try WireComparison.expected(page, host: host),
                        try WireJSON.parse(wire)
                    )
                    #expect(
                        difference == nil,
                        "broker-api.md line \(exchange.line): \(difference ?? "") — the wire's reply: \(wire)"
                    )
                } catch {
                    Issue.record(
                        "broker-api.md line \(exchange.line): a reply that is not JSON (\(error)): page \(page), wire \(wire)"
                    )
                }
            }
        }
    }

    /// Takes each of a note's `meanwhile` actions once the reply before it came: the `k`th after the `k+1`th
    /// reply (the first after the call's first reply), so each event is the answer to one action.
    private func act(
        _ actions: [String],
        onATestClock testClock: Bool,
        whileRunning client: ChildProcess,
        line: Int
    ) async {
        // The broker's test clock stands still: the worker's last activity was their sign-in, at its start.
        var lastActivity = testClock ? (try? daemon.clock) : nil
        for (index, action) in actions.enumerated() {
            let arrived = await client.waitForLines(timeout: 120) {
                $0.filter { $0.contains("\"reply\"") }.count > index
            }
            guard arrived else {
                Issue.record(
                    "line \(line): reply \(index + 1) never came, so \(action) was not done: \(client.lines) \(client.standardError)"
                )
                return
            }
            let words = action.split(separator: " ").map(String.init)
            do {
                switch words[0] {
                case "sign" where words[1] == "in": try await signIn(words[2])
                case "sign": try await signOut(reason: words[2])
                case "idle":
                    let since = try #require(lastActivity, "line \(line): `idle` needs `on a test clock`")
                    let seconds = try #require(Double(words[1]), "line \(line): \(action)")
                    try daemon.setClock(since + seconds)
                case "activity":
                    let reply = try await call("ReportActivity", as: Daemon.scannerUID)
                    guard case .object(let top) = reply, top["error"] == nil else {
                        throw BrokerAPIPage.PageError(line: line, message: "ReportActivity answered \(reply)")
                    }
                    lastActivity = try daemon.clock
                default: throw BrokerAPIPage.PageError(line: line, message: "no such action: \(action)")
                }
            } catch {
                Issue.record("line \(line): \(action) failed: \(error)")
            }
        }
    }

    /// Plays the worker who declines in the browser: the provider sends them back to the app's redirect URI
    /// with `error=access_denied` and the request's `state` (RFC 6749, 4.1.2.1).
    func decline(_ authorizationURL: String) async throws {
        let result = try await Self.sendBackDeclined(authorizationURL)
        try #require(result.status == 0, "the broker's redirect URI did not answer: \(result.stderr)")
    }

    /// Sends the browser of `authorizationURL` back to its redirect URI as the provider does when the worker
    /// declines: `error=access_denied` with the request's `state`; curl's result.
    static func sendBackDeclined(_ authorizationURL: String) async throws -> Command.Result {
        let authorization = try #require(URLComponents(string: authorizationURL), "\(authorizationURL)")
        let query = Dictionary((authorization.queryItems ?? []).map { ($0.name, $0.value ?? "") }) { $1 }
        let redirect = try #require(query["redirect_uri"], "\(authorizationURL)")
        var back = try #require(URLComponents(string: redirect))
        back.queryItems = [
            URLQueryItem(name: "error", value: "access_denied"), URLQueryItem(name: "state", value: query["state"]),
        ]
        let backURL = try #require(back.url)
        return try await Command.run(
            URL(fileURLWithPath: "/usr/bin/curl"),
            ["-s", "-o", "/dev/null", backURL.absoluteString]
        )
    }

    /// The one reply to `method` called with `parameters` as `uid`, its parameters (or its error) as JSON.
    func call(_ method: String, _ parameters: String = "{}", as uid: UInt32) async throws -> WireJSON {
        let client = try start(
            [
                BrokerAPIPage.Message(
                    send: #"{"method":"org.sharedmode.Broker1.\#(method)","parameters":\#(parameters)}"#,
                    replies: ["?"]
                )
            ],
            as: uid
        )
        defer { _ = client.killIfRunning() }
        try #require(await client.waitForExit(timeout: 30), "\(method) did not finish: \(client.standardError)")
        return try WireJSON.parse(
            try #require(Self.replies(client).first, "\(method): no reply \(client.standardError)")
        )
    }

    /// The current worker's username, as root asks the broker (nil: nobody).
    func currentWorker() async throws -> String? {
        let reply = try await call("GetStatus", as: 0)
        guard case .object(let top) = reply, case .object(let parameters)? = top["parameters"],
            case .object(let status)? = parameters["status"]
        else {
            throw BrokerAPIPage.PageError(line: 0, message: "GetStatus answered \(reply)")
        }
        guard case .object(let current)? = status["current"], case .string(let username)? = current["username"] else {
            return nil
        }
        return username
    }

    /// Signs `worker` in by device code, as the scanner through the broker.
    func signIn(_ worker: String) async throws {
        let process = try await BrokerSignInTests.approvingDeviceCode(
            daemon,
            as: Daemon.scannerUID,
            ["signin"],
            user: worker
        )
        try #require(process.status == 0, "signing \(worker) in failed: \(process.standardError)")
    }

    /// Signs the current worker out (as the scanner, with `reason`).
    func signOut(reason: String) async throws {
        let reply = try await call("SignOut", #"{"reason":"\#(reason)"}"#, as: Daemon.scannerUID)
        guard case .object(let top) = reply, top["error"] == nil else {
            throw BrokerAPIPage.PageError(line: 0, message: "SignOut answered \(reply)")
        }
    }

    /// Brings the device to the state a note needs: nobody signed in (`""`), or `worker` signed in.
    func arrange(signedIn wanted: String?) async throws {
        guard let wanted else { return }
        let current = try await currentWorker()
        guard current != (wanted.isEmpty ? nil : wanted) else { return }
        if current != nil {
            let reply = try await call("SignOut", #"{"reason":"admin"}"#, as: 0)
            guard case .object(let top) = reply, top["error"] == nil else {
                throw BrokerAPIPage.PageError(line: 0, message: "SignOut answered \(reply)")
            }
        }
        if !wanted.isEmpty { try await signIn(wanted) }
    }
}
