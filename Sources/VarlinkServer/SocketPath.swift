import Foundation
import PathSafety
import SystemPackage
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// Taking a socket path safely for a listening server (`VarlinkServer.Listener.path`). Every directory on
/// the way to it must be owned by root or the server's uid and writable by nobody else (bar root's sticky
/// ones, `/tmp`), and its own directory must be the server's (owned by its uid, writable by nobody else),
/// so that nobody can swap the path or a directory above it for a symlink; that directory is then held by
/// a descriptor and every later step names files relative to it. An existing socket is replaced only when
/// nobody answers on it (a live server is named and left alone); anything else at the path (a file, a
/// directory, a symlink) is refused and kept. The socket is bound in a private directory beside the path
/// (held by a descriptor too, and reached through it), made connectable there (`fchmodat`) and renamed
/// into place (`renameat`): no mode is ever set through a path someone else could change.
struct SocketPath {
    let path: String

    /// The directory the socket goes in.
    var directory: String {
        let parent = (path as NSString).deletingLastPathComponent
        return parent.isEmpty ? "." : parent
    }

    /// The socket's name in its directory.
    var name: String { (path as NSString).lastPathComponent }

    /// The device and inode of the socket this server put at `path`, to remove it at stop only if it is still ours.
    struct Identity: Sendable, Equatable {
        var device: UInt64
        var inode: UInt64
    }

    /// The private directory (mode 0700) beside the path that the socket is bound in before it goes in place.
    struct Staging: Sendable {
        /// Its name in the socket's directory.
        let name: String
        /// The directory itself, held.
        let directory: SafeDirectory
        /// Where to bind the socket: through the descriptor of the staging directory, not its path.
        let bindPath: String
    }

    /// Checks every directory on the way (creating missing ones, mode 0755, once their parent is found
    /// safe) and what is at the path now; removes a stale socket. Returns the socket's directory, held.
    /// - Throws: `VarlinkServerError` saying what is wrong and what to do.
    func prepare() throws(VarlinkServerError) -> SafeDirectory {
        let held: SafeDirectory
        do {
            held = try SafeDirectory.open(
                directory,
                purpose: "the socket's directory",
                alternative: "choose another --socket",
                creatingWith: [.ownerReadWriteExecute, .groupReadExecute, .otherReadExecute]
            )
        } catch {
            throw VarlinkServerError(error.message)
        }
        let me = geteuid()
        guard held.ownerID == me else {
            throw VarlinkServerError(
                """
                the socket's directory \(directory) is owned by uid \(held.ownerID), not by this daemon's uid \(me): \
                its owner could replace the socket; \(Self.ownDirectoryAdvice(for: me))
                """
            )
        }
        guard held.permissions & 0o022 == 0 else {
            let writers = held.permissions & 0o002 != 0 ? "every user" : "its group"
            let mode = String(held.permissions, radix: 8)
            // A shared sticky directory (/tmp) is meant to stay writable: the fix is a directory of the daemon's own.
            if held.permissions & 0o1000 != 0 {
                throw VarlinkServerError(
                    """
                    the socket's directory \(directory) is writable by \(writers) (mode \(mode), a shared directory such as /tmp): \
                    another user could take the socket's name there before the daemon does or once it stops; \
                    \(Self.ownDirectoryAdvice(for: me))
                    """
                )
            }
            throw VarlinkServerError(
                """
                the socket's directory \(directory) is writable by \(writers) (mode \(mode)): anyone who may write there \
                could replace the socket; if the directory is the daemon's alone, run chmod go-w \(directory); else \
                \(Self.ownDirectoryAdvice(for: me))
                """
            )
        }
        let existing: Stat
        do throws(Errno) {
            existing = try held.status(of: name)
        } catch {
            guard error == .noSuchFileOrDirectory else {
                throw VarlinkServerError("cannot inspect the socket path \(path): \(error)")
            }
            return held
        }
        switch existing.type {
        case .socket:
            if let running = Self.liveServer(at: held.descriptorPath + "/" + name) {
                throw VarlinkServerError(
                    "another server already listens on \(path) (\(running)); stop it first, or choose another --socket"
                )
            }
            do throws(Errno) {
                try held.remove(name)
            } catch let error where error != .noSuchFileOrDirectory {
                throw VarlinkServerError("cannot remove the stale socket \(path): \(error)")
            } catch {}
            return held
        case .symbolicLink:
            throw VarlinkServerError(
                "the socket path \(path) is a symbolic link, not a socket; nothing was changed: remove it or choose another --socket"
            )
        case .directory:
            throw VarlinkServerError(
                "the socket path \(path) is a directory, not a socket; nothing was changed: remove it or choose another --socket"
            )
        case .regular:
            throw VarlinkServerError(
                "the socket path \(path) is a regular file, not a socket; nothing was changed: remove it or choose another --socket"
            )
        default:
            throw VarlinkServerError(
                "the socket path \(path) is not a socket; nothing was changed: remove it or choose another --socket"
            )
        }
    }

    /// What to do instead of a socket directory that is not the daemon's own: make one (owned by the
    /// daemon's uid, searchable by the apps' users, writable by nobody else) and put the socket in it.
    static func ownDirectoryAdvice(for uid: uid_t) -> String {
        uid == 0
            ? "give the daemon a directory of its own: install -d -m 0755 /run/myapp, then --socket /run/myapp/broker.sock (the system's default, /run/devicectl/broker.sock, is one)"
            : "give the daemon a directory of its own (owned by uid \(uid), in a directory the apps' users can search): install -d -m 0755 DIR, then --socket DIR/broker.sock"
    }

    /// A private directory (mode 0700, owned by this process's uid) in `directory` to bind the socket in.
    func makeStagingDirectory(in directory: SafeDirectory) throws(VarlinkServerError) -> Staging {
        for _ in 0..<16 {
            let name = ".socket-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            do throws(Errno) {
                try directory.makeDirectory(name, permissions: .ownerReadWriteExecute)
            } catch let error where error == .fileExists {
                continue
            } catch {
                throw VarlinkServerError(
                    "cannot create a private directory in \(self.directory) for the socket: \(error)"
                )
            }
            let staging: SafeDirectory
            do throws(Errno) {
                staging = try directory.subdirectory(name)
            } catch {
                _ = try? directory.remove(name, isDirectory: true)
                throw VarlinkServerError(
                    "cannot open the private directory \(self.directory)/\(name) made for the socket: \(error)"
                )
            }
            // Only this process's uid may write in the socket's directory: nobody else can have replaced it.
            guard staging.ownerID == geteuid(), staging.permissions & 0o077 == 0 else {
                _ = try? directory.remove(name, isDirectory: true)
                throw VarlinkServerError(
                    "the private directory \(self.directory)/\(name) made for the socket is not private (owner \(staging.ownerID), mode \(String(staging.permissions, radix: 8)))"
                )
            }
            return Staging(name: name, directory: staging, bindPath: staging.descriptorPath + "/" + self.name)
        }
        throw VarlinkServerError(
            "cannot create a private directory in \(directory) for the socket: every name tried was taken"
        )
    }

    /// Makes the socket bound in `staging` connectable by every user (`fchmodat` in the held staging
    /// directory) and renames it to the path (`renameat` into the held socket directory); removes the
    /// staging directory. Returns the socket's identity.
    func publish(from staging: Staging, to directory: SafeDirectory) throws(VarlinkServerError) -> Identity {
        defer { try? directory.remove(staging.name, isDirectory: true) }
        let info: Stat
        do throws(Errno) {
            info = try staging.directory.status(of: name)
        } catch {
            throw VarlinkServerError("the socket bound in \(self.directory)/\(staging.name) is gone: \(error)")
        }
        guard info.type == .socket else {
            throw VarlinkServerError("what is bound in \(self.directory)/\(staging.name) is not a socket")
        }
        do throws(Errno) {
            try staging.directory.setPermissions(of: name, to: [.ownerReadWrite, .groupReadWrite, .otherReadWrite])
        } catch {
            throw VarlinkServerError("cannot make the socket connectable by every user (fchmodat: \(error))")
        }
        do throws(Errno) {
            try staging.directory.rename(name, to: name, in: directory)
        } catch {
            throw VarlinkServerError("cannot move the socket into place at \(path): \(error)")
        }
        return Identity(device: UInt64(info.deviceID.rawValue), inode: UInt64(info.inode.rawValue))
    }

    /// Removes the socket from `directory` if it is still the one this server published (never another's).
    func remove(ifStill identity: Identity, in directory: SafeDirectory) {
        guard let info = try? directory.status(of: name), UInt64(info.deviceID.rawValue) == identity.device,
            UInt64(info.inode.rawValue) == identity.inode
        else { return }
        try? directory.remove(name)
    }

    /// Who answers on the socket at `path`, or nil when nobody does (a stale socket).
    static func liveServer(at path: String) -> String? {
        guard let connection = try? VarlinkConnection(unixSocketPath: path) else { return nil }
        defer { connection.close() }
        guard let peer = try? connection.peer() else { return "a process the kernel does not name" }
        return "pid \(peer.pid), uid \(peer.uid)"
    }
}
