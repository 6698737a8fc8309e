/// What MSAL knows about a token request besides its response (`MSIDConfiguration` /
/// `MSIDRequestParameters`): the client, the authority, the scopes asked for.
public struct TokenRequestContext: Sendable, Equatable {
    /// The app registration's client id.
    public var clientID: String
    /// The authority's host, with the port when it is not the default (`login.microsoftonline.com`,
    /// `127.0.0.1:4593`): the cache's `environment`.
    public var environment: String
    /// The authority's tenant (`common`, `organizations`, a tenant id, or the local provider's realm).
    /// Entries use the ID token's `tid` when there is one (as MSAL does for `common`), else this.
    public var realm: String
    /// The scopes the app asked for; the cache target when the response has no `scope`.
    public var requestedScopes: [String]
    /// The account a refresh is for, when the response may carry neither `client_info` nor an
    /// `id_token` (a provider that returns only new tokens on refresh).
    public var homeAccountID: String?
    /// The B2C user flow (policy) the request went to, when the authority is Azure AD B2C: without
    /// `client_info` the account is named as B2C names it, `<oid>-<policy>.<tenant>` (lowercased policy).
    public var b2cPolicy: String?

    public init(
        clientID: String,
        environment: String,
        realm: String,
        requestedScopes: [String],
        homeAccountID: String? = nil,
        b2cPolicy: String? = nil
    ) {
        self.clientID = clientID
        self.environment = environment
        self.realm = realm
        self.requestedScopes = requestedScopes
        self.homeAccountID = homeAccountID
        self.b2cPolicy = b2cPolicy
    }
}
