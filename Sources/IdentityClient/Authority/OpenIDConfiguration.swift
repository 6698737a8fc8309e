public import Foundation

/// The authority's OpenID Provider Metadata (`/.well-known/openid-configuration`, OpenID Connect
/// Discovery 1.0 §3): the endpoints the flows use and the issuer ID tokens must name.
public struct OpenIDConfiguration: Sendable, Equatable, Codable {
    /// `issuer`. Microsoft's multi-tenant authorities publish a template with `{tenantid}`.
    public var issuer: String
    /// `authorization_endpoint`.
    public var authorizationEndpoint: URL
    /// `token_endpoint`.
    public var tokenEndpoint: URL
    /// `device_authorization_endpoint` (RFC 8628), when the authority offers the device code flow.
    public var deviceAuthorizationEndpoint: URL?
    /// `userinfo_endpoint`.
    public var userinfoEndpoint: URL?
    /// `jwks_uri`: the keys ID tokens are signed with.
    public var jwksURI: URL
    /// `end_session_endpoint`, for signing out in the browser.
    public var endSessionEndpoint: URL?
    /// `id_token_signing_alg_values_supported`.
    public var idTokenSigningAlgorithms: [String]?

    enum CodingKeys: String, CodingKey {
        case issuer
        case authorizationEndpoint = "authorization_endpoint"
        case tokenEndpoint = "token_endpoint"
        case deviceAuthorizationEndpoint = "device_authorization_endpoint"
        case userinfoEndpoint = "userinfo_endpoint"
        case jwksURI = "jwks_uri"
        case endSessionEndpoint = "end_session_endpoint"
        case idTokenSigningAlgorithms = "id_token_signing_alg_values_supported"
    }

    init(
        issuer: String,
        authorizationEndpoint: URL,
        tokenEndpoint: URL,
        deviceAuthorizationEndpoint: URL? = nil,
        userinfoEndpoint: URL? = nil,
        jwksURI: URL,
        endSessionEndpoint: URL? = nil,
        idTokenSigningAlgorithms: [String]? = nil
    ) {
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.userinfoEndpoint = userinfoEndpoint
        self.jwksURI = jwksURI
        self.endSessionEndpoint = endSessionEndpoint
        self.idTokenSigningAlgorithms = idTokenSigningAlgorithms
    }

    /// Decodes a discovery document.
    /// - Throws: `invalidResponse` naming the missing or malformed field.
    static func decode(_ data: Data, from url: URL) throws(IdentityError) -> OpenIDConfiguration {
        do {
            return try JSONDecoder().decode(OpenIDConfiguration.self, from: data)
        } catch let DecodingError.keyNotFound(key, _) {
            throw IdentityError(
                .invalidResponse,
                "the discovery document at \(url.absoluteString) has no `\(key.stringValue)`; check the authority URL"
            )
        } catch {
            throw IdentityError(
                .invalidResponse,
                "the discovery document at \(url.absoluteString) is not valid OpenID Provider Metadata; check the authority URL"
            )
        }
    }
}
