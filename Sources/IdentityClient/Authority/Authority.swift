public import Foundation

/// Where users sign in: MSAL's authority (`MSALAuthority`), parsed, checked and put in canonical form.
///
/// Three kinds are understood, as MSAL does:
/// - Microsoft Entra ID: `https://login.microsoftonline.com/{tenant}` (also `common`, `organizations`,
///   `consumers`, and the sovereign clouds `login.microsoftonline.us` and `login.chinacloudapi.cn`);
///   a trailing `/v2.0` or `/` is accepted and dropped.
/// - Azure AD B2C: `https://{tenant}.b2clogin.com/tfp/{tenant}/{policy}` or the same without `tfp`; the
///   host must be one of the app's known authorities (MSAL's `knownAuthorities`). One authority per user flow.
/// - Microsoft Entra External ID (CIAM): `https://{subdomain}.ciamlogin.com/{tenant}` (a tenant id or
///   `{subdomain}.onmicrosoft.com`; without a path, `{subdomain}.onmicrosoft.com`, as MSAL does), where
///   native authentication (`IdentityClient+NativeAuth`) signs users in without a browser.
/// - Any other OpenID Connect provider: its issuer URL, kept as given minus a trailing slash.
///
/// `https` is required, except `http` on loopback (`127.0.0.1`, `::1`, `localhost`) for a local test provider.
public struct Authority: Sendable, Hashable, CustomStringConvertible {
    /// What kind of authority this is; decides the discovery URL, the realm and the issuer rules.
    public enum Kind: Sendable, Hashable {
        /// Microsoft Entra ID (MSAL's AAD authority): a tenant id or domain, or `common`,
        /// `organizations` or `consumers`.
        case microsoft(tenant: String)
        /// Azure AD B2C (MSAL's B2C authority): the tenant (`fabrikamb2c.onmicrosoft.com`) and the
        /// user flow or custom policy (`B2C_1_SUSI`).
        case b2c(tenant: String, policy: String)
        /// Microsoft Entra External ID (MSAL's CIAM authority, `*.ciamlogin.com`): the tenant.
        case ciam(tenant: String)
        /// A generic OpenID Connect issuer (MSAL's OIDC authority).
        case oidc
    }

    /// The hosts of Microsoft Entra ID: the public cloud and the US government and China sovereign clouds.
    public static let microsoftHosts: Set<String> = [
        "login.microsoftonline.com", "login.microsoftonline.us", "login.chinacloudapi.cn",
    ]

    /// The scopes MSAL adds to every token and authorization request.
    public static let reservedScopes = ["openid", "profile", "offline_access"]

    /// The canonical authority URL: `https://login.microsoftonline.com/{tenant}`,
    /// `https://{host}/tfp/{tenant}/{policy}`, or the OIDC issuer without a trailing slash.
    public let url: URL

    /// What kind of authority this is.
    public let kind: Kind

    /// Parses and checks an authority URL string.
    /// - Parameters:
    ///   - string: The authority URL.
    ///   - knownAuthorities: Hosts (or URLs whose hosts) the app trusts as B2C authorities, as MSAL's
    ///     `knownAuthorities`. Compared case-insensitively.
    /// - Throws: `invalidAuthority` saying what is wrong and what to write instead.
    public init(_ string: String, knownAuthorities: [String] = []) throws(IdentityError) {
        guard let url = URL(string: string.trimmingCharacters(in: .whitespaces)) else {
            throw IdentityError(
                .invalidAuthority,
                "the authority `\(string)` is not a URL; use https://login.microsoftonline.com/{tenant}, a B2C authority or an OpenID Connect issuer URL"
            )
        }
        try self.init(url: url, knownAuthorities: knownAuthorities)
    }

    /// Checks an authority URL and puts it in canonical form.
    /// - Parameters:
    ///   - url: The authority URL.
    ///   - knownAuthorities: Hosts (or URLs whose hosts) the app trusts as B2C authorities.
    /// - Throws: `invalidAuthority` saying what is wrong and what to write instead.
    public init(url: URL, knownAuthorities: [String] = []) throws(IdentityError) {
        let parts = try AuthorityURLParts(url)
        let components = parts.pathComponents

        if Self.microsoftHosts.contains(parts.host) {
            var tenantPath = components
            if tenantPath.count == 2, tenantPath[1].lowercased() == "v2.0" { tenantPath.removeLast() }
            guard tenantPath.count == 1 else {
                throw IdentityError(
                    .invalidAuthority,
                    "the authority `\(url.absoluteString)` is not of the form https://\(parts.host)/{tenant}; use a tenant id or domain, `common`, `organizations` or `consumers`"
                )
            }
            self.kind = .microsoft(tenant: tenantPath[0])
            self.url = try parts.url(path: [tenantPath[0]])
            return
        }

        if parts.host.hasSuffix(".ciamlogin.com") {
            let subdomain = String(parts.host.dropLast(".ciamlogin.com".count))
            var tenantPath = components
            if tenantPath.count == 2, tenantPath[1].lowercased() == "v2.0" { tenantPath.removeLast() }
            if tenantPath.isEmpty, !subdomain.isEmpty { tenantPath = ["\(subdomain).onmicrosoft.com"] }
            guard tenantPath.count == 1 else {
                throw IdentityError(
                    .invalidAuthority,
                    "the authority `\(url.absoluteString)` is not of the form https://\(parts.host)/{tenant}; name the tenant (its id or \(subdomain).onmicrosoft.com)"
                )
            }
            self.kind = .ciam(tenant: tenantPath[0])
            self.url = try parts.url(path: [tenantPath[0]])
            return
        }

        let isKnown = Self.knownHosts(knownAuthorities).contains(parts.host)
        let hasTFP = components.first?.lowercased() == "tfp"
        if parts.host.hasSuffix(".b2clogin.com") || (isKnown && hasTFP) {
            guard isKnown else {
                throw IdentityError(
                    .invalidAuthority,
                    "the B2C authority host `\(parts.host)` is not a known authority; add `\(parts.host)` to the app's known authorities (knownAuthorities)"
                )
            }
            var policyPath = hasTFP ? Array(components.dropFirst()) : components
            if policyPath.count == 3, policyPath[2].lowercased() == "v2.0" { policyPath.removeLast() }
            guard policyPath.count == 2 else {
                throw IdentityError(
                    .invalidAuthority,
                    "the B2C authority `\(url.absoluteString)` is not of the form https://\(parts.host)/tfp/{tenant}/{policy}; name the tenant and the user flow"
                )
            }
            self.kind = .b2c(tenant: policyPath[0], policy: policyPath[1])
            self.url = try parts.url(path: ["tfp", policyPath[0], policyPath[1]])
            return
        }

        self.kind = .oidc
        var issuer = url.absoluteString
        if issuer.hasSuffix("/") { issuer.removeLast() }
        guard let issuerURL = URL(string: issuer) else {
            throw IdentityError(.invalidAuthority, "the authority `\(url.absoluteString)` is not a valid issuer URL")
        }
        self.url = issuerURL
    }

    /// The OpenID Provider Metadata URL (OpenID Connect Discovery 1.0 §4).
    ///
    /// Microsoft: `…/{tenant}/v2.0/.well-known/openid-configuration`; B2C:
    /// `…/tfp/{tenant}/{policy}/v2.0/.well-known/openid-configuration`; OIDC: `{issuer}/.well-known/openid-configuration`.
    public var openIDConfigurationURL: URL {
        switch kind {
        case .microsoft, .b2c, .ciam:
            url.appending(path: "v2.0/.well-known/openid-configuration")
        case .oidc:
            url.appending(path: ".well-known/openid-configuration")
        }
    }

    /// The token cache's `environment` for this authority: the host, with `:port` when the port is not
    /// the scheme's default, lowercased (as `TokenRequestContext.environment(of:)` in SharedDevice).
    public var environment: String {
        let host = (url.host ?? "").lowercased()
        guard let port = url.port, !(url.scheme == "https" && port == 443), !(url.scheme == "http" && port == 80) else {
            return host
        }
        return "\(host):\(port)"
    }

    /// The token cache's `realm` for this authority: the tenant for Microsoft and B2C, the issuer's first
    /// path component (or `common` when it has none) for OIDC, as `TokenRequestContext` in SharedDevice.
    public var realm: String {
        switch kind {
        case .microsoft(let tenant), .b2c(let tenant, _), .ciam(let tenant):
            tenant
        case .oidc:
            url.pathComponents.dropFirst().first ?? "common"
        }
    }

    /// The user flow of a B2C authority, lowercased as B2C writes it into account ids (`b2c_1_susi`); nil
    /// for other kinds.
    public var b2cPolicy: String? {
        if case .b2c(_, let policy) = kind { policy.lowercased() } else { nil }
    }

    /// Whether requests to this authority carry `client_info=1`, as MSAL sends to Microsoft and B2C
    /// authorities so the response names the home account (`uid.utid`).
    var sendsClientInfo: Bool {
        switch kind {
        case .microsoft, .b2c, .ciam: true
        case .oidc: false
        }
    }

    /// The scopes to send: the app's scopes in the app's order, then `openid profile offline_access`,
    /// without duplicates (compared case-insensitively) or empty entries, as MSAL does.
    func requestScopes(_ scopes: [String]) -> [String] {
        var seen = Set<String>()
        var result: [String] = []
        for scope in scopes + Self.reservedScopes {
            let trimmed = scope.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, seen.insert(trimmed.lowercased()).inserted else { continue }
            result.append(trimmed)
        }
        return result
    }

    /// Whether an ID token's `iss` is this authority's issuer.
    ///
    /// `iss` must equal the discovery document's `issuer` (a trailing slash aside). For Microsoft
    /// multi-tenant authorities (`common`, `organizations`) the document's issuer is the template
    /// `https://login.microsoftonline.com/{tenantid}/v2.0`: `iss` is accepted when it equals the template
    /// with `{tenantid}` replaced by the token's `tid`.
    /// - Parameters:
    ///   - iss: The token's `iss` claim.
    ///   - tenantID: The token's `tid` claim, when it has one.
    ///   - metadataIssuer: The `issuer` of the authority's discovery document.
    func acceptsIssuer(_ iss: String, tenantID: String?, metadataIssuer: String) -> Bool {
        let issuer = Self.trimmingTrailingSlash(iss)
        let expected = Self.trimmingTrailingSlash(metadataIssuer)
        if issuer == expected { return true }
        guard case .microsoft = kind, expected.contains(Self.tenantIDPlaceholder),
            let tenantID, !tenantID.isEmpty, !tenantID.contains("/")
        else { return false }
        return expected.replacingOccurrences(of: Self.tenantIDPlaceholder, with: tenantID) == issuer
    }

    /// The canonical authority URL.
    public var description: String { url.absoluteString }

    static let tenantIDPlaceholder = "{tenantid}"

    private static func trimmingTrailingSlash(_ string: String) -> String {
        string.hasSuffix("/") ? String(string.dropLast()) : string
    }

    /// Lowercased hosts of the known authorities, whether given as hosts or as URLs.
    private static func knownHosts(_ knownAuthorities: [String]) -> Set<String> {
        Set(
            knownAuthorities.compactMap { entry in
                let trimmed = entry.trimmingCharacters(in: .whitespaces)
                if trimmed.contains("://") { return URL(string: trimmed)?.host?.lowercased() }
                let host = trimmed.split(separator: "/").first.map(String.init) ?? trimmed
                return host.split(separator: ":").first.map { $0.lowercased() }
            }
        )
    }
}
