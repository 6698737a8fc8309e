public import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A child process for the multi-process, SIGKILL and CLI tests (a worker, `devicectl audit --follow`), with
/// stdout and stderr drained continuously by one background thread so the child never blocks on a full
/// pipe. Nothing here asserts timing: every wait has a bound and reports whether it was reached.
public final class ChildProcess: @unchecked Sendable {
    private struct Output {
        var stdout = Data()
        var stderr = Data()
        var exited = false
        var drained = false
        /// When each complete stdout line was read, in line order.
        var lineArrivals: [ContinuousClock.Instant] = []
        /// A signal to send once a line with this prefix is read, after a delay (`signal(_:afterLine:delay:)`).
        var armed: (signal: Int32, prefix: String, delay: Duration)?
    }

    /// The collected output, shared with the drain thread and the termination handler.
    private final class SharedOutput: Sendable {
        let state = Mutex(Output())
        func withLock<T>(_ body: (inout Output) -> T) -> T { state.withLock { body(&$0) } }
    }

    /// The command line, for messages.
    public let label: String
    private let process = Process()
    /// The write end of the child's standard input, when the test writes to it.
    private let input: FileHandle?
    private let output = SharedOutput()

    /// The directory the package's executables are built into (the test bundle's neighbours).
    public static let productsDirectory: URL = {
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var url = URL(fileURLWithPath: executable).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("devicectl").path), url.path != "/" {
            url.deleteLastPathComponent()
        }
        return url
    }()

    /// Starts one of the package's executables (`keychain-worker`, `account-worker`, …).
    public convenience init(product: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        try self.init(Self.productsDirectory.appendingPathComponent(product), arguments, environment: environment)
    }

    /// Starts `executable` with `arguments`, standard input from `/dev/null` (or, with `writableInput`, a
    /// pipe the test writes to with `writeLine`), in this process's environment with `environment` added
    /// (or overriding).
    public init(
        _ executable: URL,
        _ arguments: [String],
        environment: [String: String] = [:],
        writableInput: Bool = false
    ) throws {
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw ChildProcessError(
                message: "\(executable.path) is missing; build the package with `swift build --build-tests`"
            )
        }
        label = ([executable.lastPathComponent] + arguments).joined(separator: " ")
        let stdoutPipe = Pipe()
        let stderrPipe = Pipe()
        process.executableURL = executable
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        if writableInput {
            let stdinPipe = Pipe()
            process.standardInput = stdinPipe
            input = stdinPipe.fileHandleForWriting
        } else {
            process.standardInput = FileHandle.nullDevice
            input = nil
        }
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        // The watchdog hears of the child before it hears that the child was reaped: the termination handler
        // waits for the spawn's lock.
        let spawning = NSLock()
        process.terminationHandler = { [output] process in
            spawning.withLock { ChildWatchdog.release(process.processIdentifier) }
            output.withLock { $0.exited = true }
        }
        try spawning.withLock {
            try Self.withDefaultSignalMask { try process.run() }
            ChildWatchdog.watch(process.processIdentifier)
        }
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
        var empty = sigset_t()
        var saved = sigset_t()
        sigemptyset(&empty)
        pthread_sigmask(SIG_SETMASK, &empty, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
        return try body()
    }

    /// Polls both pipes until both reach end of file, or the child has exited and nothing is left
    /// (a pipe end inherited by some other process must not keep us waiting for end of file).
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
                let now = ContinuousClock.now
                let fire = output.withLock { state -> (signal: Int32, delay: Duration)? in
                    guard entry.fd == stdout else {
                        state.stderr.append(chunk)
                        return nil
                    }
                    let completeBefore = state.lineArrivals.count
                    state.stdout.append(chunk)
                    let complete = state.stdout.reduce(0) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
                    state.lineArrivals += Array(repeating: now, count: max(0, complete - completeBefore))
                    guard let armed = state.armed else { return nil }
                    let newLines = String(decoding: state.stdout, as: UTF8.self).split(
                        separator: "\n",
                        omittingEmptySubsequences: false
                    )
                    .prefix(complete).dropFirst(completeBefore)
                    guard newLines.contains(where: { $0.hasPrefix(armed.prefix) }) else { return nil }
                    state.armed = nil
                    return (armed.signal, armed.delay)
                }
                if let fire {
                    // From this thread, at once: no task scheduling between reading the line and the signal.
                    if fire.delay > .zero {
                        Thread.sleep(
                            forTimeInterval: Double(fire.delay.components.seconds) + Double(
                                fire.delay.components.attoseconds
                            ) / 1e18
                        )
                    }
                    if !output.withLock({ $0.exited }) { kill(process.processIdentifier, fire.signal) }
                }
            }
        }
        output.withLock { $0.drained = true }
    }

    /// The child's process id.
    public var pid: pid_t { process.processIdentifier }
    /// Everything read from the child's standard output so far.
    public var standardOutput: String { String(decoding: output.withLock { $0.stdout }, as: UTF8.self) }
    /// Everything read from the child's standard error so far.
    public var standardError: String { String(decoding: output.withLock { $0.stderr }, as: UTF8.self) }

    /// The complete lines of standard output so far (a line still being written is left out).
    public var lines: [String] {
        let text = standardOutput
        let complete = text.hasSuffix("\n") ? text[...] : text[..<(text.lastIndex(of: "\n") ?? text.startIndex)]
        return complete.split(separator: "\n").map(String.init)
    }

    /// Complete stdout lines starting with `prefix`.
    public func lines(prefix: String) -> [String] { lines.filter { $0.hasPrefix(prefix) } }

    private var isFinished: Bool { output.withLock { $0.exited && $0.drained } }

    /// The shortest bound any wait below gets, whatever the test asks for. A bound only catches a child that
    /// hangs; it never measures speed, and a loaded 2-core machine (other builds, `stress-ng`) can take many
    /// seconds for a step that takes milliseconds when it is idle. A wait returns as soon as its condition
    /// holds, so the bound costs time only when the test fails anyway.
    public static let shortestWait: TimeInterval = 120

    private static func deadline(_ timeout: TimeInterval) -> Date {
        Date().addingTimeInterval(max(timeout, shortestWait))
    }

    /// Waits until the child has exited and its output is fully read; `false` on timeout.
    public func waitForExit(timeout: TimeInterval) async -> Bool {
        let deadline = Self.deadline(timeout)
        while !isFinished {
            if Date() > deadline { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// Waits until a complete stdout line satisfies `predicate`; returns it, or `nil` on timeout or exit.
    public func waitForLine(timeout: TimeInterval, where predicate: (String) -> Bool) async -> String? {
        let deadline = Self.deadline(timeout)
        while true {
            if let line = lines.first(where: predicate) { return line }
            if Date() > deadline || isFinished { return lines.first(where: predicate) }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Waits until the complete stdout lines satisfy `condition`; `false` on timeout or exit.
    public func waitForLines(timeout: TimeInterval, until condition: ([String]) -> Bool) async -> Bool {
        let deadline = Self.deadline(timeout)
        while true {
            if condition(lines) { return true }
            if Date() > deadline || isFinished { return condition(lines) }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Waits until stdout holds at least `count` lines starting with `prefix`; `false` on timeout or exit.
    public func waitForLines(atLeast count: Int, prefix: String, timeout: TimeInterval) async -> Bool {
        let deadline = Self.deadline(timeout)
        while lines(prefix: prefix).count < count {
            if Date() > deadline || isFinished { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// Arms `signal` to be sent `delay` after a complete stdout line starting with `prefix` is read, by the
    /// thread that reads it (so a test can land a kill at a chosen offset into the step a line announces,
    /// without the latency of polling from a task). Only one signal can be armed; it fires once.
    public func signal(_ signal: Int32, afterLine prefix: String, delay: Duration) {
        output.withLock { $0.armed = (signal, prefix, delay) }
    }

    /// When the complete stdout line `index` was read (for measuring how long a child's steps take).
    public func arrival(ofLine index: Int) -> ContinuousClock.Instant? {
        output.withLock { index < $0.lineArrivals.count ? $0.lineArrivals[index] : nil }
    }

    /// Sends `signal` to the child; `false` if it could not be delivered (the child is gone). A child that
    /// has exited gets nothing: its pid may already belong to another process (pids wrap at
    /// /proc/sys/kernel/pid_max, 32768 here, and a full test run starts thousands of processes).
    @discardableResult
    public func send(_ signal: Int32) -> Bool {
        guard !hasExited else { return false }
        return kill(pid, signal) == 0
    }

    /// Whether the child has exited (its output may still be draining).
    public var hasExited: Bool { output.withLock { $0.exited } }
    /// Whether the child has finished by calling exit (not by a signal).
    public var exitedNormally: Bool { isFinished && process.terminationReason == .exit }
    /// The exit status, or the signal number for a child killed by a signal; -1 while it runs.
    public var status: Int32 { isFinished ? process.terminationStatus : -1 }
    /// The signal that ended the child, if one did.
    public var killedBySignal: Int32? {
        isFinished && process.terminationReason == .uncaughtSignal ? process.terminationStatus : nil
    }
    /// How the child ended, for messages: `exit status`, `signal` or `still running`.
    public var reasonDescription: String {
        guard isFinished else { return "still running" }
        return process.terminationReason == .exit ? "exit status" : "signal"
    }

    /// Writes `line` and a newline to the child's standard input (started with `writableInput`); false when
    /// it has none or the child is gone.
    @discardableResult
    public func writeLine(_ line: String) -> Bool {
        guard let input else { return false }
        do {
            try input.write(contentsOf: Data((line + "\n").utf8))
            return true
        } catch {
            return false
        }
    }

    /// Sends SIGKILL unless the child has already exited (for `defer`). - Returns: whether it was sent.
    @discardableResult
    public func killIfRunning() -> Bool {
        guard !hasExited else { return false }
        return kill(pid, SIGKILL) == 0
    }
}

/// A child process could not be started, or a test's own plumbing failed.
public struct ChildProcessError: Error, CustomStringConvertible {
    /// What went wrong.
    public var message: String
    public var description: String { message }
    /// An error saying `message`.
    public init(message: String) { self.message = message }
}
