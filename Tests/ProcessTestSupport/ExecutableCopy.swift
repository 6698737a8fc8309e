import Foundation
import SystemPackage

/// Copies a file for other users to run, in a `cp` process of its own. The copy is never open for writing in
/// the test process: a descriptor open there, even close-on-exec, is inherited by every child another thread
/// forks before that child's `exec`, and while any process holds the file open for writing every `exec` of
/// it fails with "Text file busy" (ETXTBSY). `cp`'s descriptor lives and dies in `cp`.
public enum ExecutableCopy {
    /// Copies `source` to `destination` with `mode` (default 0755).
    public static func copy(from source: String, to destination: String, mode: UInt16 = 0o755) throws {
        let status = try spawnAndWait("/bin/cp", ["cp", "--", source, destination])
        guard status == 0 else {
            throw CocoaError(
                .fileWriteUnknown,
                userInfo: [
                    NSFilePathErrorKey: destination,
                    NSLocalizedDescriptionKey: "cp \(source) \(destination) exited with \(status)",
                ]
            )
        }
        // The mode as asked, whatever the umask and the source's mode.
        guard chmod(destination, mode_t(mode)) == 0 else { throw Errno(rawValue: errno) }
    }

    /// Runs `path` with `arguments` (its standard streams this process's) and returns its exit status.
    private static func spawnAndWait(_ path: String, _ arguments: [String]) throws -> Int32 {
        var pid = pid_t()
        let argv = arguments.map { strdup($0) } + [nil]
        defer {
            for argument in argv { free(argument) }
        }
        let spawned = posix_spawn(&pid, path, nil, nil, argv, environ)
        guard spawned == 0 else { throw Errno(rawValue: spawned) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw Errno(rawValue: errno) }
        }
        // WIFEXITED / WEXITSTATUS, which Swift does not import from the C macros.
        return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}
