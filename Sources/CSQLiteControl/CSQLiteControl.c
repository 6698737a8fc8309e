#include "CSQLiteControl.h"
#include <pthread.h>
#include <sqlite3.h>
#include <string.h>

int sqlite_control_keep_wal_on_close(void *connection) {
    return sqlite3_db_config((sqlite3 *)connection, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}

static const char held_prefix[] = "/proc/self/fd/";
static sqlite3_vfs held_vfs;
static sqlite3_vfs *unix_vfs;
static pthread_once_t held_once = PTHREAD_ONCE_INIT;
static int held_registered;

/// The unix VFS's xFullPathname but for `/proc/self/fd/N/name`, which is returned as it is (the name must
/// be one component: no `/` after the descriptor's number but the one before the name).
static int held_full_pathname(sqlite3_vfs *vfs, const char *path, int size, char *out) {
    (void)vfs;
    if (strncmp(path, held_prefix, sizeof held_prefix - 1) == 0) {
        size_t length = strlen(path);
        if (length + 1 > (size_t)size) return SQLITE_CANTOPEN;
        memcpy(out, path, length + 1);
        return SQLITE_OK;
    }
    return unix_vfs->xFullPathname(unix_vfs, path, size, out);
}

static void register_held_vfs(void) {
    if (!sqlite3_compileoption_used("USE_URI")) {
        // Only possible before SQLite is initialised; sqlite_control_uri_filenames tells whether it worked.
        (void)sqlite3_config(SQLITE_CONFIG_URI, 1);
    }
    unix_vfs = sqlite3_vfs_find("unix");
    if (unix_vfs == NULL) return;
    // A copy of the unix VFS keeps its pAppData (the locking style its xOpen uses), as the unix VFS's own
    // variants ("unix-none", "unix-dotfile") do.
    held_vfs = *unix_vfs;
    held_vfs.pNext = NULL;
    held_vfs.zName = "sharedmode-held-directory";
    held_vfs.xFullPathname = held_full_pathname;
    held_registered = sqlite3_vfs_register(&held_vfs, 0) == SQLITE_OK;
}

const char *sqlite_control_held_directory_vfs(void) {
    pthread_once(&held_once, register_held_vfs);
    return held_registered ? held_vfs.zName : NULL;
}

int sqlite_control_uri_filenames(void) {
    sqlite3 *probe = NULL;
    // A URI naming a VFS that does not exist fails only when URIs are on.
    int code = sqlite3_open_v2("file::memory:?vfs=sharedmode-no-such-vfs", &probe, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, NULL);
    sqlite3_close_v2(probe);
    return code != SQLITE_OK;
}

char *sqlite_control_vfs_name(void *connection) {
    char *name = NULL;
    if (sqlite3_file_control((sqlite3 *)connection, "main", SQLITE_FCNTL_VFSNAME, &name) != SQLITE_OK) return NULL;
    return name;
}

const void *sqlite_control_wal_index(void *connection) {
    sqlite3_file *file = NULL;
    if (sqlite3_file_control((sqlite3 *)connection, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK) return NULL;
    if (file == NULL || file->pMethods == NULL || file->pMethods->iVersion < 2 || file->pMethods->xShmMap == NULL) {
        return NULL;
    }
    volatile void *region = NULL;
    // 32 KiB: SQLite's WALINDEX_PGSZ, the size every connection maps the index in.
    if (file->pMethods->xShmMap(file, 0, 32768, 0, &region) != SQLITE_OK) return NULL;
    return (const void *)region;
}

int sqlite_control_wal_index_header(const void *region, unsigned char out[48]) {
    const volatile unsigned char *copies = (const volatile unsigned char *)region;
    unsigned char second[48];
    // Writers write the second copy, a barrier, then the first (walIndexWriteHdr): read in the other order.
    for (int i = 0; i < 48; i++) out[i] = copies[i];
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (int i = 0; i < 48; i++) second[i] = copies[48 + i];
    // Byte 12 is isInit.
    return memcmp(out, second, 48) == 0 && out[12] != 0;
}

void sqlite_control_free(void *pointer) { sqlite3_free(pointer); }
