#define _GNU_SOURCE
#include "SQLiteBaselines.h"

#include <dlfcn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The sqlite3 calls a table makes, from one library or the other.
typedef struct {
    int (*open_v2)(const char *, sqlite3 **, int, const char *);
    int (*exec)(sqlite3 *, const char *, int (*)(void *, int, char **, char **), void *, char **);
    int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
    int (*bind_text)(sqlite3_stmt *, int, const char *, int, void (*)(void *));
    int (*bind_blob)(sqlite3_stmt *, int, const void *, int, void (*)(void *));
    int (*step)(sqlite3_stmt *);
    const void *(*column_blob)(sqlite3_stmt *, int);
    int (*column_bytes)(sqlite3_stmt *, int);
    int (*reset)(sqlite3_stmt *);
    int (*clear_bindings)(sqlite3_stmt *);
    int (*finalize)(sqlite3_stmt *);
    int (*close)(sqlite3 *);
    const char *(*errmsg)(sqlite3 *);
    void (*free)(void *);
} sqlite_api;

struct baseline_table {
    sqlite_api api;
    sqlite3 *db;
    sqlite3_stmt *insert;
    sqlite3_stmt *select;
    sqlite3_stmt *begin;
    sqlite3_stmt *commit;
};

static const char *schema =
    "PRAGMA journal_mode = WAL;"
    "PRAGMA synchronous = NORMAL;"
    // As the store sets it (SQLCipher keeps encrypted pages out of any memory map and ignores it).
    "PRAGMA mmap_size = 268435456;"
    "CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, group_name TEXT NOT NULL, service TEXT NOT NULL,"
    " account TEXT NOT NULL, secret BLOB NOT NULL, UNIQUE (group_name, service, account));";

static baseline_table *finish_open(baseline_table *table, const char *path, const char *key_pragma, char *error, size_t error_size) {
    sqlite_api *api = &table->api;
    if (api->open_v2(path, &table->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        snprintf(error, error_size, "cannot open %s: %s", path, table->db ? api->errmsg(table->db) : "out of memory");
        goto fail;
    }
    char *message = NULL;
    if (key_pragma && api->exec(table->db, key_pragma, NULL, NULL, &message) != SQLITE_OK) {
        snprintf(error, error_size, "PRAGMA key: %s", message ? message : "failed");
        goto fail;
    }
    if (api->exec(table->db, schema, NULL, NULL, &message) != SQLITE_OK) {
        snprintf(error, error_size, "schema: %s", message ? message : "failed");
        goto fail;
    }
    if (api->prepare_v2(table->db, "INSERT INTO items (group_name, service, account, secret) VALUES (?, ?, ?, ?)", -1, &table->insert, NULL) != SQLITE_OK
        || api->prepare_v2(table->db, "SELECT id, secret FROM items WHERE group_name = ? AND service = ? AND account = ?", -1, &table->select, NULL) != SQLITE_OK
        || api->prepare_v2(table->db, "BEGIN DEFERRED", -1, &table->begin, NULL) != SQLITE_OK
        || api->prepare_v2(table->db, "COMMIT", -1, &table->commit, NULL) != SQLITE_OK) {
        snprintf(error, error_size, "prepare: %s", api->errmsg(table->db));
        goto fail;
    }
    return table;
fail:
    baseline_close(table);
    return NULL;
}

baseline_table *baseline_open_plain(const char *path, char *error, size_t error_size) {
    baseline_table *table = calloc(1, sizeof *table);
    if (!table) return NULL;
    table->api = (sqlite_api){
        sqlite3_open_v2, sqlite3_exec, sqlite3_prepare_v2, sqlite3_bind_text, sqlite3_bind_blob, sqlite3_step,
        sqlite3_column_blob, sqlite3_column_bytes, sqlite3_reset, sqlite3_clear_bindings, sqlite3_finalize,
        sqlite3_close, sqlite3_errmsg, sqlite3_free,
    };
    return finish_open(table, path, NULL, error, error_size);
}

baseline_table *baseline_open_sqlcipher(const char *path, const uint8_t key[32], char *error, size_t error_size) {
    static void *library = NULL;
    if (!library) library = dlopen("libsqlcipher.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!library) {
        snprintf(error, error_size, "cannot load SQLCipher (%s); install libsqlcipher0", dlerror());
        return NULL;
    }
    baseline_table *table = calloc(1, sizeof *table);
    if (!table) return NULL;
    sqlite_api *api = &table->api;
#define LOAD(field, name) \
    if (!(*(void **)&api->field = dlsym(library, name))) { snprintf(error, error_size, "SQLCipher lacks %s", name); free(table); return NULL; }
    LOAD(open_v2, "sqlite3_open_v2") LOAD(exec, "sqlite3_exec") LOAD(prepare_v2, "sqlite3_prepare_v2")
    LOAD(bind_text, "sqlite3_bind_text") LOAD(bind_blob, "sqlite3_bind_blob") LOAD(step, "sqlite3_step")
    LOAD(column_blob, "sqlite3_column_blob") LOAD(column_bytes, "sqlite3_column_bytes") LOAD(reset, "sqlite3_reset")
    LOAD(clear_bindings, "sqlite3_clear_bindings") LOAD(finalize, "sqlite3_finalize") LOAD(close, "sqlite3_close")
    LOAD(errmsg, "sqlite3_errmsg") LOAD(free, "sqlite3_free")
#undef LOAD
    // A raw key (no PBKDF2 at open), as the store derives its own keys once.
    char pragma[100] = "PRAGMA key = \"x'";
    size_t length = strlen(pragma);
    for (int i = 0; i < 32; i++) length += (size_t)snprintf(pragma + length, sizeof pragma - length, "%02x", key[i]);
    snprintf(pragma + length, sizeof pragma - length, "'\";");
    return finish_open(table, path, pragma, error, error_size);
}

static void bind_key(baseline_table *table, sqlite3_stmt *statement, const char *group, const char *service, const char *account) {
    table->api.bind_text(statement, 1, group, -1, SQLITE_STATIC);
    table->api.bind_text(statement, 2, service, -1, SQLITE_STATIC);
    table->api.bind_text(statement, 3, account, -1, SQLITE_STATIC);
}

int baseline_insert(baseline_table *table, const char *group, const char *service, const char *account,
                    const void *secret, size_t secret_size) {
    bind_key(table, table->insert, group, service, account);
    table->api.bind_blob(table->insert, 4, secret, (int)secret_size, SQLITE_STATIC);
    int status = table->api.step(table->insert);
    table->api.reset(table->insert);
    table->api.clear_bindings(table->insert);
    return status == SQLITE_DONE ? 0 : status;
}

long baseline_read(baseline_table *table, const char *group, const char *service, const char *account,
                   void *buffer, size_t capacity) {
    const sqlite_api *api = &table->api;
    if (api->step(table->begin) != SQLITE_DONE) { api->reset(table->begin); return -1; }
    api->reset(table->begin);
    bind_key(table, table->select, group, service, account);
    long size = -1;
    if (api->step(table->select) == SQLITE_ROW) {
        int bytes = api->column_bytes(table->select, 1);
        const void *blob = api->column_blob(table->select, 1);
        if (bytes >= 0 && (size_t)bytes <= capacity) {
            memcpy(buffer, blob, (size_t)bytes);
            size = bytes;
        }
    }
    api->reset(table->select);
    api->clear_bindings(table->select);
    api->step(table->commit);
    api->reset(table->commit);
    return size;
}

void baseline_close(baseline_table *table) {
    if (!table) return;
    sqlite3_stmt *statements[] = {table->insert, table->select, table->begin, table->commit};
    for (size_t i = 0; i < 4; i++) if (statements[i]) table->api.finalize(statements[i]);
    if (table->db) table->api.close(table->db);
    free(table);
}
