import CSQLiteControl
import GRDB
import GRDBSQLite
import PathSafety

/// The store's database file reached through the state directory the store holds.
///
/// SQLite opens files by path only, and its unix VFS resolves every symbolic link of a path to the link's
/// text before opening: handed `/proc/self/fd/N/keychain.sqlite` it would walk the directory's path again.
/// The store therefore opens the database with a VFS of its own (`sqlite_control_held_directory_vfs`: the
/// unix VFS, but a `/proc/self/fd/` path is taken as it is), named by a URI filename. Each open by SQLite
/// of the database, its `-journal`, `-wal` and `-shm` (all with `O_NOFOLLOW`) and of the directory it
/// syncs then resolves through the descriptor held since the directory was checked: a path swapped after
/// the check changes nothing, and a symbolic link planted at one of those names is refused.
///
/// No fallback to the plain path: without a `/proc` of this process's, or an SQLite that takes URI
/// filenames, the store does not open (a typed `ioError` that says so).
struct HeldDatabaseFile: Sendable {
    /// The state directory, held.
    let directory: SafeDirectory
    /// The database's name in it.
    let name: String
    /// The VFS's name.
    let vfs: String

    /// The real path, for messages (never used to reach the file).
    var path: String { directory.path == "/" ? "/" + name : directory.path + "/" + name }
    /// The path SQLite is given and reports (`sqlite3_db_filename`): through the held descriptor.
    var descriptorPath: String { directory.descriptorPath + "/" + name }
    /// The URI filename that opens `descriptorPath` with the VFS (GRDB opens with `sqlite3_open_v2` and no VFS).
    var uri: String { "file:" + descriptorPath + "?vfs=" + vfs }

    /// - Throws: `ioError` when `/proc` does not reach the held directory (not mounted, or another
    ///   process's), or SQLite cannot take the VFS or URI filenames.
    init(directory: SafeDirectory, name: String) throws(KeychainError) {
        guard directory.descriptorPathReachesItself else {
            throw KeychainError(
                .ioError,
                """
                cannot open the store in \(directory.path): \(directory.descriptorPath) does not lead to the state directory held since \
                it was checked (/proc is not mounted, or is not this process's), and the store's database is opened only through it; \
                mount /proc: mount -t proc proc /proc
                """
            )
        }
        guard let vfs = sqlite_control_held_directory_vfs() else {
            throw KeychainError(
                .ioError,
                "cannot open the store in \(directory.path): SQLite has no unix VFS to open it through; use the system's libsqlite3"
            )
        }
        guard sqlite_control_uri_filenames() == 1 else {
            throw KeychainError(
                .ioError,
                """
                cannot open the store in \(directory.path): this process's SQLite does not take URI filenames, through which the store \
                names the VFS that opens the database relative to the held state directory; use an SQLite built with SQLITE_USE_URI=1
                """
            )
        }
        self.directory = directory
        self.name = name
        self.vfs = String(cString: vfs)
    }

    /// Checks that `connection` has the database open through the held directory with the VFS (what
    /// `sqlite3_db_filename` and `SQLITE_FCNTL_VFSNAME` report).
    /// - Throws: `ioError` when it is not (the URI was not taken as one).
    func verify(_ connection: OpaquePointer) throws(KeychainError) {
        let reported = sqlite3_db_filename(connection, "main").map { String(cString: $0) }
        let used = sqlite_control_vfs_name(UnsafeMutableRawPointer(connection)).map { name in
            defer { sqlite_control_free(name) }
            return String(cString: name)
        }
        guard reported == descriptorPath, used == vfs else {
            throw KeychainError(
                .ioError,
                """
                the store \(path) was not opened through the held state directory (SQLite reports \(reported ?? "no file") \
                with VFS \(used ?? "none")); nothing was changed: use the system's libsqlite3
                """
            )
        }
    }
}
