import Foundation

/// The checked pieces of an authority URL: scheme, lowercased host, port and path components.
///
/// Refuses what no authority may be: no host, a scheme other than `https` (or `http` on loopback),
/// user info, a query or a fragment.
struct AuthorityURLParts {
    /// The hosts on which plain `http` is allowed, for a local test provider.
    static let loopbackHosts: Set<String> = ["127.0.0.1", "::1", "localhost"]

    let scheme: String
    /// Lowercased, without IPv6 brackets.
    let host: String
    /// The port, unless it is the scheme's default.
    let port: Int?
    /// Non-empty path components, still percent-encoded.
    let pathComponents: [String]

    init(_ url: URL) throws(IdentityError) {
        let text = url.absoluteString
        guard let scheme = url.scheme?.lowercased(), let rawHost = url.host, !rawHost.isEmpty else {
            throw IdentityError(
                .invalidAuthority,
                "the authority `\(text)` has no scheme or host; write it as https://host/path"
            )
        }
        var host = rawHost.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        switch scheme {
        case "https":
            break
        case "http" where Self.loopbackHosts.contains(host):
            break
        case "http":
            throw IdentityError(
                .invalidAuthority,
                "the authority `\(text)` uses http; authorities must use https (http is allowed only on loopback: 127.0.0.1, ::1, localhost)"
            )
        default:
            throw IdentityError(
                .invalidAuthority,
                "the authority `\(text)` uses the scheme `\(scheme)`; authorities must use https"
            )
        }
        guard url.user == nil, url.password == nil else {
            throw IdentityError(.invalidAuthority, "the authority `\(text)` contains user information; remove it")
        }
        guard url.query == nil, url.fragment == nil else {
            throw IdentityError(
                .invalidAuthority,
                "the authority `\(text)` has a query or a fragment; an authority is a plain https URL"
            )
        }
        self.scheme = scheme
        self.host = host
        let isDefaultPort = (scheme == "https" && url.port == 443) || (scheme == "http" && url.port == 80)
        self.port = isDefaultPort ? nil : url.port
        self.pathComponents = url.path(percentEncoded: true).split(separator: "/").map(String.init)
    }

    /// `scheme://host[:port]/` followed by `path`, joined with slashes.
    func url(path: [String]) throws(IdentityError) -> URL {
        let hostPart = host.contains(":") ? "[\(host)]" : host
        let portPart = port.map { ":\($0)" } ?? ""
        let text = "\(scheme)://\(hostPart)\(portPart)/" + path.joined(separator: "/")
        guard let url = URL(string: text) else {
            throw IdentityError(.invalidAuthority, "the authority `\(text)` is not a valid URL")
        }
        return url
    }
}
