import Foundation
import IdentityTestSupport
import Testing

@testable import IdentityClient

struct AuthorityTests {
    static let b2cHost = "fabrikamb2c.b2clogin.com"
    static let susi = "https://fabrikamb2c.b2clogin.com/tfp/fabrikamb2c.onmicrosoft.com/B2C_1_SUSI"

    private func invalidAuthority(_ string: String, knownAuthorities: [String] = []) -> IdentityError? {
        do {
            _ = try Authority(string, knownAuthorities: knownAuthorities)
            return nil
        } catch {
            return error
        }
    }

    // MARK: Microsoft

    @Test(arguments: [
        ("https://login.microsoftonline.com/common", "common"),
        ("https://login.microsoftonline.com/common/", "common"),
        ("https://login.microsoftonline.com/common/v2.0", "common"),
        ("https://login.microsoftonline.com/common/v2.0/", "common"),
        ("https://login.microsoftonline.com/organizations", "organizations"),
        ("https://login.microsoftonline.com/consumers/v2.0", "consumers"),
        ("https://LOGIN.MicrosoftOnline.com/contoso.onmicrosoft.com", "contoso.onmicrosoft.com"),
        (
            "https://login.microsoftonline.com:443/72f988bf-86f1-41af-91ab-2d7cd011db47/v2.0",
            "72f988bf-86f1-41af-91ab-2d7cd011db47"
        ),
    ])
    func microsoftFormsAreNormalizedToTheTenantURL(string: String, tenant: String) throws {
        let authority = try Authority(string)
        #expect(authority.kind == .microsoft(tenant: tenant))
        #expect(authority.url.absoluteString == "https://login.microsoftonline.com/\(tenant)")
        #expect(authority.description == "https://login.microsoftonline.com/\(tenant)")
        #expect(
            authority.openIDConfigurationURL.absoluteString
                == "https://login.microsoftonline.com/\(tenant)/v2.0/.well-known/openid-configuration"
        )
        #expect(authority.environment == "login.microsoftonline.com")
        #expect(authority.realm == tenant)
        #expect(authority.sendsClientInfo)
    }

    @Test(arguments: ["login.microsoftonline.us", "login.chinacloudapi.cn"])
    func sovereignCloudsAreMicrosoftAuthorities(host: String) throws {
        let authority = try Authority("https://\(host)/contoso.onmicrosoft.com/v2.0/")
        #expect(authority.kind == .microsoft(tenant: "contoso.onmicrosoft.com"))
        #expect(authority.url.absoluteString == "https://\(host)/contoso.onmicrosoft.com")
        #expect(
            authority.openIDConfigurationURL.absoluteString
                == "https://\(host)/contoso.onmicrosoft.com/v2.0/.well-known/openid-configuration"
        )
        #expect(authority.environment == host)
    }

    @Test(arguments: [
        "https://login.microsoftonline.com",
        "https://login.microsoftonline.com/",
        "https://login.microsoftonline.com/common/oauth2/v2.0/authorize",
        "https://login.microsoftonline.com/common/v1.0",
    ])
    func microsoftURLsWithoutExactlyATenantAreRefused(string: String) {
        let error = invalidAuthority(string)
        #expect(error?.code == .invalidAuthority)
        #expect(error?.message.contains("{tenant}") == true)
    }

    @Test func spellingsOfTheSameAuthorityAreEqual() throws {
        #expect(
            try Authority("https://login.microsoftonline.com/common/v2.0/")
                == Authority("https://Login.MicrosoftOnline.com/common")
        )
        #expect(
            try Set([
                Authority("https://login.microsoftonline.com/common"),
                Authority("https://login.microsoftonline.com/common/"),
            ]).count == 1
        )
    }

    // MARK: B2C

    @Test func b2cTFPAuthorityWithAKnownHost() throws {
        let authority = try Authority(Self.susi, knownAuthorities: [Self.b2cHost])
        #expect(authority.kind == .b2c(tenant: "fabrikamb2c.onmicrosoft.com", policy: "B2C_1_SUSI"))
        #expect(authority.url.absoluteString == Self.susi)
        #expect(
            authority.openIDConfigurationURL.absoluteString
                == "https://fabrikamb2c.b2clogin.com/tfp/fabrikamb2c.onmicrosoft.com/B2C_1_SUSI/v2.0/.well-known/openid-configuration"
        )
        #expect(authority.environment == Self.b2cHost)
        #expect(authority.realm == "fabrikamb2c.onmicrosoft.com")
        #expect(authority.sendsClientInfo)
    }

    @Test(arguments: [
        "https://fabrikamb2c.b2clogin.com/fabrikamb2c.onmicrosoft.com/B2C_1_edit_profile",
        "https://fabrikamb2c.b2clogin.com/fabrikamb2c.onmicrosoft.com/B2C_1_edit_profile/",
        "https://fabrikamb2c.b2clogin.com/tfp/fabrikamb2c.onmicrosoft.com/B2C_1_edit_profile/v2.0",
    ])
    func b2cFormsWithoutTFPAreNormalizedToTFP(string: String) throws {
        let authority = try Authority(string, knownAuthorities: [Self.b2cHost])
        #expect(authority.kind == .b2c(tenant: "fabrikamb2c.onmicrosoft.com", policy: "B2C_1_edit_profile"))
        #expect(
            authority.url.absoluteString
                == "https://fabrikamb2c.b2clogin.com/tfp/fabrikamb2c.onmicrosoft.com/B2C_1_edit_profile"
        )
    }

    @Test(arguments: [
        "FabrikamB2C.B2CLogin.com", "https://fabrikamb2c.b2clogin.com", "https://FABRIKAMB2C.b2clogin.com/tfp/x/y",
    ])
    func knownAuthoritiesAreComparedByHostCaseInsensitively(known: String) throws {
        let authority = try Authority(Self.susi, knownAuthorities: [known])
        #expect(authority.kind == .b2c(tenant: "fabrikamb2c.onmicrosoft.com", policy: "B2C_1_SUSI"))
    }

    @Test(arguments: [[], ["contoso.b2clogin.com"]])
    func b2cHostsMustBeKnownAuthorities(known: [String]) {
        for string in [Self.susi, "https://fabrikamb2c.b2clogin.com/fabrikamb2c.onmicrosoft.com/B2C_1_SUSI"] {
            let error = invalidAuthority(string, knownAuthorities: known)
            #expect(error?.code == .invalidAuthority)
            #expect(error?.message.contains("not a known authority") == true)
            #expect(error?.message.contains("add `fabrikamb2c.b2clogin.com`") == true)
        }
    }

    @Test func b2cAuthorityWithoutAPolicyIsRefused() {
        let error = invalidAuthority(
            "https://fabrikamb2c.b2clogin.com/tfp/fabrikamb2c.onmicrosoft.com",
            knownAuthorities: [Self.b2cHost]
        )
        #expect(error?.code == .invalidAuthority)
        #expect(error?.message.contains("{policy}") == true)
    }

    @Test func aKnownCustomDomainWithTFPIsB2CAndWithoutTFPIsOIDC() throws {
        let b2c = try Authority(
            "https://login.fabrikam.com/tfp/fabrikam.onmicrosoft.com/B2C_1_SUSI",
            knownAuthorities: ["login.fabrikam.com"]
        )
        #expect(b2c.kind == .b2c(tenant: "fabrikam.onmicrosoft.com", policy: "B2C_1_SUSI"))
        let oidc = try Authority(
            "https://login.fabrikam.com/fabrikam.onmicrosoft.com/B2C_1_SUSI",
            knownAuthorities: ["login.fabrikam.com"]
        )
        #expect(oidc.kind == .oidc)
        let unknown = try Authority("https://login.fabrikam.com/tfp/fabrikam.onmicrosoft.com/B2C_1_SUSI")
        #expect(unknown.kind == .oidc)
    }

    // MARK: OIDC and schemes

    @Test func theLocalTestProviderIsAnOIDCAuthorityOnLoopbackHTTP() throws {
        for string in ["http://127.0.0.1:4593/api/oidc", "http://127.0.0.1:4593/api/oidc/"] {
            let authority = try Authority(string)
            #expect(authority.kind == .oidc)
            #expect(authority.url.absoluteString == "http://127.0.0.1:4593/api/oidc")
            #expect(
                authority.openIDConfigurationURL.absoluteString
                    == "http://127.0.0.1:4593/api/oidc/.well-known/openid-configuration"
            )
            #expect(authority.environment == "127.0.0.1:4593")
            #expect(authority.realm == "api")
            #expect(!authority.sendsClientInfo)
        }
    }

    @Test(arguments: ["http://localhost:8080/realms/kiosk", "http://[::1]:4593/oidc", "http://127.0.0.1/oidc"])
    func httpIsAcceptedOnLoopback(string: String) throws {
        #expect(try Authority(string).kind == .oidc)
    }

    @Test(arguments: [
        "http://idp.contoso.com/oidc", "http://login.microsoftonline.com/common", "http://10.0.0.5:4593/api/oidc",
        "ftp://idp.contoso.com/",
    ])
    func httpOffLoopbackAndOtherSchemesAreRefused(string: String) {
        let error = invalidAuthority(string)
        #expect(error?.code == .invalidAuthority)
        #expect(error?.message.contains("https") == true)
    }

    @Test(arguments: [
        "", "not a url", "https://", "/relative/path", "https://idp.contoso.com/oidc?p=1",
        "https://idp.contoso.com/oidc#x", "https://user:pw@idp.contoso.com/",
    ])
    func malformedAuthoritiesAreRefused(string: String) {
        #expect(invalidAuthority(string)?.code == .invalidAuthority)
    }

    @Test func oidcIssuersKeepTheirPathAndDropTheDefaultPortFromTheEnvironment() throws {
        let authority = try Authority("https://Accounts.Example.com:443/")
        #expect(authority.kind == .oidc)
        #expect(authority.url.absoluteString == "https://Accounts.Example.com:443")
        #expect(
            authority.openIDConfigurationURL.absoluteString
                == "https://Accounts.Example.com:443/.well-known/openid-configuration"
        )
        #expect(authority.environment == "accounts.example.com")
        #expect(authority.realm == "common")

        let keycloak = try Authority("https://sso.contoso.com:8443/realms/Kiosk")
        #expect(keycloak.environment == "sso.contoso.com:8443")
        #expect(keycloak.realm == "realms")
    }

    @Test func initFromURLMatchesInitFromString() throws {
        let url = try #require(URL(string: "https://login.microsoftonline.com/common/v2.0"))
        #expect(try Authority(url: url) == Authority("https://login.microsoftonline.com/common"))
    }

    // MARK: Scopes

    @Test func requestScopesAppendTheReservedScopesOnce() throws {
        let authority = try Authority("https://login.microsoftonline.com/common")
        #expect(
            authority.requestScopes(["User.Read", "OpenID", "Mail.Read", "user.read", " "])
                == ["User.Read", "OpenID", "Mail.Read", "profile", "offline_access"]
        )
        #expect(authority.requestScopes([]) == ["openid", "profile", "offline_access"])
        #expect(Authority.reservedScopes == ["openid", "profile", "offline_access"])
    }

    // MARK: Issuers

    @Test(arguments: ["common", "organizations"])
    func multiTenantAuthoritiesAcceptTheTemplateIssuerWithTheTokensTenant(tenant: String) throws {
        let authority = try Authority("https://login.microsoftonline.com/\(tenant)")
        let template = "https://login.microsoftonline.com/{tenantid}/v2.0"
        let tid = "72f988bf-86f1-41af-91ab-2d7cd011db47"
        #expect(
            authority.acceptsIssuer(
                "https://login.microsoftonline.com/\(tid)/v2.0",
                tenantID: tid,
                metadataIssuer: template
            )
        )
        #expect(
            authority.acceptsIssuer(
                "https://login.microsoftonline.com/\(tid)/v2.0/",
                tenantID: tid,
                metadataIssuer: template
            )
        )
        // Another tenant than the token's own `tid`, another host, no `tid`: refused.
        #expect(
            !authority.acceptsIssuer(
                "https://login.microsoftonline.com/\(tid)/v2.0",
                tenantID: "another-tenant",
                metadataIssuer: template
            )
        )
        #expect(
            !authority.acceptsIssuer("https://login.evil.example/\(tid)/v2.0", tenantID: tid, metadataIssuer: template)
        )
        #expect(
            !authority.acceptsIssuer(
                "https://login.microsoftonline.com/\(tid)/v2.0",
                tenantID: nil,
                metadataIssuer: template
            )
        )
        #expect(!authority.acceptsIssuer("https://sts.windows.net/\(tid)/", tenantID: tid, metadataIssuer: template))
    }

    @Test func issuersOtherwiseMatchExactlyUpToATrailingSlash() throws {
        let local = try Authority("http://127.0.0.1:4593/api/oidc")
        #expect(
            local.acceptsIssuer(
                "http://127.0.0.1:4593/api/oidc",
                tenantID: nil,
                metadataIssuer: "http://127.0.0.1:4593/api/oidc"
            )
        )
        #expect(
            local.acceptsIssuer(
                "http://127.0.0.1:4593/api/oidc/",
                tenantID: nil,
                metadataIssuer: "http://127.0.0.1:4593/api/oidc"
            )
        )
        #expect(
            !local.acceptsIssuer(
                "http://127.0.0.1:4594/api/oidc",
                tenantID: nil,
                metadataIssuer: "http://127.0.0.1:4593/api/oidc"
            )
        )
        // The `{tenantid}` template is a Microsoft convention only.
        #expect(!local.acceptsIssuer("https://idp/x", tenantID: "x", metadataIssuer: "https://idp/{tenantid}"))

        let b2c = try Authority(Self.susi, knownAuthorities: [Self.b2cHost])
        let b2cIssuer = "https://fabrikamb2c.b2clogin.com/775527ff-9a37-4307-8b3d-cc311f58d925/v2.0/"
        #expect(b2c.acceptsIssuer(b2cIssuer, tenantID: nil, metadataIssuer: b2cIssuer))
        #expect(
            !b2c.acceptsIssuer(
                "https://contoso.b2clogin.com/775527ff-9a37-4307-8b3d-cc311f58d925/v2.0/",
                tenantID: nil,
                metadataIssuer: b2cIssuer
            )
        )
    }
}
