import Foundation
import MSALBridge
import Testing

/// The bridge's half of Microsoft's broker protocol: what it reads of MSALRuntime's requests and the JSON
/// it answers with (the shapes stock MSAL Python 1.39.0 with pymsalruntime 0.20.7 accepts).
@Suite struct BrokerProtocolMessagesTests {
    static func object(_ json: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
    }

    // MARK: - Account identifiers

    @Test func microsoftHomeAccountIDsPassThroughAndOthersBecomeStableVersion8GUIDs() throws {
        let microsoft = MSALAccountIdentifiers(
            homeAccountID: "6F1B5A52-0C9E-4E8C-9D2B-1A2B3C4D5E6F.72F988BF-86F1-41AF-91AB-2D7CD011DB47"
        )
        #expect(microsoft.homeAccountID == "6f1b5a52-0c9e-4e8c-9d2b-1a2b3c4d5e6f.72f988bf-86f1-41af-91ab-2d7cd011db47")

        // glewlwyd's: `<sub>.<issuer tag>`.
        let local = MSALAccountIdentifiers(homeAccountID: "Py6UBfjySoyraa8JNvSg0MVZBPbAkfsv.dczhnqiYnVcxRcwUdvqEUc")
        for part in [local.uid, local.utid] {
            let uuid = try #require(
                UUID(uuidString: part),
                "\(part) is not a GUID (MSALRuntime refuses the account then)"
            )
            #expect(uuid.uuidString.lowercased() == part)
            let bytes = withUnsafeBytes(of: uuid.uuid) { Array($0) }
            #expect(bytes[6] >> 4 == 8 && bytes[8] >> 6 == 0b10, "not an RFC 9562 version 8 UUID: \(part)")
        }
        #expect(
            local == MSALAccountIdentifiers(homeAccountID: "Py6UBfjySoyraa8JNvSg0MVZBPbAkfsv.dczhnqiYnVcxRcwUdvqEUc")
        )
        // Another user of the same issuer: another uid, the same tenant.
        let other = MSALAccountIdentifiers(homeAccountID: "Qz7VCgkzTpzsbb9KOwTh1NWaCQcBlgtw.dczhnqiYnVcxRcwUdvqEUc")
        #expect(other.uid != local.uid && other.utid == local.utid)
    }

    @Test func clientInfoIsBase64URLOfTheUIDAndUTID() throws {
        let identifiers = MSALAccountIdentifiers(homeAccountID: "worker-one.tenant-one")
        #expect(
            !identifiers.clientInfo.contains("=") && !identifiers.clientInfo.contains("+")
                && !identifiers.clientInfo.contains("/")
        )
        var base64 = identifiers.clientInfo.replacingOccurrences(of: "-", with: "+").replacingOccurrences(
            of: "_",
            with: "/"
        )
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        let decoded = try Self.object(String(decoding: try #require(Data(base64Encoded: base64)), as: UTF8.self))
        #expect(decoded["uid"] as? String == identifiers.uid && decoded["utid"] as? String == identifiers.utid)
    }

    // MARK: - Requests

    @Test func aTokenRequestGivesItsClientScopesAndAccount() throws {
        let signIn = try BrokerProtocolMessages.tokenRequest(
            """
            {"authParameters":{"account":null,"authority":"https://login.microsoftonline.com/organizations","clientId":"cid-1",
             "requestedScopes":["https://graph.microsoft.com/User.Read"],"isSignIn":true}}
            """
        )
        #expect(
            signIn
                == BrokerTokenRequest(
                    clientID: "cid-1",
                    scopes: ["https://graph.microsoft.com/User.Read"],
                    homeAccountID: nil,
                    authorityHost: "login.microsoftonline.com"
                )
        )
        let held = try BrokerProtocolMessages.tokenRequest(
            #"{"authParameters":{"clientId":"cid-1","requestedScopes":[],"account":{"homeAccountId":"a.b"}}}"#
        )
        #expect(held.homeAccountID == "a.b")
    }

    @Test func unreadableRequestsAreRefusedWithAReason() throws {
        for (request, reason) in [
            ("[]", "not a JSON object"), ("{}", "no authParameters"),
            (#"{"authParameters":{"requestedScopes":[]}}"#, "no clientId"),
            (#"{"authParameters":{"clientId":"c","requestedScopes":[""]}}"#, "requestedScopes"),
            (String(repeating: " ", count: BrokerProtocolMessages.maximumRequestBytes + 1), "over 256 KiB"),
        ] {
            #expect { try BrokerProtocolMessages.tokenRequest(request) } throws: { error in
                (error as? BrokerProtocolRequestError)?.message.contains(reason) == true
            }
        }
        #expect(throws: BrokerProtocolRequestError.self) {
            try BrokerProtocolMessages.accountsRequestClientID(#"{"redirectUri":"x"}"#)
        }
        #expect(try BrokerProtocolMessages.accountsRequestClientID(#"{"clientId":"cid","redirectUri":"cid"}"#) == "cid")
    }

    // MARK: - Replies

    @Test func aTokenReplyNeverLivesMoreThan290SecondsAndIsInMilliseconds() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let identifiers = MSALAccountIdentifiers(homeAccountID: "u.t")
        let long = try Self.object(
            BrokerProtocolMessages.tokenReply(
                accessToken: "AT",
                expiresOn: now.addingTimeInterval(3600),
                scopes: ["User.Read", "Files.Read"],
                idToken: "h.c.s",
                account: identifiers,
                now: now
            )
        )
        let response = try #require(long["brokerTokenResponse"] as? [String: Any])
        #expect(
            response["expiresOn"] as? Int64 == 1_800_000_290_000
                && response["extendedExpiresOn"] as? Int64 == 1_800_000_290_000
        )
        #expect(
            response["accessToken"] as? String == "AT" && response["accessTokenType"] as? Int == 0
                && response["idToken"] as? String == "h.c.s"
        )
        #expect(
            response["clientInfo"] as? String == identifiers.clientInfo
                && response["grantedScopes"] as? String == "User.Read Files.Read"
        )
        // A token that expires sooner keeps its own time; one without a time gets the cap.
        let short = try Self.object(
            BrokerProtocolMessages.tokenReply(
                accessToken: "AT",
                expiresOn: now.addingTimeInterval(100),
                scopes: [],
                idToken: "h.c.s",
                account: identifiers,
                now: now
            )
        )
        #expect((short["brokerTokenResponse"] as? [String: Any])?["expiresOn"] as? Int64 == 1_800_000_100_000)
        let unknown = try Self.object(
            BrokerProtocolMessages.tokenReply(
                accessToken: "AT",
                expiresOn: nil,
                scopes: [],
                idToken: "h.c.s",
                account: identifiers,
                now: now
            )
        )
        #expect((unknown["brokerTokenResponse"] as? [String: Any])?["expiresOn"] as? Int64 == 1_800_000_290_000)
    }

    @Test func anErrorReplyCarriesEveryFieldMSALRuntimeRequires() throws {
        let reply = try Self.object(BrokerProtocolMessages.errorReply(.interactionRequired, "nobody is signed in"))
        let error = try #require((reply["brokerTokenResponse"] as? [String: Any])?["error"] as? [String: Any])
        // Without `errorCode` or `tag` pymsalruntime rejects the reply.
        #expect(
            error["status"] as? Int == 2 && error["errorCode"] as? Int == 0 && error["tag"] as? Int == 0
                && error["subStatus"] as? Int == 0
        )
        #expect(error["context"] as? String == "nobody is signed in")
    }

    @Test func thePreferredUsernameIsReadFromTheIDToken() {
        func jwt(_ claims: String) -> String {
            let payload = Data(claims.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            return "eyJhbGciOiJSUzI1NiJ9.\(payload).c2ln"
        }
        #expect(
            BrokerProtocolMessages.preferredUsername(ofIDToken: jwt(#"{"sub":"s","preferred_username":"worker1"}"#))
                == "worker1"
        )
        #expect(BrokerProtocolMessages.preferredUsername(ofIDToken: jwt(#"{"sub":"s"}"#)) == nil)
        #expect(BrokerProtocolMessages.preferredUsername(ofIDToken: "not-a-jwt") == nil)
    }
}
