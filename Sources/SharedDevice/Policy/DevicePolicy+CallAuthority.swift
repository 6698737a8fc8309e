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
        guard let asked = canonical(requested) else { return nil }
        return ([issuer] + knownAuthorities).first { canonical($0.absoluteString) == asked }
    }

    /// Whether `url` is the issuer itself (in canonical form).
    public func isIssuer(_ url: URL) -> Bool {
        guard let given = canonical(url.absoluteString) else { return false }
        return given == canonical(issuer.absoluteString)
    }

    /// `url` as the identity client puts it in canonical form, lowercased; nil when it is no authority.
    private func canonical(_ url: String) -> String? {
        (try? ParsedAuthority(url, knownAuthorities: knownAuthorities.compactMap(\.host)))?.url.absoluteString
            .lowercased()
    }

    /// The message of a refused call authority: what the policy lists and what to do.
    public func unlistedAuthorityMessage(_ requested: String) -> String {
        let listed = ([issuer] + knownAuthorities).map(\.absoluteString)
        return
            "the authority \(requested.prefix(256)) is not the device policy's issuer or one of its knownAuthorities (\(listed.joined(separator: ", "))); use one of those, or ask the administrator to add it"
    }
}
