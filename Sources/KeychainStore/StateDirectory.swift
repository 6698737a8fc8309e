public import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where devicectl keeps its state: `--state-dir`, else `$DEVICECTL_STATE_DIR`, else `/var/lib/devicectl`
/// for root and `$XDG_STATE_HOME/devicectl` (default `~/.local/state/devicectl`) for other users.
public enum StateDirectory {
    /// The state directory for the given explicit choice and environment.
    public static func resolve(explicit: String? = nil,
                               environment: [String: String] = ProcessInfo.processInfo.environment,
                               isRoot: Bool = geteuid() == 0) -> URL {
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

    /// Creates the directory (and its parents) with mode 0700 if it does not exist.
    public static func prepare(_ url: URL) throws(KeychainError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw KeychainError(.ioError, "state directory \(url.path) exists but is not a directory")
            }
            return
        }
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw KeychainError(.ioError, "cannot create state directory \(url.path): \(error.localizedDescription); choose another with --state-dir")
        }
    }
}
