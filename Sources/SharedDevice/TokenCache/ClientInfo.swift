import Foundation
import IdentityClient

/// The Microsoft identity platform's `client_info` response field: base64url JSON whose `uid` and
/// `utid` (user id and home tenant id) make MSAL's `home_account_id` `<uid>.<utid>`.
struct ClientInfo: Equatable {
    var uid: String
    var utid: String

    var homeAccountID: String { "\(uid).\(utid)" }

    /// - Throws: `invalidTokenResponse` if the value is not base64url JSON with string `uid` and `utid`.
    init(_ raw: String) throws(TokenCacheError) {
        guard let data = Base64URL.decode(raw), let object = CacheJSON.object(data),
            case .string(let uid)? = object["uid"], case .string(let utid)? = object["utid"], !uid.isEmpty,
            !utid.isEmpty
        else {
            throw TokenCacheError(
                .invalidTokenResponse,
                "client_info is not base64url JSON with uid and utid",
                path: "client_info"
            )
        }
        self.uid = uid
        self.utid = utid
    }
}
