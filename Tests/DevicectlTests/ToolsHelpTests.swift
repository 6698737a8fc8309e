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
        // The programs a script's work starts with stand first on PATH as shims that only record that they
        // ran: a script that starts its work is caught by what it ran, however slow the machine.
        let shims = FileManager.default.temporaryDirectory.appendingPathComponent("tools-help-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: shims, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: shims) }
        let ran = shims.appendingPathComponent("ran")
        for program in ["swift", "apt-get", "systemd-nspawn", "debootstrap", "flatpak", "gcc", "stress-ng"] {
            let shim = shims.appendingPathComponent(program)
            // Written as a source, executed as the copy a `cp` process made: a write descriptor of this process,
            // inherited by a child another test forks meanwhile, would make running the shim fail (ETXTBSY).
            let source = shims.appendingPathComponent(program + ".source")
            try Data("#!/bin/sh\necho \"\(program) $*\" >> '\(ran.path)'\nexit 1\n".utf8).write(to: source)
            try ExecutableCopy.copy(from: source.path, to: shim.path)
        }
        let path = shims.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        for script in Self.scripts {
            for flag in ["--help", "-h"] {
                let help = try await Command.run(
                    Self.tools.appendingPathComponent(script),
                    [flag],
                    environment: ["PATH": path]
                )
                #expect(help.status == 0, "\(script) \(flag): exit \(help.status) \(help.stderr)")
                #expect(help.stdout.count > 40, "\(script) \(flag) printed no usage: \(help.stdout)")
                #expect(
                    !help.stdout.contains("== ") && !help.stderr.contains("== "),
                    "\(script) \(flag) did some of its work: \(help.stdout)"
                )
                let started = (try? String(contentsOf: ran, encoding: .utf8)) ?? ""
                #expect(started.isEmpty, "\(script) \(flag) started its work: \(started)")
                try? FileManager.default.removeItem(at: ran)
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
