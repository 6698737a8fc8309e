import Foundation
import KeychainStore
import ProcessTestSupport
import StoreTestSupport
import Synchronization
import Testing

enum Apps {
    static let sharedGroup = AccessGroup.adalCache
    /// Entitled to the shared MSAL group and its own private group.
    static let scanner = try! AppIdentity(
        appID: "com.contoso.scanner",
        accessGroups: [sharedGroup, "com.contoso.scanner"]
    )
    /// Entitled to the shared MSAL group and its own private group.
    static let timeclock = try! AppIdentity(
        appID: "com.contoso.timeclock",
        accessGroups: [sharedGroup, "com.contoso.timeclock"]
    )
    /// Entitled only to its own group.
    static let outsider = try! AppIdentity(appID: "com.fabrikam.outsider", accessGroups: ["com.fabrikam.outsider"])
}

/// Opens a store in `directory` with fast commits unless a test needs otherwise.
func openStore(
    _ directory: TemporaryStateDirectory,
    key: MasterKeySource? = nil,
    clock: FakeClock? = nil,
    synchronous: StoreOptions.Synchronous = .normal
) throws -> KeychainStore {
    var options = StoreOptions(synchronous: synchronous)
    if let clock { options.clock = clock.function }
    return try KeychainStore(directory: directory.url, key: key, options: options)
}

/// The directory holding the built products (devicectl, keychain-worker) next to the test bundle.
let productsDirectory = ChildProcess.productsDirectory

extension Data {
    init(_ string: String) { self.init(string.utf8) }
}

/// Expects `body` to throw a `KeychainError` with `code` (the keychain's OSStatus class).
func expectError<T>(
    _ code: KeychainError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> T
) {
    do {
        _ = try body()
        Issue.record("expected \(code), but the call succeeded", sourceLocation: sourceLocation)
    } catch let error as KeychainError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
}

/// The `KeychainError` `body` throws, or `nil` if it succeeds or throws something else.
func caughtError<T>(_ body: () throws -> T) -> KeychainError? {
    do {
        _ = try body()
        return nil
    } catch {
        return error as? KeychainError
    }
}

/// Runs `body` on a thread of its own: seconds of disk work or of waiting for a lock would otherwise hold one of
/// the few threads every async test of the process shares (and delay the timing-sensitive ones).
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
