import Foundation
import KeychainStore
import SharedDevice
import Testing

/// Access groups keep one app's cache from another, as keychain access groups do for MSAL on iOS.
struct TokenCacheIsolationTests {
    typealias F = CacheFixture
    let cache = TokenCache()

    @Test func entriesInAnAppsPrivateGroupAreInvisibleToAnotherApp() throws {
        let fixture = try F.Store()
        try cache.save(
            try F.response(foci: "1"),
            context: F.context(),
            as: F.scanner,
            accessGroup: F.privateScannerGroup,
            in: fixture.store
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
            )?.secret == "at-secret-1"
        )
        #expect(
            try cache.accessToken(
                homeAccountID: F.homeAccountID,
                environment: F.environment,
                clientID: F.clientID,
                realm: F.utid,
                scopes: ["User.Read"],
                as: F.timeclock,
                in: fixture.store
            ) == nil
        )
        #expect(
            try cache.familyRefreshToken(
                homeAccountID: F.homeAccountID,
                environment: F.environment,
                familyID: "1",
                as: F.timeclock,
                in: fixture.store
            ) == nil
        )
        #expect(try cache.accounts(as: F.timeclock, in: fixture.store).isEmpty)
        #expect(
            try cache.removeCredentials(
                homeAccountID: F.homeAccountID,
                environment: F.environment,
                as: F.timeclock,
                in: fixture.store
            ) == 0
        )
        let exported = String(decoding: try cache.exportJSON(as: F.timeclock, in: fixture.store), as: UTF8.self)
        #expect(!exported.contains("secret"))

        let named = F.caughtError {
            try cache.accounts(as: F.timeclock, accessGroup: F.privateScannerGroup, in: fixture.store)
        }
        #expect((named as? TokenCacheError)?.storeError?.code == .missingEntitlement)
        #expect(try cache.accounts(as: F.scanner, in: fixture.store).count == 1)
    }

    @Test func entriesInTheSharedGroupGiveEveryEntitledAppSingleSignOn() throws {
        let fixture = try F.Store()
        try cache.save(try F.response(), context: F.context(), as: F.scanner, in: fixture.store)
        #expect(try cache.accounts(as: F.timeclock, in: fixture.store).map(\.username) == ["ada@contoso.example"])
        #expect(
            try cache.refreshToken(
                homeAccountID: F.homeAccountID,
                environment: F.environment,
                clientID: F.clientID,
                as: F.timeclock,
                in: fixture.store
            )?.secret == "rt-secret-1"
        )
    }

    @Test func savingToAGroupTheAppIsNotEntitledToFailsWithMissingEntitlement() throws {
        let fixture = try F.Store()
        let error = F.caughtError {
            try cache.save(
                try F.response(),
                context: F.context(),
                as: F.timeclock,
                accessGroup: F.privateScannerGroup,
                in: fixture.store
            )
        }
        #expect((error as? TokenCacheError)?.storeError?.code == .missingEntitlement)
        #expect(try fixture.store.metadata(as: F.scanner).isEmpty)
    }
}
