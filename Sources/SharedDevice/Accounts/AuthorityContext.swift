public import Foundation
import IdentityClient

extension TokenRequestContext {
    /// The context of a token request to the device policy's authority: the policy's client id, the
    /// issuer's host (with a non-default port) as the cache `environment`, and the issuer's first path
    /// component as the realm (`contoso.onmicrosoft.com` for `https://login.microsoftonline.com/contoso.onmicrosoft.com/v2.0`;
    /// `common` when the issuer has no path). Entries still take the ID token's `tid` when it has one.
    public init(authority: DevicePolicy.Authority, scopes: [String]? = nil) {
        // The identity client's reading of the authority when it parses (a B2C authority's realm is its
        // tenant, not `tfp`), else the issuer's first path component.
        let parsed = try? Authority(
            url: authority.issuer,
            knownAuthorities: authority.knownAuthorities.compactMap(\.host)
        )
        self.init(
            clientID: authority.clientId,
            environment: Self.environment(of: authority.issuer),
            realm: parsed?.realm ?? authority.issuer.pathComponents.dropFirst().first ?? "common",
            requestedScopes: scopes ?? authority.scopes,
            b2cPolicy: parsed?.b2cPolicy
        )
    }

    /// `host` or `host:port` (lowercased), as MSAL names an authority's environment.
    public static func environment(of url: URL) -> String {
        let host = (url.host ?? "").lowercased()
        guard let port = url.port, !(url.scheme == "https" && port == 443), !(url.scheme == "http" && port == 80) else {
            return host
        }
        return "\(host):\(port)"
    }
}
