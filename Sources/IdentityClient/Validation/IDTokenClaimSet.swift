import Foundation
import JWTKit

/// The claims of an ID token that validation reads (OpenID Connect Core 1.0 §2, plus Microsoft's `tid`,
/// `oid` and `preferred_username`), decoded leniently: every claim is optional here, and the validator
/// says which required one is missing. `aud` may be a string or an array; times may be integers or decimals.
struct IDTokenClaimSet: JWTPayload {
    var iss: String?
    var sub: String?
    var aud: [String]?
    var azp: String?
    var exp: Double?
    var iat: Double?
    var nbf: Double?
    var nonce: String?
    var tid: String?
    var oid: String?
    var preferredUsername: String?
    var name: String?
    var email: String?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, azp, exp, iat, nbf, nonce, tid, oid, name, email
        case preferredUsername = "preferred_username"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        iss = try container.decodeIfPresent(String.self, forKey: .iss)
        sub = try container.decodeIfPresent(String.self, forKey: .sub)
        if let single = try? container.decodeIfPresent(String.self, forKey: .aud) {
            aud = [single]
        } else {
            aud = try container.decodeIfPresent([String].self, forKey: .aud)
        }
        azp = try container.decodeIfPresent(String.self, forKey: .azp)
        exp = try container.decodeIfPresent(Double.self, forKey: .exp)
        iat = try container.decodeIfPresent(Double.self, forKey: .iat)
        nbf = try container.decodeIfPresent(Double.self, forKey: .nbf)
        nonce = try container.decodeIfPresent(String.self, forKey: .nonce)
        tid = try container.decodeIfPresent(String.self, forKey: .tid)
        oid = try container.decodeIfPresent(String.self, forKey: .oid)
        preferredUsername = try container.decodeIfPresent(String.self, forKey: .preferredUsername)
        name = try container.decodeIfPresent(String.self, forKey: .name)
        email = try container.decodeIfPresent(String.self, forKey: .email)
    }

    /// Claims are checked by `IDTokenValidator` against the injected clock, not by jwt-kit.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
