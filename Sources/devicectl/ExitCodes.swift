import ArgumentParser
import Foundation
import KeychainStore
import SharedDevice

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
    case usage = 64
    case badInput = 65
    case unavailable = 69
    case osError = 71
    case ioError = 74
    case protocolError = 76
    case permissionDenied = 77
    case configuration = 78

    static func forCode(_ code: KeychainError.Code) -> DevicectlExit {
        switch code {
        case .itemNotFound: .itemNotFound
        case .duplicateItem: .duplicateItem
        case .integrityFailure, .corruptStore: .integrityFailure
        case .wrongKey: .wrongKey
        case .missingEntitlement: .permissionDenied
        case .invalidParameter: .badInput
        case .storeBusy: .unavailable
        case .insecureKeyFile: .configuration
        case .cryptoUnavailable: .osError
        default: .ioError
        }
    }
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

/// Runs `body`; a `KeychainError` is printed to standard error and becomes its exit code.
func reportingErrors<T>(_ body: () throws(KeychainError) -> T) throws -> T {
    do {
        return try body()
    } catch {
        throw CLIError(exitCode: DevicectlExit.forCode(error.code), error.description)
    }
}

extension ParsableCommand {
    /// Runs the command body, printing `CLIError`s as `devicectl: error: …` and exiting with their code.
    func runReportingErrors(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as CLIError {
            throw error.reported()
        }
    }
}

extension DevicectlExit {
    static func forCode(_ code: SharedDeviceError.Code) -> DevicectlExit {
        switch code {
        case .notProvisioned: .unavailable
        case .invalidPolicy: .badInput
        case .modeChangeRequiresForce: .usage
        case .appNotInPolicy: .permissionDenied
        case .deviceRecordDamaged, .auditLogTampered: .integrityFailure
        default: .ioError
        }
    }
}

/// Runs `body`; a `SharedDeviceError` is printed to standard error and becomes its exit code
/// (a wrapped store error keeps the store's exit code).
func reportingDeviceErrors<T>(_ body: () throws(SharedDeviceError) -> T) throws -> T {
    do {
        return try body()
    } catch {
        throw CLIError.from(error)
    }
}

/// Who runs devicectl, as the audit log's actor: `devicectl (uid 0 root)`.
enum Actor {
    static var current: String {
        let uid = getuid()
        let name = getpwuid(uid).flatMap { $0.pointee.pw_name.map { String(cString: $0) } } ?? "?"
        return "devicectl (uid \(uid) \(name))"
    }
}

extension DevicectlExit {
    /// Exit codes of the account commands (documented in the README).
    static func forAccountCode(_ code: SharedDeviceError.Code) -> DevicectlExit? {
        switch code {
        case .accountAlreadySignedIn: .accountAlreadySignedIn
        case .noCurrentAccount, .currentAccountMismatch: .noCurrentAccount
        case .tokenCache: .badInput
        default: nil
        }
    }
}
