/* sweepdb.c - sweep bookkeeping in the results database; see sweepdb.h.
 *
 * hs_sweepdb_merge() ATTACHes the worker's file (ATTACH is not allowed
 * inside a transaction), then copies inside one BEGIN IMMEDIATE ...
 * COMMIT; any failure rolls back and detaches, so the target never holds
 * part of a case. */
#include "out/sweepdb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "out/db_int.h"

void hs_case_key(const char *text, char key[17])
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        h ^= *p;
        h *= UINT64_C(1099511628211);
    }
    snprintf(key, 17, "%016llx", (unsigned long long)h);
}

static int fail_sql(hs_db *db, hs_err *err, const char *what)
{
    return hs_errf(err, HS_EDB, "%s: %s: %s", hs__db_path(db), what,
                   sqlite3_errmsg(hs__db_handle(db)));
}

static int exec_sql(hs_db *db, const char *sql, const char *what, hs_err *err)
{
    char *msg = NULL;
    if (sqlite3_exec(hs__db_handle(db), sql, NULL, NULL, &msg) == SQLITE_OK) return 0;
    hs_errf(err, HS_EDB, "%s: %s: %s", hs__db_path(db), what, msg ? msg : "?");
    sqlite3_free(msg);
    return HS_EDB;
}

static void rollback(hs_db *db)
{
    if (!sqlite3_get_autocommit(hs__db_handle(db)))
        sqlite3_exec(hs__db_handle(db), "ROLLBACK", NULL, NULL, NULL);
}

int hs_sweepdb_state(hs_db *db, const char *key, int *state, int64_t *run_id, hs_err *err)
{
    sqlite3_stmt *st;
    int rc;
    *state = HS_CASE_ABSENT;
    if (sqlite3_prepare_v2(hs__db_handle(db), "SELECT run FROM sweep_cases WHERE case_key = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return fail_sql(db, err, "reading sweep_cases");
    sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        if (sqlite3_column_type(st, 0) == SQLITE_NULL) {
            *state = HS_CASE_FAILED;
        } else {
            *state = HS_CASE_DONE;
            if (run_id) *run_id = sqlite3_column_int64(st, 0);
        }
    } else if (rc != SQLITE_DONE) {
        rc = fail_sql(db, err, "reading sweep_cases");
        sqlite3_finalize(st);
        return rc;
    }
    sqlite3_finalize(st);
    return 0;
}

int hs_sweepdb_forget_failed(hs_db *db, const char *key, hs_err *err)
{
    sqlite3_stmt *st;
    int rc = 0;
    if (sqlite3_prepare_v2(hs__db_handle(db),
                           "DELETE FROM sweep_cases WHERE case_key = ?1 AND run IS NULL", -1, &st,
                           NULL) != SQLITE_OK)
        return fail_sql(db, err, "clearing a failed case");
    sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE) rc = fail_sql(db, err, "clearing a failed case");
    sqlite3_finalize(st);
    return rc;
}

/* Inserts the sweep_cases row (run 0 means NULL: a failure). */
static int insert_case(hs_db *db, const hs_case_row *c, int64_t run, hs_err *err)
{
    sqlite3_stmt *st;
    int rc = 0, s;
    if (sqlite3_prepare_v2(hs__db_handle(db),
                           "INSERT INTO sweep_cases (case_key, sweep, idx, params, run, error) "
                           "VALUES (?1, ?2, ?3, ?4, ?5, ?6)", -1, &st, NULL) != SQLITE_OK)
        return fail_sql(db, err, "recording the case");
    sqlite3_bind_text(st, 1, c->key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, c->sweep ? c->sweep : "", -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, c->idx);
    sqlite3_bind_text(st, 4, c->params ? c->params : "{}", -1, SQLITE_TRANSIENT);
    if (run > 0) sqlite3_bind_int64(st, 5, run);
    else sqlite3_bind_null(st, 5);
    if (run > 0 || !c->error) sqlite3_bind_null(st, 6);
    else sqlite3_bind_text(st, 6, c->error, -1, SQLITE_TRANSIENT);
    s = sqlite3_step(st);
    if (s == SQLITE_CONSTRAINT)
        rc = hs_errf(err, HS_ESTATE, "%s: case %s is already stored", hs__db_path(db), c->key);
    else if (s != SQLITE_DONE)
        rc = fail_sql(db, err, "recording the case");
    sqlite3_finalize(st);
    return rc;
}

/* Membership: which sweeps asked for a case.  A case is stored once
 * (sweep_cases), but a later sweep or search that reaches the same
 * configuration reuses it, and must find it under its own name too. */
#define MEMBERS_SQL \
    "CREATE TABLE IF NOT EXISTS sweep_members (\n" \
    "    sweep    TEXT NOT NULL,      -- a sweep that asked for the case (--name)\n" \
    "    case_key TEXT NOT NULL,      -- sweep_cases.case_key\n" \
    "    idx      INTEGER NOT NULL,   -- position in that sweep's case list\n" \
    "    params   TEXT NOT NULL,      -- the swept keys and values in that sweep, JSON\n" \
    "    PRIMARY KEY (sweep, case_key)\n" \
    ") WITHOUT ROWID;\n"

int hs_sweepdb_members_init(hs_db *db, hs_err *err)
{
    sqlite3_stmt *st;
    int exists, rc;
    if (sqlite3_prepare_v2(hs__db_handle(db),
                           "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sweep_members'",
                           -1, &st, NULL) != SQLITE_OK)
        return fail_sql(db, err, "reading the schema");
    exists = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
    sqlite3_finalize(st);
    if (exists) return 0;
    /* Migration: a database from before the table gets one row per case,
     * the sweep that stored it; in one transaction with the table. */
    if ((rc = exec_sql(db, "BEGIN IMMEDIATE", "adding sweep_members", err))) return rc;
    if ((rc = exec_sql(db, MEMBERS_SQL, "adding sweep_members", err)) ||
        (rc = exec_sql(db, "INSERT OR IGNORE INTO sweep_members (sweep, case_key, idx, params) "
                           "SELECT sweep, case_key, idx, params FROM sweep_cases",
                       "adding sweep_members", err)) ||
        (rc = exec_sql(db, "COMMIT", "adding sweep_members", err)))
        rollback(db);
    return rc;
}

/* Inserts c's membership row; an existing one stays (the first position
 * a sweep gave the case). */
static int insert_member(hs_db *db, const hs_case_row *c, hs_err *err)
{
    sqlite3_stmt *st;
    int rc = 0;
    if (sqlite3_prepare_v2(hs__db_handle(db),
                           "INSERT OR IGNORE INTO sweep_members (sweep, case_key, idx, params) "
                           "VALUES (?1, ?2, ?3, ?4)", -1, &st, NULL) != SQLITE_OK)
        return fail_sql(db, err, "recording the sweep of a case");
    sqlite3_bind_text(st, 1, c->sweep ? c->sweep : "", -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, c->key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, c->idx);
    sqlite3_bind_text(st, 4, c->params ? c->params : "{}", -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE) rc = fail_sql(db, err, "recording the sweep of a case");
    sqlite3_finalize(st);
    return rc;
}

int hs_sweepdb_members_add(hs_db *db, const hs_case_row *rows, int n, hs_err *err)
{
    int rc;
    if (n <= 0) return 0;
    if (hs__db_busy(db)) return hs_errf(err, HS_ESTATE, "%s: a run is open", hs__db_path(db));
    if ((rc = exec_sql(db, "BEGIN IMMEDIATE", "recording the sweep of cases", err))) return rc;
    for (int i = 0; i < n && !rc; i++) rc = insert_member(db, &rows[i], err);
    if (!rc) rc = exec_sql(db, "COMMIT", "recording the sweep of cases", err);
    if (rc) rollback(db);
    return rc;
}

/* Column list of table hs_src.T without `skip`, comma separated, quoted;
 * *has_run tells whether a column named run exists.  Caller frees. */
static char *columns(hs_db *db, const char *table, const char *skip, int *has_run)
{
    char sql[256], *out;
    size_t cap = 1024, len = 0;
    sqlite3_stmt *st;
    *has_run = 0;
    snprintf(sql, sizeof sql, "PRAGMA hs_src.table_info(\"%s\")", table);
    if (sqlite3_prepare_v2(hs__db_handle(db), sql, -1, &st, NULL) != SQLITE_OK) return NULL;
    out = malloc(cap);
    if (!out) {
        sqlite3_finalize(st);
        return NULL;
    }
    out[0] = '\0';
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 1);
        if (!name) continue;
        if (!strcmp(name, "run")) *has_run = 1;
        if (!strcmp(name, skip)) continue;
        size_t need = len + strlen(name) + 4;
        if (need >= cap) {
            char *n2 = realloc(out, cap = need * 2);
            if (!n2) {
                free(out);
                sqlite3_finalize(st);
                return NULL;
            }
            out = n2;
        }
        len += (size_t)snprintf(out + len, cap - len, "%s\"%s\"", len ? "," : "", name);
    }
    sqlite3_finalize(st);
    return out;
}

/* Copies every table of hs_src with a run column (but runs, sweep_cases)
 * into main with run = new_run. */
static int copy_tables(hs_db *db, int64_t new_run, hs_err *err)
{
    sqlite3 *h = hs__db_handle(db);
    sqlite3_stmt *st;
    int rc = 0;
    if (sqlite3_prepare_v2(h, "SELECT name FROM hs_src.sqlite_master WHERE type = 'table' "
                              "AND name NOT IN ('runs', 'meta', 'sweep_cases', 'sweep_members') "
                              "AND name NOT LIKE 'sqlite_%' ORDER BY name",
                           -1, &st, NULL) != SQLITE_OK)
        return fail_sql(db, err, "listing the case's tables");
    while (!rc && sqlite3_step(st) == SQLITE_ROW) {
        char table[128];
        int has_run;
        snprintf(table, sizeof table, "%s", (const char *)sqlite3_column_text(st, 0));
        char *cols = columns(db, table, "run", &has_run);
        if (!cols) {
            rc = hs_errf(err, HS_ENOMEM, "%s: out of memory", hs__db_path(db));
            break;
        }
        if (has_run && cols[0]) {
            size_t n = 2 * strlen(cols) + 3 * sizeof table + 128;
            char *sql = malloc(n);
            if (!sql) {
                free(cols);
                rc = hs_errf(err, HS_ENOMEM, "%s: out of memory", hs__db_path(db));
                break;
            }
            snprintf(sql, n, "INSERT INTO main.\"%s\" (run,%s) SELECT %lld,%s FROM hs_src.\"%s\"",
                     table, cols, (long long)new_run, cols, table);
            char what[200];
            snprintf(what, sizeof what, "copying table %s of the case", table);
            rc = exec_sql(db, sql, what, err);
            free(sql);
        }
        free(cols);
    }
    sqlite3_finalize(st);
    return rc;
}

int hs_sweepdb_merge(hs_db *db, const char *src, const hs_case_row *c,
                     const char *db_in_config, int64_t *run_id, hs_err *err)
{
    sqlite3 *h = hs__db_handle(db);
    sqlite3_stmt *st = NULL;
    int rc;
    int64_t n_runs = 0;
    char *cols = NULL;
    if (hs__db_busy(db)) return hs_errf(err, HS_ESTATE, "%s: a run is open", hs__db_path(db));
    if (sqlite3_prepare_v2(h, "ATTACH ?1 AS hs_src", -1, &st, NULL) != SQLITE_OK)
        return fail_sql(db, err, "attaching a case");
    sqlite3_bind_text(st, 1, src, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_DONE) return hs_errf(err, HS_EDB, "%s: attaching %s: %s", hs__db_path(db), src,
                                          sqlite3_errmsg(h));
    if ((rc = exec_sql(db, "BEGIN IMMEDIATE", "storing a case", err))) goto out;
    if (sqlite3_prepare_v2(h, "SELECT count(*) FROM hs_src.runs WHERE wall_s IS NOT NULL", -1, &st,
                           NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        rc = hs_errf(err, HS_EDB, "%s: %s is not a hetsim results file: %s", hs__db_path(db), src,
                     sqlite3_errmsg(h));
        goto out;
    }
    n_runs = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    st = NULL;
    if (n_runs != 1) {
        rc = hs_errf(err, HS_ESTATE, "%s: holds %lld committed runs, expected 1", src, (long long)n_runs);
        goto out;
    }
    {
        int dummy;
        cols = columns(db, "runs", "id", &dummy);
        if (!cols) {
            rc = hs_errf(err, HS_ENOMEM, "%s: out of memory", hs__db_path(db));
            goto out;
        }
        /* The same column list, with config's db path replaced. */
        size_t n = 2 * strlen(cols) + 256;
        char *sql = malloc(n), *sel = malloc(n);
        if (!sql || !sel) {
            free(sql);
            free(sel);
            rc = hs_errf(err, HS_ENOMEM, "%s: out of memory", hs__db_path(db));
            goto out;
        }
        snprintf(sel, n, ",%s,", cols);
        char *p = strstr(sel, ",\"config\",");
        if (p) {
            /* splice: ...,json_set(config,'$.db',?1),... */
            char tail[4096];
            snprintf(tail, sizeof tail, "%s", p + strlen(",\"config\""));
            snprintf(p, n - (size_t)(p - sel), ",json_set(\"config\",'$.db',?1)%s", tail);
        }
        sel[strlen(sel) - 1] = '\0';
        snprintf(sql, n, "INSERT INTO main.runs (%s) SELECT %s FROM hs_src.runs", cols, sel + 1);
        rc = sqlite3_prepare_v2(h, sql, -1, &st, NULL);
        free(sql);
        free(sel);
        if (rc != SQLITE_OK) {
            rc = fail_sql(db, err, "copying the case's run");
            goto out;
        }
        sqlite3_bind_text(st, 1, db_in_config ? db_in_config : "", -1, SQLITE_TRANSIENT);
        if (sqlite3_step(st) != SQLITE_DONE) {
            rc = fail_sql(db, err, "copying the case's run");
            goto out;
        }
        sqlite3_finalize(st);
        st = NULL;
    }
    *run_id = sqlite3_last_insert_rowid(h);
    if ((rc = copy_tables(db, *run_id, err))) goto out;
    if ((rc = insert_case(db, c, *run_id, err))) goto out;
    if ((rc = insert_member(db, c, err))) goto out;
    rc = exec_sql(db, "COMMIT", "committing a case", err);
out:
    sqlite3_finalize(st);
    free(cols);
    if (rc) rollback(db);
    sqlite3_exec(h, "DETACH hs_src", NULL, NULL, NULL);
    return rc;
}

int hs_sweepdb_fail(hs_db *db, const hs_case_row *c, hs_err *err)
{
    int rc;
    if (hs__db_busy(db)) return hs_errf(err, HS_ESTATE, "%s: a run is open", hs__db_path(db));
    if ((rc = exec_sql(db, "BEGIN IMMEDIATE", "recording a failed case", err))) return rc;
    if ((rc = insert_case(db, c, 0, err)) || (rc = insert_member(db, c, err)) ||
        (rc = exec_sql(db, "COMMIT", "recording a failed case", err)))
        rollback(db);
    return rc;
}

int hs_sweepdb_metric(hs_db *db, int64_t run_id, const char *name, double *value,
                      int *found, hs_err *err)
{
    sqlite3_stmt *st;
    int rc;
    *found = 0;
    if (sqlite3_prepare_v2(hs__db_handle(db),
                           "SELECT value FROM summary WHERE run = ?1 AND metric = ?2", -1, &st,
                           NULL) != SQLITE_OK)
        return fail_sql(db, err, "reading a summary");
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        *value = sqlite3_column_double(st, 0);
        *found = 1;
    } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        rc = fail_sql(db, err, "reading a summary");
        sqlite3_finalize(st);
        return rc;
    }
    sqlite3_finalize(st);
    return 0;
}

int hs_sweepdb_wal(hs_db *db, int on, hs_err *err)
{
    /* Best effort: the switch needs the file to itself, and another sweep
     * or run using it concurrently is legitimate; then the mode stays as it
     * is (slower or leaving a -wal file, never wrong). */
    (void)err;
    sqlite3_exec(hs__db_handle(db), on ? "PRAGMA journal_mode = WAL" : "PRAGMA journal_mode = DELETE",
                 NULL, NULL, NULL);
    return 0;
}
