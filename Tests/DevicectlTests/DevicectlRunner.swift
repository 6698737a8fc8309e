import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

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

// MARK: - Policies, JSON and long-running children

extension DevicectlRunner {
    /// The repository's `policies/` directory.
    static let policiesDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("policies")

    /// The path of a shipped policy file, e.g. `policy("kiosk.json")`.
    static func policy(_ name: String) -> String { policiesDirectory.appendingPathComponent(name).path }

    /// Starts `devicectl ARGS --state-dir DIR` in the background (e.g. `audit --jsonl --follow`).
    func start(_ arguments: [String]) throws -> BackgroundProcess {
        try BackgroundProcess(Self.productsDirectory.appendingPathComponent("devicectl"),
                              arguments + ["--state-dir", stateDirectory.path])
    }

    /// Runs `devicectl ARGS --json` (the caller includes `--json`) and parses standard output.
    func json(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> Any {
        let result = try run(arguments)
        #expect(result.status == 0, "devicectl \(arguments.joined(separator: " ")) exited \(result.status): \(result.stderr)",
                sourceLocation: sourceLocation)
        return try parseJSON(result.stdout)
    }
}

/// Parses a JSON document (objects, arrays, `null` as `NSNull`).
func parseJSON(_ text: String) throws -> Any {
    try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
}

/// A child process that keeps running (a `devicectl audit --follow`, a `device-worker`), with stdout and
/// stderr drained continuously by one background thread so the child never blocks on a full pipe.
/// Nothing here asserts timing: every wait has a generous bound and reports whether it was reached.
final class BackgroundProcess: @unchecked Sendable {
    private struct Output {
        var stdout = Data()
        var stderr = Data()
        var exited = false
        var drained = false
    }

    private final class SharedOutput: Sendable {
        let state = Mutex(Output())
        func withLock<T>(_ body: (inout Output) -> T) -> T { state.withLock { body(&$0) } }
    }

    let label: String
    private let process = Process()
    private let output = SharedOutput()

    init(_ executable: URL, _ arguments: [String]) throws {
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw BackgroundProcessError(message: "\(executable.path) is missing; build the package with `swift build --build-tests`")
        }
        label = ([executable.lastPathComponent] + arguments).joined(separator: " ")
        let stdoutPipe = Pipe(), stderrPipe = Pipe()
        process.executableURL = executable
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        process.terminationHandler = { [output] _ in output.withLock { $0.exited = true } }
        try Self.withDefaultSignalMask { try process.run() }
        let readers = (stdoutPipe.fileHandleForReading, stderrPipe.fileHandleForReading)
        let thread = Thread { [self] in
            drain(stdout: readers.0.fileDescriptor, stderr: readers.1.fileDescriptor)
            withExtendedLifetime(readers) {}
        }
        thread.name = "drain \(executable.lastPathComponent)"
        thread.start()
    }

    /// Runs `body` (which spawns the child) with no signal blocked on the calling thread. The child inherits
    /// its spawner's signal mask, and the test runner's worker threads block most signals (SIGTERM and
    /// SIGINT included), so without this a child could not be stopped the way a user or a service manager
    /// stops it.
    private static func withDefaultSignalMask<T>(_ body: () throws -> T) rethrows -> T {
        var empty = sigset_t(), saved = sigset_t()
        sigemptyset(&empty)
        pthread_sigmask(SIG_SETMASK, &empty, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
        return try body()
    }

    /// Polls both pipes until both reach end of file, or the child has exited and nothing is left.
    private func drain(stdout: Int32, stderr: Int32) {
        var open = [stdout: true, stderr: true]
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while open.values.contains(true) {
            let exitedBeforePoll = output.withLock { $0.exited }
            var fds = open.filter(\.value).map { pollfd(fd: $0.key, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&fds, nfds_t(fds.count), 50)
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            if ready == 0 {
                if exitedBeforePoll { break }
                continue
            }
            for entry in fds where entry.revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
                guard count > 0 else {
                    open[entry.fd] = false
                    continue
                }
                let chunk = Data(buffer[0..<count])
                output.withLock { if entry.fd == stdout { $0.stdout.append(chunk) } else { $0.stderr.append(chunk) } }
            }
        }
        output.withLock { $0.drained = true }
    }

    var pid: pid_t { process.processIdentifier }
    var standardOutput: String { String(decoding: output.withLock { $0.stdout }, as: UTF8.self) }
    var standardError: String { String(decoding: output.withLock { $0.stderr }, as: UTF8.self) }

    /// The complete lines of standard output so far (a line still being written is left out).
    var lines: [String] {
        let text = standardOutput
        let complete = text.hasSuffix("\n") ? text[...] : text[..<(text.lastIndex(of: "\n") ?? text.startIndex)]
        return complete.split(separator: "\n").map(String.init)
    }

    private var isFinished: Bool { output.withLock { $0.exited && $0.drained } }

    /// Waits until a complete stdout line satisfies `predicate`; returns it, or `nil` on timeout or exit.
    func waitForLine(timeout: TimeInterval, where predicate: (String) -> Bool) async -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let line = lines.first(where: predicate) { return line }
            if Date() > deadline || isFinished { return lines.first(where: predicate) }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Waits until the complete stdout lines satisfy `condition`; `false` on timeout or exit.
    func waitForLines(timeout: TimeInterval, until condition: ([String]) -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if condition(lines) { return true }
            if Date() > deadline || isFinished { return condition(lines) }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Waits until the child has exited and its output is fully read; `false` on timeout.
    func waitForExit(timeout: TimeInterval) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !isFinished {
            if Date() > deadline { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// Sends `signal` to the child; `false` if it could not be delivered (the child is gone).
    @discardableResult
    func send(_ signal: Int32) -> Bool { kill(pid, signal) == 0 }

    var hasExited: Bool { output.withLock { $0.exited } }
    var exitedNormally: Bool { isFinished && process.terminationReason == .exit }
    var status: Int32 { isFinished ? process.terminationStatus : -1 }
    var killedBySignal: Int32? { isFinished && process.terminationReason == .uncaughtSignal ? process.terminationStatus : nil }

    /// SIGKILLs the child if it is still running (for `defer`).
    func killIfRunning() {
        if !hasExited { kill(pid, SIGKILL) }
    }
}

struct BackgroundProcessError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
