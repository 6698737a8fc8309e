public import Foundation

/// A successful response of an OAuth 2.0 token endpoint (RFC 6749 §5.1, with OpenID Connect's
/// `id_token` and the Microsoft identity platform's extensions), as MSAL's `MSIDTokenResponse` reads it.
///
/// Durations are seconds; AAD v1-style endpoints send them as strings, which are accepted too. The
/// description never shows a token.
public struct TokenResponse: Sendable, Equatable, Decodable, CustomStringConvertible {
    /// `access_token`.
    public var accessToken: String
    /// `refresh_token`; absent when the server keeps the old one (rolling refresh).
    public var refreshToken: String?
    /// `id_token`: a JWT (OpenID Connect).
    public var idToken: String?
    /// `client_info`: base64url JSON with `uid` and `utid` (Microsoft identity platform, when the
    /// request carried `client_info=1`).
    public var clientInfo: String?
    /// `scope`: the granted scopes, space-separated; absent means the requested ones (RFC 6749 §5.1).
    public var scope: String?
    /// `token_type`, usually `Bearer`.
    public var tokenType: String?
    /// `expires_in`: access token lifetime.
    public var expiresIn: Int?
    /// `ext_expires_in`: AAD's extended lifetime for outages.
    public var extendedExpiresIn: Int?
    /// `refresh_in`: AAD's hint to refresh proactively.
    public var refreshIn: Int?
    /// `foci` (or `family_id`): the client's family id for family refresh tokens.
    public var familyID: String?

    public init(
        accessToken: String,
        refreshToken: String? = nil,
        idToken: String? = nil,
        clientInfo: String? = nil,
        scope: String? = nil,
        tokenType: String? = "Bearer",
        expiresIn: Int? = nil,
        extendedExpiresIn: Int? = nil,
        refreshIn: Int? = nil,
        familyID: String? = nil
    ) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.clientInfo = clientInfo
        self.scope = scope
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.extendedExpiresIn = extendedExpiresIn
        self.refreshIn = refreshIn
        self.familyID = familyID
    }

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
        case idToken = "id_token"
        case clientInfo = "client_info"
        case scope
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case extendedExpiresIn = "ext_expires_in"
        case refreshIn = "refresh_in"
        case foci
        case familyID = "family_id"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        accessToken = try container.decode(String.self, forKey: .accessToken)
        refreshToken = try container.decodeIfPresent(String.self, forKey: .refreshToken)
        idToken = try container.decodeIfPresent(String.self, forKey: .idToken)
        clientInfo = try container.decodeIfPresent(String.self, forKey: .clientInfo)
        scope = try container.decodeIfPresent(String.self, forKey: .scope)
        tokenType = try container.decodeIfPresent(String.self, forKey: .tokenType)
        expiresIn = try Self.seconds(container, .expiresIn)
        extendedExpiresIn = try Self.seconds(container, .extendedExpiresIn)
        refreshIn = try Self.seconds(container, .refreshIn)
        familyID = try Self.text(container, .foci) ?? Self.text(container, .familyID)
    }

    /// Decodes the body of a token endpoint response.
    /// - Throws: `invalidTokenResponse` naming the offending field (never its value).
    public static func decode(_ data: Data) throws(TokenCacheError) -> TokenResponse {
        do {
            return try JSONDecoder().decode(TokenResponse.self, from: data)
        } catch {
            let field = (error as? DecodingError).flatMap(Self.field(of:))
            throw TokenCacheError(
                .invalidTokenResponse,
                field.map { "the token response's \($0) is missing or has the wrong type" }
                    ?? "the token response is not a JSON object",
                path: field
            )
        }
    }

    public var description: String {
        let present = [
            ("access_token", true), ("refresh_token", refreshToken != nil), ("id_token", idToken != nil),
            ("client_info", clientInfo != nil),
        ].filter(\.1).map(\.0)
        return
            "TokenResponse(\(present.joined(separator: ", ")); scope \(scope ?? "(requested)"), expires_in \(expiresIn.map(String.init) ?? "-"))"
    }

    private static func seconds(_ container: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> Int? {
        if let value = try? container.decodeIfPresent(Int.self, forKey: key) { return value }
        guard let text = try container.decodeIfPresent(String.self, forKey: key) else { return nil }
        guard let value = Int(text) else {
            throw DecodingError.dataCorruptedError(
                forKey: key,
                in: container,
                debugDescription: "not a whole number of seconds"
            )
        }
        return value
    }

    private static func text(_ container: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> String? {
        if let value = try? container.decodeIfPresent(Int.self, forKey: key) { return String(value) }
        return try container.decodeIfPresent(String.self, forKey: key)
    }

    private static func field(of error: DecodingError) -> String? {
        switch error {
        case .keyNotFound(let key, _): key.stringValue
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            context.codingPath.last?.stringValue
        @unknown default: nil
        }
    }
}
