import Foundation
import KeychainStore
import SharedDevice
import Testing

/// Export and import of MSAL's unified-cache JSON.
struct TokenCacheExportTests {
    typealias F = CacheFixture
    let cache = TokenCache()

    /// A cache as another MSAL library writes it (after MSAL Python's test cache), with fields and a
    /// section this library does not know.
    static let foreignDocument = #"""
        {
            "AccessToken": {
                "uid.utid-login.windows.net-accesstoken-my_client_id-contoso-s2 s1 s3": {
                    "cached_at": "1800000000",
                    "client_id": "my_client_id",
                    "credential_type": "AccessToken",
                    "environment": "login.windows.net",
                    "expires_on": "1900000000",
                    "extended_expires_on": "1900003600",
                    "home_account_id": "uid.utid",
                    "key_id": "pop-key",
                    "realm": "contoso",
                    "secret": "an access token",
                    "target": "s2 s1 s3",
                    "token_type": "Bearer",
                    "x_future_field": {"nested": [1, 2.5, true, null, "text"]}
                }
            },
            "Account": {
                "uid.utid-login.windows.net-contoso": {
                    "account_source": "device_code",
                    "authority_type": "MSSTS",
                    "environment": "login.windows.net",
                    "home_account_id": "uid.utid",
                    "local_account_id": "object1234",
                    "realm": "contoso",
                    "username": "John Doe"
                }
            },
            "AppMetadata": {
                "appmetadata-login.windows.net-my_client_id": {
                    "client_id": "my_client_id",
                    "environment": "login.windows.net",
                    "family_id": "",
                    "x_unknown": 7
                }
            },
            "IdToken": {
                "uid.utid-login.windows.net-idtoken-my_client_id-contoso-": {
                    "client_id": "my_client_id",
                    "credential_type": "IdToken",
                    "environment": "login.windows.net",
                    "home_account_id": "uid.utid",
                    "realm": "contoso",
                    "secret": "header.eyJvaWQiOiAib2JqZWN0MTIzNCIsICJwcmVmZXJyZWRfdXNlcm5hbWUiOiAiSm9obiBEb2UiLCAic3ViIjogInN1YiJ9.signature"
                }
            },
            "RefreshToken": {
                "uid.utid-login.windows.net-refreshtoken-my_client_id--": {
                    "client_id": "my_client_id",
                    "credential_type": "RefreshToken",
                    "environment": "login.windows.net",
                    "home_account_id": "uid.utid",
                    "last_modification_time": "1800000000",
                    "secret": "a refresh token",
                    "target": "s2 s1 s3"
                }
            },
            "x_top_level": {}
        }
        """#

    @Test func exportImportExportIsByteForByteIdentical() throws {
        let first = try F.Store()
        try cache.save(try F.response(foci: "1"), context: F.context(), as: F.scanner, in: first.store)
        let exported = try cache.exportJSON(as: F.scanner, in: first.store)

        let second = try F.Store()
        #expect(try cache.importJSON(exported, as: F.scanner, in: second.store) == 6)
        #expect(try cache.exportJSON(as: F.scanner, in: second.store) == exported)
        #expect(try cache.exportJSON(as: F.scanner, in: first.store) == exported)
    }

    @Test func exportedDocumentHasMSALSectionsKeysAndStringTimes() throws {
        let fixture = try F.Store()
        let response = TokenResponse(
            accessToken: "at",
            refreshToken: "rt",
            clientInfo: F.clientInfo,
            scope: "b a",
            expiresIn: 60,
            extendedExpiresIn: 120
        )
        try cache.save(response, context: F.context(), as: F.scanner, in: fixture.store)
        let home = F.homeAccountID
        let text = String(decoding: try cache.exportJSON(as: F.scanner, in: fixture.store), as: UTF8.self)
        #expect(
            text == """
                {
                    "AccessToken": {
                        "\(home)-login.microsoftonline.com-accesstoken-\(F.clientID)-organizations-a b": {
                            "cached_at": "1800000000",
                            "client_id": "\(F.clientID)",
                            "credential_type": "AccessToken",
                            "environment": "login.microsoftonline.com",
                            "expires_on": "1800000060",
                            "extended_expires_on": "1800000120",
                            "home_account_id": "\(home)",
                            "realm": "organizations",
                            "secret": "at",
                            "target": "a b",
                            "token_type": "Bearer"
                        }
                    },
                    "Account": {
                        "\(home)-login.microsoftonline.com-organizations": {
                            "authority_type": "MSSTS",
                            "client_info": "\(F.clientInfo)",
                            "environment": "login.microsoftonline.com",
                            "home_account_id": "\(home)",
                            "local_account_id": "\(F.uid)",
                            "realm": "organizations",
                            "username": ""
                        }
                    },
                    "AppMetadata": {
                        "appmetadata-login.microsoftonline.com-\(F.clientID)": {
                            "client_id": "\(F.clientID)",
                            "environment": "login.microsoftonline.com"
                        }
                    },
                    "IdToken": {},
                    "RefreshToken": {
                        "\(home)-login.microsoftonline.com-refreshtoken-\(F.clientID)--": {
                            "client_id": "\(F.clientID)",
                            "credential_type": "RefreshToken",
                            "environment": "login.microsoftonline.com",
                            "home_account_id": "\(home)",
                            "last_modification_time": "1800000000",
                            "secret": "rt"
                        }
                    }
                }

                """
        )
    }

    @Test func unknownKeysSurviveImportAndExport() throws {
        let document = Data(Self.foreignDocument.utf8)
        let fixture = try F.Store()
        #expect(try cache.importJSON(document, as: F.scanner, in: fixture.store) == 5)
        let exported = try #require(
            try JSONSerialization.jsonObject(with: try cache.exportJSON(as: F.scanner, in: fixture.store))
                as? [String: Any]
        )
        let original = try #require(try JSONSerialization.jsonObject(with: document) as? [String: Any])
        for section in ["AccessToken", "RefreshToken", "IdToken", "Account", "AppMetadata"] {
            #expect(
                NSDictionary(dictionary: exported[section] as! [String: Any])
                    == NSDictionary(dictionary: original[section] as! [String: Any]),
                "section \(section)"
            )
        }
        // The imported tokens are usable.
        let token = try cache.accessToken(
            homeAccountID: "uid.utid",
            environment: "login.windows.net",
            clientID: "my_client_id",
            realm: "contoso",
            scopes: ["s1"],
            as: F.scanner,
            in: fixture.store
        )
        #expect(token?.secret == "an access token")
    }

    @Test func importRejectsAMalformedEntryWithItsPathAndWritesNothing() throws {
        let fixture = try F.Store()
        let document = #"""
            {"AppMetadata": {"appmetadata-env-c": {"client_id": "c", "environment": "env"}},
             "AccessToken": {"k": {"credential_type": "AccessToken", "secret": "top-secret", "home_account_id": "h",
                                   "environment": "e", "client_id": "c", "realm": "r", "target": "s", "cached_at": "1",
                                   "expires_on": true}}}
            """#
        let error = F.caughtError { try cache.importJSON(Data(document.utf8), as: F.scanner, in: fixture.store) }
        let cacheError = try #require(error as? TokenCacheError)
        #expect(cacheError.code == .invalidCacheDocument)
        #expect(cacheError.path == #"AccessToken["k"].expires_on"#)
        #expect(!cacheError.description.contains("top-secret"))
        #expect(try fixture.store.metadata(as: F.scanner).isEmpty)

        let notJSON = F.caughtError { try cache.importJSON(Data("[]".utf8), as: F.scanner, in: fixture.store) }
        #expect((notJSON as? TokenCacheError)?.code == .invalidCacheDocument)
    }
}
