/// Scope lists as MSAL's cache treats them: a `target` is the scopes space-joined and sorted; scopes
/// compare case-insensitively; the OpenID Connect scopes MSAL adds to every request (`openid`,
/// `profile`, `offline_access`) are not required to be in a cached access token's target.
enum Scopes {
    /// MSAL's reserved scopes, sent on every request but not part of what the app asked for.
    static let reserved: Set<String> = ["openid", "profile", "offline_access"]

    /// Splits a space-separated scope string (as in `scope` or `target`).
    static func split(_ text: String) -> [String] {
        // On the UTF-8 bytes (every silent token from the cache splits its target): the separators are ASCII, so
        // no scope's bytes are cut inside a character.
        text.utf8.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A }).map { String(Substring($0)) }
    }

    /// The cache `target`: distinct scopes sorted by code point, joined by single spaces.
    static func target(_ scopes: [String]) -> String {
        var seen = Set<String>()
        return scopes.filter { seen.insert($0).inserted }
            .sorted { $0.unicodeScalars.lexicographicallyPrecedes($1.unicodeScalars) }
            .joined(separator: " ")
    }

    /// Lowercased scopes of `text`.
    static func set(_ text: String) -> Set<String> { Set(split(text).map { $0.lowercased() }) }

    /// Whether a cached `target` covers the requested scopes (ignoring reserved ones, unless only those were asked for).
    static func target(_ target: String, covers requested: [String]) -> Bool {
        let asked = Set(requested.map { $0.lowercased() })
        let needed = asked.subtracting(reserved).isEmpty ? asked : asked.subtracting(reserved)
        return needed.isSubset(of: set(target))
    }

    /// Whether two targets share a scope (MSAL replaces access tokens whose scopes intersect the new one's).
    static func target(_ first: String, intersects second: String) -> Bool {
        !set(first).isDisjoint(with: set(second))
    }
}
