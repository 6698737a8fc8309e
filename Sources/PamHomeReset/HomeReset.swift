#if canImport(Glibc)
import Glibc
#endif

/// Gives a local account a fresh home: everything in it removed, then /etc/skel copied in and handed to
/// the account. The account's processes (the kiosk user's) may have planted symlinks anywhere in it, so
/// every step goes by descriptor from the home's own (`openat`/`unlinkat` with `O_NOFOLLOW`): nothing
/// outside the home is ever followed, removed or chowned.
public enum HomeReset {
    /// The skeleton copied into the fresh home.
    public static let defaultSkeleton = "/etc/skel"
    /// How deep a home's directories may nest before the reset gives up.
    static let maximumDepth = 64

    /// Why a home was not reset.
    public struct Failure: Error, Sendable {
        /// What failed, naming the path; never a secret.
        public var message: String
    }

    /// Resets the home of `user`, which must be a local account other than root with an absolute home
    /// that is not `/` and that the account or root owns, from `skeleton` (default /etc/skel).
    public static func reset(user: String, skeleton: String = defaultSkeleton) throws(Failure) {
        guard let entry = getpwnam(user) else { throw Failure(message: "no local account \(user)") }
        let uid = entry.pointee.pw_uid
        let gid = entry.pointee.pw_gid
        let home = String(cString: entry.pointee.pw_dir)
        guard uid != 0, home.hasPrefix("/"), home != "/", !home.contains("/../") else {
            throw Failure(message: "\(user) is root or has no home that may be reset (\(home))")
        }
        let directory = open(home, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard directory >= 0 else { throw Failure(message: "cannot open \(home): \(describe(errno))") }
        defer { close(directory) }
        var status = stat()
        guard fstat(directory, &status) == 0, status.st_uid == uid || status.st_uid == 0 else {
            throw Failure(message: "\(home) belongs to neither \(user) nor root")
        }
        try empty(directory, depth: 0)
        let skeletonDirectory = open(skeleton, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if skeletonDirectory >= 0 {
            defer { close(skeletonDirectory) }
            try copy(from: skeletonDirectory, to: directory, uid: uid, gid: gid, depth: 0)
        }
        guard fchown(directory, uid, gid) == 0 else {
            throw Failure(message: "cannot chown \(home): \(describe(errno))")
        }
    }

    /// The names in the directory open at `directory` (not `.` or `..`).
    private static func names(in directory: Int32) throws(Failure) -> [String] {
        let copy = dup(directory)
        guard copy >= 0, let stream = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            throw Failure(message: "cannot list a directory: \(describe(errno))")
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var result: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { result.append(name) }
        }
        return result
    }

    /// Removes everything inside the directory open at `directory`, never following a symlink.
    private static func empty(_ directory: Int32, depth: Int) throws(Failure) {
        guard depth < maximumDepth else { throw Failure(message: "directories nest deeper than \(maximumDepth)") }
        for name in try names(in: directory) {
            var status = stat()
            guard fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            if status.st_mode & S_IFMT == S_IFDIR {
                let child = openat(directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard child >= 0 else { throw Failure(message: "cannot open \(name): \(describe(errno))") }
                defer { close(child) }
                try empty(child, depth: depth + 1)
                guard unlinkat(directory, name, AT_REMOVEDIR) == 0 || errno == ENOENT else {
                    throw Failure(message: "cannot remove \(name): \(describe(errno))")
                }
            } else {
                guard unlinkat(directory, name, 0) == 0 || errno == ENOENT else {
                    throw Failure(message: "cannot remove \(name): \(describe(errno))")
                }
            }
        }
    }

    /// Copies the skeleton directory open at `source` into `target`, every copy the account's.
    private static func copy(from source: Int32, to target: Int32, uid: uid_t, gid: gid_t, depth: Int) throws(Failure) {
        guard depth < maximumDepth else { throw Failure(message: "the skeleton nests deeper than \(maximumDepth)") }
        for name in try names(in: source) {
            var status = stat()
            guard fstatat(source, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            let mode = status.st_mode & 0o7777 & ~mode_t(S_ISUID | S_ISGID)
            switch status.st_mode & S_IFMT {
            case S_IFDIR:
                guard mkdirat(target, name, 0o700) == 0 else {
                    throw Failure(message: "cannot create \(name): \(describe(errno))")
                }
                let from = openat(source, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                let to = openat(target, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                defer {
                    if from >= 0 { close(from) }
                    if to >= 0 { close(to) }
                }
                guard from >= 0, to >= 0 else { throw Failure(message: "cannot open \(name): \(describe(errno))") }
                try copy(from: from, to: to, uid: uid, gid: gid, depth: depth + 1)
                _ = fchown(to, uid, gid)
                _ = fchmod(to, mode)
            case S_IFREG:
                let from = openat(source, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
                let to = openat(target, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                defer {
                    if from >= 0 { close(from) }
                    if to >= 0 { close(to) }
                }
                guard from >= 0, to >= 0 else { throw Failure(message: "cannot copy \(name): \(describe(errno))") }
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
                    if count < 0 && errno == EINTR { continue }
                    guard count >= 0 else { throw Failure(message: "cannot read \(name): \(describe(errno))") }
                    if count == 0 { break }
                    var offset = 0
                    while offset < count {
                        let written = buffer.withUnsafeBytes { write(to, $0.baseAddress! + offset, count - offset) }
                        if written < 0 && errno == EINTR { continue }
                        guard written > 0 else { throw Failure(message: "cannot write \(name): \(describe(errno))") }
                        offset += written
                    }
                }
                _ = fchown(to, uid, gid)
                _ = fchmod(to, mode)
            case S_IFLNK:
                var link = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
                let length = readlinkat(source, name, &link, link.count - 1)
                guard length >= 0 else { continue }
                link[length] = 0
                guard symlinkat(link, target, name) == 0 else {
                    throw Failure(message: "cannot create the link \(name): \(describe(errno))")
                }
                _ = fchownat(target, name, uid, gid, AT_SYMLINK_NOFOLLOW)
            default:
                continue  // no devices, sockets or fifos in a home from the skeleton
            }
        }
    }

    private static func describe(_ code: Int32) -> String { String(cString: strerror(code)) }
}
