import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// Every `tools/*` script answers `-h`/`--help` with its usage and does nothing else (`tools/demo --help` once
/// ran the whole demo and removed the device's state directory); the scripts without options refuse an
/// unknown argument with exit 64 before doing anything.
@Suite(.tags(.integration)) struct ToolsHelpTests {
    static let tools = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
        .appendingPathComponent("tools")

    static var scripts: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: tools.path)) ?? []).filter { !$0.hasPrefix(".") }
            .sorted()
    }

    @Test func everyScriptAnswersHelpWithItsUsageAndDoesNothingElse() async throws {
        try #require(Self.scripts.count >= 10, "\(Self.scripts)")
        for script in Self.scripts {
            for flag in ["--help", "-h"] {
                let started = Date()
                let help = try await Command.run(Self.tools.appendingPathComponent(script), [flag])
                #expect(help.status == 0, "\(script) \(flag): exit \(help.status) \(help.stderr)")
                #expect(help.stdout.count > 40, "\(script) \(flag) printed no usage: \(help.stdout)")
                #expect(
                    !help.stdout.contains("== ") && !help.stderr.contains("== "),
                    "\(script) \(flag) did some of its work: \(help.stdout)"
                )
                #expect(Date().timeIntervalSince(started) < 60, "\(script) \(flag) took as long as a run")
            }
        }
    }

    @Test func scriptsWithoutOptionsRefuseAnUnknownArgument() async throws {
        for script in [
            "demo", "setup", "systemtest", "msal-python-setup", "bench-broker", "bench-msal", "bench-process",
            "bench-signin",
            "bench-silent", "bench-flatpak", "build-pam", "install", "package",
        ] {
            let refused = try await Command.run(Self.tools.appendingPathComponent(script), ["--no-such-option"])
            #expect(
                refused.status == 64 || (refused.status != 0 && refused.stderr.contains("unknown argument")),
                "\(script): exit \(refused.status) \(refused.stderr)"
            )
            #expect(refused.stderr.contains("unknown argument"), "\(script): \(refused.stderr)")
        }
    }
}
