import Foundation
import ProcessTestSupport
import Testing

/// Tests/Flatpak/varlink-call (the smallest varlink client: each argument one call, each reply one line), built
/// for the host: an attacking app's own client, at any path, sending parameters no library of ours would.
enum VarlinkCallClient {
    static let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Flatpak/varlink-call.c")

    /// Builds the client at `path` (mode 0755, its directory made 0755 if missing), compiling it in `scratch`.
    static func build(at path: URL, scratch: URL) throws {
        try FileManager.default.createDirectory(
            at: path.deletingLastPathComponent(),
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755]
        )
        let built = scratch.appendingPathComponent("varlink-call-\(UUID().uuidString.prefix(8))")
        let compiler = Process()
        compiler.executableURL = URL(fileURLWithPath: "/usr/bin/cc")
        compiler.arguments = ["-O2", "-o", built.path, source.path]
        try compiler.run()
        compiler.waitUntilExit()
        try #require(compiler.terminationStatus == 0, "cc could not build \(source.path)")
        defer { try? FileManager.default.removeItem(at: built) }
        try ExecutableCopy.copy(from: built.path, to: path.path)
    }

    /// A call of the broker's interface as JSON text.
    static func call(_ method: String, _ parameters: [String: Any] = [:]) throws -> String {
        let message: [String: Any] = ["method": "org.sharedmode.Broker1.\(method)", "parameters": parameters]
        return String(decoding: try JSONSerialization.data(withJSONObject: message), as: UTF8.self)
    }

    /// The replies `output` holds, one JSON object per line.
    static func replies(_ output: String) -> [[String: Any]] {
        output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }
}
