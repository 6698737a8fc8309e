import Foundation
import IdentityClient
import KeychainStore
import SharedDevice
import StoreTestSupport
import Testing

/// Silent lookups: access tokens by scope and expiry, refresh tokens by client or family, accounts with claims.
struct TokenCacheLookupTests {
    typealias F = CacheFixture
    let fixture: F.Store
    let cache = TokenCache()

    init() throws {
        fixture = try F.Store()
        try cache.save(try F.response(foci: "1"), context: F.context(), as: F.scanner, in: fixture.store)
    }

    func accessToken(
        _ scopes: [String],
        clientID: String = F.clientID,
        realm: String = F.utid,
        as caller: AppIdentity = F.scanner
    ) throws -> AccessTokenCacheItem? {
        try cache.accessToken(
            homeAccountID: F.homeAccountID,
            environment: F.environment,
            clientID: clientID,
            realm: realm,
            scopes: scopes,
            as: caller,
            in: fixture.store
        )
    }

    @Test func accessTokenIsFoundForASubsetOfItsScopesIgnoringCase() throws {
        #expect(try accessToken(["User.Read"])?.secret == "at-secret-1")
        #expect(try accessToken(["mail.read", "USER.READ"])?.secret == "at-secret-1")
        #expect(try accessToken(["User.Read", "openid", "profile", "offline_access"])?.secret == "at-secret-1")
    }

    @Test func grantedScopesSplitOnSpacesTabsAndNewlinesWithoutCuttingCharacters() throws {
        var response = try F.response()
        response.scope = "User.Read  Mail.Read\tFiles.Lire.Étendu\nopenid"
        try cache.save(response, context: F.context(), as: F.scanner, in: fixture.store)
        let item = try #require(try accessToken(["Files.Lire.Étendu"]))
        #expect(item.scopes == ["Files.Lire.Étendu", "Mail.Read", "User.Read", "openid"])
    }

    @Test func accessTokenIsNotFoundForASupersetOrAnotherClientOrRealm() throws {
        #expect(try accessToken(["User.Read", "Files.Read"]) == nil)
        #expect(try accessToken(["User.Read"], clientID: F.otherFamilyClientID) == nil)
        #expect(try accessToken(["User.Read"], realm: "another-tenant") == nil)
    }

    @Test func expiredAccessTokenIsNeverReturned() throws {
        // expires_on = 1800003599; MSAL's 300 s buffer.
        fixture.clock.advance(by: 3599 - 301)
        #expect(try accessToken(["User.Read"]) != nil)
        fixture.clock.advance(by: 2)
        #expect(try accessToken(["User.Read"]) == nil)
        fixture.clock.advance(by: 10_000)
        #expect(try accessToken(["User.Read"]) == nil)
        #expect(
            try TokenCache(expirationBuffer: 0).accessToken(
                homeAccountID: F.homeAccountID,
                environment: F.environment,
                clientID: F.clientID,
                realm: F.utid,
                scopes: ["User.Read"],
                as: F.scanner,
                in: fixture.store
            ) == nil
        )
    }

    @Test func newAccessTokenReplacesOnesWithOverlappingScopesAndKeepsDisjointOnes() throws {
        var response = try F.response()
        response.accessToken = "at-secret-2"
        response.scope = "User.Read Calendars.Read"
        try cache.save(response, context: F.context(), as: F.scanner, in: fixture.store)
        #expect(try accessToken(["Mail.Read"]) == nil)
        #expect(try accessToken(["User.Read"])?.secret == "at-secret-2")

        response.accessToken = "at-secret-3"
        response.scope = "Files.Read"
        try cache.save(response, context: F.context(), as: F.scanner, in: fixture.store)
        #expect(try accessToken(["Calendars.Read"])?.secret == "at-secret-2")
        #expect(try accessToken(["Files.Read"])?.secret == "at-secret-3")
        #expect(try fixture.store.metadata(matching: ItemQuery(type: 2001), as: F.scanner).count == 2)
    }

    @Test func refreshTokenIsFoundByClientIDAndFamilyRefreshTokenByFamilyID() throws {
        let appToken = try cache.refreshToken(
            homeAccountID: F.homeAccountID,
            environment: F.environment,
            clientID: F.clientID,
            as: F.scanner,
            in: fixture.store
        )
        #expect(appToken?.secret == "rt-secret-1")
        #expect(appToken?.isFamilyRefreshToken == false)

        // Another app of the family, which never signed in itself, finds the family token through the shared group.
        #expect(
            try cache.refreshToken(
                homeAccountID: F.homeAccountID,
                environment: F.environment,
                clientID: F.otherFamilyClientID,
                as: F.timeclock,
                in: fixture.store
            ) == nil
        )
        let family = try cache.familyRefreshToken(
            homeAccountID: F.homeAccountID,
            environment: F.environment,
            familyID: "1",
            as: F.timeclock,
            in: fixture.store
        )
        #expect(family?.secret == "rt-secret-1")
        #expect(family?.familyID == "1")
        #expect(family?.clientID == F.clientID)
        #expect(
            try cache.familyRefreshToken(
                homeAccountID: F.homeAccountID,
                environment: F.environment,
                familyID: "2",
                as: F.timeclock,
                in: fixture.store
            ) == nil
        )
    }

    @Test func accountsCarryTheirIDTokenClaims() throws {
        let accounts = try cache.accounts(as: F.timeclock, in: fixture.store)
        #expect(accounts.count == 1)
        let account = try #require(accounts.first)
        #expect(account.homeAccountID == F.homeAccountID)
        #expect(account.username == "ada@contoso.example")
        #expect(account.name == "Ada Worker")
        #expect(account.objectID == F.uid)
        #expect(account.tenantID == F.utid)
        #expect(account.account.authorityType == "MSSTS")

        let byID = try cache.account(
            homeAccountID: F.homeAccountID,
            environment: F.environment,
            as: F.scanner,
            in: fixture.store
        )
        #expect(byID == account)
        #expect(
            try cache.account(
                homeAccountID: "someone.else",
                environment: F.environment,
                as: F.scanner,
                in: fixture.store
            ) == nil
        )
    }

    @Test func refreshWithoutNewRefreshTokenOrIDTokenKeepsThemAndUsesTheContextsAccount() throws {
        fixture.clock.advance(by: 4000)
        let refreshed = TokenResponse(accessToken: "at-refreshed", scope: "User.Read Mail.Read", expiresIn: 3600)
        var context = F.context()
        context.homeAccountID = F.homeAccountID
        context.realm = F.utid
        let record = try cache.save(refreshed, context: context, as: F.scanner, in: fixture.store)
        #expect(record.refreshToken == nil && record.idToken == nil && record.account == nil)
        #expect(try accessToken(["User.Read"])?.secret == "at-refreshed")
        #expect(
            try cache.refreshToken(
                homeAccountID: F.homeAccountID,
                environment: F.environment,
                clientID: F.clientID,
                as: F.scanner,
                in: fixture.store
            )?.secret == "rt-secret-1"
        )
        #expect(try cache.accounts(as: F.scanner, in: fixture.store).first?.username == "ada@contoso.example")
    }

    @Test func removeCredentialsDeletesTheAccountsTokensInEveryGroupAndKeepsOthers() throws {
        try cache.save(
            try F.response(),
            context: F.context(),
            as: F.scanner,
            accessGroup: F.privateScannerGroup,
            in: fixture.store
        )
        var other = try F.response()
        other.clientInfo = Base64URL.encode(Data(#"{"uid":"other-user","utid":"other-tenant"}"#.utf8))
        try cache.save(other, context: F.context(), as: F.scanner, in: fixture.store)

        let removed = try cache.removeCredentials(
            homeAccountID: F.homeAccountID,
            environment: F.environment,
            as: F.scanner,
            in: fixture.store
        )
        // shared group: AT, RT, FRT, ID token, account; private group: AT, RT, ID token, account
        #expect(removed == 5 + 4)
        #expect(try accessToken(["User.Read"]) == nil)
        #expect(
            try cache.familyRefreshToken(
                homeAccountID: F.homeAccountID,
                environment: F.environment,
                familyID: "1",
                as: F.scanner,
                in: fixture.store
            ) == nil
        )
        #expect(
            try cache.accounts(as: F.scanner, in: fixture.store).map(\.homeAccountID) == ["other-user.other-tenant"]
        )
        #expect(try fixture.store.metadata(matching: ItemQuery(type: 3001), as: F.scanner).count == 2)
    }
}
