public import Foundation
import Synchronization

/// Authorities' discovery documents and signing keys, keyed by URL, each kept for `lifetime` (a day by
/// default, as MSAL keeps its authority metadata cache) unless a token names a key the cached set lacks.
///
/// An instance, not process-global state: an `IdentityClient` makes its own unless its caller hands it
/// one, and `ApplicationEngine` keeps one for its lifetime and gives it to the identity client it
/// makes, so an app discovers its authority once a day. Safe to share between clients and tasks.
public final class DiscoveryCache: Sendable {
    /// How long an entry is used (MSAL's authority metadata lifetime: 24 hours).
    public static let defaultLifetime: TimeInterval = 24 * 3600

    /// How long an entry is used after it was fetched.
    public let lifetime: TimeInterval

    private struct Entries {
        var configurations: [URL: (configuration: OpenIDConfiguration, fetchedAt: Date)] = [:]
        var validators: [URL: (validator: IDTokenValidator, fetchedAt: Date)] = [:]
    }

    private let entries = Mutex(Entries())

    /// An empty cache whose entries are used for `lifetime` seconds after they were fetched.
    public init(lifetime: TimeInterval = DiscoveryCache.defaultLifetime) {
        self.lifetime = lifetime
    }

    func configuration(for url: URL, now: Date) -> OpenIDConfiguration? {
        entries.withLock { entries in
            entries.configurations[url].flatMap {
                now.timeIntervalSince($0.fetchedAt) < lifetime ? $0.configuration : nil
            }
        }
    }

    func store(_ configuration: OpenIDConfiguration, for url: URL, now: Date) {
        entries.withLock { $0.configurations[url] = (configuration, now) }
    }

    func validator(for url: URL, now: Date) -> IDTokenValidator? {
        entries.withLock { entries in
            entries.validators[url].flatMap { now.timeIntervalSince($0.fetchedAt) < lifetime ? $0.validator : nil }
        }
    }

    func store(_ validator: IDTokenValidator, for url: URL, now: Date) {
        entries.withLock { $0.validators[url] = (validator, now) }
    }
}
