import Foundation
import IdentityTestSupport
import JWTKit
import Testing

@testable import IdentityClient

/// Discovery documents of the documented shapes, decoded and used to validate tokens.
struct DiscoveryDocumentTests {
    typealias P = TestProvider

    /// `https://login.microsoftonline.com/common/v2.0/.well-known/openid-configuration`, as Microsoft documents it.
    static let microsoftCommon = """
        {"token_endpoint":"https://login.microsoftonline.com/common/oauth2/v2.0/token",\
        "token_endpoint_auth_methods_supported":["client_secret_post","private_key_jwt","client_secret_basic"],\
        "jwks_uri":"https://login.microsoftonline.com/common/discovery/v2.0/keys",\
        "response_modes_supported":["query","fragment","form_post"],"subject_types_supported":["pairwise"],\
        "id_token_signing_alg_values_supported":["RS256"],\
        "response_types_supported":["code","id_token","code id_token","id_token token"],\
        "scopes_supported":["openid","profile","email","offline_access"],\
        "issuer":"https://login.microsoftonline.com/{tenantid}/v2.0","request_uri_parameter_supported":false,\
        "userinfo_endpoint":"https://graph.microsoft.com/oidc/userinfo",\
        "authorization_endpoint":"https://login.microsoftonline.com/common/oauth2/v2.0/authorize",\
        "device_authorization_endpoint":"https://login.microsoftonline.com/common/oauth2/v2.0/devicecode",\
        "http_logout_supported":true,"frontchannel_logout_supported":true,\
        "end_session_endpoint":"https://login.microsoftonline.com/common/oauth2/v2.0/logout",\
        "claims_supported":["sub","iss","cloud_instance_name","cloud_instance_host_name","cloud_graph_host_name",\
        "msgraph_host","aud","exp","iat","auth_time","acr","nonce","preferred_username","name","tid","ver","at_hash","c_hash","email"],\
        "kerberos_endpoint":"https://login.microsoftonline.com/common/kerberos","tenant_region_scope":null,\
        "cloud_instance_name":"microsoftonline.com","cloud_graph_host_name":"graph.windows.net",\
        "msgraph_host":"graph.microsoft.com","rbac_url":"https://pas.windows.net"}
        """

    /// A B2C user flow's discovery document, as Azure AD B2C publishes it.
    static let b2cSUSI = """
        {"issuer":"https://fabrikamb2c.b2clogin.com/775527ff-9a37-4307-8b3d-cc311f58d925/v2.0/",\
        "authorization_endpoint":"https://fabrikamb2c.b2clogin.com/fabrikamb2c.onmicrosoft.com/b2c_1_susi/oauth2/v2.0/authorize",\
        "token_endpoint":"https://fabrikamb2c.b2clogin.com/fabrikamb2c.onmicrosoft.com/b2c_1_susi/oauth2/v2.0/token",\
        "end_session_endpoint":"https://fabrikamb2c.b2clogin.com/fabrikamb2c.onmicrosoft.com/b2c_1_susi/oauth2/v2.0/logout",\
        "jwks_uri":"https://fabrikamb2c.b2clogin.com/fabrikamb2c.onmicrosoft.com/b2c_1_susi/discovery/v2.0/keys",\
        "response_modes_supported":["query","fragment","form_post"],\
        "response_types_supported":["code","code id_token","code token","code id_token token","id_token","id_token token","token","token id_token"],\
        "scopes_supported":["openid"],"subject_types_supported":["pairwise"],\
        "id_token_signing_alg_values_supported":["RS256"],\
        "token_endpoint_auth_methods_supported":["client_secret_post","client_secret_basic"],\
        "claims_supported":["name","emails","idp","sub","tfp","iss","iat","exp","aud","acr","nonce","auth_time"]}
        """

    @Test func microsoftsMultiTenantDocumentDecodesWithTheIssuerTemplate() throws {
        let authority = try Authority("https://login.microsoftonline.com/common")
        let configuration = try OpenIDConfiguration.decode(
            Data(Self.microsoftCommon.utf8),
            from: authority.openIDConfigurationURL
        )
        #expect(configuration.issuer == "https://login.microsoftonline.com/{tenantid}/v2.0")
        #expect(
            configuration.tokenEndpoint.absoluteString == "https://login.microsoftonline.com/common/oauth2/v2.0/token"
        )
        #expect(
            configuration.deviceAuthorizationEndpoint?.absoluteString
                == "https://login.microsoftonline.com/common/oauth2/v2.0/devicecode"
        )
        #expect(configuration.jwksURI.absoluteString == "https://login.microsoftonline.com/common/discovery/v2.0/keys")
        #expect(configuration.idTokenSigningAlgorithms == ["RS256"])
    }

    @Test func aMicrosoftMultiTenantTokenValidatesAgainstTheTemplate() async throws {
        let authority = try Authority("https://login.microsoftonline.com/organizations/v2.0")
        let configuration = try OpenIDConfiguration.decode(
            Data(Self.microsoftCommon.utf8),
            from: authority.openIDConfigurationURL
        )
        let tid = "72f988bf-86f1-41af-91ab-2d7cd011db47"
        let expectations = IDTokenExpectations(
            authority: authority,
            configuration: configuration,
            clientID: P.clientID,
            nonce: P.nonce,
            now: P.now
        )
        let validator = try IDTokenValidator(jwksJSON: P.publishedKeys())

        let token = try await P.rs256(
            P.claims(["iss": .string("https://login.microsoftonline.com/\(tid)/v2.0"), "tid": .string(tid)])
        )
        let validated = try await validator.validate(token, expectations)
        #expect(validated.tenantID == tid)
        #expect(validated.issuer == "https://login.microsoftonline.com/\(tid)/v2.0")

        // The issuer names a tenant other than the token's `tid`.
        let mismatched = try await P.rs256(
            P.claims(["iss": .string("https://login.microsoftonline.com/\(tid)/v2.0"), "tid": .string("other")])
        )
        await #expect(throws: IdentityError.self) { try await validator.validate(mismatched, expectations) }
        do {
            _ = try await validator.validate(mismatched, expectations)
        } catch {
            #expect(error.code == .invalidIDToken)
            #expect(
                error.message.contains(
                    "is not the authority's issuer `https://login.microsoftonline.com/{tenantid}/v2.0`"
                )
            )
        }
    }

    @Test func aB2CUserFlowDocumentDecodesAndItsTokensValidate() async throws {
        let authority = try Authority(
            "https://fabrikamb2c.b2clogin.com/tfp/fabrikamb2c.onmicrosoft.com/B2C_1_SUSI",
            knownAuthorities: ["fabrikamb2c.b2clogin.com"]
        )
        let configuration = try OpenIDConfiguration.decode(
            Data(Self.b2cSUSI.utf8),
            from: authority.openIDConfigurationURL
        )
        #expect(configuration.issuer == "https://fabrikamb2c.b2clogin.com/775527ff-9a37-4307-8b3d-cc311f58d925/v2.0/")
        #expect(configuration.deviceAuthorizationEndpoint == nil)
        #expect(
            configuration.endSessionEndpoint?.absoluteString
                == "https://fabrikamb2c.b2clogin.com/fabrikamb2c.onmicrosoft.com/b2c_1_susi/oauth2/v2.0/logout"
        )

        let expectations = IDTokenExpectations(
            authority: authority,
            configuration: configuration,
            clientID: P.clientID,
            nonce: P.nonce,
            now: P.now
        )
        let validator = try IDTokenValidator(jwksJSON: P.publishedKeys())
        let token = try await P.rs256(
            P.claims([
                "iss": .string(configuration.issuer), "tid": nil, "oid": nil, "email": nil,
                "tfp": .string("B2C_1_SUSI"), "emails": .strings(["ana@fabrikam.com"]),
            ])
        )
        let validated = try await validator.validate(token, expectations)
        #expect(validated.issuer == configuration.issuer)
        #expect(validated.tenantID == nil)

        // Another B2C tenant's issuer is refused.
        let foreign = try await P.rs256(
            P.claims(["iss": .string("https://contoso.b2clogin.com/775527ff-9a37-4307-8b3d-cc311f58d925/v2.0/")])
        )
        do {
            _ = try await validator.validate(foreign, expectations)
            Issue.record("a token from another B2C tenant was accepted")
        } catch {
            #expect(error.code == .invalidIDToken)
            #expect(error.message.contains("issuer"))
        }
    }
}
