public import Foundation

/// The status numbers of MSALRuntime (`pymsalruntime.Response_Status`) the bridge answers with: the four
/// that every MSAL maps to the same meaning.
public enum BrokerProtocolStatus: Int, Sendable {
    /// Sign in interactively (MSAL then calls `acquireTokenInteractively`).
    case interactionRequired = 2
    /// Try again later: the broker or the identity provider cannot be reached.
    case serverTemporarilyUnavailable = 5
    /// The sign-in was canceled, declined or took too long.
    case userCanceled = 7
    /// The account cannot be used here (the app or its client id is not in the device policy, …).
    case accountUnusable = 13
}

/// What a token request (`acquireTokenSilently`, `acquireTokenInteractively`) asks for: its
/// `authParameters`, of which the bridge reads these.
public struct BrokerTokenRequest: Sendable, Equatable {
    /// The MSAL app's client id.
    public var clientID: String
    /// `requestedScopes`.
    public var scopes: [String]
    /// `account.homeAccountId`: the account the app holds; nil to sign in (MSAL's `account: null`).
    public var homeAccountID: String?
    /// The host of `authority` (the environment MSAL files the account under); nil when absent.
    public var authorityHost: String?

    public init(clientID: String, scopes: [String], homeAccountID: String?, authorityHost: String?) {
        self.clientID = clientID
        self.scopes = scopes
        self.homeAccountID = homeAccountID
        self.authorityHost = authorityHost
    }
}

/// A request MSALRuntime sent that the bridge cannot read.
public struct BrokerProtocolRequestError: Error, Sendable, Equatable {
    public let message: String
}

/// Reading MSALRuntime's JSON requests and writing its JSON replies (`brokerTokenResponse`, `accounts`).
public enum BrokerProtocolMessages {
    /// The largest request the bridge reads (MSALRuntime's are under 4 KiB).
    public static let maximumRequestBytes = 256 * 1024
    /// The longest an answered token lives for the app: every MSAL asks the broker again when a token has
    /// less than 300 s left, so a token at most 290 s ahead is never used without asking (the shift change).
    public static let maximumTokenLifetime: TimeInterval = 290

    /// The `clientId` of a `getAccounts` request.
    public static func accountsRequestClientID(_ json: String) throws(BrokerProtocolRequestError) -> String {
        let object = try Self.object(json)
        guard let clientID = object["clientId"] as? String, !clientID.isEmpty else {
            throw BrokerProtocolRequestError(message: "the getAccounts request names no clientId")
        }
        return clientID
    }

    /// The `authParameters` of a token request.
    public static func tokenRequest(_ json: String) throws(BrokerProtocolRequestError) -> BrokerTokenRequest {
        let object = try Self.object(json)
        guard let parameters = object["authParameters"] as? [String: Any] else {
            throw BrokerProtocolRequestError(message: "the request has no authParameters object")
        }
        guard let clientID = parameters["clientId"] as? String, !clientID.isEmpty else {
            throw BrokerProtocolRequestError(message: "the request's authParameters name no clientId")
        }
        let scopes = parameters["requestedScopes"] as? [String] ?? []
        guard scopes.count <= 64, scopes.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 1024 }) else {
            throw BrokerProtocolRequestError(
                message: "the request's requestedScopes are not a list of at most 64 scopes"
            )
        }
        let account = parameters["account"] as? [String: Any]
        let homeAccountID = (account?["homeAccountId"] as? String).flatMap { $0.isEmpty ? nil : $0 }
        let authorityHost = (parameters["authority"] as? String).flatMap { URL(string: $0)?.host }
        return BrokerTokenRequest(
            clientID: clientID,
            scopes: scopes,
            homeAccountID: homeAccountID,
            authorityHost: authorityHost
        )
    }

    /// A token reply: `expiresOn` is at most `maximumTokenLifetime` after `now` (epoch milliseconds).
    public static func tokenReply(
        accessToken: String,
        expiresOn: Date?,
        scopes: [String],
        idToken: String,
        account: MSALAccountIdentifiers,
        now: Date
    ) -> String {
        let latest = now.addingTimeInterval(maximumTokenLifetime)
        let expires = min(expiresOn ?? latest, latest)
        let milliseconds = Int64((expires.timeIntervalSince1970 * 1000).rounded(.down))
        var response: [String: Any] = [
            "accessToken": accessToken, "accessTokenType": 0, "expiresOn": milliseconds,
            "extendedExpiresOn": milliseconds,
            "idToken": idToken, "clientInfo": account.clientInfo,
        ]
        if !scopes.isEmpty { response["grantedScopes"] = scopes.joined(separator: " ") }
        return serialize(["brokerTokenResponse": response])
    }

    /// An error reply MSALRuntime understands (a D-Bus error would break the client): `context` tells
    /// the app's developer what happened and what to do; it never holds a secret.
    public static func errorReply(_ status: BrokerProtocolStatus, _ context: String) -> String {
        serialize([
            "brokerTokenResponse": [
                "error": ["status": status.rawValue, "subStatus": 0, "errorCode": 0, "tag": 0, "context": context]
            ]
        ])
    }

    /// A `getAccounts` reply.
    public static func accountsReply(_ accounts: [[String: Any]]) -> String {
        serialize(["accounts": accounts])
    }

    /// MSAL's account object for the broker's account.
    public static func account(
        _ identifiers: MSALAccountIdentifiers,
        environment: String,
        username: String?,
        name: String?
    ) -> [String: Any] {
        [
            "homeAccountId": identifiers.homeAccountID, "environment": environment, "realm": identifiers.utid,
            "localAccountId": identifiers.uid, "clientInfo": identifiers.clientInfo, "username": username ?? "",
            "name": name ?? "",
            "givenName": "", "familyName": "", "middleName": "", "alternativeAccountId": "",
            "homeEnvironment": environment,
            "passwordChangeUrl": "", "passwordExpiry": 0,
        ]
    }

    /// The `preferred_username` claim of an ID token (read, not verified: the broker validated the token
    /// when the worker signed in), or nil when it has none.
    public static func preferredUsername(ofIDToken jwt: String) -> String? {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64),
            let claims = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let username = claims["preferred_username"] as? String, !username.isEmpty
        else { return nil }
        return username
    }

    private static func object(_ json: String) throws(BrokerProtocolRequestError) -> [String: Any] {
        guard json.utf8.count <= maximumRequestBytes else {
            throw BrokerProtocolRequestError(message: "the request is over \(maximumRequestBytes / 1024) KiB")
        }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any] else {
            throw BrokerProtocolRequestError(message: "the request is not a JSON object")
        }
        return object
    }

    private static func serialize(_ object: [String: Any]) -> String {
        // Every value put in is a string, a number, a list or an object: serialization cannot fail.
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: object,
                options: [.sortedKeys, .withoutEscapingSlashes]
            )
        else {
            return
                #"{"brokerTokenResponse":{"error":{"status":13,"subStatus":0,"errorCode":0,"tag":0,"context":"the bridge could not write its reply"}}}"#
        }
        return String(decoding: data, as: UTF8.self)
    }
}
