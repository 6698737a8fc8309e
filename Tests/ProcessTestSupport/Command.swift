public import Foundation
import Subprocess
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A command run to completion by the tests (`devicectl`, `sqlite3`, `tools/idp`, `openssl`), with
/// swift-subprocess: standard input from a string, standard output and error collected whole. For a child
/// that must be read while it runs or killed midway, use `ChildProcess`.
public enum Command {
    /// How a command ended and what it printed.
    public struct Result: Sendable {
        /// The exit status; for a command killed by a signal, 128 + the signal number (as a shell reports it).
        public var status: Int32
        /// Everything the command wrote to standard output.
        public var stdout: String
        /// Everything the command wrote to standard error.
        public var stderr: String

        /// A result with these values.
        public init(status: Int32, stdout: String, stderr: String) {
            self.status = status
            self.stdout = stdout
            self.stderr = stderr
        }
    }

    /// The most either stream may print before the run fails (a runaway command, not a test's output).
    public static let outputLimit = 64 * 1024 * 1024

    /// Runs `executable` with `arguments` until it exits: `stdin` as its standard input (empty when `nil`),
    /// this process's environment with `environment` added or overriding.
    public static func run(
        _ executable: URL,
        _ arguments: [String],
        stdin: String? = nil,
        environment: [String: String] = [:]
    ) async throws -> Result {
        var overrides: [Environment.Key: String?] = [:]
        for (name, value) in environment { overrides[Environment.Key(stringLiteral: name)] = value }
        // Standard input comes from an unlinked file, not a pipe: a command that exits before reading it
        // (a refusal) must not make the write fail (swift-subprocess stops the process on a pipe it could
        // not finish writing).
        let input = try standardInputFile(stdin ?? "")
        let result = try await Subprocess.run(
            .path(FilePath(executable.path)),
            arguments: Arguments(arguments),
            environment: .inherit.updating(overrides),
            input: .fileDescriptor(input, closeAfterSpawningProcess: true),
            output: .string(limit: outputLimit),
            error: .string(limit: outputLimit)
        ) { execution in
            // Killed with the test process if it dies first (ChildWatchdog); forgotten once reaped, below.
            ChildWatchdog.watch(execution.processIdentifier.value)
            return execution.processIdentifier.value
        }
        ChildWatchdog.release(result.closureResult)
        let status: Int32 =
            switch result.terminationStatus {
            case .exited(let code): code
            case .signaled(let signal): 128 + signal
            }
        return Result(status: status, stdout: result.standardOutput ?? "", stderr: result.standardError ?? "")
    }

    /// A descriptor reading `text` from its start, of a file already removed.
    private static func standardInputFile(_ text: String) throws -> FileDescriptor {
        let path = FilePath(
            FileManager.default.temporaryDirectory.appendingPathComponent("stdin-\(UUID().uuidString)").path
        )
        let descriptor = try FileDescriptor.open(
            path,
            .readWrite,
            options: [.create, .exclusiveCreate],
            permissions: [.ownerReadWrite]
        )
        do {
            _ = unlink(path.string)
            _ = try descriptor.writeAll(Array(text.utf8))
            _ = try descriptor.seek(offset: 0, from: .start)
            return descriptor
        } catch {
            try? descriptor.close()
            throw error
        }
    }
}
