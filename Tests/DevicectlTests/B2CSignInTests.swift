import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// Azure AD B2C against the real local provider: the user flows are glewlwyd OIDC plugin instances reached
/// at B2C-shaped paths (`/tfp/{tenant}/{policy}/`) through tools/idp's path-rewriting nginx proxy, as
/// policies/kiosk-b2c.json names them (issuer: the sign-up-or-sign-in flow; known authorities: both flows).
@Suite(.serialized, .tags(.integration, .needsRoot, .needsIdentityProvider)) struct B2CSignInTests {
    typealias Daemon = BrokerDaemon
    typealias Provider = IdentityCLITests.Provider

    /// A daemon on policies/kiosk-b2c.json with the test provider's B2C authorities.
    static func daemon() async throws -> (Daemon, Provider) {
        let provider = try await Provider.shared()
        let susi = try #require(provider.b2cSignUpOrSignIn, "tools/idp printed no B2C_SUSI authority")
        let edit = try #require(provider.b2cEditProfile, "tools/idp printed no B2C_EDIT_PROFILE authority")
        var policy = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: DevicectlRunner.policy("kiosk-b2c.json"))))
                                  as? [String: Any])
        var authority = try #require(policy["authority"] as? [String: Any])
        authority["issuer"] = susi
        authority["knownAuthorities"] = [susi, edit]
        policy["authority"] = authority
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("b2c-policy-\(UUID().uuidString).json")
        try JSONSerialization.data(withJSONObject: policy).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let daemon = try await Daemon(policy: file.path)
        try await daemon.start(["--log-level", "debug"])
        return (daemon, provider)
    }

    @Test func aWorkerSignsInThroughTheSignUpOrSignInUserFlowBehindTheB2CPathsAndTheOtherAppGetsSingleSignOn() async throws {
        let (daemon, provider) = try await Self.daemon()
        let susi = try #require(provider.b2cSignUpOrSignIn)
        let signIn = try await BrokerSignInTests.approvingDeviceCode(daemon, as: Daemon.scannerUID, ["signin"], user: "worker1", plugin: "b2c-susi")
        #expect(signIn.status == 0, "\(signIn.standardError)\n\(daemon.logTail())")
        let result = try #require(try parseJSON(signIn.standardOutput) as? [String: Any], "\(signIn.standardOutput)")
        let account = try #require(result["account"] as? [String: Any])
        // The B2C authority's environment (the proxy's host and port) and its tenant as the realm.
        #expect(account["environment"] as? String == URL(string: susi)?.host.map { "\($0):\(URL(string: susi)?.port ?? 0)" }, "\(account)")
        #expect(account["realm"] as? String == "contoso.onmicrosoft.com", "\(account)")
        #expect(account["username"] as? String == "worker1")
        let token = try await daemon.devicectl(as: Daemon.timeclockUID, ["token", "--scopes", "Files.Read", "--json"])
        let silent = try? parseJSON(token.stdout) as? [String: Any]
        #expect(token.status == 0 && silent?["source"] as? String == "cache", "\(token.stdout) \(token.stderr)")
        // The user flow's own token: the userinfo of the sign-up-or-sign-in plugin names the worker.
        let userinfo = try await daemon.devicectl(as: Daemon.timeclockUID, ["call", "--scopes", "User.Read", "userinfo"])
        #expect(userinfo.stdout.hasPrefix("HTTP 200") && userinfo.stdout.contains("worker1"), "\(userinfo.stdout) \(userinfo.stderr)")
        await daemon.cleanUp()
    }
}
