import Foundation
import IdentityClient
import IdentityTestSupport
import Synchronization
import Testing

/// Discovery documents are kept per `DiscoveryCache` instance, for its lifetime: clients that share one
/// discover once; clients that do not, each once; an expired entry is fetched again.
struct DiscoveryCacheTests {
    static let discoveryPath = "/api/oidc/.well-known/openid-configuration"

    private func provider() -> ScriptedTransport {
        let transport = ScriptedTransport()
        transport.always(
            Self.discoveryPath,
            .json([
                "issuer": TestProvider.issuer, "authorization_endpoint": "\(TestProvider.issuer)/auth",
                "token_endpoint": "\(TestProvider.issuer)/token", "jwks_uri": "\(TestProvider.issuer)/jwks",
            ])
        )
        return transport
    }

    @Test func clientsSharingACacheDiscoverTheAuthorityOnce() async throws {
        let transport = provider()
        let cache = DiscoveryCache()
        for _ in 0..<3 {
            let client = IdentityClient(
                clientID: TestProvider.clientID,
                authority: TestProvider.authority,
                transport: transport,
                discoveryCache: cache
            )
            _ = try await client.configuration()
        }
        #expect(transport.requests(to: Self.discoveryPath).count == 1)
    }

    @Test func clientsWithTheirOwnCachesDoNotSeeEachOthersEntries() async throws {
        let transport = provider()
        let first = IdentityClient(
            clientID: TestProvider.clientID,
            authority: TestProvider.authority,
            transport: transport
        )
        let second = IdentityClient(
            clientID: TestProvider.clientID,
            authority: TestProvider.authority,
            transport: transport
        )
        _ = try await first.configuration()
        _ = try await first.configuration()
        _ = try await second.configuration()
        #expect(transport.requests(to: Self.discoveryPath).count == 2)
    }

    @Test func anEntryIsFetchedAgainAfterTheCachesLifetime() async throws {
        let transport = provider()
        let clock = Mutex(TestProvider.now)
        let cache = DiscoveryCache()
        #expect(cache.lifetime == 24 * 3600)
        let client = IdentityClient(
            clientID: TestProvider.clientID,
            authority: TestProvider.authority,
            transport: transport,
            now: { clock.withLock { $0 } },
            discoveryCache: cache
        )
        _ = try await client.configuration()
        clock.withLock { $0 += 24 * 3600 - 1 }
        _ = try await client.configuration()
        #expect(transport.requests(to: Self.discoveryPath).count == 1)
        clock.withLock { $0 += 2 }
        _ = try await client.configuration()
        #expect(transport.requests(to: Self.discoveryPath).count == 2)
    }
}
