#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Varlink

/// Taking a socket path safely for a listening server (`VarlinkServer.Listener.path`). Its directory must
/// be the server's own (owned by its uid, writable by nobody else), so that nobody can swap the path for a
/// symlink; an existing socket is replaced only when nobody answers on it (a live server is named and
/// left alone); anything else at the path (a file, a directory, a symlink) is refused and kept. The socket
/// is created in a private directory beside the path, made connectable there, and renamed into place: no
/// mode is ever set through a path someone else could change.
struct SocketPath {
    let path: String

    /// The directory the socket goes in.
    var directory: String {
        let parent = (path as NSString).deletingLastPathComponent
        return parent.isEmpty ? "." : parent
    }

    /// The path of the socket bound in `staging` before it is moved into place.
    func staged(in staging: String) -> String { staging + "/" + (path as NSString).lastPathComponent }

    /// The device and inode of the socket this server put at `path`, to remove it at stop only if it is still ours.
    struct Identity: Sendable, Equatable {
        var device: UInt64
        var inode: UInt64
    }

    /// Checks the directory and what is at the path now; removes a stale socket.
    /// - Throws: `VarlinkServerError` saying what is wrong and what to do.
    func prepare() throws(VarlinkServerError) {
        var parent = stat()
        guard stat(directory, &parent) == 0 else {
            throw VarlinkServerError("cannot use the socket's directory \(directory): \(Self.describe(errno)); create it (owned by uid \(geteuid()), mode 0755)")
        }
        guard (parent.st_mode & S_IFMT) == S_IFDIR else { throw VarlinkServerError("the socket's directory \(directory) is not a directory") }
        guard parent.st_uid == geteuid() else {
            throw VarlinkServerError("""
                the socket's directory \(directory) is owned by uid \(parent.st_uid), not by this daemon's uid \(geteuid()): \
                its owner could replace the socket; use a directory of the daemon's own (the default \(directory == "/run/devicectl" ? "is" : "/run/devicectl is"))
                """)
        }
        guard parent.st_mode & (S_IWGRP | S_IWOTH) == 0 else {
            throw VarlinkServerError("""
                the socket's directory \(directory) is writable by \(parent.st_mode & S_IWOTH != 0 ? "every user" : "its group") \
                (mode \(String(parent.st_mode & 0o7777, radix: 8))): anyone who may write there could replace the socket; chmod go-w \(directory) or use another directory
                """)
        }
        var existing = stat()
        guard lstat(path, &existing) == 0 else {
            guard errno == ENOENT else { throw VarlinkServerError("cannot inspect the socket path \(path): \(Self.describe(errno))") }
            return
        }
        switch existing.st_mode & S_IFMT {
        case S_IFSOCK:
            if let running = Self.liveServer(at: path) {
                throw VarlinkServerError("another server already listens on \(path) (\(running)); stop it first, or choose another --socket")
            }
            guard unlink(path) == 0 || errno == ENOENT else {
                throw VarlinkServerError("cannot remove the stale socket \(path): \(Self.describe(errno))")
            }
        case S_IFLNK: throw VarlinkServerError("the socket path \(path) is a symbolic link, not a socket; nothing was changed: remove it or choose another --socket")
        case S_IFDIR: throw VarlinkServerError("the socket path \(path) is a directory, not a socket; nothing was changed: remove it or choose another --socket")
        case S_IFREG: throw VarlinkServerError("the socket path \(path) is a regular file, not a socket; nothing was changed: remove it or choose another --socket")
        default: throw VarlinkServerError("the socket path \(path) is not a socket; nothing was changed: remove it or choose another --socket")
        }
    }

    /// A private directory beside the path (mode 0700) to bind the socket in before it is moved into place.
    func makeStagingDirectory() throws(VarlinkServerError) -> String {
        var template = Array("\(directory)/.socket-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw VarlinkServerError("cannot create a private directory in \(directory) for the socket: \(Self.describe(errno))")
        }
        return String(cString: made)
    }

    /// Makes the socket bound at `staged` (in the private `staging` directory) connectable by every user
    /// and renames it to the path; removes the staging directory. Returns the socket's identity.
    func publish(_ staged: String, staging: String) throws(VarlinkServerError) -> Identity {
        defer { _ = rmdir(staging) }
        // Only this process can write in `staging`: the path cannot have been swapped.
        guard chmod(staged, 0o666) == 0 else {
            throw VarlinkServerError("cannot make the socket connectable by every user (chmod: \(Self.describe(errno)))")
        }
        var info = stat()
        guard lstat(staged, &info) == 0, (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw VarlinkServerError("the socket bound in \(staging) is gone or not a socket")
        }
        guard rename(staged, path) == 0 else {
            throw VarlinkServerError("cannot move the socket into place at \(path): \(Self.describe(errno))")
        }
        return Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Removes the socket at the path if it is still the one this server published (never another's).
    func remove(ifStill identity: Identity) {
        var info = stat()
        guard lstat(path, &info) == 0, UInt64(info.st_dev) == identity.device, UInt64(info.st_ino) == identity.inode else { return }
        _ = unlink(path)
    }

    /// Who answers on the socket at `path`, or nil when nobody does (a stale socket).
    static func liveServer(at path: String) -> String? {
        guard let connection = try? VarlinkConnection(unixSocketPath: path) else { return nil }
        defer { connection.close() }
        guard let peer = try? connection.peer() else { return "a process the kernel does not name" }
        return "pid \(peer.pid), uid \(peer.uid)"
    }

    private static func describe(_ code: Int32) -> String { String(cString: strerror(code)) }
}
