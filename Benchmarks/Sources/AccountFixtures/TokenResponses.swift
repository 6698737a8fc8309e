import Foundation
public import SharedDevice

/// Token responses as an identity provider returns them, built locally (unsigned ID token: the account
/// manager reads its claims; validation is the token benchmarks' business).
public enum TokenResponses {
    /// A response for `worker` with `scope` as its scopes.
    public static func response(worker: Int, scope: String) throws -> TokenResponse {
        let idToken =
            base64URL(["alg": "none"]) + "."
            + base64URL([
                "iss": "http://127.0.0.1:4593/api/oidc", "sub": "w\(worker)", "oid": "w\(worker)", "tid": "contoso",
                "preferred_username": "worker\(worker)@contoso.com", "name": "Worker \(worker)", "aud": "kiosk-apps",
            ]) + "."
        let json: [String: Any] = [
            "access_token": "at-\(worker)-\(scope)", "refresh_token": "rt-\(worker)", "id_token": idToken,
            "client_info": base64URL(["uid": "w\(worker)", "utid": "contoso"]), "scope": scope, "token_type": "Bearer",
            "expires_in": 3600, "ext_expires_in": 3600,
        ]
        return try TokenResponse.decode(JSONSerialization.data(withJSONObject: json))
    }

    private static func base64URL(_ object: [String: Any]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(
            of: "/",
            with: "_"
        )
        .replacingOccurrences(of: "=", with: "")
    }
}
