import Foundation
import ProcessTestSupport
import Testing

/// `devicectl --help` and the help of every subcommand, nested ones included (`devicectl keychain
/// add-generic-password --help`), byte for byte as the golden files under `Tests/DevicectlTests/Help/`
/// have them: one file per command path, named by its words joined with dots
/// (`devicectl.keychain.add-generic-password.txt`). A changed option, abstract or discussion shows up here
/// as a diff to review, and a subcommand without a golden file (or a file without its subcommand) fails.
///
/// The command paths come from the built binary itself (`devicectl --experimental-dump-help`, the JSON
/// swift-argument-parser prints of its command tree), so a new subcommand cannot go unpinned. The help is
/// taken with `COLUMNS=80`, which swift-argument-parser reads before the terminal's size, so the width of
/// the terminal that runs the tests does not change it.
///
/// To accept a change of the help (after reading the diff), rewrite the files and commit them:
///
///     DEVICECTL_HELP_RECORD=1 swift test --skip-build --filter DevicectlHelpGoldenTests
///
/// Recording writes every command's file, removes the files of commands that no longer exist, and fails
/// the run (so a recording never passes by accident); run the filter again without the variable to see it pass.
@Suite struct DevicectlHelpGoldenTests {
    static let helpDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "Help"
    )
    static let recordVariable = "DEVICECTL_HELP_RECORD"
    static let regenerate =
        "if the change is intended, regenerate with `\(recordVariable)=1 swift test --skip-build --filter DevicectlHelpGoldenTests` and commit Tests/DevicectlTests/Help"

    /// The terminal's width must not reach the output.
    static let environment = ["COLUMNS": "80", "LINES": "24"]

    @Test func everyCommandsHelpMatchesItsGoldenFile() async throws {
        let paths = try await Self.commandPaths()
        try #require(paths.count > 20, "devicectl --experimental-dump-help named only \(paths)")
        let record = ProcessInfo.processInfo.environment[Self.recordVariable] == "1"
        if record { try FileManager.default.createDirectory(at: Self.helpDirectory, withIntermediateDirectories: true) }

        var expectedFiles: Set<String> = []
        for path in paths {
            let file = Self.fileName(path)
            expectedFiles.insert(file)
            let help = try await DevicectlRunner.execute(
                DevicectlRunner.productsDirectory.appendingPathComponent("devicectl"),
                Array(path.dropFirst()) + ["--help"],
                environment: Self.environment
            )
            #expect(help.status == 0, "\(path.joined(separator: " ")) --help: exit \(help.status) \(help.stderr)")
            #expect(
                help.stderr.isEmpty,
                "\(path.joined(separator: " ")) --help wrote to standard error: \(help.stderr)"
            )
            let actual = Data(help.stdout.utf8)
            let url = Self.helpDirectory.appendingPathComponent(file)
            if record {
                try actual.write(to: url)
                continue
            }
            guard let golden = FileManager.default.contents(atPath: url.path) else {
                Issue.record("`\(path.joined(separator: " "))` has no golden help file \(file); \(Self.regenerate)")
                continue
            }
            #expect(
                golden == actual,
                """
                `\(path.joined(separator: " ")) --help` differs from Help/\(file) (first differing line: \
                \(Self.firstDifference(String(decoding: golden, as: UTF8.self), help.stdout))); \(Self.regenerate)
                """
            )
        }

        let present = Set(
            try FileManager.default.contentsOfDirectory(atPath: Self.helpDirectory.path).filter { $0.hasSuffix(".txt") }
        )
        for stale in present.subtracting(expectedFiles).sorted() {
            if record {
                try FileManager.default.removeItem(at: Self.helpDirectory.appendingPathComponent(stale))
            } else {
                Issue.record("Help/\(stale) is the help of no command devicectl has; \(Self.regenerate)")
            }
        }
        if record {
            Issue.record(
                "recorded \(paths.count) help files in \(Self.helpDirectory.path): review the diff, commit, and run again without \(Self.recordVariable)"
            )
        }
    }

    /// The dump names subcommands as well as the paths' files do: a command tree without them fails here.
    @Test func theDumpNamesNestedSubcommands() async throws {
        let paths = try await Self.commandPaths()
        #expect(paths.contains(["devicectl"]))
        #expect(paths.contains(["devicectl", "keychain", "add-generic-password"]), "\(paths)")
    }

    /// Every command path of devicectl's tree, the root first, from `--experimental-dump-help`.
    static func commandPaths() async throws -> [[String]] {
        let dump = try await DevicectlRunner.execute(
            DevicectlRunner.productsDirectory.appendingPathComponent("devicectl"),
            ["--experimental-dump-help"],
            environment: environment
        )
        try #require(dump.status == 0, "devicectl --experimental-dump-help: exit \(dump.status) \(dump.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8))
        let root = try #require(
            (json as? [String: Any])?["command"] as? [String: Any],
            "no command in the dump: \(dump.stdout.prefix(200))"
        )
        var paths: [[String]] = []
        func walk(_ command: [String: Any], _ prefix: [String]) throws {
            let name = try #require(command["commandName"] as? String, "a command without a name in the dump")
            let path = prefix + [name]
            paths.append(path)
            for sub in command["subcommands"] as? [[String: Any]] ?? [] { try walk(sub, path) }
        }
        try walk(root, [])
        return paths
    }

    /// `devicectl.keychain.add-generic-password.txt`.
    static func fileName(_ path: [String]) -> String { path.joined(separator: ".") + ".txt" }

    /// The first line where `golden` and `actual` differ, both shown, for the failure's message.
    static func firstDifference(_ golden: String, _ actual: String) -> String {
        let old = golden.split(separator: "\n", omittingEmptySubsequences: false)
        let new = actual.split(separator: "\n", omittingEmptySubsequences: false)
        for index in 0..<max(old.count, new.count) {
            let a = index < old.count ? String(old[index]) : "<end>"
            let b = index < new.count ? String(new[index]) : "<end>"
            if a != b { return "line \(index + 1): golden \"\(a)\", now \"\(b)\"" }
        }
        return "none: only the bytes differ"
    }
}
