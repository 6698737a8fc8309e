import Foundation
import KeychainStore
import SharedDevice
import Testing

/// The token cache's keys in a namespace of their own: an app's plain item at MSAL's exact key never stops a
/// sign-in from caching its tokens, and a store an earlier version wrote (services without the namespace) is
/// moved into it once, its tokens found again.
struct TokenCacheNamespaceTests {
    typealias F = CacheFixture

    static var account: String { "\(F.homeAccountID)-\(F.environment)".lowercased() }

    @Test func anAppsPlainItemAtATokensExactKeyDoesNotStopTheSignIn() throws {
        let fixture = try F.Store()
        // What an app may do through the broker: a plain item (no token-cache type) at MSAL's refresh-token key.
        let app = F.scanner.hidingItemTypes(TokenCache.itemTypes)
        try fixture.store.add(
            NewItem(
                accessGroup: AccessGroup.adalCache,
                service: "refreshtoken-\(F.clientID)--",
                account: Self.account,
                secret: Data("squatted".utf8)
            ),
            as: app
        )
        try TokenCache().save(try F.response(), context: F.context(), as: F.scanner, in: fixture.store)
        let token = try TokenCache().refreshToken(
            homeAccountID: F.homeAccountID,
            environment: F.environment,
            clientID: F.clientID,
            as: F.scanner,
            in: fixture.store
        )
        #expect(token?.secret == "rt-secret-1")
        let own = try fixture.store.find(
            ItemQuery(service: "refreshtoken-\(F.clientID)--", account: Self.account),
            as: app
        )
        #expect(own.secret == Data("squatted".utf8))
    }

    @Test func aStoreOfTheEarlierLayoutIsMovedIntoTheNamespaceOnceAndItsTokensAreFoundAgain() throws {
        let fixture = try F.Store()
        let cache = TokenCache()
        try cache.save(try F.response(), context: F.context(), as: F.scanner, in: fixture.store)
        // Rewrite every token item as 0.3.0 kept it: MSAL's service without the namespace.
        let tokenItems = try fixture.store.findAll(ItemQuery(), as: F.scanner).filter {
            TokenCache.itemTypes.contains($0.metadata.type ?? 0)
        }
        #expect(tokenItems.count == 5)
        for item in tokenItems {
            _ = try fixture.store.update(
                ItemQuery(accessGroup: item.accessGroup, service: item.service, account: item.account),
                with: ItemChanges(service: String(item.service.dropFirst(TokenCache.serviceNamespace.count))),
                as: F.scanner
            )
        }
        #expect(
            try cache.refreshToken(
                homeAccountID: F.homeAccountID,
                environment: F.environment,
                clientID: F.clientID,
                as: F.scanner,
                in: fixture.store
            ) == nil
        )
        // An app's own plain item beside them is not the token cache's and stays as it is.
        try fixture.store.add(
            NewItem(
                accessGroup: AccessGroup.adalCache,
                service: "app-notes",
                account: Self.account,
                secret: Data("n".utf8)
            ),
            as: F.scanner
        )

        let moved = try cache.moveIntoNamespace(
            groups: [AccessGroup.adalCache, F.privateScannerGroup],
            in: fixture.store
        )
        #expect(moved == 5)
        #expect(
            try cache.refreshToken(
                homeAccountID: F.homeAccountID,
                environment: F.environment,
                clientID: F.clientID,
                as: F.scanner,
                in: fixture.store
            )?.secret == "rt-secret-1"
        )
        #expect(
            try cache.accessToken(
                homeAccountID: F.homeAccountID,
                environment: F.environment,
                clientID: F.clientID,
                realm: F.utid,
                scopes: ["User.Read"],
                as: F.scanner,
                in: fixture.store
            ) != nil
        )
        #expect(try fixture.store.find(ItemQuery(service: "app-notes"), as: F.scanner).secret == Data("n".utf8))
        #expect(
            try cache.moveIntoNamespace(groups: [AccessGroup.adalCache, F.privateScannerGroup], in: fixture.store) == 0
        )
    }
}
