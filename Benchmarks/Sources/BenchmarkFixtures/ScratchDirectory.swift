public import Foundation

/// A fresh private directory (mode 0700) under `$TMPDIR` (default /tmp) for one benchmark's store files.
public struct ScratchDirectory: Sendable {
    /// The directory.
    public let url: URL

    /// Creates `PREFIX.XXXXXXXX` under the temporary directory.
    public init(_ prefix: String) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "\(prefix).\(UUID().uuidString.prefix(8))",
            isDirectory: true
        )
        try FileManager.default.createDirectory(
            at: url,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
    }

    /// Removes the directory and everything in it.
    public func remove() { try? FileManager.default.removeItem(at: url) }
}
