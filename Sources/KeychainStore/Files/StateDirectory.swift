public import Foundation
import SystemPackage

/// Where devicectl keeps its state: `--state-dir`, else `$DEVICECTL_STATE_DIR`, else `/var/lib/devicectl`
/// for root and `$XDG_STATE_HOME/devicectl` (default `~/.local/state/devicectl`) for other users.
public enum StateDirectory {
    /// The state directory for the given explicit choice and environment.
    public static func resolve(explicit: String? = nil,
                               environment: [String: String] = ProcessInfo.processInfo.environment,
                               isRoot: Bool = StateDirectory.isRoot) -> URL {
        if let explicit, !explicit.isEmpty { return URL(fileURLWithPath: explicit) }
        if let fromEnvironment = environment["DEVICECTL_STATE_DIR"], !fromEnvironment.isEmpty {
            return URL(fileURLWithPath: fromEnvironment)
        }
        if isRoot { return URL(fileURLWithPath: "/var/lib/devicectl") }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") {
            return URL(fileURLWithPath: xdg).appendingPathComponent("devicectl")
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".local/state/devicectl")
    }

    /// Whether this process runs as root (effective uid 0), which picks `/var/lib/devicectl`.
    public static var isRoot: Bool { Syscalls.effectiveUserID == 0 }

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
