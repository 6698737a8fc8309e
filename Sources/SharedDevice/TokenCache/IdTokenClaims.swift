import Foundation
import IdentityClient

/// The claims MSAL reads from an ID token (`MSIDIdTokenClaims` / `MSIDAADV2IdTokenClaims`), decoded
/// from the JWT's payload **without** checking its signature: the cache stores what the token endpoint
/// returned over TLS; validating issuer, audience and signature belongs to the identity client.
public struct IdTokenClaims: Sendable, Equatable {
    /// `sub`.
    public let subject: String?
    /// `oid`: the object id in the issuing tenant.
    public let objectID: String?
    /// `tid`: the tenant id.
    public let tenantID: String?
    /// `iss`.
    public let issuer: String?
    /// `preferred_username`.
    public let preferredUsername: String?
    /// `upn` (AD FS).
    public let userPrincipalName: String?
    /// `email`.
    public let email: String?
    /// `name`.
    public let name: String?
    /// `given_name`.
    public let givenName: String?
    /// `family_name`.
    public let familyName: String?

    /// The displayable username MSAL shows: `preferred_username`, else `upn`, else `email`.
    public var username: String? { preferredUsername ?? userPrincipalName ?? email }
    /// MSAL's `local_account_id`: `oid`, else `sub`.
    public var localAccountID: String? { objectID ?? subject }

    /// Decodes the payload (second part) of a compact JWT.
    /// - Throws: `invalidTokenResponse` if it is not a JWT with a JSON object payload (the token is not quoted).
    public init(jwt: String) throws(TokenCacheError) {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decode(String(parts[1])),
            let claims = CacheJSON.object(payload)
        else {
            throw TokenCacheError(
                .invalidTokenResponse,
                "the id_token is not a JWT with a JSON payload",
                path: "id_token"
            )
        }
        func string(_ name: String) -> String? {
            if case .string(let value)? = claims[name], !value.isEmpty { return value }
            return nil
        }
        subject = string("sub")
        objectID = string("oid")
        tenantID = string("tid")
        issuer = string("iss")
        preferredUsername = string("preferred_username")
        userPrincipalName = string("upn")
        email = string("email")
        name = string("name")
        givenName = string("given_name")
        familyName = string("family_name")
    }
}
