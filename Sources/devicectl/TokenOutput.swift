import Foundation
import SharedDevice

/// An authentication result as `devicectl` prints it: no token unless asked.
struct TokenJSON: Encodable {
    var account: DeviceAccount
    var scopes: [String]
    var expiresOn: Date?
    var source: String
    var correlationId: String
    var accessToken: String?

    init(_ result: AuthenticationResult, includeSecret: Bool) {
        account = result.account
        scopes = result.scopes
        expiresOn = result.expiresOn
        source = result.source.rawValue
        correlationId = result.correlationID
        accessToken = includeSecret ? result.accessToken : nil
    }
}

enum TokenText {
    static func lines(_ result: AuthenticationResult, printSecret: Bool) -> String {
        var text = "account: \(AccountText.line(result.account))\nscopes: \(result.scopes.joined(separator: " "))"
        if let expiresOn = result.expiresOn {
            let minutes = Int(expiresOn.timeIntervalSinceNow / 60)
            text += "\nexpires: \(ISO8601DateFormatter().string(from: expiresOn)) (in \(minutes) min)"
        }
        text += "\nsource: \(result.source.rawValue)"
        if printSecret { text += "\naccess token: \(result.accessToken)" }
        return text
    }
}
