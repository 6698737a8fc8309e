import Foundation

/// What an ID token must say to be accepted for one sign-in: who issued it, for which app, with which
/// `nonce`, and the time to judge `exp` and `iat` against.
struct IDTokenExpectations: Sendable {
    /// The authority the sign-in went to; decides how `iss` is matched.
    var authority: Authority
    /// The `issuer` of the authority's discovery document (a template with `{tenantid}` for Microsoft
    /// multi-tenant authorities).
    var metadataIssuer: String
    /// The app's client id: must be in `aud` (and be `azp` when there are several audiences).
    var clientID: String
    /// The `nonce` the authorization request sent, or `nil` when none was sent (device code, refresh).
    var nonce: String?
    /// The current time.
    var now: Date
    /// How far the authority's clock may be off from ours, in seconds (MSAL allows 5 minutes).
    var allowedClockSkew: TimeInterval

    /// Expectations for a token from `authority`, whose discovery document names `metadataIssuer`.
    init(
        authority: Authority,
        metadataIssuer: String,
        clientID: String,
        nonce: String? = nil,
        now: Date = Date(),
        allowedClockSkew: TimeInterval = 300
    ) {
        self.authority = authority
        self.metadataIssuer = metadataIssuer
        self.clientID = clientID
        self.nonce = nonce
        self.now = now
        self.allowedClockSkew = allowedClockSkew
    }

    /// Expectations for a token from `authority`, whose discovery document is `configuration`.
    init(
        authority: Authority,
        configuration: OpenIDConfiguration,
        clientID: String,
        nonce: String? = nil,
        now: Date = Date(),
        allowedClockSkew: TimeInterval = 300
    ) {
        self.init(
            authority: authority,
            metadataIssuer: configuration.issuer,
            clientID: clientID,
            nonce: nonce,
            now: now,
            allowedClockSkew: allowedClockSkew
        )
    }
}
