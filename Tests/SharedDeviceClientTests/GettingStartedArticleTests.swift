import Foundation
import Testing

/// The DocC article `GettingStarted.md` shows the README's "Write an app" Swift sample step by step, and
/// that sample is what `ReadmeSampleTests` builds and runs against a real broker. So the article's code
/// cannot drift from code that works: every line of its Swift blocks (but comment-only lines) must be a
/// line of the README's Swift section, indentation aside. Change the sample in the README (and its test) first, then the
/// article.
@Suite struct GettingStartedArticleTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let article = repository.appendingPathComponent(
        "Sources/SharedDeviceClient/SharedDeviceClient.docc/GettingStarted.md"
    )

    @Test func everyCodeLineOfTheArticleIsALineOfTheReadmesSample() throws {
        let readme = try String(contentsOf: Self.repository.appendingPathComponent("README.md"), encoding: .utf8)
        // The README's Swift section, from its heading to the next one (Python's).
        let start = try #require(readme.range(of: "\n### Swift\n"), "the README has no \"### Swift\" section")
        let section = readme[start.upperBound...]
        let end = section.range(of: "\n### ")?.lowerBound ?? section.endIndex
        let readmeLines = Set(section[..<end].split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        #expect(readmeLines.count > 40, "the README's Swift section has only \(readmeLines.count) lines")
        let code = Self.swiftBlockLines(try String(contentsOf: Self.article, encoding: .utf8))
        #expect(code.count > 30, "GettingStarted.md has only \(code.count) lines of Swift")
        for line in code where !line.isEmpty && !line.hasPrefix("//") {
            let inReadme = readmeLines.contains(line)
            #expect(inReadme, "GettingStarted.md shows `\(line)`, which the README's tested Swift sample does not have")
        }
    }

    /// The trimmed lines inside the ```swift fences of `markdown`.
    static func swiftBlockLines(_ markdown: String) -> [String] {
        var lines: [String] = []
        var inside = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("```") {
                inside = !inside && trimmed == "```swift"
            } else if inside {
                lines.append(trimmed)
            }
        }
        return lines
    }
}
