// broker-app: a Swift app on the device, the way an app uses MSAL with a broker: PublicClientApplication
// with its own registration (client id, authority, app id), run by the broker tests under the app's Unix
// user. It finds the broker daemon at $DEVICECTL_SOCKET and never opens the store.
//
//   broker-app current --app ID --client-id C --authority URL
//       Prints `mode <shared|private>`, `brokered <true|false>` and `current <username or none>`.
//   broker-app silent --app ID --client-id C --authority URL --scopes "A B"
//       Prints `token <source> <expires-on> <scopes>` (never the token itself).
//   broker-app signout --app ID --client-id C --authority URL
//       Prints `signed-out <username> global <true|false>`.
//   broker-app watch --app ID --client-id C --authority URL --count N
//       Prints `ready`, then `event <kind> <account> <reason>` for each of the next N account changes.
//   broker-app poll --app ID --client-id C --authority URL --count N --interval-ms M
//       Asks for the current account N times, M ms apart, on one application (one broker connection,
//       reopened when the broker restarts): `ok <username or none>` or `error <code>` each time.
//   broker-app soak --app ID --client-id C --authority URL --seconds S --tag T
//       For S seconds, mixed calls in a loop: add a keychain item (service `soak-T-<i>`) to the app's own
//       group, read it back, update it, read the update, list, current account, and every 10th item
//       delete it again. Any error or wrong answer ends it with exit 1. Then it checks that every item it
//       kept is there with its last secret (no lost update) and prints `soak <calls> calls <kept> kept`.
//
// Each line is one write(2) (`WorkerOutput`). An error prints `error: <code> <message>` to stderr and exits 1.

import Foundation
import IdentityClient
import KeychainStore
import ProcessTestSupport
import SharedDevice

let arguments = WorkerArguments(CommandLine.arguments, hasMode: true,
                                usage: "broker-app current|silent|signout|watch --app ID --client-id C --authority URL [--scopes S] [--count N]")

func fail(_ error: SharedDeviceError) -> Never {
    WorkerOutput.fail("\(error.code.name) \(error.message)")
}

let configuration = PublicClientApplicationConfiguration(clientID: arguments.string("client-id"), authority: arguments.string("authority"),
                                                         appID: arguments.string("app"))
let application: PublicClientApplication
do {
    application = try PublicClientApplication(configuration: configuration)
} catch {
    fail(error)
}

do {
    switch arguments.mode {
    case "current":
        WorkerOutput.say("mode \(application.deviceInformation().information.mode.rawValue)")
        WorkerOutput.say("brokered \(application.broker != nil)")
        WorkerOutput.say("current \(try application.currentAccount().current?.username ?? "none")")
    case "silent":
        let scopes = arguments.string("scopes").split(separator: " ").map(String.init)
        let result = try await application.acquireTokenSilent(scopes: scopes)
        WorkerOutput.say("token \(result.source.rawValue) \(Int(result.expiresOn?.timeIntervalSince1970 ?? 0)) \(result.scopes.joined(separator: ","))")
    case "signout":
        let outcome = try await application.signOut()
        WorkerOutput.say("signed-out \(outcome.account?.username ?? "none") global \(outcome.global)")
    case "watch":
        let count = arguments.int("count")
        let changes = application.accountChanges()  // live when it returns
        WorkerOutput.say("ready")
        var seen = 0
        for await change in changes {
            WorkerOutput.say("event \(change.kind.rawValue) \(change.account ?? "-") \(change.reason?.rawValue ?? "-")")
            seen += 1
            if seen >= count { break }
        }
    case "poll":
        let count = arguments.int("count"), interval = arguments.int("interval-ms")
        for _ in 0..<count {
            do {
                WorkerOutput.say("ok \(try application.currentAccount().current?.username ?? "none")")
            } catch {
                WorkerOutput.say("error \(error.code.name)")
            }
            try? await Task.sleep(for: .milliseconds(interval))
        }
    case "soak":
        try soak(seconds: Double(arguments.int("seconds")), tag: arguments.string("tag"))
    default:
        WorkerOutput.fail("invalid-arguments unknown mode \(arguments.mode ?? "")")
    }
} catch {
    fail(error)
}

/// The soak loop: every answer checked, every kept item re-read at the end.
func soak(seconds: Double, tag: String) throws(SharedDeviceError) {
    guard let broker = application.broker else { WorkerOutput.fail("not-brokered the broker is not running") }
    let group = application.app.accessGroups.last!
    let deadline = Date().addingTimeInterval(seconds)
    var calls = 0, index = 0
    var kept: [String: Data] = [:]
    func check(_ condition: Bool, _ what: String) {
        if !condition { WorkerOutput.fail("wrong-answer \(what)") }
    }
    do throws(BrokerClientError) {
        while Date() < deadline {
            index += 1
            let service = "soak-\(tag)-\(index)", first = Data("v1-\(tag)-\(index)".utf8), second = Data("v2-\(tag)-\(index)".utf8)
            _ = try broker.add(NewItem(accessGroup: group, service: service, account: "soak", secret: first))
            check(try broker.find(ItemQuery(accessGroup: group, service: service)).first?.secret == first, "read after add \(service)")
            check(try broker.update(ItemQuery(accessGroup: group, service: service), with: ItemChanges(secret: second)) == 1, "update \(service)")
            check(try broker.find(ItemQuery(service: service)).first?.secret == second, "read after update \(service)")
            check(!(try broker.metadata(matching: ItemQuery(accessGroup: group, service: service))).isEmpty, "list \(service)")
            _ = try broker.currentAccount()
            calls += 6
            if index % 10 == 0 {
                check(try broker.delete(ItemQuery(accessGroup: group, service: service)) == 1, "delete \(service)")
                calls += 1
            } else {
                kept[service] = second
            }
        }
        for (service, secret) in kept {
            check(try broker.find(ItemQuery(accessGroup: group, service: service)).first?.secret == secret, "kept \(service)")
        }
    } catch {
        throw SharedDeviceError(error)
    }
    WorkerOutput.say("soak \(calls) calls \(kept.count) kept")
}
