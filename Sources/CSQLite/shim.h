#include <sqlite3.h>

/* sqlite3_db_config is variadic, which Swift cannot call: one fixed-argument wrapper per use. */
/* Turns on SQLITE_DBCONFIG_DEFENSIVE: no writes to the schema table even with writable_schema,
   no deliberate corruption through PRAGMAs. Returns SQLITE_OK or an error code. */
static inline int softchat_sqlite3_enable_defensive(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)0);
}
