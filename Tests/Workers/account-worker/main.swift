// account-worker: a test helper process for the account manager's multi-process and SIGKILL tests in
// Tests/SharedDeviceTests/AccountProcessTests.swift. It plays the kiosk's apps on a shared device.
//
//   account-worker fill DIR N [--policy FILE]
//       Provisions the device from FILE if it is not provisioned, signs the worker in for the scanner
//       (tokens in com.microsoft.adalcache) and, by single sign-on, for the timeclock (tokens in its own
//       group), then adds N access tokens (scopes api://kiosk/resource-<i>.read) to each of the three
//       groups in one transaction. Prints `filled N`.
//   account-worker signout DIR APP [--reason R] [--after MS]
//       Opens the store, waits MS milliseconds (default 0; lets a test time a SIGKILL into the sign-out),
//       prints `signing-out`, signs the current worker out (globally on a shared device) as APP and
//       prints `signed-out <items removed>`.
//   account-worker signout-loop DIR N [--policy FILE] [--rounds K]
//       Repeats K times (default: until killed), each step one transaction acknowledged once committed:
//       sign the worker in for the scanner (`signed-in scanner`), then by SSO for the timeclock
//       (`signed-in timeclock`), add N tokens per group as `fill` does (`filled`), sign out globally
//       (`signing-out` before, `signed-out <items>` after).
//   account-worker wait DIR APP [--fallback SECONDS]
//       Records APP's current account (`initial <json>`), starts AccountManager.changes() with the given
//       fallback re-check interval (default 600 s, so only the change signal can wake it in a test),
//       prints `ready`, then one line per change (`event <kind> <account> <sequence>`). After the first
//       global sign-out it prints `current <json of currentAccount(APP)>` and exits 0.
//
// The worker's identity, client, tenant and token secrets are ProcessTestSupport's AccountWorkerFixture,
// which the tests use too. Each output line is written with one write(2) (`WorkerOutput`), so whatever was
// printed before a SIGKILL is in the pipe. An error prints `error: <code> <message>` to stderr and exits 1.

import Foundation
import IdentityClient
import KeychainStore
import ProcessTestSupport
import SharedDevice

#if canImport(Glibc)
import Glibc
#endif

// MARK: - Output

func say(_ line: String) { WorkerOutput.say(line) }

func say(_ step: AccountWorkerFixture.Step, _ detail: String? = nil) {
    say(detail.map { "\(step.rawValue) \($0)" } ?? step.rawValue)
}

func fail(_ message: String) -> Never { WorkerOutput.fail(message) }

func fail(_ error: any Error, _ context: String) -> Never {
    switch error {
    case let error as SharedDeviceError: fail("\(error.code) \(error.message) [\(context)]")
    case let error as KeychainError: fail("\(error.code) \(error.message) [\(context)]")
    default: fail("\(error) [\(context)]")
    }
}

/// Runs `body`, exiting with `error:` on any failure.
func attempt<T>(_ context: String, _ body: () throws -> T) -> T {
    do {
        return try body()
    } catch {
        fail(error, context)
    }
}

// MARK: - The worker and the kiosk (constants in ProcessTestSupport's AccountWorkerFixture, shared with the tests)

typealias Kiosk = AccountWorkerFixture

extension AccountWorkerFixture {
    static func json(_ object: [String: String]) -> Data {
        attempt("json") { try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) }
    }

    /// base64url(`{"uid":…,"utid":…}`), as the Microsoft identity platform returns it.
    static var clientInfo: String { Base64URL.encode(json(["uid": workerUID, "utid": tenant])) }

    /// An unsigned JWT with the claims MSAL reads.
    static var idToken: String {
        let header = Base64URL.encode(json(["alg": "none", "typ": "JWT"]))
        let payload = Base64URL.encode(
            json([
                "aud": clientID, "iss": "http://\(environment)/api/oidc", "name": workerName, "oid": workerUID,
                "preferred_username": workerUsername, "sub": "jo-subject", "tid": tenant, "ver": "2.0",
            ])
        )
        return "\(header).\(payload)."
    }

    /// The sign-in response an app receives for the worker.
    static func signInResponse(app: String) -> TokenResponse {
        TokenResponse(
            accessToken: signInAccessToken(app: app),
            refreshToken: "rt-\(app)",
            idToken: idToken,
            clientInfo: clientInfo,
            scope: signInScopes.joined(separator: " "),
            expiresIn: 3600,
            extendedExpiresIn: 7200
        )
    }

    static var context: TokenRequestContext {
        TokenRequestContext(clientID: clientID, environment: environment, realm: tenant, requestedScopes: signInScopes)
    }

    /// A unified-cache document with `count` access tokens of the worker, one per fill scope.
    static func fillDocument(count: Int, group: String, now: Date) -> Data {
        let cachedAt = Int(now.timeIntervalSince1970)
        var tokens: [String: [String: String]] = [:]
        for index in 0..<count {
            let target = fillScope(index)
            let key = [homeAccountID, environment, "accesstoken", clientID, tenant, target].joined(separator: "-")
                .lowercased()
            tokens[key] = [
                "credential_type": "AccessToken", "secret": fillAccessToken(group: group, index: index),
                "home_account_id": homeAccountID,
                "environment": environment, "client_id": clientID, "realm": tenant, "target": target,
                "token_type": "Bearer",
                "cached_at": "\(cachedAt)", "expires_on": "\(cachedAt + 3600)",
                "extended_expires_on": "\(cachedAt + 7200)",
            ]
        }
        return attempt("fill document") {
            try JSONSerialization.data(withJSONObject: ["AccessToken": tokens], options: [.sortedKeys])
        }
    }
}

typealias Arguments = WorkerArguments

// MARK: - The device

struct Device {
    let store: KeychainStore
    let device: ManagedDevice
    let accounts: AccountManager

    init(directory: String) {
        store = attempt("open") {
            try KeychainStore(
                directory: URL(fileURLWithPath: directory, isDirectory: true),
                options: StoreOptions(synchronous: .normal)
            )
        }
        device = ManagedDevice(store: store)
        accounts = AccountManager(device: device)
    }

    func provisionIfNeeded(policy: String?) {
        guard attempt("record", { try device.record() }) == nil else { return }
        guard let policy else { fail("not-provisioned the device has no policy; pass --policy FILE") }
        let document = attempt("read policy") { try Data(contentsOf: URL(fileURLWithPath: policy)) }
        _ = attempt("provision") { try device.provision(policyDocument: document, actor: "account-worker") }
    }

    func app(_ appID: String) -> AppIdentity {
        guard let identity = attempt("app identity", { try device.appIdentity(appID, actor: "account-worker") }) else {
            fail("not-provisioned the device has no policy")
        }
        return identity
    }

    /// Signs the worker in for the scanner (tokens in the shared MSAL group); one transaction.
    func signInScanner() {
        _ = attempt("sign in scanner") {
            try accounts.signIn(Kiosk.signInResponse(app: "scanner"), context: Kiosk.context, app: app(Kiosk.scannerID))
        }
    }

    /// Signs the signed-in worker in for the timeclock too (single sign-on; tokens in its own group); one transaction.
    func signInTimeclock() {
        _ = attempt("sign in timeclock") {
            try accounts.signIn(
                Kiosk.signInResponse(app: "timeclock"),
                context: Kiosk.context,
                app: app(Kiosk.timeclockID),
                accessGroup: Kiosk.timeclockGroup
            )
        }
    }

    /// Signs the worker in for the scanner and, by SSO, for the timeclock.
    func signIn() {
        signInScanner()
        signInTimeclock()
    }

    /// Adds `count` access tokens of the worker to each of the kiosk's three token groups, in one transaction.
    func fill(_ count: Int) {
        let scanner = app(Kiosk.scannerID)
        let timeclock = app(Kiosk.timeclockID)
        let cache = accounts.tokenCache
        attempt("fill") {
            try store.writeTransaction { tx in
                let targets = [
                    (scanner, AccessGroup.adalCache), (scanner, Kiosk.scannerGroup), (timeclock, Kiosk.timeclockGroup),
                ]
                for (app, group) in targets {
                    try cache.importJSON(
                        Kiosk.fillDocument(count: count, group: group, now: tx.now),
                        as: app,
                        accessGroup: group,
                        in: tx
                    )
                }
            }
        }
    }

    func signOut(as app: AppIdentity, reason: SignOutReason) -> AccountManager.SignOutOutcome {
        attempt("sign out") { try accounts.signOut(app: app, reason: reason) }
    }
}

func encodeJSON(_ value: some Encodable) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return String(decoding: attempt("encode") { try encoder.encode(value) }, as: UTF8.self)
}

// MARK: - Subcommands

func runFill(_ arguments: Arguments) {
    let device = Device(directory: arguments.positional(0, "DIR"))
    let count = arguments.positionalInt(1, "N")
    device.provisionIfNeeded(policy: arguments.options["policy"])
    device.signIn()
    device.fill(count)
    say(.filled, "\(count)")
}

func runSignOut(_ arguments: Arguments) {
    let device = Device(directory: arguments.positional(0, "DIR"))
    let appID = arguments.positional(1, "APP")
    let reasonText = arguments.options["reason"] ?? SignOutReason.user.rawValue
    guard let reason = SignOutReason(rawValue: reasonText) else {
        fail("invalid-arguments unknown reason \(reasonText)")
    }
    let app = device.app(appID)
    let after = arguments.int("after", default: 0)
    if after > 0 { usleep(useconds_t(after) * 1000) }
    say(.signingOut)
    let outcome = device.signOut(as: app, reason: reason)
    say(.signedOut, "\(outcome.itemsRemoved)")
}

/// Every step is one transaction and is acknowledged once it committed, so after a SIGKILL the store holds
/// the state of the last acknowledged step, or of the one after it (committed, not yet acknowledged).
func runSignOutLoop(_ arguments: Arguments) {
    let device = Device(directory: arguments.positional(0, "DIR"))
    let count = arguments.positionalInt(1, "N")
    let rounds = arguments.int("rounds", default: Int.max)
    device.provisionIfNeeded(policy: arguments.options["policy"])
    var round = 0
    while round < rounds {
        device.signInScanner()
        say(.signedIn, "scanner")
        device.signInTimeclock()
        say(.signedIn, "timeclock")
        device.fill(count)
        say(.filled)
        say(.signingOut)
        let outcome = device.signOut(
            as: device.app(round % 2 == 0 ? Kiosk.scannerID : Kiosk.timeclockID),
            reason: .shiftEnd
        )
        say(.signedOut, "\(outcome.itemsRemoved)")
        round += 1
    }
}

func runWait(_ arguments: Arguments) async {
    let device = Device(directory: arguments.positional(0, "DIR"))
    let app = device.app(arguments.positional(1, "APP"))
    let fallback = Int(arguments.options["fallback"] ?? "600") ?? 600
    say("initial \(encodeJSON(attempt("current account") { try device.accounts.currentAccount(for: app) }))")
    let changes = device.accounts.changes(fallbackInterval: .seconds(fallback))
    say("ready")
    for await change in changes {
        say("event \(change.kind.rawValue) \(change.account ?? "-") \(change.sequence)")
        if change.kind == .signedOutGlobally {
            say("current \(encodeJSON(attempt("current account") { try device.accounts.currentAccount(for: app) }))")
            exit(0)
        }
    }
    fail("stream-ended the change stream finished without a global sign-out")
}

// MARK: - main

signal(SIGPIPE, SIG_IGN)
let arguments = Arguments(
    CommandLine.arguments,
    hasMode: true,
    usage: "account-worker fill|signout|signout-loop|wait DIR …"
)
switch arguments.mode ?? "" {
case "fill": runFill(arguments)
case "signout": runSignOut(arguments)
case "signout-loop": runSignOutLoop(arguments)
case "wait": await runWait(arguments)
default: fail("invalid-arguments unknown mode \(arguments.mode ?? "-"); use fill, signout, signout-loop or wait")
}
exit(0)
