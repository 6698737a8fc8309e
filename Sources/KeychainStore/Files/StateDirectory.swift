public import Foundation
import SystemPackage

/// The directory that holds the store (its database and key file). Which directory is the
/// executables' choice (`--state-dir`); the library only prepares the one it is given.
public enum StateDirectory {
    /// Creates the directory (and its parents) with mode 0700 if it does not exist.
    public static func prepare(_ url: URL) throws(KeychainError) {
        let path = FilePath(url.path)
        do {
            let info = try path.stat()
            guard info.type == .directory else {
                throw KeychainError(.ioError, "state directory \(url.path) exists but is not a directory; remove it or choose another with --state-dir")
            }
            return
        } catch let error as KeychainError {
            throw error
        } catch let error as Errno where AccessDiagnosis.isPermissionFailure(error) {
            throw KeychainError(.ioError, AccessDiagnosis.permissionDenied("use the state directory", path: path, error: error))
        } catch {
            // Missing (or unreadable in another way): try to create it, which reports what is wrong.
        }
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw KeychainError(.ioError, "cannot create state directory \(url.path): \(error.localizedDescription); choose another with --state-dir")
        }
    }
}
