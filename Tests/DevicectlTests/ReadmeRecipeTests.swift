import Foundation
import ProcessTestSupport
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The README's "Run your own broker" recipe, run as written by a shell as root from the repository's root:
/// every line but `swift build` (the tests' binaries are built, and a build inside `swift test` would wait
/// for its lock), with a scratch directory and the tests' identity provider port of its own. The shell
/// dies with the test (`setpriv --pdeathsig`), and the recipe's deviced with the shell.
@Suite(.serialized, .tags(.integration, .needsRoot, .needsIdentityProvider)) struct ReadmeRecipeTests {
    typealias Provider = IdentityCLITests.Provider

    /// The pids of processes whose command line mentions `text`.
    static func processes(mentioning text: String) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry in
            guard let pid = pid_t(entry), pid != getpid(),
                let commandLine = try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(entry)/cmdline"))
            else { return nil }
            let arguments = String(decoding: commandLine.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
            return arguments.contains(text) ? pid : nil
        }
    }

    @Test func theScratchBrokerRecipeRunsAsWrittenAndServesTheScannerApp() async throws {
        // the tests' provider, started once per run: the recipe's `tools/idp start` finds it
        _ = try await Provider.shared()
        let block = try ReadmeBlocks.block("scratch-broker")
        var lines = block.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let build = lines.firstIndex {
            $0.split(separator: "#").first?.trimmingCharacters(in: .whitespaces) == "swift build"
        }
        lines.remove(at: try #require(build, "the recipe no longer says `swift build`: \(block)"))
        #expect(block.contains("$(swift build --show-bin-path)"), "the recipe no longer says where the binaries are")

        let scratch = "/run/scratch-broker-test-\(UUID().uuidString.prefix(8))"
        let script = scratch + "-recipe.sh"
        defer {
            try? FileManager.default.removeItem(atPath: scratch)
            try? FileManager.default.removeItem(atPath: script)
        }
        // A script file, as a reader's shell runs the lines: `bash -c` would exec the last command in the shell's
        // place, and a parent that became the app's uid cannot deliver the parent-death signal to root's deviced.
        try Data(("cd '\(ReadmeBlocks.packageRoot.path)'\n" + lines.joined(separator: "\n")).utf8).write(
            to: URL(fileURLWithPath: script)
        )
        let shell = try ChildProcess(
            BrokerDaemon.setpriv,
            ["--pdeathsig", "KILL", "/bin/bash", "-euo", "pipefail", script],
            environment: ["IDP_PORT": "\(IdentityCLITests.port)", "SCRATCH_BROKER": scratch]
        )
        defer { _ = shell.killIfRunning() }
        try #require(
            await shell.waitForExit(timeout: 180),
            "the recipe did not finish: \(shell.lines) \(shell.standardError)"
        )
        #expect(shell.status == 0, "the recipe failed (exit \(shell.status)): \(shell.standardError)")

        // `swift build --show-bin-path` named the tests' own binaries.
        #expect(FileManager.default.fileExists(atPath: scratch + "/devicectl"))
        // The app call: the scanner's uid, answered by the recipe's broker (nobody is signed in there).
        #expect(
            Array(shell.lines.suffix(2)) == ["current: none", "previous: none"],
            "\(shell.lines) \(shell.standardError)"
        )
        #expect(!shell.standardError.contains("error"), "\(shell.standardError)")

        // The recipe's deviced died with its shell: nothing runs on the scratch directory any more.
        let deadline = Date().addingTimeInterval(60)
        while !Self.processes(mentioning: scratch).isEmpty && Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        let left = Self.processes(mentioning: scratch)
        for pid in left { kill(pid, SIGKILL) }
        #expect(left.isEmpty, "the recipe's deviced outlived its shell: \(left)")
    }
}
