import Foundation
import ProcessTestSupport
import Testing

/// The README's code blocks that tests run: each follows a marker line `<!-- readme-test: NAME … -->`, so a
/// reader's copy and the tested text are the same bytes.
enum ReadmeBlocks {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The content of the fenced block right after the marker `name` (with its final newline, without the
    /// fences).
    static func block(_ name: String) throws -> String {
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false)
        let markers = lines.indices.filter {
            lines[$0].hasPrefix("<!-- readme-test: \(name) ") || lines[$0] == "<!-- readme-test: \(name) -->"
        }
        guard markers.count == 1, let marker = markers.first else {
            throw ChildProcessError(message: "README.md has \(markers.count) blocks marked readme-test: \(name)")
        }
        guard marker + 1 < lines.count, lines[marker + 1].hasPrefix("```"),
            let end = lines[(marker + 2)...].firstIndex(where: { $0 == "```" })
        else {
            throw ChildProcessError(
                message: "README.md's marker readme-test: \(name) is not followed by a fenced block"
            )
        }
        return lines[(marker + 2)..<end].joined(separator: "\n") + "\n"
    }
}
