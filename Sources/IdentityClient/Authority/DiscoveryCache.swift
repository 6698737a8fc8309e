import Foundation
import Synchronization

/// The per-process cache of discovery documents and signing keys, keyed by URL, each kept for a day
/// (as MSAL keeps authority metadata) unless a token names an unknown key.
final class DiscoveryCache: Sendable {
    static let shared = DiscoveryCache()
    static let lifetime: TimeInterval = 24 * 3600

    private let configurations = Mutex<[URL: (OpenIDConfiguration, Date)]>([:])
    private let validators = Mutex<[URL: (IDTokenValidator, Date)]>([:])

    func configuration(for url: URL, now: Date) -> OpenIDConfiguration? {
        configurations.withLock { cache in cache[url].flatMap { now.timeIntervalSince($0.1) < Self.lifetime ? $0.0 : nil } }
    }

    func store(_ configuration: OpenIDConfiguration, for url: URL, now: Date) {
        configurations.withLock { $0[url] = (configuration, now) }
    }

    func validator(for url: URL, now: Date) -> IDTokenValidator? {
        validators.withLock { cache in cache[url].flatMap { now.timeIntervalSince($0.1) < Self.lifetime ? $0.0 : nil } }
    }

    func store(_ validator: IDTokenValidator, for url: URL, now: Date) {
        validators.withLock { $0[url] = (validator, now) }
    }
}
