import Foundation
import Testing

/// Runs the built `devicectl` binary as a user would: arguments, standard input, environment.
struct DevicectlRunner {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// The state directory every command of this runner uses; removed with the runner's `cleanUp`.
    let stateDirectory: URL

    init() {
        stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("devicectl-test-\(UUID().uuidString)")
    }

    static let productsDirectory: URL = {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var url = URL(fileURLWithPath: executable).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("devicectl").path), url.path != "/" {
            url.deleteLastPathComponent()
        }
        return url
    }()

    var databasePath: String { stateDirectory.appendingPathComponent("keychain.sqlite").path }

    /// Runs `devicectl ARGS` with `--state-dir` appended when `stateDir` is set.
    @discardableResult
    func run(_ arguments: [String], stdin: String? = nil, stateDir: Bool = true,
             environment: [String: String] = [:]) throws -> Result {
        try Self.execute(Self.productsDirectory.appendingPathComponent("devicectl"),
                         arguments + (stateDir ? ["--state-dir", stateDirectory.path] : []), stdin: stdin, environment: environment)
    }

    /// Runs any executable and collects its output.
    static func execute(_ executable: URL, _ arguments: [String], stdin: String? = nil,
                        environment: [String: String] = [:]) throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let input = Pipe(), output = Pipe(), error = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = error
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let errorData = ErrorCollector(error.fileHandleForReading)
        let outData = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                      stderr: String(decoding: errorData.wait(), as: UTF8.self))
    }

    func cleanUp() { try? FileManager.default.removeItem(at: stateDirectory) }
}

/// Drains a pipe on a background thread so neither stream can fill up and block the child.
final class ErrorCollector: @unchecked Sendable {
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            data = handle.readDataToEndOfFile()
            done.signal()
        }
    }

    func wait() -> Data {
        done.wait()
        return data
    }
}

/// Raw SQL on a database file through the `sqlite3` shell, as an attacker with file access would.
func sqlite3(_ path: String, _ sql: String) throws -> String {
    let result = try DevicectlRunner.execute(URL(fileURLWithPath: "/usr/bin/sqlite3"), [path, sql])
    #expect(result.status == 0, "sqlite3 failed: \(result.stderr)")
    return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
}
