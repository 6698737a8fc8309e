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
//   account-worker signout-loop DIR N [--rounds K]
//       Repeats K times (default: until killed): sign the worker in for both apps (`signing-in`,
//       `signed-in`), add N tokens per group as `fill` does (`filled`), sign out globally
//       (`signing-out`, `signed-out <items>`).
//   account-worker wait DIR APP [--fallback SECONDS]
//       Records APP's current account (`initial <json>`), starts AccountManager.changes() with the given
//       fallback re-check interval (default 600 s, so only the change signal can wake it in a test),
//       prints `ready`, then one line per change (`event <kind> <account> <sequence>`). After the first
//       global sign-out it prints `current <json of currentAccount(APP)>` and exits 0.
//
// The worker's identity, client and tenant are fixed; the tests use the same constants. Each output
// line is written with one write(2), so whatever was printed before a SIGKILL is in the pipe. An error
// prints `error: <code> <message>` to stderr and exits 1.

import Foundation
import KeychainStore
import SharedDevice

#if canImport(Glibc)
import Glibc
#endif

// MARK: - Output

func writeLine(_ line: String, to handle: FileHandle) {
    handle.write(Data((line + "\n").utf8))
}

func say(_ line: String) { writeLine(line, to: FileHandle.standardOutput) }

func fail(_ message: String) -> Never {
    writeLine("error: \(message)", to: FileHandle.standardError)
    exit(1)
}

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

// MARK: - The worker and the kiosk (same constants as Tests/SharedDeviceTests/AccountManagerTests.swift)

enum Kiosk {
    static let scannerID = "com.contoso.kiosk.scanner"
    static let timeclockID = "com.contoso.kiosk.timeclock"
    static let timeclockGroup = "com.contoso.kiosk.timeclock"
    static let scannerGroup = "com.contoso.kiosk.scanner"
    static let clientID = "kiosk-apps"
    static let environment = "127.0.0.1:4593"
    static let tenant = "c0ffee00-1234-4abc-9def-0123456789ab"
    static let workerUID = "3f2a9c1b-5d4e-4f60-8a7b-1c2d3e4f5a6b"
    static let workerUsername = "jo.worker@contoso.example"
    static let workerName = "Jo Worker"
    static var homeAccountID: String { "\(workerUID).\(tenant)" }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func json(_ object: [String: String]) -> Data {
        attempt("json") { try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) }
    }

    /// base64url(`{"uid":…,"utid":…}`), as the Microsoft identity platform returns it.
    static var clientInfo: String { base64URL(json(["uid": workerUID, "utid": tenant])) }

    /// An unsigned JWT with the claims MSAL reads.
    static var idToken: String {
        let header = base64URL(json(["alg": "none", "typ": "JWT"]))
        let payload = base64URL(json([
            "aud": clientID, "iss": "http://\(environment)/api/oidc", "name": workerName, "oid": workerUID,
            "preferred_username": workerUsername, "sub": "jo-subject", "tid": tenant, "ver": "2.0",
        ]))
        return "\(header).\(payload)."
    }

    /// The sign-in response an app receives for the worker.
    static func signInResponse(app: String) -> TokenResponse {
        TokenResponse(accessToken: "at-\(app)", refreshToken: "rt-\(app)", idToken: idToken, clientInfo: clientInfo,
                      scope: "openid profile offline_access User.Read", expiresIn: 3600, extendedExpiresIn: 7200)
    }

    static var context: TokenRequestContext {
        TokenRequestContext(clientID: clientID, environment: environment, realm: tenant,
                            requestedScopes: ["openid", "profile", "offline_access", "User.Read"])
    }

    static func fillScope(_ index: Int) -> String { "api://kiosk/resource-\(index).read" }

    /// A unified-cache document with `count` access tokens of the worker, one per fill scope.
    static func fillDocument(count: Int, tag: String, now: Date) -> Data {
        let cachedAt = Int(now.timeIntervalSince1970)
        var tokens: [String: [String: String]] = [:]
        for index in 0..<count {
            let target = fillScope(index)
            let key = [homeAccountID, environment, "accesstoken", clientID, tenant, target].joined(separator: "-").lowercased()
            tokens[key] = [
                "credential_type": "AccessToken", "secret": "at-fill-\(tag)-\(index)", "home_account_id": homeAccountID,
                "environment": environment, "client_id": clientID, "realm": tenant, "target": target, "token_type": "Bearer",
                "cached_at": "\(cachedAt)", "expires_on": "\(cachedAt + 3600)", "extended_expires_on": "\(cachedAt + 7200)",
            ]
        }
        return attempt("fill document") { try JSONSerialization.data(withJSONObject: ["AccessToken": tokens], options: [.sortedKeys]) }
    }
}

// MARK: - Arguments

struct Arguments {
    var mode: String
    var positional: [String] = []
    var options: [String: String] = [:]

    init(_ raw: [String]) {
        guard raw.count >= 2 else { fail("invalid-arguments usage: account-worker fill|signout|signout-loop|wait DIR …") }
        mode = raw[1]
        var index = 2
        while index < raw.count {
            let argument = raw[index]
            if argument.hasPrefix("--") {
                guard index + 1 < raw.count else { fail("invalid-arguments \(argument) needs a value") }
                options[String(argument.dropFirst(2))] = raw[index + 1]
                index += 2
            } else {
                positional.append(argument)
                index += 1
            }
        }
    }

    func positional(_ index: Int, _ name: String) -> String {
        guard index < positional.count else { fail("invalid-arguments missing \(name)") }
        return positional[index]
    }

    func int(_ index: Int, _ name: String) -> Int {
        guard let value = Int(positional(index, name)) else { fail("invalid-arguments \(name) is not an integer") }
        return value
    }
}

// MARK: - The device

struct Device {
    let store: KeychainStore
    let device: ManagedDevice
    let accounts: AccountManager

    init(directory: String) {
        store = attempt("open") {
            try KeychainStore(directory: URL(fileURLWithPath: directory, isDirectory: true), options: StoreOptions(synchronous: .normal))
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

    /// Signs the worker in for the scanner (shared MSAL group) and, by SSO, for the timeclock (its own group).
    func signIn() {
        let scanner = app(Kiosk.scannerID), timeclock = app(Kiosk.timeclockID)
        _ = attempt("sign in scanner") {
            try accounts.signIn(Kiosk.signInResponse(app: "scanner"), context: Kiosk.context, app: scanner)
        }
        _ = attempt("sign in timeclock") {
            try accounts.signIn(Kiosk.signInResponse(app: "timeclock"), context: Kiosk.context, app: timeclock,
                                accessGroup: Kiosk.timeclockGroup)
        }
    }

    /// Adds `count` access tokens of the worker to each of the kiosk's three token groups, in one transaction.
    func fill(_ count: Int) {
        let scanner = app(Kiosk.scannerID), timeclock = app(Kiosk.timeclockID)
        let cache = accounts.tokenCache
        attempt("fill") {
            try store.writeTransaction { tx in
                let targets = [(scanner, AccessGroup.adalCache), (scanner, Kiosk.scannerGroup), (timeclock, Kiosk.timeclockGroup)]
                for (app, group) in targets {
                    try cache.importJSON(Kiosk.fillDocument(count: count, tag: group, now: tx.now), as: app, accessGroup: group, in: tx)
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
    let count = arguments.int(1, "N")
    device.provisionIfNeeded(policy: arguments.options["policy"])
    device.signIn()
    device.fill(count)
    say("filled \(count)")
}

func runSignOut(_ arguments: Arguments) {
    let device = Device(directory: arguments.positional(0, "DIR"))
    let appID = arguments.positional(1, "APP")
    let reasonText = arguments.options["reason"] ?? SignOutReason.user.rawValue
    guard let reason = SignOutReason(rawValue: reasonText) else { fail("invalid-arguments unknown reason \(reasonText)") }
    let app = device.app(appID)
    if let after = arguments.options["after"].flatMap(Int.init), after > 0 { usleep(useconds_t(after) * 1000) }
    say("signing-out")
    let outcome = device.signOut(as: app, reason: reason)
    say("signed-out \(outcome.itemsRemoved)")
}

func runSignOutLoop(_ arguments: Arguments) {
    let device = Device(directory: arguments.positional(0, "DIR"))
    let count = arguments.int(1, "N")
    let rounds = arguments.options["rounds"].map { Int($0) ?? 0 } ?? Int.max
    device.provisionIfNeeded(policy: arguments.options["policy"])
    var round = 0
    while round < rounds {
        say("signing-in")
        device.signIn()
        say("signed-in")
        device.fill(count)
        say("filled")
        say("signing-out")
        let outcome = device.signOut(as: device.app(round % 2 == 0 ? Kiosk.scannerID : Kiosk.timeclockID), reason: .shiftEnd)
        say("signed-out \(outcome.itemsRemoved)")
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
let arguments = Arguments(CommandLine.arguments)
switch arguments.mode {
case "fill": runFill(arguments)
case "signout": runSignOut(arguments)
case "signout-loop": runSignOutLoop(arguments)
case "wait": await runWait(arguments)
default: fail("invalid-arguments unknown mode \(arguments.mode); use fill, signout, signout-loop or wait")
}
exit(0)
