// The store benchmark's in-process baselines, in C: a plain SQLite table read through the sqlite3 C API
// (the same libsqlite3 GRDB links: the floor for one indexed lookup), and SQLCipher 3.4 (Debian's
// libsqlcipher0, page-encrypted), loaded with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) so its sqlite3_* symbols
// stay apart from the system SQLite's in the same process.
#ifndef SQLITE_BASELINES_H
#define SQLITE_BASELINES_H

#include <stddef.h>
#include <stdint.h>

/// A table `items (id INTEGER PRIMARY KEY, group_name, service, account, secret, UNIQUE (group_name,
/// service, account))` in WAL mode with synchronous NORMAL, and its prepared INSERT and SELECT.
typedef struct baseline_table baseline_table;

/// Opens (creating) the plain table at `path` through the system SQLite. NULL on failure (`error` says why).
baseline_table *baseline_open_plain(const char *path, char *error, size_t error_size);

/// Opens (creating) the table at `path` through SQLCipher with the raw 32-byte `key`. NULL on failure,
/// also when libsqlcipher.so.0 is missing (install libsqlcipher0).
baseline_table *baseline_open_sqlcipher(const char *path, const uint8_t key[32], char *error, size_t error_size);

/// Inserts one row in its own transaction (autocommit). 0 on success.
int baseline_insert(baseline_table *table, const char *group, const char *service, const char *account,
                    const void *secret, size_t secret_size);

/// Reads the secret of one row into `buffer` (at most `capacity` bytes) in a read transaction:
/// BEGIN, the prepared SELECT stepped once, the blob copied, COMMIT. Returns its size, or -1.
long baseline_read(baseline_table *table, const char *group, const char *service, const char *account,
                   void *buffer, size_t capacity);

void baseline_close(baseline_table *table);

#endif
