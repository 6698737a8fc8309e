#if canImport(Glibc)
import Glibc
#endif

/// Reads which sandbox a process runs in, the way xdg-desktop-portal does: its root through
/// `/proc/PID/root`, then `.flatpak-info` relative to that root without following a link, a regular file,
/// and the process's pidfd checked alive after the read, so that a pid recycled in between cannot lend
/// another process's sandbox.
///
/// Reading another user's `/proc/PID/root` takes ptrace access (`CAP_SYS_PTRACE` for a daemon of another
/// uid); without it the read fails and the process is `unidentified`.
public enum SandboxReader {
    /// The largest `/.flatpak-info` read; Flatpak writes well under 4 KiB.
    static let maximumInfoBytes = 64 * 1024

    /// The sandbox of process `pid`, pinned by `pidfd` (a pidfd of that process, which the caller keeps
    /// open until this returns).
    public static func sandbox(ofProcess pid: Int32, pidfd: Int32) -> PeerSandbox {
        guard pid > 0 else { return .unidentified(reason: "the kernel gave no process id") }
        let sandbox = readSandbox(pid: pid)
        // Whatever was read belongs to `pid` only if the process the pidfd names is still alive: otherwise
        // the pid may have been reused in between.
        guard isAlive(pidfd: pidfd) else {
            return .unidentified(reason: "the process exited before it could be identified")
        }
        return sandbox
    }

    /// Whether the process behind `pidfd` is still running (a pidfd polls readable once it has exited).
    public static func isAlive(pidfd: Int32) -> Bool {
        var entry = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 0
    }

    private static func readSandbox(pid: Int32) -> PeerSandbox {
        // O_PATH (Linux; not in Glibc's Swift overlay without _GNU_SOURCE): the root as a directory to open from.
        let root = open("/proc/\(pid)/root", 0o10_000_000 | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else {
            return .unidentified(reason: "its root could not be opened (\(errorText(errno)))")
        }
        defer { close(root) }
        let info = openat(root, ".flatpak-info", O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
        guard info >= 0 else {
            let error = errno
            if error == ENOENT { return .host }
            return .unidentified(reason: "its /.flatpak-info could not be opened (\(errorText(error)))")
        }
        defer { close(info) }
        var status = stat()
        guard fstat(info, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            return .unidentified(reason: "its /.flatpak-info is not a regular file")
        }
        guard status.st_size <= maximumInfoBytes, let text = readAll(info) else {
            return .unidentified(reason: "its /.flatpak-info could not be read")
        }
        guard let app = FlatpakInfo.app(in: text) else {
            return .unidentified(reason: "its /.flatpak-info names no valid application")
        }
        return .flatpak(app)
    }

    private static func readAll(_ descriptor: Int32) -> String? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[..<count])
            if bytes.count > maximumInfoBytes { return nil }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func errorText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}

/// The two keys of a sandbox's `/.flatpak-info` (a GLib key file) that identify it.
enum FlatpakInfo {
    /// `[Application] name` (a valid Flatpak id) and `[Instance] instance-id`, or nil when the file has no
    /// valid application name. A key given twice in a group: the last one counts, as in GLib.
    static func app(in text: String) -> FlatpakApp? {
        var group = ""
        var name: String?
        var instance: String?
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let line = rawLine.trimmingPrefix(while: { $0 == " " || $0 == "\t" })
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                guard let end = line.firstIndex(of: "]") else { return nil }
                group = String(line[line.index(after: line.startIndex)..<end])
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingSuffix(while: { $0 == " " || $0 == "\t" })
            let value = String(line[line.index(after: equals)...].trimmingPrefix(while: { $0 == " " || $0 == "\t" }))
            switch (group, key) {
            case ("Application", "name"): name = value
            case ("Instance", "instance-id"): instance = value
            default: continue
            }
        }
        guard let name, FlatpakAppID.isValid(name) else { return nil }
        let instanceID = instance.flatMap { id in
            id.utf8.count <= 64 && id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) ? id : nil
        }
        return FlatpakApp(appID: name, instanceID: instanceID)
    }
}

extension Substring {
    fileprivate func trimmingSuffix(while predicate: (Character) -> Bool) -> Substring {
        var end = endIndex
        while end > startIndex, predicate(self[index(before: end)]) { end = index(before: end) }
        return self[startIndex..<end]
    }
}
