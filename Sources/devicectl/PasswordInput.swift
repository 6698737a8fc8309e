import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The worker's password for `--flow password`: from standard input with `--password-stdin` (one line; a
/// trailing newline is dropped), else typed at a terminal with echo off. Never from the command line.
enum PasswordInput {
    /// The longest password read (bytes).
    static let maximumBytes = 1024

    static func read(fromStandardInput: Bool, username: String) throws -> String {
        if fromStandardInput { return try fromPipe() }
        guard isatty(STDIN_FILENO) == 1 else {
            throw CLIError(
                exitCode: .usage,
                "--flow password needs the password: pass it on standard input with --password-stdin, or run at a terminal"
            )
        }
        return try typed(prompt: "Password for \(username.forTerminal): ")
    }

    private static func fromPipe() throws -> String {
        var data = FileHandle.standardInput.readData(ofLength: maximumBytes + 2)
        defer { data.resetBytes(in: 0..<data.count) }
        if data.last == UInt8(ascii: "\n") { data.removeLast() }
        if data.last == UInt8(ascii: "\r") { data.removeLast() }
        guard data.count <= maximumBytes else {
            throw CLIError(exitCode: .badInput, "the password on standard input is longer than \(maximumBytes) bytes")
        }
        guard !data.isEmpty, let password = String(data: data, encoding: .utf8) else {
            throw CLIError(exitCode: .badInput, "standard input held no password (UTF-8, one line)")
        }
        return password
    }

    /// Reads a line at the terminal with echo off (restored afterwards, also on failure).
    private static func typed(prompt: String) throws -> String {
        FileHandle.standardError.write(Data(prompt.utf8))
        var saved = termios()
        guard tcgetattr(STDIN_FILENO, &saved) == 0 else {
            throw CLIError(exitCode: .osError, "cannot read the terminal's settings")
        }
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        _ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        defer {
            _ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        guard let line = readLine(strippingNewline: true), !line.isEmpty else {
            throw CLIError(exitCode: .badInput, "no password was typed")
        }
        guard line.utf8.count <= maximumBytes else {
            throw CLIError(exitCode: .badInput, "the password is longer than \(maximumBytes) bytes")
        }
        return line
    }
}
