public import Foundation

/// A successful token-endpoint response whose ID token (when it carried one) passed validation.
///
/// `description` shows no secret; `body` is the response as the server sent it, for the token cache.
public struct TokenGrant: Sendable, CustomStringConvertible {
    /// The token endpoint's JSON, as received (the cache stores from it).
    public let body: Data
    /// `access_token`.
    public let accessToken: String
    /// `refresh_token`, when one was issued (refresh responses of some providers carry none).
    public let refreshToken: String?
    /// The validated ID token, when the response had one.
    public let idToken: ValidatedIDToken?
    /// The granted scopes (`scope`), or the requested ones when the server did not say.
    public let scopes: [String]
    /// `expires_in`, seconds.
    public let expiresIn: Int?
    /// When the response arrived.
    public let receivedAt: Date

    /// When the access token expires, if the server said.
    public var expiresOn: Date? { expiresIn.map { receivedAt.addingTimeInterval(TimeInterval($0)) } }

    public var description: String {
        "TokenGrant(scopes: \(scopes.joined(separator: " ")), expiresIn: \(expiresIn.map(String.init) ?? "?"), refreshToken: \(refreshToken == nil ? "no" : "yes"), idToken: \(idToken == nil ? "no" : "yes"))"
    }

    /// Parses a 2xx token response; the ID token is validated by the caller.
    static func parse(_ body: Data) throws(IdentityError) -> (fields: [String: Any], accessToken: String) {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            throw IdentityError(
                .invalidResponse,
                "the token endpoint answered with something that is not a JSON object"
            )
        }
        guard let accessToken = object["access_token"] as? String, !accessToken.isEmpty else {
            throw IdentityError(.invalidResponse, "the token endpoint's response has no access_token")
        }
        return (object, accessToken)
    }

    init(
        body: Data,
        fields: [String: Any],
        accessToken: String,
        idToken: ValidatedIDToken?,
        requestedScopes: [String],
        receivedAt: Date
    ) {
        self.body = body
        self.accessToken = accessToken
        refreshToken = (fields["refresh_token"] as? String).flatMap { $0.isEmpty ? nil : $0 }
        self.idToken = idToken
        let granted = (fields["scope"] as? String)?.split(separator: " ").map(String.init) ?? []
        scopes = granted.isEmpty ? requestedScopes : granted
        if let seconds = fields["expires_in"] as? Int {
            expiresIn = seconds
        } else if let text = fields["expires_in"] as? String {
            expiresIn = Int(text)
        } else {
            expiresIn = nil
        }
        self.receivedAt = receivedAt
    }
}
