#if canImport(Glibc)
import Glibc
#endif

/// How the test workers (`Tests/Workers/*`) report to the test that drives them: one line per acknowledged
/// step on standard output, each written with a single write(2) and no stdio buffering, so whatever a
/// worker printed before it was killed with SIGKILL is in the pipe, and a line is never torn (lines are
/// shorter than `PIPE_BUF`, which POSIX writes to a pipe atomically). Errors go to standard error as
/// `error: <message>` with exit status 1.
public enum WorkerOutput {
    /// Writes `line` and a newline to standard output with one write(2). Exits 1 if nobody reads the
    /// pipe any more (there is no one left to report to).
    public static func say(_ line: String) {
        guard write(line + "\n", to: STDOUT_FILENO) else {
            // Say why on standard error (a test's failure message shows it), then stop.
            let reason = String(cString: strerror(errno))
            _ = write("error: cannot write to standard output (\(reason))\n", to: STDERR_FILENO)
            exit(1)
        }
    }

    /// Writes `error: <message>` to standard error and exits with status 1.
    public static func fail(_ message: String) -> Never {
        _ = write("error: \(message)\n", to: STDERR_FILENO)
        exit(1)
    }

    /// Writes `text` with one write(2) (retried only if a signal interrupted it before anything was written).
    private static func write(_ text: String, to descriptor: Int32) -> Bool {
        let bytes = Array(text.utf8)
        while true {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            return written == bytes.count
        }
    }
}
