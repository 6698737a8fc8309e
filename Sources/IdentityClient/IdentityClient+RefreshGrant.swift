import Foundation
import Logging

// The refresh token grant (RFC 6749 §6): the network step of MSAL's `acquireTokenSilent`.
extension IdentityClient {
    /// Redeems a refresh token for an access token for `scopes` (the silent step after the cache).
    /// - Throws: `interactionRequired` when the refresh token is expired, revoked or not good for the
    ///   scopes (`invalid_grant`); server errors; `authorityUnreachable`.
    public func refresh(refreshToken: String, scopes: [String]) async throws(IdentityError) -> TokenGrant {
        let requested = authority.requestScopes(scopes)
        logger.debug("refresh started", metadata: ["oauth.scopes": LogFields.scopes(requested)])
        do {
            let grant = try await redeem(refreshToken: refreshToken, requested: requested, scopes: scopes)
            logger.debug(
                "refresh succeeded",
                metadata: [
                    "oauth.scopes": LogFields.scopes(grant.scopes),
                    "oauth.new_refresh_token": "\(grant.refreshToken != nil)",
                ]
            )
            return grant
        } catch {
            logger.debug("refresh failed", metadata: LogFields.failure(error))
            throw error
        }
    }

    private func redeem(
        refreshToken: String,
        requested: [String],
        scopes: [String]
    ) async throws(IdentityError) -> TokenGrant {
        let configuration = try await configuration()
        var fields =
            [("grant_type", "refresh_token"), ("refresh_token", refreshToken)] + clientFields
            + [("scope", requested.joined(separator: " "))]
        if authority.sendsClientInfo { fields.append(("client_info", "1")) }
        let response = try await post(.form(configuration.tokenEndpoint, fields))
        guard response.isSuccess else {
            // RFC 6749 §5.2 answers a bad refresh token with 400 `invalid_grant`; some providers send
            // 400/401 with no body at all for a revoked or expired one. Either way only a new sign-in helps.
            if response.status == 400 || response.status == 401, OAuthErrorResponse.parse(response.body) == nil {
                throw IdentityError(
                    .interactionRequired,
                    "the authority refused the refresh token (HTTP \(response.status)); it was revoked or expired — sign in again",
                    httpStatus: response.status
                )
            }
            throw OAuthErrorResponse.identityError(for: response, endpoint: "token endpoint")
        }
        let grant = try await grant(from: response, grantType: "refresh_token", requestedScopes: requested, nonce: nil)
        try Self.checkGranted(grant, covers: scopes)
        return grant
    }
}
