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
//
// Each line is one write(2) (`WorkerOutput`). An error prints `error: <code> <message>` to stderr and exits 1.

import Foundation
import IdentityClient
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
    default:
        WorkerOutput.fail("invalid-arguments unknown mode \(arguments.mode ?? "")")
    }
} catch {
    fail(error)
}
