// account-bench: global sign-out and currentAccount on real stores (tools/bench-accounts).
//
// Prints global sign-out p50 for apps × tokens of 10×10, 100×10 and 100×100 (goal: 100 × 10 ≤ 10 ms with
// synchronous NORMAL), currentAccount p50 (goal ≤ 50 µs) and the latency of an account change event
// between two store objects (goal ≤ 100 ms). Not a test: it prints figures.
import Foundation
import KeychainStore
import SharedDevice
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

func microseconds(_ body: () throws -> Void) rethrows -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1000
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
}

func format(_ value: Double) -> String { String(format: "%.1f", value) }

func base64URL(_ object: [String: Any]) -> String {
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    return data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// A token response for `worker`, with `scope` as its scopes.
func response(worker: Int, scope: String) throws -> TokenResponse {
    let idToken = base64URL(["alg": "none"]) + "." + base64URL([
        "iss": "http://127.0.0.1:4593/api/oidc", "sub": "w\(worker)", "oid": "w\(worker)", "tid": "contoso",
        "preferred_username": "worker\(worker)@contoso.com", "name": "Worker \(worker)", "aud": "kiosk-apps",
    ]) + "."
    let json: [String: Any] = [
        "access_token": "at-\(worker)-\(scope)", "refresh_token": "rt-\(worker)", "id_token": idToken,
        "client_info": base64URL(["uid": "w\(worker)", "utid": "contoso"]), "scope": scope, "token_type": "Bearer",
        "expires_in": 3600, "ext_expires_in": 3600,
    ]
    return try TokenResponse.decode(JSONSerialization.data(withJSONObject: json))
}

/// A shared-mode policy with `apps` apps, each entitled to the shared MSAL group and a group of its own.
func policy(apps: Int) throws -> Data {
    let list: [[String: Any]] = (0..<apps).map { index in
        ["id": "com.contoso.bench.app\(index)", "accessGroups": ["com.microsoft.adalcache", "com.contoso.bench.app\(index)"], "uid": 2000 + index]
    }
    let document: [String: Any] = [
        "version": 1, "device": ["name": "bench kiosk", "mode": "shared"],
        "authority": ["issuer": "http://127.0.0.1:4593/api/oidc", "clientId": "kiosk-apps", "scopes": ["openid"]],
        "apps": list, "audit": ["checkpointInterval": 100],
    ]
    return try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys])
}

struct Setup {
    let directory: URL
    let store: KeychainStore
    let accounts: AccountManager
    let apps: [AppIdentity]
    let context: TokenRequestContext
}

func makeSetup(parent: URL, apps: Int) throws -> Setup {
    let directory = parent.appendingPathComponent("apps\(apps)-\(UUID().uuidString.prefix(8))")
    let store = try KeychainStore(directory: directory, options: StoreOptions(synchronous: .normal))
    let device = ManagedDevice(store: store)
    try device.provision(policyDocument: try policy(apps: apps), actor: "account-bench")
    let identities = try (0..<apps).map { try device.appIdentity("com.contoso.bench.app\($0)", actor: "account-bench")! }
    let context = TokenRequestContext(clientID: "kiosk-apps", environment: "127.0.0.1:4593", realm: "contoso", requestedScopes: ["openid"])
    return Setup(directory: directory, store: store, accounts: AccountManager(device: device), apps: identities, context: context)
}

/// Signs `worker` in and gives every app `tokens` access tokens (distinct scopes) in its own group, in one transaction.
func fill(_ setup: Setup, worker: Int, tokens: Int) throws {
    try setup.accounts.signIn(try response(worker: worker, scope: "openid profile"), context: setup.context, app: setup.apps[0])
    let responses = try (0..<tokens).map { try response(worker: worker, scope: "api://bench/scope\($0)") }
    try setup.store.writeTransaction { tx in
        for app in setup.apps {
            for response in responses {
                try setup.accounts.tokenCache.save(response, context: setup.context, as: app, accessGroup: app.accessGroups[1], in: tx)
            }
        }
    }
}

func signOutSeries(parent: URL, apps: Int, tokens: Int, rounds: Int) throws -> [Double] {
    let setup = try makeSetup(parent: parent, apps: apps)
    defer { try? FileManager.default.removeItem(at: setup.directory) }
    var times: [Double] = []
    for round in 0..<rounds {
        try fill(setup, worker: round, tokens: tokens)
        var removed = 0
        times.append(try microseconds {
            removed = try setup.accounts.signOut(app: setup.apps[round % apps], reason: .shiftEnd).itemsRemoved
        })
        precondition(removed >= apps * tokens, "sign-out removed \(removed) items, expected at least \(apps * tokens)")
    }
    return times
}

let arguments = CommandLine.arguments.dropFirst()
let parent = URL(fileURLWithPath: arguments.first ?? NSTemporaryDirectory()).appendingPathComponent("account-bench.\(getpid())")
try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: parent) }

print("account-bench: AccountManager on real stores (release build, synchronous NORMAL)")
var results: [(String, [Double])] = []
for (apps, tokens, rounds) in [(10, 10, 30), (100, 10, 15), (100, 100, 5)] {
    let times = try signOutSeries(parent: parent, apps: apps, tokens: tokens, rounds: rounds)
    results.append(("\(apps) apps × \(tokens) tokens", times))
    print("global sign-out, \(apps) apps × \(tokens) tokens (\(rounds) rounds): p50 \(format(percentile(times, 0.5) / 1000)) ms, "
          + "min \(format((times.min() ?? .nan) / 1000)) ms, max \(format((times.max() ?? .nan) / 1000)) ms")
}

// currentAccount: a signed-in worker, an app that has already seen them (the steady state).
let setup = try makeSetup(parent: parent, apps: 2)
try fill(setup, worker: 1, tokens: 3)
_ = try setup.accounts.currentAccount(for: setup.apps[1])
var current: [Double] = []
for _ in 0..<2000 { _ = try setup.accounts.currentAccount(for: setup.apps[1]) }
for _ in 0..<10_000 { current.append(try microseconds { _ = try setup.accounts.currentAccount(for: setup.apps[1]) }) }
print("currentAccount (signed in, unchanged), 10000 calls: p50 \(format(percentile(current, 0.5))) µs, p99 \(format(percentile(current, 0.99))) µs")

// Where a 100 × 10 sign-out goes: the credential deletes alone, in a transaction of their own.
do {
    let setup = try makeSetup(parent: parent, apps: 100)
    defer { try? FileManager.default.removeItem(at: setup.directory) }
    let groups = Array(Set(setup.apps.flatMap(\.accessGroups))).sorted()
    let wiper = try AppIdentity(appID: "account-bench", accessGroups: groups)
    var deletes: [Double] = []
    var emptyTransactions: [Double] = []
    for round in 0..<10 {
        try fill(setup, worker: 100 + round, tokens: 10)
        let account = try setup.accounts.currentAccount(for: setup.apps[0]).current!
        deletes.append(try microseconds {
            try setup.store.writeTransaction { tx in
                _ = try setup.accounts.tokenCache.removeCredentials(homeAccountID: account.homeAccountID, environment: account.environment, as: wiper, in: tx)
            }
        })
        emptyTransactions.append(try microseconds { try setup.store.writeTransaction { _ in } })
        try setup.accounts.signOut(app: setup.apps[0], reason: .admin)
    }
    print("  of which: deleting the credentials of 100 apps × 10 tokens (own transaction): p50 \(format(percentile(deletes, 0.5) / 1000)) ms; "
          + "an empty write transaction: p50 \(format(percentile(emptyTransactions, 0.5))) µs")
}

// Cross-process notification: a second store object (its own SQLite connection, as another process
// would have) waits on `changes()`; the first signs the worker out. Latency = from calling signOut to
// the waiter receiving the event (the sign-out itself included).
var latencies: [Double] = []
do {
    let setup = try makeSetup(parent: parent, apps: 2)
    defer { try? FileManager.default.removeItem(at: setup.directory) }
    let waiterStore = try KeychainStore(directory: setup.directory, options: StoreOptions(synchronous: .normal))
    let waiter = AccountManager(device: ManagedDevice(store: waiterStore))
    let received = Mutex<[UInt64]>([])
    let stream = waiter.changes(fallbackInterval: .seconds(60))
    let listener = Task.detached {
        for await change in stream where change.kind == .signedOutGlobally {
            let now = DispatchTime.now().uptimeNanoseconds
            received.withLock { $0.append(now) }
        }
    }
    for round in 0..<30 {
        try fill(setup, worker: 200 + round, tokens: 1)
        let start = DispatchTime.now().uptimeNanoseconds
        try setup.accounts.signOut(app: setup.apps[0], reason: .shiftEnd)
        let deadline = start + 5_000_000_000
        while received.withLock({ $0.count }) <= round && DispatchTime.now().uptimeNanoseconds < deadline { usleep(200) }
        guard let arrival = received.withLock({ $0.count > round ? $0[round] : nil }) else {
            print("  round \(round): no event within 5 s")
            continue
        }
        latencies.append(Double(arrival - start) / 1000)
    }
    listener.cancel()
}
print("account change event, sign-out in one store object → waiter on another (30 rounds): p50 \(format(percentile(latencies, 0.5) / 1000)) ms, "
      + "max \(format((latencies.max() ?? .nan) / 1000)) ms")

let goal = results[1].1
print("global sign-out p50 (100 apps × 10 tokens, synchronous NORMAL): \(format(percentile(goal, 0.5) / 1000)) ms (goal ≤ 10 ms)")
print("currentAccount p50: \(format(percentile(current, 0.5))) µs (goal ≤ 50 µs)")
print("account change event latency p50: \(format(percentile(latencies, 0.5) / 1000)) ms (goal ≤ 100 ms)")
