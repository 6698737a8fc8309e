public import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

extension SafeDirectory {
    /// Reaches the directory at `path` one component at a time from `/` (`openat` with `O_PATH|O_NOFOLLOW`,
    /// then `fstat`), the way systemd's `CHASE_SAFE` does, and holds it.
    ///
    /// Every directory on the way, the last included, must be owned by root or by this process's effective
    /// user, and must not be writable by its group or by others unless it has the sticky bit (a root-owned
    /// `/tmp` is fine): whoever else could write in one could swap what is below it for a symbolic link
    /// between our check and our use. A symbolic link on the way is followed only if root or this process's
    /// user owns it (`/var/run -> /run`). Relative paths are taken from the working directory.
    ///
    /// - Parameters:
    ///   - purpose: what the directory is, for messages ("the state directory").
    ///   - alternative: the way out that does not touch the directory, for messages ("choose another --state-dir").
    ///   - creatingWith: creates missing directories (the last and its parents) with these permissions
    ///     (less the umask), once their parent is found safe; `nil` refuses a missing directory.
    /// - Throws: `PathSafetyError` naming the component it stopped at and what to do.
    public static func open(
        _ path: String,
        purpose: String,
        alternative: String,
        creatingWith creation: FilePermissions? = nil
    ) throws(PathSafetyError) -> SafeDirectory {
        var chase = DirectoryChase(path: path, purpose: purpose, alternative: alternative, creation: creation)
        return try chase.run()
    }
}

/// The walk behind `SafeDirectory.open`: a stack of components still to visit, the directory reached so far.
struct DirectoryChase {
    let path: String
    let purpose: String
    let alternative: String
    let creation: FilePermissions?
    let me = geteuid()
    /// Symbolic links followed so far (the kernel's limit, 40, stops a loop).
    private var links = 0

    init(path: String, purpose: String, alternative: String, creation: FilePermissions?) {
        self.path = path.hasPrefix("/") ? path : Self.workingDirectory() + "/" + path
        self.purpose = purpose
        self.alternative = alternative
        self.creation = creation
    }

    mutating func run() throws(PathSafetyError) -> SafeDirectory {
        var pending = Self.components(of: path).reversed() as [String]
        var walked: [String] = []
        var current = try root()
        while let name = pending.popLast() {
            if name == "." { continue }
            if name == ".." {
                if !walked.isEmpty { walked.removeLast() }
                current = try enter(current, "..", display: Self.display(walked))
                continue
            }
            walked.append(name)
            let display = Self.display(walked)
            let entry = try lookUp(name, in: current, display: display)
            let info = try status(entry, display: display)
            switch info.type {
            case .directory:
                try check(info, display: display)
                current = SafeDirectory(
                    path: display,
                    descriptor: entry,
                    ownerID: info.userID.rawValue,
                    permissions: UInt32(info.mode.rawValue) & 0o7777
                )
            case .symbolicLink:
                defer { try? entry.close() }
                try checkLink(info, display: display)
                let target: String
                do throws(Errno) { target = try DirectorySyscalls.linkTarget(of: entry) } catch {
                    throw failure(error, display, "cannot read the symbolic link \(display)")
                }
                walked.removeLast()
                if target.hasPrefix("/") {
                    walked = []
                    current = try root()
                }
                pending.append(contentsOf: Self.components(of: target).reversed())
            default:
                try? entry.close()
                throw PathSafetyError(
                    .notDirectory,
                    at: display,
                    "\(purpose) \(path) cannot be used: \(display) is not a directory; \(alternative)"
                )
            }
        }
        return current
    }

    /// `/`, checked like every other component.
    private func root() throws(PathSafetyError) -> SafeDirectory {
        let descriptor: FileDescriptor
        do throws(Errno) {
            descriptor = try DirectorySyscalls.open(
                "/",
                in: FileDescriptor(rawValue: AT_FDCWD),
                DirectorySyscalls.O_PATH | O_DIRECTORY | O_CLOEXEC
            )
        } catch {
            throw failure(error, "/", "cannot open /")
        }
        let info = try status(descriptor, display: "/")
        try check(info, display: "/")
        return SafeDirectory(
            path: "/",
            descriptor: descriptor,
            ownerID: info.userID.rawValue,
            permissions: UInt32(info.mode.rawValue) & 0o7777
        )
    }

    /// The directory `name` (`..`) of `directory`, checked.
    private func enter(
        _ directory: SafeDirectory,
        _ name: String,
        display: String
    ) throws(PathSafetyError) -> SafeDirectory {
        let entry = try lookUp(name, in: directory, display: display)
        let info = try status(entry, display: display)
        try check(info, display: display)
        return SafeDirectory(
            path: display,
            descriptor: entry,
            ownerID: info.userID.rawValue,
            permissions: UInt32(info.mode.rawValue) & 0o7777
        )
    }

    /// A descriptor of what is at `name` in `directory`, the link itself for a symbolic link; a missing
    /// directory is created first when the walk creates.
    private func lookUp(
        _ name: String,
        in directory: SafeDirectory,
        display: String
    ) throws(PathSafetyError) -> FileDescriptor {
        let flags = DirectorySyscalls.O_PATH | O_NOFOLLOW | O_CLOEXEC
        do throws(Errno) {
            return try DirectorySyscalls.open(name, in: directory.descriptor, flags)
        } catch let error where error == .noSuchFileOrDirectory && creation != nil {
            do throws(Errno) {
                try DirectorySyscalls.makeDirectory(
                    name,
                    in: directory.descriptor,
                    permissions: mode_t(creation!.rawValue)
                )
            } catch let error where error == .fileExists {
                // Made meanwhile by someone allowed to write here: it is checked like any other.
            } catch {
                throw failure(error, display, "cannot create \(display)")
            }
            do throws(Errno) {
                return try DirectorySyscalls.open(name, in: directory.descriptor, flags)
            } catch {
                throw failure(error, display, "cannot open \(display)")
            }
        } catch {
            if error == .noSuchFileOrDirectory {
                throw PathSafetyError(
                    .system(error),
                    at: display,
                    "\(purpose) \(path) does not exist (\(display) is missing); create it, or \(alternative)"
                )
            }
            throw failure(error, display, "cannot open \(display)")
        }
    }

    private func status(_ descriptor: FileDescriptor, display: String) throws(PathSafetyError) -> Stat {
        do throws(Errno) {
            return try descriptor.stat()
        } catch {
            try? descriptor.close()
            throw failure(error, display, "cannot inspect \(display)")
        }
    }

    /// The `CHASE_SAFE` rule for a directory: owned by root or us, not writable by others without the sticky bit.
    private func check(_ info: Stat, display: String) throws(PathSafetyError) {
        let owner = info.userID.rawValue
        guard owner == 0 || owner == me else {
            throw PathSafetyError(
                .unsafe,
                at: display,
                """
                \(purpose) \(path) is unsafe: \(display) is owned by uid \(owner), not by root\(me == 0 ? "" : " or uid \(me) (this process)"), \
                and its owner could swap what is below it; run: chown \(me == 0 ? "root" : "\(me)") \(display), or \(alternative)
                """
            )
        }
        let mode = UInt32(info.mode.rawValue) & 0o7777
        guard mode & 0o022 == 0 || mode & 0o1000 != 0 else {
            throw PathSafetyError(
                .unsafe,
                at: display,
                """
                \(purpose) \(path) is unsafe: \(display) is writable by \(mode & 0o002 != 0 ? "every user" : "its group") \
                (mode \(String(mode, radix: 8))) without the sticky bit, so they could swap what is below it; \
                run: chmod go-w \(display), or \(alternative)
                """
            )
        }
    }

    /// A symbolic link is followed only when root or we own it (so nobody else chose where it points).
    private mutating func checkLink(_ info: Stat, display: String) throws(PathSafetyError) {
        let owner = info.userID.rawValue
        guard owner == 0 || owner == me else {
            throw PathSafetyError(
                .unsafe,
                at: display,
                """
                \(purpose) \(path) is unsafe: \(display) is a symbolic link owned by uid \(owner), who chooses where it leads; \
                give the real path, or \(alternative)
                """
            )
        }
        links += 1
        guard links <= 40 else {
            throw PathSafetyError(
                .system(.tooManySymbolicLinkLevels),
                at: display,
                "\(purpose) \(path) cannot be used: too many symbolic links (a loop at \(display)?); \(alternative)"
            )
        }
    }

    private func failure(_ error: Errno, _ display: String, _ what: String) -> PathSafetyError {
        PathSafetyError(
            .system(error),
            at: display,
            "\(what) on the way to \(purpose) \(path): \(error); \(alternative)"
        )
    }

    private static func components(of path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }

    private static func display(_ walked: [String]) -> String { "/" + walked.joined(separator: "/") }

    private static func workingDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return "." }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
