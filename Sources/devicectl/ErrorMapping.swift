import ArgumentParser
import Foundation
import IdentityClient
import KeychainStore
import SharedDevice

// The CLI's error mapping, in one place: which exit code each library error gets, and the wrappers that
// turn thrown errors into `CLIError`s and print them.

extension DevicectlExit {
    /// Exit codes of the keychain store's errors.
    static func forCode(_ code: KeychainError.Code) -> DevicectlExit {
        switch code {
        case .itemNotFound: .itemNotFound
        case .duplicateItem: .duplicateItem
        case .integrityFailure, .corruptStore: .integrityFailure
        case .wrongKey: .wrongKey
        case .missingEntitlement: .permissionDenied
        case .invalidParameter: .badInput
        case .storeBusy: .unavailable
        case .insecureKeyFile, .insecureStateDirectory: .configuration
        case .cryptoUnavailable: .osError
        case .quotaExceeded: .quotaExceeded
        default: .ioError
        }
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
        case .brokerUnavailable: .unavailable
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

extension DevicectlExit {
    /// Exit codes of the account commands (documented in the README).
    static func forAccountCode(_ code: SharedDeviceError.Code) -> DevicectlExit? {
        switch code {
        case .accountAlreadySignedIn: .accountAlreadySignedIn
        case .noCurrentAccount, .currentAccountMismatch: .noCurrentAccount
        case .tokenCache: .badInput
        case .flowNotAllowed: .configuration
        default: nil
        }
    }
}

extension DevicectlExit {
    /// Exit codes of the identity provider calls (documented in the README).
    static func forIdentityCode(_ code: IdentityError.Code) -> DevicectlExit {
        switch code {
        case .interactionRequired, .declinedScopes: .interactionRequired
        case .userCanceled, .accessDenied, .deviceCodeExpired: .signInNotCompleted
        case .invalidIDToken, .stateMismatch: .tokenRejected
        case .authorityUnreachable: .unavailable
        case .invalidAuthority: .configuration
        case .serverError, .invalidResponse, .unsupported: .protocolError
        case .invalidCredentials, .userNotFound, .invalidCode: .invalidCredentials
        case .signInExpired, .browserRequired: .signInNotCompleted
        default: .protocolError
        }
    }
}

/// Runs `body`; a `SharedDeviceError` (including the identity client's) becomes its documented exit code.
func reportingAsyncErrors<T>(_ body: () async throws(SharedDeviceError) -> T) async throws -> T {
    do {
        return try await body()
    } catch {
        throw CLIError.from(error)
    }
}

/// Runs `body`; an `IdentityError` becomes its documented exit code.
func reportingIdentityErrors<T>(_ body: () async throws(IdentityError) -> T) async throws -> T {
    do {
        return try await body()
    } catch {
        throw CLIError.from(SharedDeviceError(error))
    }
}

extension CLIError {
    /// The documented exit code and message of a shared-device error.
    static func from(_ error: SharedDeviceError) -> CLIError {
        if let identityError = error.identityError {
            return CLIError(exitCode: DevicectlExit.forIdentityCode(identityError.code), identityError.description)
        }
        if let storeError = error.storeError {
            return CLIError(exitCode: DevicectlExit.forCode(storeError.code), storeError.description)
        }
        return CLIError(
            exitCode: DevicectlExit.forAccountCode(error.code) ?? DevicectlExit.forCode(error.code),
            error.description
        )
    }
}

extension AsyncParsableCommand {
    /// Runs the command body, printing `CLIError`s as `devicectl: error: …` and exiting with their code.
    func runReportingErrors(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let error as CLIError {
            throw error.reported()
        }
    }
}
