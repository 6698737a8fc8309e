public import Foundation

// RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0): the browser step of MSAL's `signout`
// with `signoutFromBrowser`.
extension IdentityClient {
    /// The browser URL that ends the user's session at the authority (RP-initiated logout), if it offers one.
    public func endSessionURL(idTokenHint: String?) async throws(IdentityError) -> URL? {
        guard let endpoint = try await configuration().endSessionEndpoint else { return nil }
        guard let idTokenHint else { return endpoint }
        let separator = endpoint.query == nil ? "?" : "&"
        return URL(
            string: endpoint.absoluteString + separator
                + FormEncoding.encodeQuery([("id_token_hint", idTokenHint), ("client_id", clientID)])
        )
    }
}
