import Foundation
import KeychainStore
import SharedDevice
import Testing

/// A known token response becomes exactly the entries, keys and keychain items MSAL writes.
struct TokenCacheSchemaTests {
    typealias F = CacheFixture
    static let home = "5f7c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f.c0ffee00-1234-4abc-9def-0123456789ab"
    static let client = "9a1f3c2e-6b7d-4e8f-a0b1-c2d3e4f5a6b7"
    static let tenant = "c0ffee00-1234-4abc-9def-0123456789ab"

    @Test func knownResponseProducesMSALEntriesWithStringTimesAndSortedTarget() throws {
        let fixture = try F.Store()
        try TokenCache().save(try F.response(), context: F.context(), as: F.scanner, in: fixture.store)

        let accessTokens = try F.itemJSON(fixture.store, as: F.scanner, type: 2001)
        #expect(
            accessTokens.values.first == """
                {"cached_at":"1800000000","client_id":"\(Self.client)","credential_type":"AccessToken",\
                "environment":"login.microsoftonline.com","expires_on":"1800003599","extended_expires_on":"1800007199",\
                "home_account_id":"\(Self.home)","realm":"\(Self.tenant)","refresh_on":"1800001800","secret":"at-secret-1",\
                "target":"Mail.Read User.Read offline_access openid profile","token_type":"Bearer"}
                """
        )
        #expect(
            try F.itemJSON(fixture.store, as: F.scanner, type: 2002).values.first == """
                {"client_id":"\(Self.client)","credential_type":"RefreshToken","environment":"login.microsoftonline.com",\
                "home_account_id":"\(Self.home)","last_modification_time":"1800000000","secret":"rt-secret-1"}
                """
        )
        #expect(
            try F.itemJSON(fixture.store, as: F.scanner, type: 2003).values.first == """
                {"client_id":"\(Self.client)","credential_type":"IdToken","environment":"login.microsoftonline.com",\
                "home_account_id":"\(Self.home)","realm":"\(Self.tenant)","secret":"\(F.idToken)"}
                """
        )
        #expect(
            try F.itemJSON(fixture.store, as: F.scanner, type: 1003).values.first == """
                {"authority_type":"MSSTS","client_info":"\(F.clientInfo)","environment":"login.microsoftonline.com",\
                "home_account_id":"\(Self.home)","local_account_id":"5f7c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f","name":"Ada Worker",\
                "realm":"\(Self.tenant)","username":"ada@contoso.example"}
                """
        )
        #expect(
            try F.itemJSON(fixture.store, as: F.scanner, type: 3001).values.first == """
                {"client_id":"\(Self.client)","environment":"login.microsoftonline.com"}
                """
        )
    }

    @Test func cacheKeysAreLowercasedPartsJoinedByDashes() throws {
        let fixture = try F.Store()
        let record = try TokenCache().save(try F.response(), context: F.context(), as: F.scanner, in: fixture.store)
        #expect(
            record.accessToken.cacheKey
                == "\(Self.home)-login.microsoftonline.com-accesstoken-\(Self.client)-\(Self.tenant)-mail.read user.read offline_access openid profile"
        )
        #expect(record.refreshToken?.cacheKey == "\(Self.home)-login.microsoftonline.com-refreshtoken-\(Self.client)--")
        #expect(
            record.idToken?.cacheKey == "\(Self.home)-login.microsoftonline.com-idtoken-\(Self.client)-\(Self.tenant)-"
        )
        #expect(record.account?.cacheKey == "\(Self.home)-login.microsoftonline.com-\(Self.tenant)")
        #expect(record.appMetadata.cacheKey == "appmetadata-login.microsoftonline.com-\(Self.client)")
        #expect(record.familyRefreshToken == nil)
    }

    @Test func keychainItemsHaveMSALServiceAccountTypeAndGeneric() throws {
        let fixture = try F.Store()
        try TokenCache().save(try F.response(), context: F.context(), as: F.scanner, in: fixture.store)
        let items = try fixture.store.metadata(as: F.scanner)
        let account = "\(Self.home)-login.microsoftonline.com"
        // MSAL for iOS's services, each in the token cache's namespace (which no app's item can take).
        #expect(items.allSatisfy { $0.service.hasPrefix(TokenCache.serviceNamespace) }, "\(items.map(\.service))")
        let found = Set(
            items.map {
                "\($0.accessGroup) | \($0.account) | \($0.service.dropFirst(TokenCache.serviceNamespace.count)) | \($0.type ?? 0) | \($0.generic.map { String(decoding: $0, as: UTF8.self) } ?? "-")"
            }
        )
        #expect(
            found == [
                "com.microsoft.adalcache | \(account) | accesstoken-\(Self.client)-\(Self.tenant)-mail.read user.read offline_access openid profile | 2001 | accesstoken-\(Self.client)-\(Self.tenant)",
                "com.microsoft.adalcache | \(account) | refreshtoken-\(Self.client)-- | 2002 | refreshtoken-\(Self.client)-",
                "com.microsoft.adalcache | \(account) | idtoken-\(Self.client)-\(Self.tenant)- | 2003 | idtoken-\(Self.client)-\(Self.tenant)",
                "com.microsoft.adalcache | \(account) | \(Self.tenant) | 1003 | ada@contoso.example",
                "com.microsoft.adalcache | login.microsoftonline.com | appmetadata-\(Self.client) | 3001 | -",
            ]
        )
    }

    @Test func fociResponseAlsoStoresTheFamilyRefreshTokenKeyedByFamilyID() throws {
        let fixture = try F.Store()
        let record = try TokenCache().save(
            try F.response(foci: "1"),
            context: F.context(),
            as: F.scanner,
            in: fixture.store
        )
        #expect(record.familyRefreshToken?.cacheKey == "\(Self.home)-login.microsoftonline.com-refreshtoken-1--")
        #expect(
            try F.itemJSON(fixture.store, as: F.scanner, type: 2002)[TokenCache.serviceNamespace + "refreshtoken-1--"]
                == """
                {"client_id":"\(Self.client)","credential_type":"RefreshToken","environment":"login.microsoftonline.com",\
                "family_id":"1","home_account_id":"\(Self.home)","last_modification_time":"1800000000","secret":"rt-secret-1"}
                """
        )
        #expect(
            try F.itemJSON(fixture.store, as: F.scanner, type: 3001).values.first == """
                {"client_id":"\(Self.client)","environment":"login.microsoftonline.com","family_id":"1"}
                """
        )
        let metadata = try fixture.store.metadata(matching: ItemQuery(type: 3001), as: F.scanner)
        #expect(metadata.first?.generic == Data("1".utf8))
    }

    @Test func homeAccountIDWithoutClientInfoIsSubDotTid() throws {
        let fixture = try F.Store()
        let idToken = try F.jwt([
            "sub": "worker-7", "tid": "tenant-42", "oid": "object-9", "upn": "grace@kiosk.test",
            "iss": "https://sts.example/tenant-42",
        ])
        let response = TokenResponse(
            accessToken: "at",
            refreshToken: "rt",
            idToken: idToken,
            scope: "api.read",
            expiresIn: 600
        )
        let record = try TokenCache().save(response, context: F.context(), as: F.scanner, in: fixture.store)
        #expect(record.accessToken.homeAccountID == "worker-7.tenant-42")
        #expect(record.accessToken.realm == "tenant-42")
        #expect(record.account?.localAccountID == "object-9")
        #expect(record.account?.username == "grace@kiosk.test")
        #expect(record.account?.clientInfo == nil)
    }

    @Test func homeAccountIDWithoutClientInfoOrTidUsesAHashOfTheIssuer() throws {
        let fixture = try F.Store()
        // {"iss":"http://127.0.0.1:4593/api/oidc","sub":"worker-7","aud":"kiosk","name":"Grace Shift","email":"grace@kiosk.test"}
        let idToken =
            "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJpc3MiOiJodHRwOi8vMTI3LjAuMC4xOjQ1OTMvYXBpL29pZGMiLCJzdWIiOiJ3b3JrZXItNyIsImF1ZCI6Imtpb3NrIiwibmFtZSI6IkdyYWNlIFNoaWZ0IiwiZW1haWwiOiJncmFjZUBraW9zay50ZXN0In0."
        let response = TokenResponse(accessToken: "at", refreshToken: "rt", idToken: idToken, expiresIn: 600)
        let context = TokenRequestContext(
            clientID: "kiosk",
            environment: "127.0.0.1:4593",
            realm: "oidc",
            requestedScopes: ["openid", "api.read"]
        )
        let record = try TokenCache().save(response, context: context, as: F.scanner, in: fixture.store)
        #expect(record.accessToken.homeAccountID == "worker-7.dczhnqiYnVcxRcwUdvqEUc")
        #expect(record.accessToken.realm == "oidc")
        #expect(record.accessToken.target == "api.read openid")
        #expect(
            record.accessToken.cacheKey
                == "worker-7.dczhnqiynvcxrcwudvqeuc-127.0.0.1:4593-accesstoken-kiosk-oidc-api.read openid"
        )
        #expect(record.account?.localAccountID == "worker-7")
        #expect(record.account?.username == "grace@kiosk.test")
        #expect(record.account?.name == "Grace Shift")
    }

    @Test func responseNamingNoAccountIsRejectedWithoutQuotingTokens() throws {
        let fixture = try F.Store()
        let response = TokenResponse(accessToken: "secret-at-value", expiresIn: 600)
        let error = F.caughtError {
            try TokenCache().save(response, context: F.context(), as: F.scanner, in: fixture.store)
        }
        let cacheError = try #require(error as? TokenCacheError)
        #expect(cacheError.code == .invalidTokenResponse)
        #expect(!cacheError.description.contains("secret-at-value"))
        #expect(try fixture.store.metadata(as: F.scanner).isEmpty)

        let malformed = TokenResponse(accessToken: "at", idToken: "not-a-jwt-secret", expiresIn: 600)
        let jwtError = F.caughtError {
            try TokenCache().save(malformed, context: F.context(), as: F.scanner, in: fixture.store)
        }
        #expect((jwtError as? TokenCacheError)?.path == "id_token")
        #expect(!"\(jwtError!)".contains("not-a-jwt-secret"))
    }

    @Test func tokenResponseAcceptsStringDurationsAndFociAndHidesTokensInItsDescription() throws {
        let body =
            #"{"access_token":"at-hidden","token_type":"Bearer","expires_in":"3600","ext_expires_in":"7200","foci":"1","refresh_token":"rt-hidden"}"#
        let response = try TokenResponse.decode(Data(body.utf8))
        #expect(response.expiresIn == 3600)
        #expect(response.extendedExpiresIn == 7200)
        #expect(response.familyID == "1")
        #expect(!response.description.contains("hidden"))
        let missing = F.caughtError { try TokenResponse.decode(Data(#"{"token_type":"Bearer"}"#.utf8)) }
        #expect((missing as? TokenCacheError)?.path == "access_token")
    }

    @Test func idTokenClaimsAreReadWithoutVerification() throws {
        let claims = try IdTokenClaims(jwt: F.idToken)
        #expect(claims.username == "ada@contoso.example")
        #expect(claims.name == "Ada Worker")
        #expect(claims.objectID == "5f7c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f")
        #expect(claims.tenantID == Self.tenant)
        #expect(claims.subject == "Ab3dEf9hIj")
    }
}
