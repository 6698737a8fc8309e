#ifndef CSQLITECONTROL_H
#define CSQLITECONTROL_H

/// sqlite3_db_config(connection, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL): closing `connection` (a
/// `sqlite3 *`) leaves the write-ahead log as it is, not checkpointed into the database file nor removed.
/// Returns SQLite's result code. (sqlite3_db_config is variadic, which Swift cannot call; the connection is
/// passed untyped so that this module declares none of SQLite's types beside GRDB's.)
int sqlite_control_keep_wal_on_close(void *connection);

#endif
