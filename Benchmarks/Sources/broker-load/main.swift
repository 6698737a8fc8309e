// broker-load: the broker daemon's benchmark driver (tools/bench broker runs it; it asserts nothing and
// prints figures). Every mode prints `key value…` lines on standard output.
//
//   broker-load prepare STATE_DIR POLICY     provision STATE_DIR from POLICY and sign a worker in (root)
//   broker-load inprocess STATE_DIR N APP    N silent tokens and N currentAccount calls on the store (root)
//   broker-load broker SOCKET N APP          the same through the broker (run as APP's uid): SharedDeviceClient's
//                                            PublicClientApplication (pooled connections), and the generated
//                                            contract over one blocking connection (`persistent-…`)
//   broker-load direct STATE_DIR N UID        the broker's service logic alone (no socket): its calls in-process
//   broker-load load SOCKET SECONDS START    silent tokens through the broker from START (Unix ms) for SECONDS
//   broker-load watch SOCKET N               subscribes (as an app's uid): `ready`, then `event KIND UNIX_NS` for N events
//   broker-load cycle STATE_DIR N            (root) N global sign-outs and sign-ins in-process: `committed KIND UNIX_NS`
//                                            right after each commit, 200 ms apart
//   broker-load audit-append STATE_DIR N     (root) N audit events appended in-process, 100 ms apart:
//                                            `appended SEQUENCE UNIX_NS` right after each commit
//   broker-load idle-cycle STATE_DIR SOCKET N SECONDS
//                                            (root) N rounds: sign a worker in if nobody is, report activity to the
//                                            broker (whose idle timeout is SECONDS of real time), print
//                                            `deadline UNIX_NS`, wait for the idle sign-out
//   broker-load store-reads DIR N            (profiling aid) 10,000 items of 2 KB in a fresh store in DIR, then
//                                            N random point reads; prints the p50 (µs)
//   broker-load store-adds DIR N             (profiling aid) N adds of 2 KB items (synchronous NORMAL) into a fresh
//                                            store in DIR; prints the p50 (µs)
//   broker-load sign-outs N APPS TOKENS     (profiling aid) N global sign-outs on a fresh shared device of APPS apps,
//                                            each after a worker signs in and every app gets TOKENS tokens (untimed);
//                                            prints the p50 and p99 (µs)
//   broker-load first-reply SOCKET CMD…      starts CMD (deviced), times until the first reply on SOCKET
//   broker-load activated-reply SOCKET CMD…  starts CMD (systemd-socket-activate … deviced), then times one
//                                            call from connect to reply (the daemon starts on that connect)
//
// The figures under the broker's (tools/bench broker prints them as a breakdown, under attack, and as what each
// safety property costs):
//   broker-load codec SOCKET N               (as an app's uid) the varlink codec of one silent token alone, on a real
//                                            reply captured from SOCKET once: client encode, server frame and
//                                            decode, reply encode, client decode; the decoder's value limit's own
//                                            cost and the largest call the bounds let through (Codec.swift)
//   broker-load connections NAME=SOCKET… N   (as an app's uid) a new connection's first silent token against one on
//                                            an open connection, interleaved over the brokers named
//   broker-load refusals SOCKET N KIND       KIND keychain (as an app's uid): a read of its own group against one of
//                                            the other app's (refused); unlisted (as a uid the policy does not
//                                            list): GetCurrentAccount, refused
//   broker-load direct-refusals STATE_DIR N  (root) allowed and refused calls in the service logic alone, with the
//                                            audit records each wrote
//   broker-load audit-sequence STATE_DIR     (root) the audit log's last sequence number
//   broker-load victim SOCKET N LABEL        (as an app's uid) silent tokens through SharedDeviceClient and on one
//                                            connection, quiet or while attackers run
//   broker-load root SOCKET N LABEL          (root) root's GetCaller and GetStatus on one connection
//   broker-load attack KIND SOCKET COUNT     a hostile caller until SIGTERM (Attacks.swift): flood (connections up
//                                            to the limit, COUNT at most), trickle-huge, decoded, unread, held (on
//                                            COUNT connections); prints `ready`, then at SIGTERM what it did
import AccountFixtures
import BrokerContract
import DeviceBroker
import Foundation
import KeychainStore
import Logging
import SharedDevice
import SharedDeviceClient
import Varlink

/// The thin client's application on the broker at `socket`.
func thinClient(_ socket: String) -> SharedDeviceClient.PublicClientApplication {
    SharedDeviceClient.PublicClientApplication(
        endpoint: BrokerEndpoint(socketPath: socket),
        logger: Logger(label: "broker-load")
    )
}

/// One blocking varlink connection speaking the generated contract (what devicectl's client does).
struct PersistentBroker {
    let connection: VarlinkConnection
    init(_ socket: String) throws { connection = try VarlinkConnection(unixSocketPath: socket) }
    func call<Method: VarlinkMethod>(_ method: Method.Type, _ parameters: Method.Parameters) throws -> Method.Reply {
        let reply = try connection.call(VarlinkCall(method, parameters))
        if let error = reply.error { throw BrokerLoadError.refused(error) }
        return try Method.Reply(varlinkFields: reply.parameters)
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let mode = arguments.first else {
    FileHandle.standardError.write(
        Data("usage: broker-load MODE … (the modes: the comment atop main.swift)\n".utf8)
    )
    exit(64)
}

/// A fresh store in a directory, one app and 2 KB items, for the store profiling modes.
struct StoreProfile {
    let store: KeychainStore
    let group = "com.microsoft.adalcache"
    let app: AppIdentity
    let secret = Data((0..<2048).map { UInt8(truncatingIfNeeded: $0 &* 31) })

    init(directory: String, synchronous: StoreOptions.Synchronous) throws {
        store = try KeychainStore(
            directory: URL(fileURLWithPath: directory),
            options: StoreOptions(synchronous: synchronous)
        )
        app = try AppIdentity(appID: "com.contoso.profile", accessGroups: [group])
    }

    func item(_ index: Int) -> NewItem {
        NewItem(accessGroup: group, service: "svc-\(index)", account: "acct-\(index)", secret: secret)
    }

    /// Nanoseconds of `count` operations; `prepare(i)` (untimed) returns the i-th operation.
    func timed(_ count: Int, _ prepare: (Int) -> () throws -> Void) throws -> [UInt64] {
        var samples: [UInt64] = []
        samples.reserveCapacity(count)
        for index in 0..<count {
            let operation = prepare(index)
            let start = now()
            try operation()
            samples.append(now() - start)
        }
        return samples
    }
}

/// Runs on the caller's executor (`nonisolated(nonsending)`), as `body` does: no thread hop between samples.
nonisolated(nonsending) func measure(_ label: String, count: Int, _ body: () async throws -> Void) async {
    for _ in 0..<min(200, count) { try? await body() }  // warm up
    var samples: [UInt64] = []
    samples.reserveCapacity(count)
    for _ in 0..<count {
        let start = now()
        do { try await body() } catch { fail("\(label): \(error)") }
        samples.append(now() - start)
    }
    let (p50, p99) = percentiles(samples)
    print(String(format: "%@ p50 %.1f p99 %.1f", label, p50, p99))
}

func tokenResponse() throws -> TokenResponse {
    func base64URL(_ object: [String: Any]) throws -> String {
        try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(
                of: "=",
                with: ""
            )
    }
    let idToken =
        try base64URL(["alg": "none"]) + "."
        + base64URL([
            "iss": "http://127.0.0.1:4593/api/oidc", "sub": "bench", "oid": "bench", "tid": "contoso",
            "preferred_username": "bench.worker@contoso.com", "name": "Bench Worker", "aud": "kiosk-apps",
        ]) + "."
    let json: [String: Any] = [
        "access_token": "at-bench-\(UUID().uuidString)", "refresh_token": "rt-bench", "id_token": idToken,
        "client_info": try base64URL(["uid": "bench", "utid": "contoso"]),
        "scope": "openid profile offline_access User.Read",
        "token_type": "Bearer", "expires_in": 86_400, "ext_expires_in": 86_400,
    ]
    return try TokenResponse.decode(JSONSerialization.data(withJSONObject: json))
}

func registration(_ app: String) -> ApplicationEngineConfiguration {
    ApplicationEngineConfiguration(clientID: "kiosk-apps", authority: "http://127.0.0.1:4593/api/oidc", appID: app)
}

switch mode {
case "prepare":
    guard arguments.count == 3 else { fail("usage: prepare STATE_DIR POLICY") }
    do {
        let store = try KeychainStore(directory: URL(fileURLWithPath: arguments[1]))
        let device = ManagedDevice(store: store)
        let (_, record) = try device.provision(
            policyDocument: try Data(contentsOf: URL(fileURLWithPath: arguments[2])),
            actor: "broker-load"
        )
        let policy = try record.policy()
        guard let app = try device.appIdentity(policy.apps[0].id, actor: "broker-load") else { fail("no app") }
        _ = try AccountManager(device: device).signIn(
            try tokenResponse(),
            context: TokenRequestContext(authority: policy.authority),
            app: app
        )
        print("prepared \(policy.apps.map { "\($0.id)=\($0.uid)" }.joined(separator: " "))")
    } catch {
        fail("prepare: \(error)")
    }

case "inprocess":
    guard arguments.count == 4, let count = Int(arguments[2]) else { fail("usage: inprocess STATE_DIR N APP") }
    do {
        let store = try KeychainStore(directory: URL(fileURLWithPath: arguments[1]))
        let application = try SharedDevice.ApplicationEngine(
            configuration: registration(arguments[3]),
            device: ManagedDevice(store: store)
        )
        await measure("inprocess-silent", count: count) { _ = try await application.acquireTokenSilent(scopes: scopes) }
        await measure("inprocess-current", count: count) { _ = try application.currentAccount() }
    } catch {
        fail("inprocess: \(error)")
    }

case "broker":
    guard arguments.count == 4, let count = Int(arguments[2]) else { fail("usage: broker SOCKET N APP") }
    do {
        let application = thinClient(arguments[1])
        await measure("broker-silent", count: count) { _ = try await application.acquireTokenSilent(scopes: scopes) }
        await measure("broker-current", count: count) { _ = try await application.currentAccount() }
        let persistent = try PersistentBroker(arguments[1])
        await measure("persistent-silent", count: count) {
            _ = try persistent.call(Broker1.AcquireTokenSilent.self, .init(scopes: scopes))
        }
        await measure("persistent-current", count: count) {
            _ = try persistent.call(Broker1.GetCurrentAccount.self, .init())
        }
    } catch {
        fail("broker: \(error)")
    }

case "direct":
    guard arguments.count == 4, let count = Int(arguments[2]), let uid = UInt32(arguments[3]) else {
        fail("usage: direct STATE_DIR N UID")
    }
    do {
        let broker = Broker(
            device: ManagedDevice(store: try KeychainStore(directory: URL(fileURLWithPath: arguments[1])))
        )
        let direct = DirectCalls(broker: broker, caller: BrokerCaller(uid: uid, gid: uid, pid: 1, connectionID: 1))
        // deviced runs a call from its decoding to its reply on one of its store's threads, with no hop: the series
        // runs off the main actor so that the driver adds none either.
        await Task.detached {
            await measure("direct-silent", count: count) {
                try await direct.call("AcquireTokenSilent", ["scopes": .array([.string("User.Read")])])
            }
            await measure("direct-current", count: count) { try await direct.call("GetCurrentAccount", [:]) }
            // The same calls as deviced answers them from the cache: at once, inside the read (the series above made
            // the app's engine and read the policy).
            await measure("direct-atonce-silent", count: count) {
                try direct.replyAtOnce("AcquireTokenSilent", ["scopes": .array([.string("User.Read")])])
            }
            await measure("direct-atonce-current", count: count) { try direct.replyAtOnce("GetCurrentAccount", [:]) }
        }.value
    } catch {
        fail("direct: \(error)")
    }

case "watch":
    guard arguments.count == 3, let count = Int(arguments[2]) else { fail("usage: watch SOCKET N") }
    var seen = 0
    do {
        for try await event in thinClient(arguments[1]).accountChanges() {
            switch event {
            case .subscribed:
                say("ready")
                continue
            case .signedIn: say("event signed_in \(wallNanoseconds())")
            case .signedOut: say("event signed_out \(wallNanoseconds())")
            case .switched: say("event switched \(wallNanoseconds())")
            case .deviceModeChanged: say("event mode_changed \(wallNanoseconds())")
            case .idleWarning, .idleWarningCanceled: continue
            }
            seen += 1
            if seen >= count { break }
        }
    } catch {
        fail("watch: \(error)")
    }

case "cycle":
    guard arguments.count == 3, let count = Int(arguments[2]) else { fail("usage: cycle STATE_DIR N") }
    do {
        let store = try KeychainStore(directory: URL(fileURLWithPath: arguments[1]))
        let device = ManagedDevice(store: store)
        let accounts = AccountManager(device: device)
        guard let policy = try device.policy(),
            let app = try device.appIdentity(policy.apps[0].id, actor: "broker-load")
        else { fail("not provisioned") }
        for _ in 0..<count {
            usleep(200_000)
            _ = try accounts.signOut(app: nil, reason: .admin, actor: "broker-load")
            print("committed signed_out \(wallNanoseconds())")
            usleep(200_000)
            _ = try accounts.signIn(
                try tokenResponse(),
                context: TokenRequestContext(authority: policy.authority),
                app: app
            )
            print("committed signed_in \(wallNanoseconds())")
        }
    } catch {
        fail("cycle: \(error)")
    }

case "load":
    guard arguments.count == 4, let seconds = Double(arguments[2]), let start = Double(arguments[3]) else {
        fail("usage: load SOCKET SECONDS START")
    }
    let client: PersistentBroker
    do { client = try PersistentBroker(arguments[1]) } catch { fail("load: \(error)") }  // connect before the start
    let wait = start / 1000 - Date().timeIntervalSince1970
    if wait > 0 { usleep(UInt32(wait * 1_000_000)) }
    let deadline = Date().addingTimeInterval(seconds)
    var calls = 0
    while Date() < deadline {
        do { _ = try client.call(Broker1.AcquireTokenSilent.self, .init(scopes: scopes)) } catch {
            fail("load: \(error)")
        }
        calls += 1
    }
    print("load \(calls)")

case "first-reply", "activated-reply":
    guard arguments.count >= 3 else { fail("usage: \(mode) SOCKET CMD…") }
    let socket = arguments[1]
    let process = Process()
    process.executableURL = URL(fileURLWithPath: arguments[2])
    process.arguments = Array(arguments.dropFirst(3))
    process.standardError = FileHandle.nullDevice
    process.standardOutput = FileHandle.nullDevice  // or $(…) in the caller's shell would wait for the daemon
    let call = VarlinkCall(method: "org.varlink.service.GetInfo")
    var started = now()
    do { try process.run() } catch { fail("cannot start \(arguments[2]): \(error)") }
    if mode == "activated-reply" {
        // Wait for the activator's socket, then time connect → reply (deviced starts on the connect).
        while !FileManager.default.fileExists(atPath: socket) { usleep(500) }
        started = now()
    }
    while true {
        if let connection = try? VarlinkConnection(unixSocketPath: socket), let reply = try? connection.call(call),
            reply.error == nil
        {
            break
        }
        usleep(200)
        if now() - started > 30_000_000_000 { fail("no reply within 30 s") }
    }
    print(String(format: "%@ %.1f ms pid %d", mode, Double(now() - started) / 1e6, process.processIdentifier))

case "store-reads":
    guard arguments.count == 3, let count = Int(arguments[2]) else { fail("usage: store-reads DIR N") }
    do {
        let profile = try StoreProfile(directory: arguments[1], synchronous: .full)
        for index in 0..<10_000 { _ = try profile.store.add(profile.item(index), as: profile.app) }
        var generator = SystemRandomNumberGenerator()
        let samples = try profile.timed(count) { _ in
            let index = Int.random(in: 0..<10_000, using: &generator)
            return {
                _ = try profile.store.find(
                    ItemQuery(accessGroup: profile.group, service: "svc-\(index)", account: "acct-\(index)"),
                    as: profile.app
                )
            }
        }
        let (p50, p99) = percentiles(samples)
        print(String(format: "store-read p50 %.1f p99 %.1f", p50, p99))
    } catch {
        fail("store-reads: \(error)")
    }

case "store-adds":
    guard arguments.count == 3, let count = Int(arguments[2]) else { fail("usage: store-adds DIR N") }
    do {
        let profile = try StoreProfile(directory: arguments[1], synchronous: .normal)
        let samples = try profile.timed(count) { index in
            let item = profile.item(index)
            return { _ = try profile.store.add(item, as: profile.app) }
        }
        let (p50, p99) = percentiles(samples)
        print(String(format: "store-add p50 %.1f p99 %.1f", p50, p99))
    } catch {
        fail("store-adds: \(error)")
    }

case "sign-outs":
    guard arguments.count == 4, let count = Int(arguments[1]), let apps = Int(arguments[2]),
        let tokens = Int(arguments[3])
    else {
        fail("usage: sign-outs N APPS TOKENS")
    }
    do {
        let device = try BenchmarkDevice(appCount: apps)
        defer { device.remove() }
        var samples: [UInt64] = []
        for round in 0..<count {
            try device.signIn(worker: round, tokensPerApp: tokens)
            let start = now()
            let outcome = try device.accounts.signOut(app: device.apps[round % apps], reason: .shiftEnd)
            samples.append(now() - start)
            guard outcome.itemsRemoved >= apps * tokens else {
                fail("sign-out removed only \(outcome.itemsRemoved) items")
            }
        }
        let (p50, p99) = percentiles(samples)
        print(String(format: "sign-out p50 %.1f p99 %.1f min %.1f", p50, p99, Double(samples.min() ?? 0) / 1000))
        if ProcessInfo.processInfo.environment["SIGN_OUT_SAMPLES"] != nil {
            print(samples.map { "\($0 / 1000)" }.joined(separator: " "))
        }
    } catch {
        fail("sign-outs: \(error)")
    }

case "audit-append":
    guard arguments.count == 3, let count = Int(arguments[2]) else { fail("usage: audit-append STATE_DIR N") }
    do {
        let device = ManagedDevice(store: try KeychainStore(directory: URL(fileURLWithPath: arguments[1])))
        for index in 0..<count {
            usleep(100_000)
            let event = try device.record(
                AuditEntry(type: .keychainAccessDenied, actor: "broker-load", reason: "follow latency \(index)")
            )
            say("appended \(event?.sequence ?? -1) \(wallNanoseconds())")
        }
    } catch {
        fail("audit-append: \(error)")
    }

case "idle-cycle":
    guard arguments.count == 5, let rounds = Int(arguments[3]), let seconds = Double(arguments[4]) else {
        fail("usage: idle-cycle STATE_DIR SOCKET N SECONDS")
    }
    do {
        let device = ManagedDevice(store: try KeychainStore(directory: URL(fileURLWithPath: arguments[1])))
        let accounts = AccountManager(device: device)
        guard let policy = try device.policy(),
            let app = try device.appIdentity(policy.apps[0].id, actor: "broker-load")
        else { fail("not provisioned") }
        let client = try PersistentBroker(arguments[2])
        func signedIn() throws -> Bool { try accounts.accounts().contains { $0.signedIn } }
        for _ in 0..<rounds {
            if try !signedIn() {
                _ = try accounts.signIn(
                    try tokenResponse(),
                    context: TokenRequestContext(authority: policy.authority),
                    app: app
                )
                usleep(200_000)  // the broker times the new worker
            }
            let sent = wallNanoseconds()
            _ = try client.call(Broker1.ReportActivity.self, .init())
            say("deadline \(sent + UInt64(seconds * 1e9))")
            let limit = Date().addingTimeInterval(seconds + 5)
            while try signedIn() {
                guard Date() < limit else { fail("idle-cycle: no idle sign-out") }
                usleep(20_000)
            }
        }
    } catch {
        fail("idle-cycle: \(error)")
    }

case "codec":
    guard arguments.count == 3, let count = Int(arguments[2]) else { fail("usage: codec SOCKET N") }
    codec(socket: arguments[1], count: count)

case "connections":
    guard arguments.count >= 3, let count = Int(arguments.last!) else { fail("usage: connections NAME=SOCKET… N") }
    let brokers = arguments.dropFirst().dropLast().map { argument -> (name: String, socket: String) in
        guard let equals = argument.firstIndex(of: "=") else { fail("connections: \(argument) is not NAME=SOCKET") }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }
    connections(brokers: brokers, count: count)

case "refusals":
    guard arguments.count == 4, let count = Int(arguments[2]) else {
        fail("usage: refusals SOCKET N keychain|unlisted")
    }
    refusals(socket: arguments[1], count: count, kind: arguments[3])

case "direct-refusals":
    guard arguments.count == 3, let count = Int(arguments[2]) else { fail("usage: direct-refusals STATE_DIR N") }
    await directRefusals(stateDirectory: arguments[1], count: count)

case "audit-sequence":
    guard arguments.count == 2 else { fail("usage: audit-sequence STATE_DIR") }
    auditSequence(stateDirectory: arguments[1])

case "victim":
    guard arguments.count == 4, let count = Int(arguments[2]) else { fail("usage: victim SOCKET N LABEL") }
    await victim(socket: arguments[1], count: count, label: arguments[3])

case "root":
    guard arguments.count == 4, let count = Int(arguments[2]) else { fail("usage: root SOCKET N LABEL") }
    await rootCalls(socket: arguments[1], count: count, label: arguments[3])

case "attack":
    guard arguments.count == 4, let count = Int(arguments[3]) else { fail("usage: attack KIND SOCKET COUNT") }
    attack(kind: arguments[1], socket: arguments[2], connections: count)

default:
    fail("unknown mode \(mode)")
}

enum BrokerLoadError: Error { case refused(String) }

/// A flag set from the reply callback.
/// Calls of `org.sharedmode.Broker1` straight to the broker's service logic, as `caller`.
struct DirectCalls: Sendable {
    let broker: Broker
    let caller: BrokerCaller

    func call(_ method: String, _ parameters: [String: VarlinkValue]) async throws {
        let failed = Failure()
        await broker.handle(
            VarlinkCall(method: "org.sharedmode.Broker1.\(method)", parameters: parameters),
            caller: caller
        ) { reply in
            if reply.error != nil { failed.set() }
            return true
        }
        if failed.isSet { throw BrokerLoadError.refused(method) }
    }

    /// The call answered at once (`Broker.replyAtOnce`); throws when it was not, or was refused.
    func replyAtOnce(_ method: String, _ parameters: [String: VarlinkValue]) throws {
        let reply = broker.replyAtOnce(
            to: VarlinkCall(method: "org.sharedmode.Broker1.\(method)", parameters: parameters),
            caller: caller
        )
        guard let reply, reply.error == nil else { throw BrokerLoadError.refused(method) }
    }
}

final class Failure: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
