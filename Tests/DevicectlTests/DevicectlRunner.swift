import Foundation
import ProcessTestSupport
import Testing

/// Runs the built `devicectl` binary as a user would: arguments, standard input, environment.
struct DevicectlRunner {
    typealias Result = Command.Result

    /// The state directory every command of this runner uses; removed with the runner's `cleanUp`.
    let stateDirectory: URL

    init() {
        stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "devicectl-test-\(UUID().uuidString)"
        )
    }

    static let productsDirectory = ChildProcess.productsDirectory

    var databasePath: String { stateDirectory.appendingPathComponent("keychain.sqlite").path }

    /// Runs `devicectl ARGS` to completion, with `--state-dir` appended when `stateDir` is set.
    @discardableResult
    func run(
        _ arguments: [String],
        stdin: String? = nil,
        stateDir: Bool = true,
        environment: [String: String] = [:]
    ) async throws -> Result {
        try await Self.execute(
            Self.productsDirectory.appendingPathComponent("devicectl"),
            arguments + (stateDir ? ["--state-dir", stateDirectory.path] : []),
            stdin: stdin,
            environment: environment
        )
    }

    /// Runs any executable to completion and collects its output.
    static func execute(
        _ executable: URL,
        _ arguments: [String],
        stdin: String? = nil,
        environment: [String: String] = [:]
    ) async throws -> Result {
        try await Command.run(executable, arguments, stdin: stdin, environment: environment)
    }

    func cleanUp() {
        try? FileManager.default.removeItem(at: stateDirectory)
        try? FileManager.default.removeItem(at: filesDirectory)
    }

    /// A directory next to the state directory for the test's input files (token responses, exports),
    /// so writing them never creates or touches the state directory; removed with `cleanUp`.
    var filesDirectory: URL { URL(fileURLWithPath: stateDirectory.path + "-files") }

    /// Writes `contents` to `name` in `filesDirectory` and returns the file's path.
    @discardableResult
    func writeFile(_ name: String, _ contents: Data) throws -> String {
        try FileManager.default.createDirectory(at: filesDirectory, withIntermediateDirectories: true)
        let url = filesDirectory.appendingPathComponent(name)
        try contents.write(to: url)
        return url.path
    }
}

/// Raw SQL on a database file through the `sqlite3` shell, as an attacker with file access would.
func sqlite3(_ path: String, _ sql: String) async throws -> String {
    let result = try await DevicectlRunner.execute(URL(fileURLWithPath: "/usr/bin/sqlite3"), [path, sql])
    #expect(result.status == 0, "sqlite3 failed: \(result.stderr)")
    return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
}

// MARK: - Policies, JSON and long-running children

extension DevicectlRunner {
    /// The repository's `policies/` directory.
    static let policiesDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("policies")

    /// The path of a shipped policy file, e.g. `policy("kiosk.json")`.
    static func policy(_ name: String) -> String { policiesDirectory.appendingPathComponent(name).path }

    /// Starts `devicectl ARGS --state-dir DIR` in the background (e.g. `audit --jsonl --follow`), with
    /// `environment` added to this process's.
    func start(_ arguments: [String], environment: [String: String] = [:]) throws -> BackgroundProcess {
        try BackgroundProcess(
            Self.productsDirectory.appendingPathComponent("devicectl"),
            arguments + ["--state-dir", stateDirectory.path],
            environment: environment
        )
    }

    /// Runs `devicectl ARGS --json` (the caller includes `--json`) and parses standard output.
    func json(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws -> Any {
        try parsedJSON(try await run(arguments), of: arguments, sourceLocation: sourceLocation)
    }
}

/// The JSON standard output of `devicectl ARGUMENTS` (with `--json` among them), which must have exited 0.
func parsedJSON(
    _ result: DevicectlRunner.Result,
    of arguments: [String],
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> Any {
    #expect(
        result.status == 0,
        "devicectl \(arguments.joined(separator: " ")) exited \(result.status): \(result.stderr)",
        sourceLocation: sourceLocation
    )
    return try parseJSON(result.stdout)
}

/// Parses a JSON document (objects, arrays, `null` as `NSNull`).
func parseJSON(_ text: String) throws -> Any {
    try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
}

/// A child process that keeps running (a `devicectl audit --follow`, a `device-worker`).
typealias BackgroundProcess = ChildProcess
typealias BackgroundProcessError = ChildProcessError
