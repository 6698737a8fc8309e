/// The PAM result codes the helper reports to the module (`result NAME`), by their names in
/// `<security/_pam_types.h>`: the module maps each name to its number, so the helper needs no PAM headers.
enum PamCode: String, Sendable {
    case success = "PAM_SUCCESS"
    case authError = "PAM_AUTH_ERR"
    case authInfoUnavailable = "PAM_AUTHINFO_UNAVAIL"
    case userUnknown = "PAM_USER_UNKNOWN"
    case maxTries = "PAM_MAXTRIES"
    case sessionError = "PAM_SESSION_ERR"
    case serviceError = "PAM_SERVICE_ERR"
    case conversationError = "PAM_CONV_ERR"
    case abort = "PAM_ABORT"
}

/// Why a call of the helper did not succeed: the code the module returns and the message the greeter
/// shows (never a password, code or token).
struct PamFailure: Error, Sendable {
    /// The PAM code.
    var code: PamCode
    /// What the greeter shows; nil shows nothing.
    var message: String?

    init(_ code: PamCode, _ message: String?) {
        self.code = code
        self.message = message
    }
}
