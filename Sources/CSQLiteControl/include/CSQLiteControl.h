#ifndef CSQLITECONTROL_H
#define CSQLITECONTROL_H

/// sqlite3_db_config(connection, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL): closing `connection` (a
/// `sqlite3 *`) leaves the write-ahead log as it is, not checkpointed into the database file nor removed.
/// Returns SQLite's result code. (sqlite3_db_config is variadic, which Swift cannot call; the connection is
/// passed untyped so that this module declares none of SQLite's types beside GRDB's.)
int sqlite_control_keep_wal_on_close(void *connection);

/// The name of a VFS that is SQLite's "unix" VFS but for one thing: a path that starts with
/// `/proc/self/fd/` is taken as it is. The unix VFS resolves every symbolic link of a path to its target
/// text before it opens anything, which turns `/proc/self/fd/N/name` (a directory held by descriptor N)
/// back into the directory's path, to be walked again at every open; this one leaves the kernel to follow
/// the descriptor, so the database, its journal, write-ahead log and shared-memory files (each opened by
/// the unix VFS with `O_NOFOLLOW`) and the directory it syncs are all reached through that descriptor.
/// Registered once (not as the default VFS) on the first call, which also turns URI filenames on if this
/// SQLite is not built with them and is not initialised yet; NULL when it cannot be registered.
const char *sqlite_control_held_directory_vfs(void);

/// Whether this process's SQLite takes URI filenames in sqlite3_open_v2 without SQLITE_OPEN_URI (as
/// GRDB opens), so that a `file:...?vfs=NAME` name chooses that VFS: 1 or 0.
int sqlite_control_uri_filenames(void);

/// The name of the VFS the main database of `connection` uses (SQLITE_FCNTL_VFSNAME, the caller frees it
/// with sqlite_control_free), or NULL.
char *sqlite_control_vfs_name(void *connection);

/// The first region of the write-ahead-log index of `connection`'s main database (the `-shm` file's first
/// 32 KiB, where its header is), as the connection itself maps it (the VFS's xShmMap, nothing created or
/// extended): valid until the connection closes. NULL when the database is not in WAL mode or the VFS has
/// no shared memory.
const void *sqlite_control_wal_index(void *connection);

/// Copies the write-ahead-log index header at `region` into `out` (48 bytes) as SQLite's own readers read
/// it without a lock (walIndexTryHdr): the first copy, a memory barrier, the second. Returns 1 when the two
/// copies are the same and the index is initialised; 0 (a writer is rewriting it) otherwise.
int sqlite_control_wal_index_header(const void *region, unsigned char out[48]);

/// sqlite3_free.
void sqlite_control_free(void *pointer);

#endif
