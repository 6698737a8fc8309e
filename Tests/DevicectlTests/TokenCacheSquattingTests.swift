import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// Key squatting in `com.microsoft.adalcache`: an app (a real process under its uid) adds plain items under
/// the exact keys MSAL gives the worker's tokens. The token cache's keys live in a namespace of their own, which
/// no app may name, so the worker's sign-in still works, the refusal is the same whether a token exists or
/// not, and the app's items stay its own.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct TokenCacheSquattingTests {
    typealias Daemon = BrokerDaemon
    typealias Worker = AccountWorkerFixture

    static let cache = "com.microsoft.adalcache"
    static let namespace = "org.sharedmode.token-cache/"

    /// MSAL's keychain services for the worker's tokens of the kiosk's client (as MSAL for iOS writes them).
    static var msalServices: [String] {
        [
            "refreshtoken-\(Worker.clientID)--", "idtoken-\(Worker.clientID)-\(Worker.tenant)-", Worker.tenant,
            "appmetadata-\(Worker.clientID)",
            "accesstoken-\(Worker.clientID)-\(Worker.tenant)-\(Worker.fillScope(0))",
        ].map { $0.lowercased() }
    }

    static func add(_ daemon: Daemon, service: String, account: String, secret: String) async throws -> Command.Result {
        try await daemon.devicectl(
            as: Daemon.scannerUID,
            [
                "keychain", "add-generic-password", "--access-group", cache, "--service", service,
                "--account", account, "--secret-stdin",
            ],
            stdin: secret
        )
    }

    /// The scanner's silent token for the first fill scope, through the broker (a real app process).
    static func scannerSilentToken(_ daemon: Daemon) async throws -> String {
        let app = try daemon.start(product: "thin-app", as: Daemon.scannerUID, ["silent", Worker.fillScope(0)])
        #expect(await app.waitForExit(timeout: 30), "the scanner's silent token did not finish")
        return app.lines.first ?? "error: \(app.standardError)"
    }

    @Test func anAppsItemsUnderTheTokenCachesKeysNeitherBlockTheWorkersSignInNorTellWhetherATokenExists() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        let account = "\(Worker.homeAccountID)-\(Worker.environment)".lowercased()
        // The squatter takes every key MSAL would give the worker's tokens, before the worker signs in.
        for service in Self.msalServices {
            let squat = try await Self.add(
                daemon,
                service: service,
                account: service == "appmetadata-\(Worker.clientID)" ? Worker.environment : account,
                secret: "squatted"
            )
            #expect(squat.status == 0, "\(service): \(squat.stderr)")
        }
        // The token cache's own namespace is refused, and audited.
        let namespaced = Self.namespace + "refreshtoken-\(Worker.clientID)--"
        let before = try await Self.add(daemon, service: namespaced, account: account, secret: "forged")
        #expect(before.status == 77 && before.stderr.contains("token cache"), "\(before.status) \(before.stderr)")

        // The worker signs in (a real process writing the token cache): nothing collides.
        try await daemon.signWorkerIn()
        let token = try await Self.scannerSilentToken(daemon)
        #expect(token.hasPrefix("token cache "), "the worker's token was not served: \(token)")

        // With the worker's tokens there, the same refusals, word for word: nothing tells that a token exists.
        let after = try await Self.add(daemon, service: namespaced, account: account, secret: "forged")
        #expect(after.status == before.status && after.stderr == before.stderr, "\(after.stderr) vs \(before.stderr)")
        let duplicate = try await Self.add(daemon, service: Self.msalServices[0], account: account, secret: "again")
        #expect(
            duplicate.status != 0 && duplicate.stderr.contains("duplicate"),
            "the squatter's own item: \(duplicate.stderr)"
        )
        for verb in [["find-generic-password"], ["delete-generic-password"]] {
            let refused = try await daemon.devicectl(
                as: Daemon.scannerUID,
                ["keychain"] + verb + ["--access-group", Self.cache, "--service", namespaced]
            )
            #expect(refused.status == 77, "\(verb): \(refused.status) \(refused.stderr)")
        }
        let events = try await daemon.auditEvents().filter { $0["reason"] as? String == "token cache namespace" }
        #expect(!events.isEmpty, "the attempts were not audited")

        // The shift ends: the worker's tokens go, and so do the app's items under the worker's cache account
        // (the worker's data); the one under the environment alone is the app's and stays as it put it.
        let signOut = try await daemon.devicectl(as: 0, ["signout"])
        #expect(signOut.status == 0, "\(signOut.stderr)")
        let gone = try await Self.scannerSilentToken(daemon)
        #expect(!gone.hasPrefix("token cache "), "a token survived the sign-out: \(gone)")
        let workers = try await daemon.devicectl(
            as: Daemon.scannerUID,
            [
                "keychain", "find-generic-password", "--access-group", Self.cache,
                "--service", Self.msalServices[0],
            ]
        )
        #expect(
            workers.status != 0 && workers.stderr.contains("not found"),
            "an item under the worker's account outlived the sign-out: \(workers.stdout)"
        )
        let own = try await daemon.devicectl(
            as: Daemon.scannerUID,
            [
                "keychain", "find-generic-password", "--access-group", Self.cache,
                "--service", "appmetadata-\(Worker.clientID)".lowercased(), "--print-secret", "--json",
            ]
        )
        #expect(
            own.status == 0 && own.stdout.contains(Data("squatted".utf8).base64EncodedString()),
            "\(own.stdout) \(own.stderr)"
        )
        try await daemon.verifyStore()
        await daemon.cleanUp()
    }
}
