public import Foundation
public import PathSafety
import SystemPackage

/// The directory that holds the store (its database and key file). Which directory is the
/// executables' choice (`--state-dir`); the library only prepares the one it is given.
///
/// Every component of its path is checked the way systemd's `CHASE_SAFE` does (`SafeDirectory.open`):
/// owned by root or this process's user, not writable by others without the sticky bit; the directory
/// itself must not be writable by others at all. A directory another user could swap (one of theirs, or
/// below one of theirs) is refused before anything in it is read or written: root would otherwise write
/// through the symbolic links its owner plants.
public enum StateDirectory {
    /// Checks the directory and every directory above it, creating missing ones with mode 0700.
    /// - Throws: `insecureStateDirectory` naming the component another user could swap and the fix;
    ///   `ioError` when the directory cannot be created or opened.
    public static func prepare(_ url: URL) throws(KeychainError) {
        _ = try open(url)
    }

    /// Like `prepare(_:)`, and holds the directory: its files are then opened relative to it, with `O_NOFOLLOW`.
    public static func open(_ url: URL) throws(KeychainError) -> SafeDirectory {
        try open(url, creating: true)
    }

    /// Like `open(_:)` for a directory that must exist already (nothing is created).
    /// - Throws: `ioError` when it does not exist, as `open(_:)` otherwise.
    public static func existing(_ url: URL) throws(KeychainError) -> SafeDirectory {
        try open(url, creating: false)
    }

    private static func open(_ url: URL, creating: Bool) throws(KeychainError) -> SafeDirectory {
        let held: SafeDirectory
        do {
            held = try SafeDirectory.open(
                url.path,
                purpose: "the state directory",
                alternative: "choose another with --state-dir",
                creatingWith: creating ? [.ownerReadWriteExecute] : nil
            )
        } catch {
            switch error.reason {
            case .unsafe:
                throw KeychainError(.insecureStateDirectory, error.message)
            case .notDirectory:
                throw KeychainError(
                    .ioError,
                    "state directory \(url.path) cannot be used: \(error.component) is not a directory; remove it or choose another with --state-dir"
                )
            case .system(let code) where AccessDiagnosis.isPermissionFailure(code):
                throw KeychainError(
                    .ioError,
                    AccessDiagnosis.permissionDenied("use the state directory", path: FilePath(url.path), error: code)
                )
            case .system:
                throw KeychainError(.ioError, error.message)
            }
        }
        guard held.permissions & 0o022 == 0 else {
            let octal = String(held.permissions, radix: 8)
            throw KeychainError(
                .insecureStateDirectory,
                """
                the state directory \(url.path) is writable by \(held.permissions & 0o002 != 0 ? "every user" : "its group") (mode \(octal)): \
                they could plant files or links in it; run: chmod go-w \(url.path), or choose another with --state-dir
                """
            )
        }
        return held
    }
}
