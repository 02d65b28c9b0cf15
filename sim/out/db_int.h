/* db_int.h - internal view of an hs_db for the other out/ modules that need
 * SQL beyond db.h (sweep bookkeeping in sweepdb.c).  Not a public API. */
#ifndef HS_DB_INT_H
#define HS_DB_INT_H

#include <sqlite3.h>

#include "out/db.h"

sqlite3 *hs__db_handle(hs_db *db);
const char *hs__db_path(const hs_db *db);
/* 1 while a run's transaction is open (no other writes may start). */
int hs__db_busy(const hs_db *db);

#endif
