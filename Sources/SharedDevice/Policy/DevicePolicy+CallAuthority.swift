public import Foundation
import IdentityClient

/// The identity client's authority (inside `DevicePolicy.Authority` the name means the policy's).
private typealias ParsedAuthority = Authority

extension DevicePolicy.Authority {
    /// The policy's authority a call names (MSAL's `parameters.authority`): the issuer or one of the
    /// `knownAuthorities`, compared in canonical form (`…/tfp/{tenant}/{policy}`, a trailing `/v2.0` or
    /// slash aside, case-insensitively). MSAL's rule for B2C: an app signs in only at authorities it knows.
    /// - Returns: the listed URL, or nil when the policy lists no such authority (or it is no authority).
    public func listedAuthority(_ requested: String) -> URL? {
        let known = knownAuthorities.compactMap(\.host)
        func canonical(_ url: String) -> String? { (try? ParsedAuthority(url, knownAuthorities: known))?.url.absoluteString.lowercased() }
        guard let asked = canonical(requested) else { return nil }
        return ([issuer] + knownAuthorities).first { canonical($0.absoluteString) == asked }
    }

    /// Whether `url` is the issuer itself (in canonical form).
    public func isIssuer(_ url: URL) -> Bool {
        let known = knownAuthorities.compactMap(\.host)
        func canonical(_ url: URL) -> String? { (try? ParsedAuthority(url: url, knownAuthorities: known))?.url.absoluteString.lowercased() }
        return canonical(url) != nil && canonical(url) == canonical(issuer)
    }

    /// The message of a refused call authority: what the policy lists and what to do.
    public func unlistedAuthorityMessage(_ requested: String) -> String {
        let listed = ([issuer] + knownAuthorities).map(\.absoluteString)
        return "the authority \(requested.prefix(256)) is not the device policy's issuer or one of its knownAuthorities (\(listed.joined(separator: ", "))); use one of those, or ask the administrator to add it"
    }
}
