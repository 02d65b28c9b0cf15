/* runjson.c - one run as a JSON result file (`hetsim run --json-out F`),
 * the counterpart of vLLM's `benchmark_serving --save-result`; see db.h.
 *
 * The keys are the columns of the run's summary_wide row, read back from
 * the database after the run is committed, so the file and the view cannot
 * disagree: one definition (the view, results/schema.sql) serves both.
 * Counts are integers, rates and latencies numbers, NULL columns null. */
#include "out/db.h"
#include "out/db_int.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conf.h"

/* Adds text that holds JSON as a parsed value, or null when it is absent
 * or not JSON (rows written before the column existed). */
static void add_json_text(cJSON *o, const char *key, const unsigned char *text)
{
    cJSON *v = text ? cJSON_Parse((const char *)text) : NULL;
    cJSON_AddItemToObject(o, key, v ? v : cJSON_CreateNull());
}

/* Adds v as the shortest decimal that reads back as exactly v (cJSON's
 * own printing allows an error of an ulp), null when not finite. */
static void add_number(cJSON *o, const char *name, double v)
{
    char buf[40];
    if (!isfinite(v)) {
        cJSON_AddNullToObject(o, name);
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    cJSON_AddRawToObject(o, name, buf);
}

/* Copies column c of the current row into o under its column name. */
static void add_column(cJSON *o, sqlite3_stmt *st, int c)
{
    const char *name = sqlite3_column_name(st, c);
    switch (sqlite3_column_type(st, c)) {
    case SQLITE_INTEGER:
        cJSON_AddNumberToObject(o, name, (double)sqlite3_column_int64(st, c));
        break;
    case SQLITE_FLOAT:
        add_number(o, name, sqlite3_column_double(st, c));
        break;
    case SQLITE_TEXT:
        cJSON_AddStringToObject(o, name, (const char *)sqlite3_column_text(st, c));
        break;
    default:
        cJSON_AddNullToObject(o, name);
    }
}

int hs_db_run_json(hs_db *db, int64_t run_id, const char *path, hs_err *err)
{
    sqlite3 *h = hs__db_handle(db);
    sqlite3_stmt *st = NULL;
    cJSON *root = cJSON_CreateObject();
    int rc = 0, step;
    if (!root) return hs_errf(err, HS_ENOMEM, "out of memory writing %s", path);
    if (sqlite3_prepare_v2(h, "SELECT * FROM summary_wide WHERE run = ?1", -1, &st, NULL) != SQLITE_OK) {
        rc = hs_errf(err, HS_EDB, "%s: reading run %lld: %s", hs__db_path(db), (long long)run_id,
                     sqlite3_errmsg(h));
        goto done;
    }
    sqlite3_bind_int64(st, 1, run_id);
    step = sqlite3_step(st);
    if (step == SQLITE_DONE) {
        rc = hs_errf(err, HS_ENOTFOUND, "%s: run %lld has no summary", hs__db_path(db), (long long)run_id);
        goto done;
    }
    if (step != SQLITE_ROW) {
        rc = hs_errf(err, HS_EDB, "%s: reading run %lld: %s", hs__db_path(db), (long long)run_id,
                     sqlite3_errmsg(h));
        goto done;
    }
    for (int c = 0; c < sqlite3_column_count(st); c++) add_column(root, st, c);
    sqlite3_finalize(st);
    st = NULL;
    if (sqlite3_prepare_v2(h, "SELECT config, deployment, git_rev FROM runs WHERE id = ?1", -1, &st,
                           NULL) != SQLITE_OK ||
        sqlite3_bind_int64(st, 1, run_id) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
        rc = hs_errf(err, HS_EDB, "%s: reading run %lld: %s", hs__db_path(db), (long long)run_id,
                     sqlite3_errmsg(h));
        goto done;
    }
    cJSON_AddStringToObject(root, "git_rev", (const char *)sqlite3_column_text(st, 2));
    add_json_text(root, "config", sqlite3_column_text(st, 0));
    add_json_text(root, "deployment", sqlite3_column_text(st, 1));
    rc = hs_json_save(root, path, err);
done:
    sqlite3_finalize(st);
    cJSON_Delete(root);
    return rc;
}
