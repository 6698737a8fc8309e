import Crypto
import Foundation

/// The identifiers MSALRuntime needs of an account, made from the broker's home account id.
///
/// MSALRuntime (pymsalruntime and every MSAL that uses it) accepts an account only when both parts of
/// its `client_info` — `uid` (the user) and `utid` (the tenant) — are GUIDs; with another `utid` it goes
/// to the network to discover the tenant itself. Microsoft's home account ids (`<oid>.<tid>`) are GUIDs
/// already and pass through unchanged. Another provider's (`<sub>.<tenant or issuer tag>`) become
/// name-based UUIDs: the first 16 bytes of SHA-256 of the part, as an RFC 9562 version 8 UUID, so the
/// same account always gets the same ids and two accounts never share them.
public struct MSALAccountIdentifiers: Sendable, Hashable {
    /// The user's GUID (`uid`, also MSAL's local account id).
    public let uid: String
    /// The tenant's GUID (`utid`, MSAL's realm).
    public let utid: String

    /// The identifiers of the broker's account `homeAccountID` (`<user>.<tenant>`; without a dot the
    /// tenant part is empty).
    public init(homeAccountID: String) {
        let user: Substring
        let tenant: Substring
        if let dot = homeAccountID.lastIndex(of: ".") {
            (user, tenant) = (homeAccountID[..<dot], homeAccountID[homeAccountID.index(after: dot)...])
        } else {
            (user, tenant) = (Substring(homeAccountID), "")
        }
        uid = Self.guid(String(user))
        utid = Self.guid(String(tenant))
    }

    /// MSAL's home account id: `<uid>.<utid>`.
    public var homeAccountID: String { "\(uid).\(utid)" }

    /// MSAL's `client_info`: base64url (no padding) of `{"uid":"…","utid":"…"}`.
    public var clientInfo: String {
        let json = #"{"uid":"\#(uid)","utid":"\#(utid)"}"#
        return Data(json.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(
                of: "=",
                with: ""
            )
    }

    /// `part` in lowercase when it is a GUID, else the name-based UUID of it.
    static func guid(_ part: String) -> String {
        if let uuid = UUID(uuidString: part) { return uuid.uuidString.lowercased() }
        var bytes = Array(SHA256.hash(data: Data(part.utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80  // version 8: custom (RFC 9562 § 5.8)
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // variant 10
        let uuid = UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            )
        )
        return uuid.uuidString.lowercased()
    }
}
