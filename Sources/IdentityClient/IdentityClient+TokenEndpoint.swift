import Foundation
import Logging

// What every grant shares at the token endpoint: the retry on 5xx, reading a successful response
// (with its ID token validated), and MSAL's declined-scopes check.
extension IdentityClient {
    /// Sends a token or device-authorization request; like MSAL, retries once after half a second when
    /// the authority answers 5xx (a busy or restarting server), then returns whatever came back.
    func post(_ request: HTTPRequest) async throws(IdentityError) -> HTTPResponse {
        let response = try await transport.send(request)
        guard (500..<600).contains(response.status) else { return response }
        logger.debug(
            "retrying once after a server error",
            metadata: [
                "http.endpoint": LogFields.endpoint(request.url),
                "http.status": "\(response.status)",
            ]
        )
        do { try await Task.sleep(for: .milliseconds(500)) } catch {
            throw IdentityError(.userCanceled, "the sign-in was canceled")
        }
        let retried = try await transport.send(request)
        if !retried.isSuccess {
            logger.debug(
                "the retry failed too",
                metadata: ["http.endpoint": LogFields.endpoint(request.url), "http.status": "\(retried.status)"]
            )
        }
        return retried
    }

    /// Reads a 2xx token response of `grantType` and validates its ID token (with `nonce` when the
    /// request sent one); `requireIDToken` refuses a response without one to an `openid` request.
    func grant(
        from response: HTTPResponse,
        grantType: String,
        requestedScopes: [String],
        nonce: String?,
        requireIDToken: Bool = false
    ) async throws(IdentityError) -> TokenGrant {
        let receivedAt = now()
        let (fields, accessToken) = try TokenGrant.parse(response.body)
        var idToken: ValidatedIDToken?
        if let jwt = fields["id_token"] as? String, !jwt.isEmpty {
            idToken = try await validateIDToken(jwt, nonce: nonce)
        } else if requireIDToken, requestedScopes.contains("openid") {
            throw IdentityError(
                .invalidIDToken,
                "the token endpoint returned no ID token for an `openid` request; nothing was cached"
            )
        }
        let grant = TokenGrant(
            body: response.body,
            fields: fields,
            accessToken: accessToken,
            idToken: idToken,
            requestedScopes: requestedScopes,
            receivedAt: receivedAt
        )
        var arrived: [Logger.MetadataValue] = ["access_token"]
        if grant.refreshToken != nil { arrived.append("refresh_token") }
        if idToken != nil { arrived.append("id_token") }
        logger.debug(
            "token grant received",
            metadata: [
                "oauth.grant_type": "\(grantType)",
                "oauth.scopes": LogFields.scopes(grant.scopes),
                "oauth.expires_in": "\(grant.expiresIn.map(String.init) ?? "unknown")",
                "oauth.token_types": .array(arrived),
            ]
        )
        return grant
    }

    /// MSAL's declined-scopes check: the response must grant every scope the app asked for (the
    /// OpenID scopes aside). Nothing is cached from a response that does not.
    static func checkGranted(_ grant: TokenGrant, covers scopes: [String]) throws(IdentityError) {
        let granted = Set(grant.scopes.map { $0.lowercased() })
        let declined = scopes.filter {
            !Authority.reservedScopes.contains($0.lowercased()) && !granted.contains($0.lowercased())
        }
        guard declined.isEmpty else {
            throw IdentityError(
                .declinedScopes,
                "the authority did not grant \(declined.joined(separator: " ")) (granted: \(grant.scopes.joined(separator: " "))); sign in interactively asking for them, or add them to the scopes the device signs in with"
            )
        }
    }

    /// A number field of a JSON response, sent as a number or a string.
    static func number(_ value: Any?) -> TimeInterval? {
        if let value = value as? Int { return TimeInterval(value) }
        if let value = value as? Double { return value }
        if let value = value as? String { return TimeInterval(value) }
        return nil
    }
}
