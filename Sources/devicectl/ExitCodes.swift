import ArgumentParser
import Foundation

/// devicectl's documented exit codes (sysexits where one fits; 44/45 as macOS `security` uses them).
enum DevicectlExit: Int32 {
    case itemNotFound = 44
    case duplicateItem = 45
    case integrityFailure = 46
    case wrongKey = 47
    case accountAlreadySignedIn = 48
    case noCurrentAccount = 49
    case interactionRequired = 50
    case signInNotCompleted = 51
    case tokenRejected = 52
    case apiError = 53
    /// The app's keychain quota is full (-34, the policy's limits.itemsPerApp or bytesPerApp).
    case quotaExceeded = 54
    /// The identity provider refused the username or password (a password sign-in's `invalid_grant`).
    case invalidCredentials = 55
    /// Too many failed password sign-ins on the device: the policy's back-off is running.
    case tryLater = 75
    case usage = 64
    case badInput = 65
    case unavailable = 69
    case osError = 71
    case ioError = 74
    case protocolError = 76
    case permissionDenied = 77
    case configuration = 78

}

/// A failure already explained to the user; exits with its code.
struct CLIError: Error, CustomStringConvertible {
    let exitCode: DevicectlExit
    let description: String

    init(exitCode: DevicectlExit, _ message: String) {
        self.exitCode = exitCode
        description = message
    }
}

extension CLIError {
    /// Prints the error as `devicectl: error: …` and returns the exit to throw.
    func reported() -> ExitCode {
        FileHandle.standardError.write(Data("devicectl: error: \(description)\n".utf8))
        return ExitCode(exitCode.rawValue)
    }
}
