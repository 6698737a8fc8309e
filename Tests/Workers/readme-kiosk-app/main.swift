import Foundation
import SharedDeviceClient

// The broker's socket: $DEVICECTL_SOCKET (a broker of your own), else the system's /run/devicectl/broker.sock.
// The app decides; the library reads no environment variable.
let socket = ProcessInfo.processInfo.environment["DEVICECTL_SOCKET"] ?? BrokerEndpoint.systemSocketPath
let app = PublicClientApplication(endpoint: BrokerEndpoint(socketPath: socket))  // logs to Logger.current
let group = "com.contoso.kiosk.scanner"  // this app's own access group in the device policy

do {
    let caller = try await app.caller()
    print("app \(caller.appID ?? "none") uid \(caller.uid)")
    if try await app.deviceInformation().mode == .shared, try await app.currentAccount().current == nil {
        let signIn = InteractiveTokenParameters(
            scopes: ["User.Read"],
            flow: .deviceCode { code in
                print("enter \(code.userCode) at \(code.verificationURI)")
            }
        )
        _ = try await app.acquireToken(signIn)
    }
    // send token.accessToken as Authorization: Bearer
    let token = try await app.acquireTokenSilent(scopes: ["User.Read"])
    print("worker \(token.account.username ?? "?"), token from the \(token.source)")

    // A secret in the app's own group (named: without accessGroup an item goes to the app's first group).
    let pin = ItemQuery(accessGroup: group, service: "printer", account: "pin")
    try await app.deleteGenericPasswordIfPresent(pin)  // an earlier run's; none is fine
    try await app.addGenericPassword(service: "printer", account: "pin", secret: Data("4711".utf8), accessGroup: group)
    print("secret \(String(decoding: try await app.findGenericPassword(pin).secret ?? Data(), as: UTF8.self))")
    try await app.deleteGenericPassword(pin)
    do {
        _ = try await app.findGenericPassword(pin)
    } catch SharedDeviceClientError.Code.itemNotFound {  // match codes, not messages: -25300, nothing there
        print("secret deleted")
    } catch {
        throw error  // the rest, to the catch below
    }

    // The end of the shift: the broker pushes it to every app.
    events: for try await event in app.accountChanges() {
        switch event {
        case .subscribed: print("waiting for the sign-out")
        case .signedOut(let reason, _):
            print("signed out: \(reason?.description ?? "no reason given")")  // lock the screen here
            break events
        default: continue
        }
    }
} catch {
    print("error: \(error)")  // says what happened and what to do
    exit(1)
}
