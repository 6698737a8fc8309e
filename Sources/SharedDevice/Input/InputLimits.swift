/// The sizes past which input from a file, standard input or a caller is refused before it is parsed,
/// so that a mistaken or hostile document costs neither time nor memory (and is never echoed back in
/// full). Each refusal names its limit.
public enum InputLimits {
    /// A device policy document: 1 MiB.
    public static let policyDocumentBytes = 1 << 20
    /// A unified-cache JSON document to import, or a token response file: 16 MiB.
    public static let cacheDocumentBytes = 16 << 20
    /// A device name or an app id: 255 characters.
    public static let nameCharacters = 255
    /// Apps in one device policy: 1,000.
    public static let apps = 1_000
    /// MSAL client ids one app of the policy may list.
    public static let msalClientIDsPerApp = 64

    /// `bytes` for people: `1 MiB (1048576 bytes)`, or `N bytes` when not a whole number of MiB.
    public static func describe(bytes: Int) -> String {
        let mebibytes = bytes >> 20
        return mebibytes << 20 == bytes ? "\(mebibytes) MiB (\(bytes) bytes)" : "\(bytes) bytes"
    }
}
