public import Foundation

// Protected resources: the userinfo endpoint (OpenID Connect Core §5.3) and any API called with a token.
extension IdentityClient {
    /// `GET url` with `Authorization: Bearer <accessToken>` (a protected API or the userinfo endpoint).
    /// Returns the response whatever its status; the caller decides what a non-2xx status means.
    public func get(_ url: URL, accessToken: String) async throws(IdentityError) -> HTTPResponse {
        try await transport.send(
            HTTPRequest(url: url, headers: ["Authorization": "Bearer \(accessToken)", "Accept": "application/json"])
        )
    }

    /// The authority's `userinfo_endpoint` (OpenID Connect Core §5.3), our stand-in for Graph `/me`.
    public func userInfoEndpoint() async throws(IdentityError) -> URL {
        guard let url = try await configuration().userinfoEndpoint else {
            throw IdentityError(.unsupported, "the authority publishes no userinfo_endpoint")
        }
        return url
    }
}
