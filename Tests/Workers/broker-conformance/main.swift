// broker-conformance: drives every method of org.sharedmode.Broker1, and every error an app can meet,
// through the generated contract (`Broker1.<Method>` over SharedDeviceClient's BrokerInterfaceClient, and
// once over the varlink codec's blocking connection, for a request the client would not send),
// against a real deviced whose policy's authority is a real identity provider. Run under an app's uid.
//
//   broker-conformance app        the whole sequence; prints `<Method> ok <detail>` or
//                                 `<Method> error <error> <detail>` per step, and `code <user code>` when
//                                 the device-code sign-in waits for the worker (the test approves it)
//   broker-conformance stranger   GetCurrentAccount as a uid the policy does not list
//
// The socket is $DEVICECTL_SOCKET. Each line is one write(2).

import BrokerContract
import Foundation
import Logging
import SharedDeviceClient
import Varlink

#if canImport(Glibc)
import Glibc
#endif

func say(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

/// The varlink error (and its telling detail) a failure stands for.
func describe(_ error: SharedDeviceClientError) -> String {
    if let status = error.keychainStatus { return "KeychainError \(status)" }
    switch error.code {
    case .callerNotInPolicy: return "CallerNotInPolicy"
    case .limitExceeded: return "LimitExceeded \(error.limit ?? "")"
    case .refused: return error.varlinkError ?? ""
    case .brokerUnavailable:
        return error.message.contains("already holds")
            ? "TooManyConnections user" : "brokerUnavailable \(error.message)"
    case .untrustedBroker, .cancelled: return error.code.name
    default: return "AccountError \(error.code)"
    }
}

let socket = ProcessInfo.processInfo.environment["DEVICECTL_SOCKET"] ?? BrokerEndpoint.systemSocketPath
var logger = Logger(label: "broker-conformance")
logger.logLevel = .warning
let broker = BrokerInterfaceClient(endpoint: BrokerEndpoint(socketPath: socket), logger: logger)

/// Runs one step: `name ok <detail>` or `name error <error>`.
func step(_ name: String, _ body: () async throws(SharedDeviceClientError) -> String) async {
    do throws(SharedDeviceClientError) {
        say("\(name) ok \(try await body())")
    } catch {
        say("\(name) error \(describe(error))")
    }
}

/// Holds a `more` call open in the background once its first reply came (a pending sign-in, a
/// subscription); cancel the task to close it.
func holdOpen<Method: VarlinkMethod>(
    _ method: Method.Type,
    _ parameters: Method.Parameters
) async -> (Task<Void, Never>, String) {
    let (first, continuation) = AsyncStream<String>.makeStream()
    let task = Task {
        do throws(SharedDeviceClientError) {
            let _: Never = try await broker.stream(method, parameters) {
                _,
                _ throws(SharedDeviceClientError) -> Never? in
                continuation.yield("ok")
                return nil
            }
        } catch {
            continuation.yield("error \(describe(error))")
        }
        continuation.finish()
    }
    var outcome = "closed"
    for await line in first {
        outcome = line
        break
    }
    return (task, outcome)
}

let mode = CommandLine.arguments.dropFirst().first ?? "app"
if mode == "stranger" {
    await step("GetCurrentAccount") { () async throws(SharedDeviceClientError) in
        _ = try await broker.call(Broker1.GetCurrentAccount.self, .init())
        return "-"
    }
    exit(0)
}

await step("GetCaller") { () async throws(SharedDeviceClientError) in
    let reply = try await broker.call(Broker1.GetCaller.self, .init())
    return "\(reply.appId ?? "-") administrator \(reply.administrator)"
}
// The MSAL bridge's hand-over, with a number that is no descriptor of this process: refused, and the
// connection stays this app's.
await step("ActForCaller") { () async throws(SharedDeviceClientError) in
    _ = try await broker.call(Broker1.ActForCaller.self, .init(callerPidfd: 999))
    return "-"
}
await step("GetStatus") { () async throws(SharedDeviceClientError) in
    _ = try await broker.call(Broker1.GetStatus.self, .init())
    return "-"
}
await step("GetDeviceInformation") { () async throws(SharedDeviceClientError) in
    try await broker.call(Broker1.GetDeviceInformation.self, .init()).information.mode.rawValue
}
await step("GetCurrentAccount") { () async throws(SharedDeviceClientError) in
    try await broker.call(Broker1.GetCurrentAccount.self, .init()).current?.username ?? "none"
}
await step("ReportActivity") { () async throws(SharedDeviceClientError) in
    try await broker.call(Broker1.ReportActivity.self, .init()).idle == nil ? "no-idle-policy" : "idle"
}
await step("AcquireTokenSilent") { () async throws(SharedDeviceClientError) in
    try await broker.call(Broker1.AcquireTokenSilent.self, .init(scopes: ["User.Read"])).result.source.rawValue
}

// The keychain methods, and their errors.
let secret = Data("conformance-secret".utf8).base64EncodedString()
await step("AddGenericPassword") { () async throws(SharedDeviceClientError) in
    try await broker.call(Broker1.AddGenericPassword.self, .init(service: "conformance", account: "a", secret: secret))
        .item.service
}
await step("AddGenericPassword") { () async throws(SharedDeviceClientError) in
    try await broker.call(Broker1.AddGenericPassword.self, .init(service: "conformance", account: "a", secret: secret))
        .item.service
}
await step("FindGenericPassword") { () async throws(SharedDeviceClientError) in
    try await broker.call(Broker1.FindGenericPassword.self, .init(service: "conformance")).item.secret == secret
        ? "secret" : "wrong"
}
await step("UpdateGenericPassword") { () async throws(SharedDeviceClientError) in
    "\(try await broker.call(Broker1.UpdateGenericPassword.self, .init(service: "conformance", setLabel: "updated")).updated)"
}
await step("ListGenericPasswords") { () async throws(SharedDeviceClientError) in
    try await broker.call(Broker1.ListGenericPasswords.self, .init(service: "conformance")).items.map {
        "\($0.label ?? "-")"
    }.joined(separator: ",")
}
await step("DeleteGenericPassword") { () async throws(SharedDeviceClientError) in
    "\(try await broker.call(Broker1.DeleteGenericPassword.self, .init(service: "conformance")).deleted)"
}
await step("FindGenericPassword") { () async throws(SharedDeviceClientError) in
    _ = try await broker.call(Broker1.FindGenericPassword.self, .init(service: "conformance"))
    return "found"
}
// A request over the broker's 1 MiB message limit: the client refuses it before sending (the same error
// name as the broker's); sent anyway, with the generated call over the varlink codec, the broker answers
// ProtocolError naming its limit and closes the connection.
let oversized = Broker1.AddGenericPassword.Parameters(
    service: "oversized",
    account: "a",
    secret: Data(repeating: 0x5a, count: 900_000).base64EncodedString()
)
await step("AddGenericPassword") { () async throws(SharedDeviceClientError) in
    _ = try await broker.call(Broker1.AddGenericPassword.self, oversized)
    return "added"
}
do {
    let connection = try VarlinkConnection(unixSocketPath: socket)
    // The broker stops reading at its limit: the rest of the message may not go out.
    try? connection.send(VarlinkCall(Broker1.AddGenericPassword.self, oversized))
    let reply = try connection.nextReply(timeout: .seconds(10))
    if case .protocolError(let error)? = try Broker1.ErrorReply(reply) {
        say("ProtocolError ok \(error.reason.contains("\(1 << 20) bytes (the limit)") ? "names-limit" : error.reason)")
    } else {
        say("ProtocolError error \(reply.error ?? "no error")")
    }
} catch {
    say("ProtocolError error \(error)")
}
// Five 700 KB secrets: their base64 together is over the 4 MiB a reply may be.
let big = Data(repeating: 0x5a, count: 700_000).base64EncodedString()
for index in 0..<5 {
    _ = try? await broker.call(Broker1.AddGenericPassword.self, .init(service: "big", account: "\(index)", secret: big))
}
await step("FindGenericPassword") { () async throws(SharedDeviceClientError) in
    "\(try await broker.call(Broker1.FindGenericPassword.self, .init(service: "big", all: true)).items.count)"
}
_ = try? await broker.call(Broker1.DeleteGenericPassword.self, .init(service: "big"))

// Only administrators sign the device out with reason admin.
await step("SignOut") { () async throws(SharedDeviceClientError) in
    _ = try await broker.call(Broker1.SignOut.self, .init(reason: "admin"))
    return "-"
}

// A subscription, live for the rest of the run.
let events = EventLog()
let subscription = Task {
    do throws(SharedDeviceClientError) {
        let _: Never = try await broker.stream(Broker1.SubscribeAccountChanges.self, .init()) {
            reply,
            _ throws(SharedDeviceClientError) -> Never? in
            events.append(reply.event.kind.rawValue)
            return nil
        }
    } catch {
        if error.code != .cancelled { events.append("error \(describe(error))") }
    }
}
while events.all.isEmpty { try? await Task.sleep(for: .milliseconds(10)) }
say("SubscribeAccountChanges ok \(events.all[0])")

// The kiosk policy allows neither the password flow nor native authentication; an unknown native sign-in is not found.
await step("SignInWithPassword") { () async throws(SharedDeviceClientError) in
    try await broker.call(
        Broker1.SignInWithPassword.self,
        .init(scopes: ["User.Read"], username: "worker1", password: "worker1-password")
    ).result.source.rawValue
}
await step("StartNativeSignIn") { () async throws(SharedDeviceClientError) in
    try await broker.call(Broker1.StartNativeSignIn.self, .init(username: "worker1")).next.challenge.rawValue
}
await step("ResendNativeSignInCode") { () async throws(SharedDeviceClientError) in
    try await broker.call(Broker1.ResendNativeSignInCode.self, .init(signInId: "no-such-sign-in")).next.challenge
        .rawValue
}
await step("SubmitNativeSignIn") { () async throws(SharedDeviceClientError) in
    try await broker.call(
        Broker1.SubmitNativeSignIn.self,
        .init(signInId: "no-such-sign-in", scopes: [], code: "12345678")
    ).result.source.rawValue
}

// The browser sign-in's first reply; closing the call drops it.
await step("SignInWithBrowser") { () async throws(SharedDeviceClientError) in
    try await broker.stream(
        Broker1.SignInWithBrowser.self,
        .init(scopes: ["User.Read"], redirectUri: "http://127.0.0.1/")
    ) {
        reply,
        _ throws(SharedDeviceClientError) -> String? in
        reply.authorizationUrl.map { $0.hasPrefix("http") ? "authorizationUrl" : "bad-url" }
    }
}
// The device-code sign-in, approved by the test.
await step("SignInWithDeviceCode") { () async throws(SharedDeviceClientError) in
    try await broker.stream(Broker1.SignInWithDeviceCode.self, .init(scopes: ["User.Read"])) {
        reply,
        _ throws(SharedDeviceClientError) -> String? in
        if let verification = reply.verification { say("code \(verification.userCode)") }
        return reply.result.map { "\($0.source) \($0.account.username ?? "-")" }
    }
}
await step("AcquireTokenSilent") { () async throws(SharedDeviceClientError) in
    try await broker.call(Broker1.AcquireTokenSilent.self, .init(scopes: ["User.Read"])).result.source.rawValue
}
await step("GetAccounts") { () async throws(SharedDeviceClientError) in
    try await broker.call(Broker1.GetAccounts.self, .init()).accounts.map { $0.username ?? "-" }.joined(separator: ",")
}
// An authority the policy does not list is refused before anything reaches it.
await step("AcquireTokenSilent") { () async throws(SharedDeviceClientError) in
    try await broker.call(
        Broker1.AcquireTokenSilent.self,
        .init(scopes: ["User.Read"], authority: "https://attacker.example/tenant")
    ).result.source.rawValue
}
// A switch: the worker is signed out first, then the next worker's code is shown; closing the call there
// leaves the device signed out.
await step("SwitchWorker") { () async throws(SharedDeviceClientError) in
    let signedOut = SignedOut()
    return try await broker.stream(Broker1.SwitchWorker.self, .init(scopes: ["User.Read"])) {
        reply,
        _ throws(SharedDeviceClientError) -> String? in
        if let worker = reply.signedOut { signedOut.name = worker.account?.username ?? "none" }
        return reply.verification.map { _ in "signedOut \(signedOut.name) then verification" }
    }
}
await step("GetCurrentAccount") { () async throws(SharedDeviceClientError) in
    try await broker.call(Broker1.GetCurrentAccount.self, .init()).current?.username ?? "none"
}
await step("GetAccounts") { () async throws(SharedDeviceClientError) in
    "\(try await broker.call(Broker1.GetAccounts.self, .init()).accounts.count)"
}
await step("SignOut") { () async throws(SharedDeviceClientError) in
    let reply = try await broker.call(Broker1.SignOut.self, .init())
    return "\(reply.account?.username ?? "none") global \(reply.global)"
}

// Two sign-ins pending (the policy's default): a third is refused.
var pending: [Task<Void, Never>] = []
for _ in 0..<2 {
    let (task, outcome) = await holdOpen(Broker1.SignInWithDeviceCode.self, .init(scopes: ["User.Read"]))
    pending.append(task)
    if outcome != "ok" { say("pending \(outcome)") }
}
await step("SignInWithDeviceCode") { () async throws(SharedDeviceClientError) in
    try await broker.stream(Broker1.SignInWithDeviceCode.self, .init(scopes: ["User.Read"])) {
        _,
        _ throws(SharedDeviceClientError) -> String? in "pending"
    }
}
for task in pending { task.cancel() }
for task in pending { await task.value }

// Connections: the app's cap (16 by default) holds; the subscription is one of them.
var held: [Task<Void, Never>] = []
var refusal = "none"
for _ in 0..<20 {
    let (task, outcome) = await holdOpen(Broker1.SubscribeAccountChanges.self, .init())
    held.append(task)
    if outcome != "ok" {
        refusal = outcome
        break
    }
}
say("connections \(held.count) \(refusal)")
for task in held { task.cancel() }
for task in held { await task.value }

subscription.cancel()
await subscription.value
say("events \(events.all.joined(separator: ","))")

final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var kinds: [String] = []
    func append(_ kind: String) { lock.withLock { kinds.append(kind) } }
    var all: [String] { lock.withLock { kinds } }
}

final class SignedOut: @unchecked Sendable {
    var name = "-"
}
