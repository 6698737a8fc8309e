import Crypto
import Foundation
import Logging

/// Values the flows put in log metadata, built so that no token, code, verifier or secret can slip in.
enum LogFields {
    /// The first 16 hex digits of SHA-256(`text`): tells log lines about the same user apart without
    /// naming the user (an ID token's `sub`).
    static func fingerprint(_ text: String) -> Logger.MetadataValue {
        .string(SHA256.hash(data: Data(text.utf8)).prefix(8).map { String(format: "%02x", $0) }.joined())
    }

    /// Scopes, space-joined.
    static func scopes(_ scopes: [String]) -> Logger.MetadataValue {
        .string(scopes.joined(separator: " "))
    }

    /// `scheme://host[:port]/path` of an endpoint: never its query, which may carry codes or hints.
    static func endpoint(_ url: URL) -> Logger.MetadataValue {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        components?.query = nil
        components?.fragment = nil
        components?.user = nil
        components?.password = nil
        return .string(components?.string ?? url.path)
    }

    /// What went wrong, without the message (a server's description or a user code may be in it).
    static func failure(_ error: IdentityError) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["error.code": .string(error.code.rawValue)]
        if let oauthError = error.oauthError { metadata["oauth.error"] = .string(oauthError) }
        if let status = error.httpStatus { metadata["http.status"] = .stringConvertible(status) }
        return metadata
    }
}
