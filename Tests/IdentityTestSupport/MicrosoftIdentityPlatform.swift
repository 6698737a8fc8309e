import Foundation

/// Response shapes of the Microsoft identity platform's v2.0 endpoints, as documented, for tests that
/// stand in for Microsoft (unreachable from here).
public enum MicrosoftIdentityPlatform {
    public static let host = "https://login.microsoftonline.com"

    /// The v2.0 discovery document of `…/{tenant}/v2.0/.well-known/openid-configuration`. For `common` and
    /// `organizations` the issuer is the template `https://login.microsoftonline.com/{tenantid}/v2.0`; for
    /// a tenant it names the tenant's id.
    public static func discovery(tenant: String, issuer: String) -> [String: Any] {
        [
            "token_endpoint": "\(host)/\(tenant)/oauth2/v2.0/token",
            "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
            "jwks_uri": "\(host)/\(tenant)/discovery/v2.0/keys",
            "response_modes_supported": ["query", "fragment", "form_post"],
            "subject_types_supported": ["pairwise"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            "scopes_supported": ["openid", "profile", "email", "offline_access"],
            "issuer": issuer,
            "request_uri_parameter_supported": false,
            "userinfo_endpoint": "https://graph.microsoft.com/oidc/userinfo",
            "authorization_endpoint": "\(host)/\(tenant)/oauth2/v2.0/authorize",
            "device_authorization_endpoint": "\(host)/\(tenant)/oauth2/v2.0/devicecode",
            "http_logout_supported": true,
            "frontchannel_logout_supported": true,
            "end_session_endpoint": "\(host)/\(tenant)/oauth2/v2.0/logout",
            "claims_supported": [
                "sub", "iss", "cloud_instance_name", "cloud_instance_host_name", "cloud_graph_host_name",
                "msgraph_host", "aud", "exp", "iat", "auth_time", "acr", "nonce", "preferred_username",
                "name", "tid", "ver", "at_hash", "c_hash", "email",
            ],
            "kerberos_endpoint": "\(host)/\(tenant)/kerberos",
            "tenant_region_scope": NSNull(),
            "cloud_instance_name": "microsoftonline.com",
            "cloud_graph_host_name": "graph.windows.net",
            "msgraph_host": "graph.microsoft.com",
            "rbac_url": "https://pas.windows.net",
        ]
    }
}
