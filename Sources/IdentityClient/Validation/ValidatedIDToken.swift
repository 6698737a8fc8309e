public import Foundation

/// An ID token whose signature and claims have been checked, with the claims the token cache and the
/// account model read (MSAL's `MSALIdTokenClaims`).
///
/// `description` never shows the raw token.
public struct ValidatedIDToken: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// `sub`: the user at this issuer.
    public let subject: String
    /// `iss`: the issuer that signed the token.
    public let issuer: String
    /// `aud`: the client ids the token is for.
    public let audience: [String]
    /// `azp`: the party the token was issued to, when present.
    public let authorizedParty: String?
    /// `exp`.
    public let expiresAt: Date
    /// `iat`, when present.
    public let issuedAt: Date?
    /// `nonce`, when present.
    public let nonce: String?
    /// `tid`: the Microsoft tenant (the cache realm), when present.
    public let tenantID: String?
    /// `oid`: the Microsoft object id (the cache's `local_account_id`), when present.
    public let objectID: String?
    /// `preferred_username`: the cache's `username`, when present.
    public let preferredUsername: String?
    /// `name`, when present.
    public let name: String?
    /// `email`, when present.
    public let email: String?
    /// The compact-serialized token, for the cache's ID token entry. Never printed.
    public let raw: String

    init(claims: IDTokenClaimSet, subject: String, issuer: String, audience: [String], expiresAt: Date, raw: String) {
        self.subject = subject
        self.issuer = issuer
        self.audience = audience
        self.authorizedParty = claims.azp
        self.expiresAt = expiresAt
        self.issuedAt = claims.iat.map(Date.init(timeIntervalSince1970:))
        self.nonce = claims.nonce
        self.tenantID = claims.tid
        self.objectID = claims.oid
        self.preferredUsername = claims.preferredUsername
        self.name = claims.name
        self.email = claims.email
        self.raw = raw
    }

    /// Issuer, subject and expiry; never the token.
    public var description: String {
        "ValidatedIDToken(issuer: \(issuer), subject: \(subject), expiresAt: \(expiresAt))"
    }

    /// Same as `description`: the token stays out of logs.
    public var debugDescription: String { description }
}
