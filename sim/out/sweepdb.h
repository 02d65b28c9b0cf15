/* sweepdb.h - sweep bookkeeping in the results database (table sweep_cases).
 *
 * A sweep case is identified by its case key: 16 hex digits of FNV-1a 64 of
 * the canonical configuration JSON (hs_run_cfg_json with db and label
 * cleared), so the same configuration reached from any sweep, search or
 * worker count has the same key.  sweep_cases.case_key is the PRIMARY KEY:
 * a case is stored at most once (INV-SWEEP-1), and its row is written in
 * the same transaction as the run's rows, so a case is in the database
 * whole (run + all its rows + its case row) or not at all (INV-SWEEP-2).
 *
 * Cases are simulated by `hetsim run` into a private one-run database
 * (a worker's temporary file) and copied here by hs_sweepdb_merge(): every
 * table of that file with a `run` column is copied, so tables added later
 * come along without changes here. */
#ifndef HS_SWEEPDB_H
#define HS_SWEEPDB_H

#include <stdint.h>

#include "core/err.h"
#include "out/db.h"

enum { HS_CASE_ABSENT = 0, HS_CASE_DONE = 1, HS_CASE_FAILED = 2 };

/* FNV-1a 64 of text as 16 lowercase hex digits plus NUL. */
void hs_case_key(const char *text, char key[17]);

/* *state: HS_CASE_ABSENT, HS_CASE_DONE (with *run_id) or HS_CASE_FAILED. */
int hs_sweepdb_state(hs_db *db, const char *key, int *state, int64_t *run_id, hs_err *err);

/* Deletes the failure record of key (so the case is run again). */
int hs_sweepdb_forget_failed(hs_db *db, const char *key, hs_err *err);

typedef struct hs_case_row {
    const char *key;       /* hs_case_key */
    const char *sweep;     /* sweep name, may be "" */
    int64_t idx;           /* position in the sweep's case list */
    const char *params;    /* JSON object of swept keys */
    const char *error;     /* failure text (failed cases only) */
} hs_case_row;

/* Copies the single run of the database file src into db as a new run, with
 * its sweep_cases row, in one transaction; runs.config's "db" becomes
 * db_in_config.  *run_id is the new id.  A key already present is
 * HS_ESTATE and changes nothing. */
int hs_sweepdb_merge(hs_db *db, const char *src, const hs_case_row *c,
                     const char *db_in_config, int64_t *run_id, hs_err *err);

/* Table sweep_members (sweep, case_key, idx, params): every sweep that
 * asked for a case, so a case stored by one sweep and reused by another
 * belongs to both (INV-SWEEP-4). Created on first use; an older database
 * gets one row per stored case, its storing sweep, in the same
 * transaction.  Call once after opening, before the functions below. */
int hs_sweepdb_members_init(hs_db *db, hs_err *err);

/* Records that rows[i].sweep asked for rows[i].key (existing rows stay),
 * in one transaction.  hs_sweepdb_merge and hs_sweepdb_fail record their
 * own case's row themselves. */
int hs_sweepdb_members_add(hs_db *db, const hs_case_row *rows, int n, hs_err *err);

/* Records a failed case (run NULL, error text) in one transaction. */
int hs_sweepdb_fail(hs_db *db, const hs_case_row *c, hs_err *err);

/* on 1: write-ahead log with synchronous=NORMAL while a sweep commits many
 * small transactions (no fsync per case; a committed case may be lost
 * only to a power failure, and resuming re-runs it); on 0: back to the
 * rollback journal, checkpointing and removing the -wal file.  A sweep
 * killed in between leaves the file in WAL mode, which SQLite recovers on
 * the next open.  Best effort: while another connection uses the file the
 * mode stays as it is, and 0 is returned. */
int hs_sweepdb_wal(hs_db *db, int on, hs_err *err);

/* Reads metric `name` of run_id's summary; *found 0 when absent or NULL. */
int hs_sweepdb_metric(hs_db *db, int64_t run_id, const char *name, double *value,
                      int *found, hs_err *err);

#endif
