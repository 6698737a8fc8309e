public import Foundation

// What a worker writes and what its test expects to find, defined once for both sides.

/// The deterministic secrets of `keychain-worker` (Tests/Workers/keychain-worker), so the test can check
/// every byte of every item a worker acknowledged.
public enum KeychainWorkerFixture {
    /// `length` pseudo-random bytes from a splitmix64 stream seeded by `tag` and `index`.
    public static func secretBytes(tag: UInt64, index: Int, length: Int) -> Data {
        var state = tag &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(truncatingIfNeeded: index) &* 0xD1B5_4A32_D192_ED03
        var bytes = [UInt8]()
        bytes.reserveCapacity(length + 8)
        while bytes.count < length {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            withUnsafeBytes(of: z.littleEndian) { bytes.append(contentsOf: $0) }
        }
        return Data(bytes.prefix(length))
    }

    /// The secret of item `index` of mixed worker `worker`: 16–271 bytes.
    public static func mixedSecret(worker: Int, index: Int) -> Data {
        secretBytes(tag: UInt64(worker) + 1, index: index, length: 16 + index % 256)
    }

    /// The secret of writer item `index`: 1–4 KB, so commits take a little time.
    public static func writerSecret(index: Int) -> Data {
        secretBytes(tag: 0xC0FFEE, index: index, length: 1024 + (index &* 7919) % 3072)
    }

    /// The account name of item `index` (`item-<index>`).
    public static func account(_ index: Int) -> String { "item-\(index)" }

    /// The `index` of an account named `item-<index>`.
    public static func itemIndex(_ account: String) -> Int? {
        guard account.hasPrefix("item-") else { return nil }
        return Int(account.dropFirst(5))
    }
}

/// The fill items of `device-worker` (Tests/Workers/device-worker).
public enum DeviceWorkerFixture {
    /// The secret of fill item `index` in `group`: the text `<group>/item-<index>;` repeated to 512–1535 bytes.
    public static func fillSecret(group: String, index: Int) -> Data {
        let unit = "\(group)/item-\(index);"
        let length = 512 + (index &* 37) % 1024
        let text = String(repeating: unit, count: length / unit.utf8.count + 1)
        return Data(text.utf8.prefix(length))
    }
}

/// The kiosk `account-worker` (Tests/Workers/account-worker) plays: its apps, its identity provider and
/// the one worker who signs in, as policies/kiosk.json and the account manager's tests name them.
public enum AccountWorkerFixture {
    /// The scanner app; its tokens go to the shared MSAL group, its fill tokens to its own group too.
    public static let scannerID = "com.contoso.kiosk.scanner"
    /// The timeclock app; its tokens go to its own group.
    public static let timeclockID = "com.contoso.kiosk.timeclock"
    /// The scanner's own access group.
    public static let scannerGroup = "com.contoso.kiosk.scanner"
    /// The timeclock's own access group.
    public static let timeclockGroup = "com.contoso.kiosk.timeclock"
    /// The kiosk policy's client id.
    public static let clientID = "kiosk-apps"
    /// The kiosk policy's environment: its issuer's host and port.
    public static let environment = "127.0.0.1:4593"
    /// The workers' tenant (`utid` in `client_info`, `tid` in the ID token).
    public static let tenant = "c0ffee00-1234-4abc-9def-0123456789ab"
    /// The scopes of a sign-in response.
    public static let signInScopes = ["openid", "profile", "offline_access", "User.Read"]
    /// The object id (`oid`, `uid`) of the worker who signs in, Jo.
    public static let workerUID = "3f2a9c1b-5d4e-4f60-8a7b-1c2d3e4f5a6b"
    /// Jo's `preferred_username`.
    public static let workerUsername = "jo.worker@contoso.example"
    /// Jo's display name.
    public static let workerName = "Jo Worker"
    /// Jo's MSAL home account id (`<uid>.<utid>`).
    public static var homeAccountID: String { "\(workerUID).\(tenant)" }

    /// The scope of fill token `index` (`api://kiosk/resource-<index>.read`).
    public static func fillScope(_ index: Int) -> String { "api://kiosk/resource-\(index).read" }

    /// The access-token secret the worker's app `app` (`scanner`, `timeclock`) receives at sign-in.
    public static func signInAccessToken(app: String) -> String { "at-\(app)" }

    /// The secret of fill token `index` in `group`.
    public static func fillAccessToken(group: String, index: Int) -> String { "at-fill-\(group)-\(index)" }

    /// The steps `account-worker` acknowledges, each on its own line (`signed-in scanner`, `filled`,
    /// `signed-out 608`); `signing-out` is printed just before the sign-out starts.
    public enum Step: String, Sendable, CaseIterable {
        /// Followed by the app (`scanner`, `timeclock`) whose sign-in committed.
        case signedIn = "signed-in"
        /// Followed, for `fill`, by the number of tokens per group.
        case filled
        /// Printed just before the sign-out starts.
        case signingOut = "signing-out"
        /// Followed by the number of items removed.
        case signedOut = "signed-out"

        /// The step a line reports (`signed-out 608` is `.signedOut`).
        public init?(line: String) {
            self.init(rawValue: String(line.split(separator: " ", maxSplits: 1).first ?? ""))
        }
    }
}
