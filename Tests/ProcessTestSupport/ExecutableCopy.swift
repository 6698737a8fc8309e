import Foundation
import SystemPackage

/// Copies a file for other users to run, writing it through a close-on-exec descriptor. (A copy made with
/// `FileManager.copyItem` while another thread starts a long-lived child leaves that child holding the
/// copy open for writing, and every `exec` of the copy then fails with "Text file busy".)
public enum ExecutableCopy {
    /// Copies `source` to `destination` with `mode` (default 0755).
    public static func copy(from source: String, to destination: String, mode: UInt16 = 0o755) throws {
        let permissions = FilePermissions(rawValue: UInt32(mode))
        let data = try Data(contentsOf: URL(fileURLWithPath: source))
        let descriptor = try FileDescriptor.open(FilePath(destination), .writeOnly, options: [.create, .truncate, .closeOnExec],
                                                 permissions: permissions)
        defer { try? descriptor.close() }
        _ = try descriptor.writeAll(data)
        // The mode as asked, whatever the umask.
        guard chmod(destination, mode_t(mode)) == 0 else { throw Errno(rawValue: errno) }
    }
}
