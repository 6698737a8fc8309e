import Foundation
import IdentityClient
import KeychainStore

/// Whose tokens a response carries and in which tenant: the account identifiers MSAL derives before
/// writing a response to the cache.
struct ResponseAccount {
    var homeAccountID: String
    var realm: String
    var claims: IdTokenClaims?
    var clientInfo: String?

    /// Derives the identifiers of `response`.
    ///
    /// `home_account_id` is, in order:
    /// 1. `<uid>.<utid>` from `client_info`, as every MSAL library does;
    /// 2. without `client_info` from a B2C user flow (the context names its policy), B2C's own shape
    ///    `<oid>-<policy>.<tenant>` (`oid`, else `sub`; the tenant is `tid`, else the context's realm), so
    ///    one user's accounts of two user flows differ by policy and share the object id, as MSAL's do;
    /// 3. without `client_info` (a non-Microsoft OpenID Connect provider), `<sub>.<tid>` from the ID
    ///    token, or `<sub>.<h>` when it has no `tid`, where `h` is the first 22 characters of
    ///    base64url(SHA-256(`iss`)): stable for the same user at the same issuer, and never equal to
    ///    an id of another issuer's user with the same `sub` (MSAL Python would use the bare `sub`);
    /// 4. without either, the context's `homeAccountID` (a refresh whose response names no account).
    ///
    /// The realm is the ID token's `tid` when present (MSAL records the tenant that issued the
    /// tokens, not `common`), else the context's realm.
    /// - Throws: `invalidTokenResponse` when none applies or `client_info`/`id_token` is malformed.
    init(response: TokenResponse, context: TokenRequestContext) throws(TokenCacheError) {
        let claims = try response.idToken.map { (jwt) throws(TokenCacheError) in try IdTokenClaims(jwt: jwt) }
        if let raw = response.clientInfo {
            homeAccountID = try ClientInfo(raw).homeAccountID
        } else if let claims, let policy = context.b2cPolicy, let user = claims.localAccountID {
            homeAccountID = "\(user)-\(policy).\(claims.tenantID ?? context.realm)"
        } else if let claims, let subject = claims.subject {
            let tenant =
                if let tenantID = claims.tenantID { tenantID } else {
                    try Self.issuerTag(claims.issuer ?? context.environment)
                }
            homeAccountID = "\(subject).\(tenant)"
        } else if let known = context.homeAccountID, !known.isEmpty {
            homeAccountID = known
        } else {
            throw TokenCacheError(
                .invalidTokenResponse,
                "the token response names no account: it has no client_info and no id_token with a sub claim, and the request context gives no home account id"
            )
        }
        realm = claims?.tenantID ?? context.realm
        self.claims = claims
        clientInfo = response.clientInfo
    }

    /// The first 22 characters of base64url(SHA-256(`issuer`)).
    static func issuerTag(_ issuer: String) throws(TokenCacheError) -> String {
        do {
            return String(Base64URL.encode(try ChainHash.sha256(Data(issuer.utf8))).prefix(22))
        } catch {
            throw TokenCacheError.wrapping(error)
        }
    }
}
