import Foundation
import KeychainStore
import SharedDevice
import Testing

/// Azure AD B2C accounts as MSAL names them: one per user flow, `<oid>-<policy>.<tenant>`, one worker.
struct B2CAccountTests {
    typealias F = CacheFixture
    static let tenant = "contoso.onmicrosoft.com"
    static let environment = "contoso.b2clogin.com"
    static let oid = "0b9d4c1e-7a2f-4e3b-9c8d-1e2f3a4b5c6d"

    /// A B2C user flow's token response without `client_info` (as the local provider sends it): the ID
    /// token names the user by `oid`; its `sub` differs per flow.
    static func response(oid: String = oid, sub: String) throws -> TokenResponse {
        let idToken = try F.jwt([
            "sub": sub, "oid": oid, "preferred_username": "worker1", "iss": "https://\(environment)/\(tenant)/v2.0/",
        ])
        let body =
            #"{"token_type":"Bearer","scope":"User.Read","expires_in":3600,"access_token":"at-\#(sub)","refresh_token":"rt-\#(sub)","id_token":"\#(idToken)"}"#
        return try TokenResponse.decode(Data(body.utf8))
    }

    static func context(policy: String?) -> TokenRequestContext {
        TokenRequestContext(
            clientID: F.clientID,
            environment: environment,
            realm: tenant,
            requestedScopes: ["User.Read"],
            b2cPolicy: policy
        )
    }

    /// The account a response is cached under.
    static func cachedAccount(_ response: TokenResponse, policy: String?, in fixture: F.Store) throws -> DeviceAccount {
        let record = try TokenCache().save(response, context: context(policy: policy), as: F.scanner, in: fixture.store)
        let account = try #require(
            try TokenCache().account(
                homeAccountID: record.accessToken.homeAccountID,
                environment: environment,
                as: F.scanner,
                in: fixture.store
            )
        )
        return DeviceAccount(
            homeAccountID: account.homeAccountID,
            environment: account.environment,
            realm: account.tenantID,
            username: account.username,
            name: account.name,
            localAccountID: account.objectID
        )
    }

    @Test func eachUserFlowCachesItsOwnAccountNamedByObjectIDAndPolicyAndTheyAreOneWorker() throws {
        let fixture = try F.Store()
        let susi = try Self.cachedAccount(try Self.response(sub: "susi-sub"), policy: "b2c_1_susi", in: fixture)
        let edit = try Self.cachedAccount(try Self.response(sub: "edit-sub"), policy: "b2c_1_edit_profile", in: fixture)
        #expect(susi.homeAccountID == "\(Self.oid)-b2c_1_susi.\(Self.tenant)")
        #expect(edit.homeAccountID == "\(Self.oid)-b2c_1_edit_profile.\(Self.tenant)")
        #expect(susi.b2cPolicy == "b2c_1_susi" && edit.b2cPolicy == "b2c_1_edit_profile")
        #expect(!susi.isSameAccount(as: edit))
        #expect(susi.isSameWorker(as: edit) && edit.isSameWorker(as: susi))
        #expect(susi.b2cHomeAccountID(policy: "B2C_1_Edit_Profile") == edit.homeAccountID)
        // Both flows' tokens stay, each under its account.
        #expect(try TokenCache().accounts(as: F.scanner, in: fixture.store).count == 2)
    }

    @Test func anotherUserOrAnotherEnvironmentOrANonB2CAccountIsAnotherWorker() throws {
        let fixture = try F.Store()
        let worker = try Self.cachedAccount(try Self.response(sub: "a"), policy: "b2c_1_susi", in: fixture)
        let other = try Self.cachedAccount(
            try Self.response(oid: "7c6b5a49-3827-4e16-a5f4-e3d2c1b0a998", sub: "b"),
            policy: "b2c_1_edit_profile",
            in: fixture
        )
        #expect(!worker.isSameWorker(as: other))
        var elsewhere = worker
        elsewhere.environment = "fabrikam.b2clogin.com"
        elsewhere.homeAccountID = "\(Self.oid)-b2c_1_edit_profile.\(Self.tenant)"
        #expect(!worker.isSameWorker(as: elsewhere))
        // Without a B2C policy in the request context the account is an OpenID Connect one (`sub.tag`),
        // which never pairs with another account of the same person.
        let plain = try Self.cachedAccount(try Self.response(sub: "c"), policy: nil, in: fixture)
        #expect(plain.b2cPolicy == nil && plain.homeAccountID.hasPrefix("c."))
        #expect(!plain.isSameWorker(as: worker) && !worker.isSameWorker(as: plain))
        // A home account id that only looks like B2C's but whose first part is not the object id.
        let lookalike = DeviceAccount(
            homeAccountID: "x-b2c_1_susi.\(Self.tenant)",
            environment: Self.environment,
            realm: Self.tenant,
            username: nil,
            name: nil,
            localAccountID: Self.oid
        )
        #expect(lookalike.b2cPolicy == nil && !lookalike.isSameWorker(as: worker))
    }

    @Test func aCallsAuthorityMustBeThePolicysIssuerOrAKnownAuthorityInAnySpelling() throws {
        var document = try PolicyDecodingTests.kiosk()
        let susi = "https://contoso.b2clogin.com/tfp/contoso.onmicrosoft.com/B2C_1_susi"
        let edit = "https://contoso.b2clogin.com/tfp/contoso.onmicrosoft.com/B2C_1_edit_profile"
        var authority = try #require(document["authority"] as? [String: Any])
        authority["issuer"] = susi
        authority["knownAuthorities"] = [susi, edit]
        document["authority"] = authority
        let policy = try DevicePolicy.decode(try JSONSerialization.data(withJSONObject: document)).authority
        #expect(policy.listedAuthority(edit)?.absoluteString == edit)
        #expect(policy.listedAuthority(edit.lowercased() + "/v2.0/")?.absoluteString == edit)
        #expect(policy.listedAuthority(susi + "/").map(policy.isIssuer) == true)
        #expect(policy.listedAuthority(edit).map(policy.isIssuer) == false)
        #expect(policy.listedAuthority("https://contoso.b2clogin.com/tfp/contoso.onmicrosoft.com/B2C_1_reset") == nil)
        #expect(policy.listedAuthority("https://evil.example/tfp/contoso.onmicrosoft.com/B2C_1_edit_profile") == nil)
        #expect(policy.listedAuthority("not a url") == nil)
        #expect(policy.unlistedAuthorityMessage("https://x.example").contains("knownAuthorities"))
    }
}
