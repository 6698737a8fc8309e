import Foundation

/// The claim checks of OpenID Connect Core 1.0 §3.1.3.7 on a token whose signature has verified.
struct IDTokenClaimChecks {
    let claims: IDTokenClaimSet
    let expectations: IDTokenExpectations

    /// Runs every check, in the order: `iss`, `aud`, `azp`, `exp`, `iat`, `nbf`, `nonce`, `sub`.
    func validated(raw: String) throws(IdentityError) -> ValidatedIDToken {
        let issuer = try checkIssuer()
        let audience = try checkAudience()
        let expiresAt = try checkTimes()
        try checkNonce()
        guard let subject = claims.sub, !subject.isEmpty else {
            throw IdentityError(.invalidIDToken, "the ID token has no subject (`sub`); it does not name a user")
        }
        return ValidatedIDToken(
            claims: claims,
            subject: subject,
            issuer: issuer,
            audience: audience,
            expiresAt: expiresAt,
            raw: raw
        )
    }

    private func checkIssuer() throws(IdentityError) -> String {
        guard let issuer = claims.iss else {
            throw IdentityError(.invalidIDToken, "the ID token has no issuer (`iss`); it is not from this authority")
        }
        guard
            expectations.authority.acceptsIssuer(
                issuer,
                tenantID: claims.tid,
                metadataIssuer: expectations.metadataIssuer
            )
        else {
            throw IdentityError(
                .invalidIDToken,
                "the ID token's issuer `\(issuer)` is not the authority's issuer `\(expectations.metadataIssuer)`; check the authority URL"
            )
        }
        return issuer
    }

    private func checkAudience() throws(IdentityError) -> [String] {
        let clientID = expectations.clientID
        guard let audience = claims.aud, audience.contains(clientID) else {
            throw IdentityError(
                .invalidIDToken,
                "the ID token's audience (`aud`) does not include this app's client id `\(clientID)`; it was issued to another app — check the client id"
            )
        }
        if audience.count > 1, claims.azp != clientID {
            throw IdentityError(
                .invalidIDToken,
                "the ID token has several audiences (`aud`) and its authorized party (`azp`) is not this app's client id `\(clientID)`; it was issued to another app"
            )
        }
        if let azp = claims.azp, azp != clientID {
            throw IdentityError(
                .invalidIDToken,
                "the ID token's authorized party (`azp`) `\(azp)` is not this app's client id `\(clientID)`; it was issued to another app"
            )
        }
        return audience
    }

    private func checkTimes() throws(IdentityError) -> Date {
        let now = expectations.now.timeIntervalSince1970
        let skew = expectations.allowedClockSkew
        guard let exp = claims.exp else {
            throw IdentityError(.invalidIDToken, "the ID token has no expiry (`exp`); it cannot be accepted")
        }
        guard exp > now - skew else {
            throw IdentityError(
                .invalidIDToken,
                "the ID token expired (`exp`) at \(Self.format(exp)), more than \(Int(skew)) s ago; sign in again, and check this device's clock"
            )
        }
        if let iat = claims.iat, iat > now + skew {
            throw IdentityError(
                .invalidIDToken,
                "the ID token's issue time (`iat`) \(Self.format(iat)) is more than \(Int(skew)) s in the future; check this device's clock"
            )
        }
        if let nbf = claims.nbf, nbf > now + skew {
            throw IdentityError(
                .invalidIDToken,
                "the ID token is not valid before (`nbf`) \(Self.format(nbf)), more than \(Int(skew)) s from now; check this device's clock"
            )
        }
        return Date(timeIntervalSince1970: exp)
    }

    private func checkNonce() throws(IdentityError) {
        guard let expected = expectations.nonce else { return }
        guard let nonce = claims.nonce else {
            throw IdentityError(
                .invalidIDToken,
                "the ID token has no `nonce` but the sign-in request sent one; the response may be replayed — sign in again"
            )
        }
        guard nonce == expected else {
            throw IdentityError(
                .invalidIDToken,
                "the ID token's `nonce` does not match the one this sign-in sent; the response may be replayed — sign in again"
            )
        }
    }

    private static func format(_ seconds: Double) -> String {
        Date(timeIntervalSince1970: seconds).formatted(.iso8601)
    }
}
