public import Foundation

/// A started device authorization (RFC 8628 §3.2): what to show the user while the app polls.
///
/// `description` never shows the device code.
public struct DeviceCodeSession: Sendable, CustomStringConvertible {
    /// The code the user enters (`user_code`).
    public let userCode: String
    /// Where the user enters it (`verification_uri`).
    public let verificationURI: URL
    /// The same page with the code filled in (`verification_uri_complete`), when offered.
    public let verificationURIComplete: URL?
    /// When the device code stops working.
    public let expiresAt: Date
    /// Seconds between polls the server asked for (`interval`, default 5).
    public let interval: TimeInterval
    /// The server's own instruction text (`message`, Microsoft), when it sent one.
    public let serverMessage: String?
    /// The scopes asked for.
    public let scopes: [String]
    /// `device_code`: the secret the app polls with.
    let deviceCode: String

    /// A session to show whose polling happens elsewhere (a broker daemon polls; the app only shows the
    /// code). It holds no device code.
    public init(
        userCode: String,
        verificationURI: URL,
        verificationURIComplete: URL?,
        expiresAt: Date,
        interval: TimeInterval = 5,
        serverMessage: String?,
        scopes: [String]
    ) {
        self.init(
            userCode: userCode,
            verificationURI: verificationURI,
            verificationURIComplete: verificationURIComplete,
            expiresAt: expiresAt,
            interval: interval,
            serverMessage: serverMessage,
            scopes: scopes,
            deviceCode: ""
        )
    }

    init(
        userCode: String,
        verificationURI: URL,
        verificationURIComplete: URL?,
        expiresAt: Date,
        interval: TimeInterval,
        serverMessage: String?,
        scopes: [String],
        deviceCode: String
    ) {
        self.userCode = userCode
        self.verificationURI = verificationURI
        self.verificationURIComplete = verificationURIComplete
        self.expiresAt = expiresAt
        self.interval = interval
        self.serverMessage = serverMessage
        self.scopes = scopes
        self.deviceCode = deviceCode
    }

    /// "To sign in, open URL and enter the code CODE" (MSAL's wording).
    public var message: String {
        "To sign in, open \(verificationURI.absoluteString) and enter the code \(userCode)"
    }

    public var description: String { message }
}

/// Where a device-code sign-in stands while the app waits.
public struct DeviceCodeProgress: Sendable {
    /// Seconds until the code expires.
    public var secondsLeft: Int
    /// Polls made so far.
    public var polls: Int
    /// Seconds between polls now (grows on `slow_down`).
    public var interval: TimeInterval
}
