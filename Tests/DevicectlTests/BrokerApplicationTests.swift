import Foundation
import ProcessTestSupport
import Testing

/// A Swift app using `PublicClientApplication` under its own uid: with the broker daemon running it talks
/// to the broker (MSAL with the Authenticator broker) and never opens the store.
@Suite(.serialized) struct BrokerApplicationTests {
    typealias Daemon = BrokerDaemon

    /// The app's own registration, as an app ships it.
    static func registration(_ app: String) -> [String] {
        ["--app", app, "--client-id", Worker.kioskClientID, "--authority", Worker.kioskIssuer]
    }

    static func finished(_ process: ChildProcess, sourceLocation: SourceLocation = #_sourceLocation) async -> [String] {
        #expect(await process.waitForExit(timeout: 30), "broker-app did not finish", sourceLocation: sourceLocation)
        #expect(process.status == 0, "broker-app failed: \(process.standardError)", sourceLocation: sourceLocation)
        return process.lines
    }

    @Test func publicClientApplicationGoesThroughTheBrokerUnderItsOwnUid() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        let jo = try daemon.cli.writeFile("jo.json", Worker.jo.response(issuer: Worker.kioskIssuer, clientID: Worker.kioskClientID))
        let signIn = try await daemon.cli.run(["signin", "--app", Daemon.scanner, "--token-response", jo])
        try #require(signIn.status == 0, "\(signIn.stderr)")

        let current = await Self.finished(try daemon.start(product: "broker-app", as: Daemon.timeclockUID,
                                                           ["current"] + Self.registration(Daemon.timeclock)))
        #expect(current == ["mode shared", "brokered true", "current \(Worker.jo.username)"])
        let silent = await Self.finished(try daemon.start(product: "broker-app", as: Daemon.timeclockUID,
                                                          ["silent", "--scopes", "User.Read"] + Self.registration(Daemon.timeclock)))
        #expect(silent.first?.hasPrefix("token cache ") == true, "\(silent)")

        // The timeclock watches; the scanner ends the shift; the timeclock hears of it through the broker.
        let watcher = try daemon.start(product: "broker-app", as: Daemon.timeclockUID, ["watch", "--count", "1"] + Self.registration(Daemon.timeclock))
        try #require(await watcher.waitForLine(timeout: 20) { $0 == "ready" } != nil, "\(watcher.standardError)")
        let signOut = await Self.finished(try daemon.start(product: "broker-app", as: Daemon.scannerUID,
                                                           ["signout"] + Self.registration(Daemon.scanner)))
        #expect(signOut == ["signed-out \(Worker.jo.username) global true"])
        let events = await Self.finished(watcher)
        #expect(events == ["ready", "event signed_out - user"])

        // An app cannot pass itself off as another: the broker knows it by its uid.
        let impostor = try daemon.start(product: "broker-app", as: Daemon.timeclockUID, ["current"] + Self.registration(Daemon.scanner))
        #expect(await impostor.waitForExit(timeout: 30))
        #expect(impostor.status == 1 && impostor.standardError.contains("appNotInPolicy") && impostor.standardError.contains("as app \(Daemon.timeclock)"),
                "\(impostor.standardError)")
        await daemon.cleanUp()
    }
}
