import Foundation

/// MSAL's unified-cache JSON document, the serialized cache that every MSAL library can load:
/// top-level `AccessToken`, `RefreshToken`, `IdToken`, `Account` and `AppMetadata` objects, each a
/// map from an entry's cache key to the entry.
struct UnifiedCacheDocument {
    /// The sections, in their JSON names, each mapping cache key → entry JSON.
    private(set) var sections: [String: [String: JSONValue]] = Self.emptySections

    static let kinds: [any CacheEntry.Type] = [
        AccessTokenCacheItem.self, RefreshTokenCacheItem.self, IdTokenCacheItem.self, AccountCacheItem.self,
        AppMetadataCacheItem.self,
    ]
    private static let emptySections = Dictionary(
        uniqueKeysWithValues: kinds.map { ($0.section, [String: JSONValue]()) }
    )

    init() {}

    /// Adds `entry` under its cache key unless an entry already holds that key (the first wins).
    mutating func add(_ entry: some CacheEntry) {
        let section = type(of: entry).section
        if sections[section]?[entry.cacheKey] == nil { sections[section]?[entry.cacheKey] = .object(entry.json) }
    }

    /// The document as text: every section present (empty ones as `{}`), keys sorted, four-space indent.
    var data: Data {
        CacheJSON.pretty(sections.mapValues { JSONValue.object($0) })
    }

    /// Decodes every entry of a document, in section order and then by key. Unknown top-level
    /// sections are ignored; unknown fields inside entries are kept.
    /// - Throws: `invalidCacheDocument` with the path of the first problem (never a value).
    static func entries(of data: Data) throws(TokenCacheError) -> [any CacheEntry] {
        guard let document = CacheJSON.object(data) else {
            throw TokenCacheError(.invalidCacheDocument, "the cache file is not a JSON object", path: "(document)")
        }
        var entries: [any CacheEntry] = []
        for kind in kinds {
            guard let section = document[kind.section], section != .null else { continue }
            guard case .object(let members) = section else {
                throw TokenCacheError(
                    .invalidCacheDocument,
                    "must be an object mapping cache keys to entries, not \(section.kind)",
                    path: kind.section
                )
            }
            for key in members.keys.sorted() {
                let path = "\(kind.section)[\"\(key)\"]"
                guard case .object(let object) = members[key]! else {
                    throw TokenCacheError(
                        .invalidCacheDocument,
                        "must be an object, not \(members[key]!.kind)",
                        path: path
                    )
                }
                do {
                    entries.append(try kind.init(json: object))
                } catch {
                    throw TokenCacheError(
                        .invalidCacheDocument,
                        error.problem,
                        path: error.field.map { "\(path).\($0)" } ?? path
                    )
                }
            }
        }
        return entries
    }
}
