// thin-app: an app on the device that links SharedDeviceClient and nothing of the engine (no store, no
// crypto, no identity client). The thin-client tests run it under an app's uid against a real deviced.
//
//   thin-app [--socket PATH] current           `mode <shared|private>`, `current <username|none>`
//   thin-app [--socket PATH] watch N           `returned` as soon as accountChanges() returns, then
//                                              `event <kind> <detail>` for each of the next N events
//   thin-app [--socket PATH] signin SCOPES     device code: `code <user code> <uri>` when the callback
//                                              fires, then `token <source> <username> <scopes>`
//   thin-app [--socket PATH] cancel-signin S F starts a device-code sign-in, cancels its task once the
//                                              code is shown and file F exists: `code …`, then `cancelled`
//   thin-app [--socket PATH] silent SCOPES     `token <source> <username> <scopes>`
//   thin-app [--socket PATH] signout           `signed-out <username|none> global <bool> items <n>`
//   thin-app [--socket PATH] activity          `idle <signOutIn|none>`
//   thin-app [--socket PATH] not-found         in the app's last group: `if-present <n>` for a delete-if-present
//                                              with nothing there, then with one item; `find isItemNotFound
//                                              <bool> status <n>` and `delete isItemNotFound <bool> status <n>`
//                                              for a find and a delete of the item gone
//   thin-app [--socket PATH] poll N MS         asks for the current account N times, MS ms apart (a
//                                              connection per call): `ok <username|none>` or `error <case>`
//   thin-app [--socket PATH] soak S TAG        for S seconds, mixed calls in a loop: add an item (service
//                                              `soak-TAG-<i>`) to the app's first group (its own), read it back, update
//                                              it, read the update, list, current account, and every 10th
//                                              item delete it again; any wrong answer fails. Then every kept
//                                              item must be there with its last secret: `soak <calls> calls <kept> kept`
//
// The socket defaults to $DEVICECTL_SOCKET (the executable resolves it; the library reads no environment).
// Each output line is one write(2). A failure prints `error: <case> <message>` to standard error, exit 1.

import Foundation
import Logging
import SharedDeviceClient

#if canImport(Glibc)
import Glibc
#endif

func say(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

func fail(_ error: SharedDeviceClientError) -> Never {
    FileHandle.standardError.write(Data("error: \(name(error)) \(error)\n".utf8))
    exit(1)
}

var arguments = Array(CommandLine.arguments.dropFirst())
var socket =
    ProcessInfo.processInfo.environment["DEVICECTL_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
    ?? BrokerEndpoint.systemSocketPath
if arguments.first == "--socket", arguments.count >= 2 {
    socket = arguments[1]
    arguments.removeFirst(2)
}
guard let mode = arguments.first else {
    FileHandle.standardError.write(
        Data(
            "usage: thin-app [--socket PATH] current|watch N|signin SCOPES|cancel-signin SCOPES|silent SCOPES|signout|activity\n"
                .utf8
        )
    )
    exit(2)
}
let argument = arguments.dropFirst().first ?? ""
let scopes = argument.split(separator: " ").map(String.init)

var logger = Logger(label: "thin-app")
logger.logLevel = .warning
let application = PublicClientApplication(endpoint: BrokerEndpoint(socketPath: socket), logger: logger)

/// The error's kind as the tests read it: the client's own codes and the broker's refusals by their code,
/// the keychain's and the account manager's answers as `keychain` and `account`.
func name(_ error: SharedDeviceClientError) -> String {
    if error.keychainStatus != nil { return "keychain" }
    switch error.code {
    case .brokerUnavailable, .untrustedBroker, .callerNotInPolicy, .limitExceeded, .refused, .cancelled:
        return error.code.name
    default: return "account"
    }
}

/// The soak loop: every answer checked, every kept item re-read at the end.
func soak(seconds: Double, tag: String) async throws(SharedDeviceClientError) {
    guard let group = try await application.caller().accessGroups.first else {
        fail(SharedDeviceClientError(.refused, "the app has no access group"))
    }
    let deadline = Date().addingTimeInterval(seconds)
    var calls = 0
    var index = 0
    var kept: [String: Data] = [:]
    func check(_ condition: Bool, _ what: String) {
        if !condition {
            FileHandle.standardError.write(Data("error: wrong-answer \(what)\n".utf8))
            exit(1)
        }
    }
    while Date() < deadline {
        index += 1
        let service = "soak-\(tag)-\(index)"
        let first = Data("v1-\(tag)-\(index)".utf8)
        let second = Data("v2-\(tag)-\(index)".utf8)
        let query = ItemQuery(accessGroup: group, service: service)
        try await application.addGenericPassword(service: service, account: "soak", secret: first, accessGroup: group)
        check(try await application.findGenericPassword(query).secret == first, "read after add \(service)")
        check(try await application.updateGenericPassword(query, secret: second) == 1, "update \(service)")
        check(
            try await application.findGenericPassword(ItemQuery(service: service)).secret == second,
            "read after update \(service)"
        )
        check(!(try await application.listGenericPasswords(query)).isEmpty, "list \(service)")
        _ = try await application.currentAccount()
        calls += 6
        if index % 10 == 0 {
            check(try await application.deleteGenericPassword(query) == 1, "delete \(service)")
            calls += 1
        } else {
            kept[service] = second
        }
    }
    for (service, secret) in kept {
        check(
            try await application.findGenericPassword(ItemQuery(accessGroup: group, service: service)).secret == secret,
            "kept \(service)"
        )
    }
    say("soak \(calls) calls \(kept.count) kept")
}

func describe(_ result: AuthenticationResult) -> String {
    "token \(result.source.rawValue) \(result.account.username ?? "-") \(result.scopes.joined(separator: ","))"
}

do throws(SharedDeviceClientError) {
    switch mode {
    case "current":
        say("mode \(try await application.deviceInformation().mode.rawValue)")
        say("current \(try await application.currentAccount().current?.username ?? "none")")
    case "watch":
        let count = Int(argument) ?? 1
        let changes = application.accountChanges()
        say("returned")
        var seen = 0
        do {
            for try await event in changes {
                switch event {
                case .subscribed(let current, _): say("event subscribed \(current?.username ?? "none")")
                case .signedIn(let current, _): say("event signedIn \(current?.username ?? "none")")
                case .signedOut(let reason, _): say("event signedOut \(reason?.rawValue ?? "-")")
                case .switched(let current, _): say("event switched \(current?.username ?? "none")")
                case .deviceModeChanged(let mode, _): say("event deviceModeChanged \(mode.rawValue)")
                case .idleWarning(let secondsLeft): say("event idleWarning \(secondsLeft)")
                case .idleWarningCanceled: say("event idleWarningCanceled -")
                }
                seen += 1
                if seen >= count { break }
            }
        } catch let error as SharedDeviceClientError {
            fail(error)
        } catch {
            fail(SharedDeviceClientError(.refused, "\(error)"))
        }
    case "signin":
        let result = try await application.acquireToken(
            InteractiveTokenParameters(
                scopes: scopes,
                flow: .deviceCode { verification in
                    say("code \(verification.userCode) \(verification.verificationURI)")
                }
            )
        )
        say(describe(result))
    case "cancel-signin":
        let shown = AsyncStream<Void>.makeStream()
        let signIn = Task { () async throws(SharedDeviceClientError) -> AuthenticationResult in
            try await application.acquireToken(
                InteractiveTokenParameters(
                    scopes: scopes,
                    flow: .deviceCode { verification in
                        say("code \(verification.userCode) \(verification.verificationURI)")
                        shown.continuation.yield()
                    }
                )
            )
        }
        for await _ in shown.stream { break }
        let go = arguments.dropFirst(2).first ?? ""
        while !go.isEmpty && !FileManager.default.fileExists(atPath: go) {
            try? await Task.sleep(for: .milliseconds(20))
        }
        signIn.cancel()
        do {
            _ = try await signIn.value
            say("not cancelled")
        } catch SharedDeviceClientError.Code.cancelled {
            say("cancelled")
        } catch {
            fail(error as? SharedDeviceClientError ?? SharedDeviceClientError(.refused, "\(error)"))
        }
    case "silent":
        say(describe(try await application.acquireTokenSilent(scopes: scopes)))
    case "signout":
        let outcome = try await application.signOut()
        say("signed-out \(outcome.account?.username ?? "none") global \(outcome.global) items \(outcome.itemsRemoved)")
    case "activity":
        let idle = try await application.reportActivity()
        say("idle \(idle?.signOutIn.map { String(Int($0.rounded())) } ?? "none")")
    case "poll":
        let count = Int(argument) ?? 1
        let interval = Int(arguments.dropFirst(2).first ?? "") ?? 50
        for _ in 0..<count {
            do throws(SharedDeviceClientError) {
                say("ok \(try await application.currentAccount().current?.username ?? "none")")
            } catch {
                say("error \(name(error))")
            }
            try? await Task.sleep(for: .milliseconds(interval))
        }
    case "not-found":
        let group = try await application.caller().accessGroups.last
        let query = ItemQuery(accessGroup: group, service: "thin-app-not-found", account: "a")
        say("if-present \(try await application.deleteGenericPasswordIfPresent(query))")
        try await application.addGenericPassword(
            service: "thin-app-not-found",
            account: "a",
            secret: Data("s".utf8),
            accessGroup: group
        )
        say("if-present \(try await application.deleteGenericPasswordIfPresent(query))")
        do throws(SharedDeviceClientError) {
            _ = try await application.findGenericPassword(query)
            say("find found")
        } catch {
            say("find isItemNotFound \(error.isItemNotFound) status \(error.keychainStatus.map(String.init) ?? "none")")
        }
        do throws(SharedDeviceClientError) {
            say("delete deleted \(try await application.deleteGenericPassword(query))")
        } catch {
            say(
                "delete isItemNotFound \(error.isItemNotFound) status \(error.keychainStatus.map(String.init) ?? "none")"
            )
        }
    case "soak":
        try await soak(seconds: Double(argument) ?? 10, tag: arguments.dropFirst(2).first ?? "t")
    default:
        FileHandle.standardError.write(Data("thin-app: unknown mode \(mode)\n".utf8))
        exit(2)
    }
} catch {
    fail(error)
}
