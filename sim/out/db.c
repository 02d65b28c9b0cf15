/* db.c - the SQLite results writer; see db.h.
 *
 * Atomicity: every row of a run is written inside one transaction opened by
 * hs_db_run_begin() (BEGIN IMMEDIATE, so a second writer waits on the busy
 * timeout at the start of a run rather than failing at its end) and closed
 * by hs_db_run_commit() or hs_db_run_abort().  Because SQLite rolls a
 * transaction back by itself after some errors (disk full, I/O), each write
 * first checks that the transaction is still open; otherwise later rows
 * would land in autocommit mode and a run could reach the file in part.
 *
 * Speed: the default rollback journal (no -wal/-shm files beside a results
 * file that people copy around) with synchronous=NORMAL and a 64 MiB page
 * cache; the one transaction per run makes the journal cost per run, not
 * per row.  Inserts reuse prepared statements.
 *
 * Errors: every SQLite failure becomes one hs_err line
 * "<file>: <what>: <sqlite3_errmsg>", code HS_EDB.
 *
 * Schema: kept in results/schema.sql and embedded below as the same text
 * (tests/test_db.c creates a database from each and compares sqlite_master). */
#include "out/db.h"
#include "out/db_int.h"

#include <assert.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The tables version 2 added: part of the schema text and the 1 -> 2
 * migration, so both create them identically. */
#define SCHEMA_V2_TABLES \
    "-- Schema version 2: sweeps and time series.\n" \
    "CREATE TABLE IF NOT EXISTS sweep_cases (\n" \
    "    case_key TEXT PRIMARY KEY,          -- 16 hex digits: FNV-1a 64 of the canonical configuration\n" \
    "    sweep    TEXT NOT NULL DEFAULT '',  -- name given to the sweep (--name)\n" \
    "    idx      INTEGER NOT NULL,          -- position in that sweep's case list\n" \
    "    params   TEXT NOT NULL,             -- the swept keys and values, JSON object\n" \
    "    run      INTEGER REFERENCES runs(id) ON DELETE CASCADE,  -- NULL: the case failed\n" \
    "    error    TEXT                       -- why it failed; NULL when it ran\n" \
    ") WITHOUT ROWID;\n" \
    "CREATE TABLE IF NOT EXISTS samples (\n" \
    "    run     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n" \
    "    replica INTEGER NOT NULL,\n" \
    "    t       REAL NOT NULL,              -- s, simulated: the state at this instant\n" \
    "    util    REAL NOT NULL,              -- busy fraction of lane time since the previous sample\n" \
    "    kv_used REAL NOT NULL,              -- fraction of KV blocks held\n" \
    "    running INTEGER NOT NULL,           -- sequences in the decode set\n" \
    "    waiting INTEGER NOT NULL,           -- requests waiting for admission\n" \
    "    PRIMARY KEY (run, replica, t)\n" \
    ") WITHOUT ROWID;\n"

/* Version 4, as results/schema.sql has it (the same text: sqlite_master
 * keeps each view's SQL, which test_db compares). */
#define SCHEMA_V4 \
    "ALTER TABLE runs ADD COLUMN deployment TEXT;\n" \
    "ALTER TABLE runs ADD COLUMN planner TEXT;\n" \
    "CREATE VIEW IF NOT EXISTS requests_ms AS\n" \
    "SELECT run, id, arrival AS arrival_s, prompt AS prompt_tokens, output AS output_tokens,\n" \
    "       replica, 1000 * ttft AS ttft_ms, 1000 * tpot AS tpot_ms, 1000 * e2e AS e2el_ms,\n" \
    "       1000 * queue_delay AS queue_ms, preemptions, slo_met, dropped, drop_reason\n" \
    "FROM requests;\n" \
    "CREATE VIEW IF NOT EXISTS summary_wide AS\n" \
    "SELECT p.run AS run, r.label AS label, r.started AS started,\n" \
    "       coalesce(r.planner, json_extract(r.config, '$.planner')) AS planner,\n" \
    "       CAST(p.num_prompts AS INTEGER) AS num_prompts,\n" \
    "       CAST(p.completed AS INTEGER) AS completed,\n" \
    "       CAST(p.dropped AS INTEGER) AS dropped,\n" \
    "       p.duration AS duration,\n" \
    "       CAST(round(p.input_throughput * p.duration) AS INTEGER) AS total_input_tokens,\n" \
    "       CAST(round(p.output_throughput * p.duration) AS INTEGER) AS total_output_tokens,\n" \
    "       p.request_throughput AS request_throughput,\n" \
    "       p.request_goodput AS request_goodput,\n" \
    "       p.input_throughput AS input_throughput,\n" \
    "       p.output_throughput AS output_throughput,\n" \
    "       p.total_token_throughput AS total_token_throughput,\n" \
    "       p.mean_ttft_ms AS mean_ttft_ms, p.median_ttft_ms AS median_ttft_ms,\n" \
    "       (SELECT sqrt(avg((1000 * q.ttft - p.mean_ttft_ms) * (1000 * q.ttft - p.mean_ttft_ms)))\n" \
    "        FROM requests q WHERE q.run = p.run AND q.ttft IS NOT NULL) AS std_ttft_ms,\n" \
    "       p.p90_ttft_ms AS p90_ttft_ms, p.p95_ttft_ms AS p95_ttft_ms, p.p99_ttft_ms AS p99_ttft_ms,\n" \
    "       p.mean_tpot_ms AS mean_tpot_ms, p.median_tpot_ms AS median_tpot_ms,\n" \
    "       (SELECT sqrt(avg((1000 * q.tpot - p.mean_tpot_ms) * (1000 * q.tpot - p.mean_tpot_ms)))\n" \
    "        FROM requests q WHERE q.run = p.run AND q.tpot IS NOT NULL) AS std_tpot_ms,\n" \
    "       p.p90_tpot_ms AS p90_tpot_ms, p.p95_tpot_ms AS p95_tpot_ms, p.p99_tpot_ms AS p99_tpot_ms,\n" \
    "       p.mean_itl_ms AS mean_itl_ms, p.median_itl_ms AS median_itl_ms,\n" \
    "       p.p90_itl_ms AS p90_itl_ms, p.p95_itl_ms AS p95_itl_ms, p.p99_itl_ms AS p99_itl_ms,\n" \
    "       p.mean_e2el_ms AS mean_e2el_ms, p.median_e2el_ms AS median_e2el_ms,\n" \
    "       (SELECT sqrt(avg((1000 * q.e2e - p.mean_e2el_ms) * (1000 * q.e2e - p.mean_e2el_ms)))\n" \
    "        FROM requests q WHERE q.run = p.run AND q.e2e IS NOT NULL) AS std_e2el_ms,\n" \
    "       p.p90_e2el_ms AS p90_e2el_ms, p.p95_e2el_ms AS p95_e2el_ms, p.p99_e2el_ms AS p99_e2el_ms,\n" \
    "       p.mean_queue_ms AS mean_queue_ms, p.median_queue_ms AS median_queue_ms,\n" \
    "       p.p90_queue_ms AS p90_queue_ms, p.p95_queue_ms AS p95_queue_ms, p.p99_queue_ms AS p99_queue_ms,\n" \
    "       p.slo_attainment AS slo_attainment,\n" \
    "       CAST(p.preemptions AS INTEGER) AS preemptions,\n" \
    "       p.cost_per_hour AS cost_per_hour,\n" \
    "       p.tokens_per_dollar AS tokens_per_dollar,\n" \
    "       CAST(p.iterations AS INTEGER) AS iterations,\n" \
    "       p.simulated_s AS simulated_s\n" \
    "FROM (SELECT run,\n" \
    "             max(CASE metric WHEN 'arrivals' THEN value END) AS num_prompts,\n" \
    "             max(CASE metric WHEN 'completed' THEN value END) AS completed,\n" \
    "             max(CASE metric WHEN 'dropped' THEN value END) AS dropped,\n" \
    "             max(CASE metric WHEN 'duration_s' THEN value END) AS duration,\n" \
    "             max(CASE metric WHEN 'request_throughput' THEN value END) AS request_throughput,\n" \
    "             max(CASE metric WHEN 'goodput' THEN value END) AS request_goodput,\n" \
    "             max(CASE metric WHEN 'input_token_throughput' THEN value END) AS input_throughput,\n" \
    "             max(CASE metric WHEN 'output_token_throughput' THEN value END) AS output_throughput,\n" \
    "             max(CASE metric WHEN 'total_token_throughput' THEN value END) AS total_token_throughput,\n" \
    "             max(CASE metric WHEN 'ttft_mean_ms' THEN value END) AS mean_ttft_ms,\n" \
    "             max(CASE metric WHEN 'ttft_p50_ms' THEN value END) AS median_ttft_ms,\n" \
    "             max(CASE metric WHEN 'ttft_p90_ms' THEN value END) AS p90_ttft_ms,\n" \
    "             max(CASE metric WHEN 'ttft_p95_ms' THEN value END) AS p95_ttft_ms,\n" \
    "             max(CASE metric WHEN 'ttft_p99_ms' THEN value END) AS p99_ttft_ms,\n" \
    "             max(CASE metric WHEN 'tpot_mean_ms' THEN value END) AS mean_tpot_ms,\n" \
    "             max(CASE metric WHEN 'tpot_p50_ms' THEN value END) AS median_tpot_ms,\n" \
    "             max(CASE metric WHEN 'tpot_p90_ms' THEN value END) AS p90_tpot_ms,\n" \
    "             max(CASE metric WHEN 'tpot_p95_ms' THEN value END) AS p95_tpot_ms,\n" \
    "             max(CASE metric WHEN 'tpot_p99_ms' THEN value END) AS p99_tpot_ms,\n" \
    "             max(CASE metric WHEN 'itl_mean_ms' THEN value END) AS mean_itl_ms,\n" \
    "             max(CASE metric WHEN 'itl_p50_ms' THEN value END) AS median_itl_ms,\n" \
    "             max(CASE metric WHEN 'itl_p90_ms' THEN value END) AS p90_itl_ms,\n" \
    "             max(CASE metric WHEN 'itl_p95_ms' THEN value END) AS p95_itl_ms,\n" \
    "             max(CASE metric WHEN 'itl_p99_ms' THEN value END) AS p99_itl_ms,\n" \
    "             max(CASE metric WHEN 'e2el_mean_ms' THEN value END) AS mean_e2el_ms,\n" \
    "             max(CASE metric WHEN 'e2el_p50_ms' THEN value END) AS median_e2el_ms,\n" \
    "             max(CASE metric WHEN 'e2el_p90_ms' THEN value END) AS p90_e2el_ms,\n" \
    "             max(CASE metric WHEN 'e2el_p95_ms' THEN value END) AS p95_e2el_ms,\n" \
    "             max(CASE metric WHEN 'e2el_p99_ms' THEN value END) AS p99_e2el_ms,\n" \
    "             max(CASE metric WHEN 'queue_mean_ms' THEN value END) AS mean_queue_ms,\n" \
    "             max(CASE metric WHEN 'queue_p50_ms' THEN value END) AS median_queue_ms,\n" \
    "             max(CASE metric WHEN 'queue_p90_ms' THEN value END) AS p90_queue_ms,\n" \
    "             max(CASE metric WHEN 'queue_p95_ms' THEN value END) AS p95_queue_ms,\n" \
    "             max(CASE metric WHEN 'queue_p99_ms' THEN value END) AS p99_queue_ms,\n" \
    "             max(CASE metric WHEN 'slo_attainment' THEN value END) AS slo_attainment,\n" \
    "             max(CASE metric WHEN 'preemptions' THEN value END) AS preemptions,\n" \
    "             max(CASE metric WHEN 'cost_per_hour' THEN value END) AS cost_per_hour,\n" \
    "             max(CASE metric WHEN 'tokens_per_dollar' THEN value END) AS tokens_per_dollar,\n" \
    "             max(CASE metric WHEN 'iterations' THEN value END) AS iterations,\n" \
    "             max(CASE metric WHEN 'simulated_s' THEN value END) AS simulated_s\n" \
    "      FROM summary GROUP BY run) AS p\n" \
    "JOIN runs AS r ON r.id = p.run;\n"

/* results/schema.sql up to version 2; the versions after it are the
 * migrations below, which the file lists at its end. */
static const char schema_sql[] =
    "-- hetsim results database, schema version 3 (its last section migrates a\n"
    "-- version 2 database; run the whole file on an empty database only).\n"
    "-- sim/out/db.c embeds this text up to version 2 and applies the later\n"
    "-- versions as migrations (tests/test_db.c checks that both\n"
    "-- create the same sqlite_master); change them together and bump\n"
    "-- HS_DB_SCHEMA_VERSION in sim/out/db.h with a migration in db.c.\n"
    "-- Times in requests are seconds; validations are nanoseconds.\n"
    "CREATE TABLE IF NOT EXISTS meta (\n"
    "    key   TEXT PRIMARY KEY,\n"
    "    value TEXT NOT NULL\n"
    ");\n"
    "CREATE TABLE IF NOT EXISTS runs (\n"
    "    id      INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "    started TEXT NOT NULL,              -- ISO-8601 UTC wall clock, 2024-05-01T12:00:00Z\n"
    "    config  TEXT NOT NULL,              -- the effective configuration, JSON\n"
    "    git_rev TEXT NOT NULL DEFAULT '',\n"
    "    seed    INTEGER NOT NULL,           -- uint64 stored as its int64 bit pattern\n"
    "    wall_s  REAL,                       -- wall-clock seconds; NULL until committed\n"
    "    events  INTEGER,                    -- simulated events processed\n"
    "    label   TEXT NOT NULL DEFAULT ''\n"
    ");\n"
    "CREATE TABLE IF NOT EXISTS requests (\n"
    "    run         INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "    id          INTEGER NOT NULL,\n"
    "    arrival     REAL NOT NULL,          -- s\n"
    "    prompt      INTEGER NOT NULL,       -- tokens\n"
    "    output      INTEGER NOT NULL,       -- tokens generated\n"
    "    replica     INTEGER,                -- NULL: never routed\n"
    "    ttft        REAL,                   -- s; NULL when dropped\n"
    "    tpot        REAL,                   -- s; NULL when dropped or output <= 1\n"
    "    e2e         REAL,                   -- s; NULL when dropped\n"
    "    queue_delay REAL,                   -- s; NULL when dropped\n"
    "    preemptions INTEGER NOT NULL,\n"
    "    slo_met     INTEGER NOT NULL,       -- 0 or 1\n"
    "    dropped     INTEGER NOT NULL,       -- 0 or 1\n"
    "    drop_reason TEXT,                   -- why it was dropped; NULL otherwise\n"
    "    PRIMARY KEY (run, id)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE IF NOT EXISTS replicas (\n"
    "    run        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "    id         INTEGER NOT NULL,\n"
    "    role       TEXT NOT NULL,           -- colocated, prefill, decode, ...\n"
    "    gpus       TEXT NOT NULL,           -- e.g. a100-80g:0,1,2,3\n"
    "    tp         INTEGER NOT NULL,\n"
    "    pp         INTEGER NOT NULL,\n"
    "    bits       INTEGER NOT NULL,        -- weight bits\n"
    "    kv_blocks  INTEGER NOT NULL,\n"
    "    perf_model TEXT NOT NULL,           -- latency model that served it\n"
    "    PRIMARY KEY (run, id)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE IF NOT EXISTS summary (\n"
    "    run    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "    metric TEXT NOT NULL,               -- vLLM-style name, e.g. ttft_p99_ms\n"
    "    value  REAL,\n"
    "    PRIMARY KEY (run, metric)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE IF NOT EXISTS validations (\n"
    "    run          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "    device       TEXT NOT NULL,\n"
    "    iteration    INTEGER NOT NULL,\n"
    "    predicted_ns INTEGER NOT NULL,\n"
    "    measured_ns  INTEGER NOT NULL,\n"
    "    PRIMARY KEY (run, device, iteration)\n"
    ") WITHOUT ROWID;\n"
    SCHEMA_V2_TABLES
    "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '2');\n"
    ;

/* migrations[v] upgrades a version-v database to v + 1 (inside the open
 * transaction). */
static const char *const migrations[HS_DB_SCHEMA_VERSION] = {
    NULL,   /* 0 -> 1: no hetsim database ever had version 0 */
    SCHEMA_V2_TABLES,   /* 1 -> 2: sweep_cases and samples */
    /* 2 -> 3: how far to trust each replica's latencies */
    "ALTER TABLE replicas ADD COLUMN calibration TEXT;\n"      /* e.g. a100-80g: measured table */
    "ALTER TABLE replicas ADD COLUMN expected_err_pct REAL;\n" /* cross-validated, per layer */
    "ALTER TABLE replicas ADD COLUMN engine TEXT;\n",          /* engine profile, none */
    /* 3 -> 4: the deployment's content and planner; views in ms and in
     * vLLM benchmark_serving names (results/schema.sql says why) */
    SCHEMA_V4,
};

struct hs_db {
    sqlite3 *h;
    char *path;                 /* for error messages */
    sqlite3_stmt *ins_run, *ins_replica, *ins_request, *ins_summary, *upd_run;
    sqlite3_stmt *ins_sample;
    int open;                   /* 1 while a run's transaction is open */
    int64_t run;                /* the open run's id */
};

/* Formats the connection's last SQLite error; returns HS_EDB. */
static int db_fail(hs_db *db, hs_err *err, const char *what)
{
    return hs_errf(err, HS_EDB, "%s: %s: %s", db->path, what, sqlite3_errmsg(db->h));
}

static int db_exec(hs_db *db, const char *sql, const char *what, hs_err *err)
{
    char *msg = NULL;
    if (sqlite3_exec(db->h, sql, NULL, NULL, &msg) == SQLITE_OK) return 0;
    hs_errf(err, HS_EDB, "%s: %s: %s", db->path, what,
            msg ? msg : sqlite3_errmsg(db->h));
    sqlite3_free(msg);
    return HS_EDB;
}

/* Steps a statement that returns no rows and resets it for reuse.  The
 * message is taken before the reset so it names this failure. */
static int step_done(hs_db *db, sqlite3_stmt *st, const char *what, hs_err *err)
{
    int rc = sqlite3_step(st);
    int ret = 0;
    if (rc != SQLITE_DONE) ret = db_fail(db, err, what);
    sqlite3_reset(st);
    return ret;
}

/* Rolls back whatever transaction is open; SQLite may already have done so
 * after an error, hence the autocommit test. */
static void rollback(hs_db *db)
{
    if (!sqlite3_get_autocommit(db->h))
        sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
}

/* Runs a one-row, one-column query; *found tells whether a row came back.
 * The text (when any) is copied into buf. */
static int query_text(hs_db *db, const char *sql, char *buf, size_t cap,
                      int *found, hs_err *err)
{
    sqlite3_stmt *st = NULL;
    *found = 0;
    buf[0] = '\0';
    if (sqlite3_prepare_v2(db->h, sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(db, err, "reading the schema");
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        snprintf(buf, cap, "%s", t ? (const char *)t : "");
        *found = 1;
    } else if (rc != SQLITE_DONE) {
        int ret = db_fail(db, err, "reading the schema");
        sqlite3_finalize(st);
        return ret;
    }
    sqlite3_finalize(st);
    return 0;
}

/* Parses a schema_version value; -1 when it is not a plain integer. */
static long parse_version(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    return (end == s || *end || v < 0) ? -1 : v;
}

/* Creates the schema in an empty database, migrates an older one, refuses
 * a newer or foreign one; all inside one IMMEDIATE transaction so two
 * processes opening a new file cannot both create it. */
static int ensure_schema(hs_db *db, hs_err *err)
{
    char buf[64];
    int found, rc;
    if ((rc = db_exec(db, "BEGIN IMMEDIATE", "opening", err))) return rc;
    rc = query_text(db, "SELECT count(*) FROM sqlite_master "
                        "WHERE type = 'table' AND name = 'meta'",
                    buf, sizeof buf, &found, err);
    if (rc) goto fail;
    if (strcmp(buf, "0") == 0) {
        rc = query_text(db, "SELECT count(*) FROM sqlite_master", buf,
                        sizeof buf, &found, err);
        if (rc) goto fail;
        if (strcmp(buf, "0") != 0) {
            rc = hs_errf(err, HS_EDB, "%s: not a hetsim results database "
                         "(it has tables but no table meta)", db->path);
            goto fail;
        }
        if ((rc = db_exec(db, schema_sql, "creating the schema", err))) goto fail;
    }
    rc = query_text(db, "SELECT value FROM meta WHERE key = 'schema_version'",
                    buf, sizeof buf, &found, err);
    if (rc) goto fail;
    long v = found ? parse_version(buf) : -1;
    if (v < 0) {
        rc = hs_errf(err, HS_EDB, "%s: table meta has no valid schema_version "
                     "(found '%s')", db->path, found ? buf : "");
        goto fail;
    }
    if (v > HS_DB_SCHEMA_VERSION) {
        rc = hs_errf(err, HS_EDB, "%s: schema version %ld is newer than this "
                     "build's (%d); use a newer hetsim or another file",
                     db->path, v, HS_DB_SCHEMA_VERSION);
        goto fail;
    }
    for (; v < HS_DB_SCHEMA_VERSION; v++) {
        if (!migrations[v]) {
            rc = hs_errf(err, HS_EDB, "%s: no migration from schema version "
                         "%ld to %ld", db->path, v, v + 1);
            goto fail;
        }
        if ((rc = db_exec(db, migrations[v], "migrating the schema", err))) goto fail;
        char upd[128];
        snprintf(upd, sizeof upd, "UPDATE meta SET value = '%ld' "
                 "WHERE key = 'schema_version'", v + 1);
        if ((rc = db_exec(db, upd, "migrating the schema", err))) goto fail;
    }
    if ((rc = db_exec(db, "COMMIT", "creating the schema", err))) goto fail;
    return 0;
fail:
    rollback(db);
    return rc;
}

static int prepare(hs_db *db, sqlite3_stmt **st, const char *sql, hs_err *err)
{
    /* PERSISTENT: these statements live as long as the connection. */
    if (sqlite3_prepare_v3(db->h, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL)
        != SQLITE_OK)
        return db_fail(db, err, "preparing a statement");
    return 0;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int hs_db_open(hs_db **out, const char *path, hs_err *err)
{
    int rc;
    *out = NULL;
    if (!path || !*path) return hs_errf(err, HS_EINVAL, "database path is empty");
    hs_db *db = calloc(1, sizeof *db);
    if (!db || !(db->path = dup_str(path))) {
        free(db);
        return hs_errf(err, HS_ENOMEM, "%s: out of memory", path);
    }
    rc = sqlite3_open_v2(path, &db->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                         NULL);
    if (rc != SQLITE_OK) {
        rc = hs_errf(err, HS_EDB, "%s: opening: %s", path,
                     db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc));
        goto fail;
    }
    /* Another run writing the same file holds the lock for its whole run;
     * wait for it (up to 60 s) rather than fail. */
    sqlite3_busy_timeout(db->h, 60000);
    rc = db_exec(db, "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; "
                     "PRAGMA cache_size = -65536", "opening", err);
    if (rc) goto fail;
    if ((rc = ensure_schema(db, err))) goto fail;
    if ((rc = prepare(db, &db->ins_run,
            "INSERT INTO runs (started, config, git_rev, seed, label) "
            "VALUES (?1, ?2, ?3, ?4, ?5)", err)) ||
        (rc = prepare(db, &db->ins_replica,
            "INSERT INTO replicas (run, id, role, gpus, tp, pp, bits, kv_blocks, "
            "perf_model, calibration, expected_err_pct, engine) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)", err)) ||
        (rc = prepare(db, &db->ins_request,
            "INSERT INTO requests (run, id, arrival, prompt, output, replica, "
            "ttft, tpot, e2e, queue_delay, preemptions, slo_met, dropped, drop_reason) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)", err)) ||
        (rc = prepare(db, &db->ins_summary,
            "INSERT INTO summary (run, metric, value) VALUES (?1, ?2, ?3)", err)) ||
        (rc = prepare(db, &db->upd_run,
            "UPDATE runs SET wall_s = ?1, events = ?2 WHERE id = ?3", err)) ||
        (rc = prepare(db, &db->ins_sample,
            "INSERT INTO samples (run, replica, t, util, kv_used, running, waiting) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", err)))
        goto fail;
    *out = db;
    return 0;
fail:
    hs_db_close(db);
    return rc;
}

int hs_db_check_writable(const char *path, hs_err *err)
{
    char dir[4096];
    const char *slash;
    sqlite3 *h = NULL;
    int rc;
    if (!path || !*path) return hs_errf(err, HS_EINVAL, "database path is empty");
    slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (access(path, F_OK) != 0) {
        if (access(dir, W_OK | X_OK) != 0)
            return hs_errf(err, HS_EIO, "%s: cannot create the database: folder %s: %s", path, dir,
                           strerror(errno));
        return 0;
    }
    rc = sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE, NULL);
    if (rc != SQLITE_OK || sqlite3_db_readonly(h, "main") == 1) {
        rc = hs_errf(err, HS_EIO, "%s: the database is not writable%s%s", path,
                     rc != SQLITE_OK ? ": " : " (read-only file)",
                     rc != SQLITE_OK ? (h ? sqlite3_errmsg(h) : sqlite3_errstr(rc)) : "");
        sqlite3_close(h);
        return rc;
    }
    sqlite3_close(h);
    if (access(dir, W_OK | X_OK) != 0)
        return hs_errf(err, HS_EIO, "%s: the database's folder %s takes no new files (for its journal): %s",
                       path, dir, strerror(errno));
    return 0;
}

void hs_db_close(hs_db *db)
{
    if (!db) return;
    if (db->h) {
        hs_db_run_abort(db);
        sqlite3_finalize(db->ins_run);
        sqlite3_finalize(db->ins_replica);
        sqlite3_finalize(db->ins_request);
        sqlite3_finalize(db->ins_summary);
        sqlite3_finalize(db->upd_run);
        sqlite3_finalize(db->ins_sample);
        sqlite3_close(db->h);
    }
    free(db->path);
    free(db);
}

/* NULL text is stored as the empty string (the columns are NOT NULL). */
static int bind_text(sqlite3_stmt *st, int i, const char *s)
{
    return sqlite3_bind_text(st, i, s ? s : "", -1, SQLITE_TRANSIENT);
}

/* NULL for an absent or empty value, as rows migrated from older schema
 * versions have it: one way to say "not recorded". */
static int bind_text_or_null(sqlite3_stmt *st, int i, const char *s)
{
    return s && *s ? bind_text(st, i, s) : sqlite3_bind_null(st, i);
}

/* Checks that run_id is the open run and that SQLite has not rolled its
 * transaction back behind our back (see the file comment). */
static int check_run(hs_db *db, int64_t run_id, hs_err *err)
{
    if (!db->open || db->run != run_id)
        return hs_errf(err, HS_ESTATE, "%s: run %lld is not the open run",
                       db->path, (long long)run_id);
    if (sqlite3_get_autocommit(db->h))
        return hs_errf(err, HS_EDB, "%s: run %lld: its transaction was rolled "
                       "back after an earlier error", db->path, (long long)run_id);
    return 0;
}

int hs_db_run_begin(hs_db *db, const hs_run_info *info, int64_t *run_id,
                    hs_err *err)
{
    int rc;
    if (db->open)
        return hs_errf(err, HS_ESTATE, "%s: run %lld is still open", db->path,
                       (long long)db->run);
    char started[32];
    time_t now = time(NULL);
    struct tm tm;
    if (now == (time_t)-1 || !gmtime_r(&now, &tm) ||
        !strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(started, sizeof started, "unknown");
    if ((rc = db_exec(db, "BEGIN IMMEDIATE", "beginning a run", err))) return rc;
    sqlite3_stmt *st = db->ins_run;
    if (bind_text(st, 1, started) || bind_text(st, 2, info->config_json ? info->config_json : "{}") ||
        bind_text(st, 3, info->git_rev) ||
        sqlite3_bind_int64(st, 4, (sqlite3_int64)info->seed) ||
        bind_text(st, 5, info->label)) {
        rc = db_fail(db, err, "inserting the run");
        sqlite3_reset(st);
        goto fail;
    }
    if ((rc = step_done(db, st, "inserting the run", err))) goto fail;
    db->run = sqlite3_last_insert_rowid(db->h);
    db->open = 1;
    *run_id = db->run;
    return 0;
fail:
    rollback(db);
    return rc;
}

int hs_db_run_deployment(hs_db *db, int64_t run_id, const char *deployment_json,
                         const char *planner, hs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc;
    if ((rc = check_run(db, run_id, err))) return rc;
    /* once per run: not worth a persistent statement */
    if (sqlite3_prepare_v2(db->h, "UPDATE runs SET deployment = ?1, planner = ?2 WHERE id = ?3", -1, &st,
                           NULL) != SQLITE_OK)
        return db_fail(db, err, "recording the deployment");
    if (bind_text_or_null(st, 1, deployment_json) || bind_text_or_null(st, 2, planner) ||
        sqlite3_bind_int64(st, 3, run_id))
        rc = db_fail(db, err, "recording the deployment");
    else
        rc = step_done(db, st, "recording the deployment", err);
    sqlite3_finalize(st);
    return rc;
}

int hs_db_replica(hs_db *db, int64_t run_id, const hs_replica_row *r,
                  hs_err *err)
{
    int rc;
    if ((rc = check_run(db, run_id, err))) return rc;
    sqlite3_stmt *st = db->ins_replica;
    if (sqlite3_bind_int64(st, 1, run_id) || sqlite3_bind_int(st, 2, r->id) ||
        bind_text(st, 3, r->role) || bind_text(st, 4, r->gpus) ||
        sqlite3_bind_int(st, 5, r->tp) || sqlite3_bind_int(st, 6, r->pp) ||
        sqlite3_bind_int(st, 7, r->bits) || sqlite3_bind_int64(st, 8, r->kv_blocks) ||
        bind_text(st, 9, r->perf_model) || bind_text_or_null(st, 10, r->calibration) ||
        (r->expected_err_pct >= 0 ? sqlite3_bind_double(st, 11, r->expected_err_pct)
                                  : sqlite3_bind_null(st, 11)) ||
        bind_text_or_null(st, 12, r->engine)) {
        rc = db_fail(db, err, "inserting a replica");
        sqlite3_reset(st);
        return rc;
    }
    return step_done(db, st, "inserting a replica", err);
}

int hs_db_request(hs_db *db, int64_t run_id, const hs_req_record *r,
                  int slo_met, hs_err *err)
{
    int rc;
    if ((rc = check_run(db, run_id, err))) return rc;
    sqlite3_stmt *st = db->ins_request;
    /* Binding numbers cannot fail on a valid statement and index, so only
     * the step is checked (asserted in debug builds). */
    int b = 0;
    b |= sqlite3_bind_int64(st, 1, run_id);
    b |= sqlite3_bind_int64(st, 2, r->id);
    b |= sqlite3_bind_double(st, 3, hs_ns_to_s(r->arrival));
    b |= sqlite3_bind_int(st, 4, r->prompt);
    b |= sqlite3_bind_int(st, 5, r->output);
    b |= r->replica >= 0 ? sqlite3_bind_int(st, 6, r->replica) : sqlite3_bind_null(st, 6);
    if (r->dropped) {
        for (int i = 7; i <= 10; i++) b |= sqlite3_bind_null(st, i);
    } else {
        b |= sqlite3_bind_double(st, 7, hs_ns_to_s(r->first_token - r->arrival));
        /* Same definition as metrics.c: (finish - first_token) / (output - 1). */
        if (r->output > 1)
            b |= sqlite3_bind_double(st, 8, hs_ns_to_s(r->finish - r->first_token) /
                                                (double)(r->output - 1));
        else
            b |= sqlite3_bind_null(st, 8);
        b |= sqlite3_bind_double(st, 9, hs_ns_to_s(r->finish - r->arrival));
        b |= sqlite3_bind_double(st, 10, hs_ns_to_s(r->first_sched - r->arrival));
    }
    b |= sqlite3_bind_int(st, 11, r->preemptions);
    b |= sqlite3_bind_int(st, 12, slo_met ? 1 : 0);
    b |= sqlite3_bind_int(st, 13, r->dropped ? 1 : 0);
    b |= r->dropped && r->why ? sqlite3_bind_text(st, 14, r->why, -1, SQLITE_STATIC)
                              : sqlite3_bind_null(st, 14);
    assert(b == SQLITE_OK);
    (void)b;
    return step_done(db, st, "inserting a request", err);
}

int hs_db_summary(hs_db *db, int64_t run_id, const hs_metric_value *v, int n,
                  hs_err *err)
{
    int rc;
    if ((rc = check_run(db, run_id, err))) return rc;
    sqlite3_stmt *st = db->ins_summary;
    for (int i = 0; i < n; i++) {
        /* A NaN binds as NULL, which the value column allows. */
        if (sqlite3_bind_int64(st, 1, run_id) || bind_text(st, 2, v[i].name) ||
            sqlite3_bind_double(st, 3, v[i].value)) {
            rc = db_fail(db, err, "inserting a summary value");
            sqlite3_reset(st);
            return rc;
        }
        char what[80];
        snprintf(what, sizeof what, "inserting summary metric %.40s", v[i].name);
        if ((rc = step_done(db, st, what, err))) return rc;
    }
    return 0;
}

int hs_db_run_commit(hs_db *db, int64_t run_id, double wall_s, int64_t events,
                     hs_err *err)
{
    int rc;
    if ((rc = check_run(db, run_id, err))) return rc;
    sqlite3_stmt *st = db->upd_run;
    sqlite3_bind_double(st, 1, wall_s);
    sqlite3_bind_int64(st, 2, events);
    sqlite3_bind_int64(st, 3, run_id);
    if ((rc = step_done(db, st, "finishing the run", err))) goto fail;
    if ((rc = db_exec(db, "COMMIT", "committing the run", err))) goto fail;
    db->open = 0;
    return 0;
fail:
    /* A run that cannot be committed leaves nothing behind; the caller's
     * later hs_db_run_abort() is then a no-op. */
    hs_db_run_abort(db);
    return rc;
}

void hs_db_run_abort(hs_db *db)
{
    if (!db) return;
    rollback(db);
    db->open = 0;
}

int hs_db_latest_run(hs_db *db, int64_t *run_id, hs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc;
    if (sqlite3_prepare_v2(db->h, "SELECT max(id) FROM runs", -1, &st, NULL) != SQLITE_OK)
        return db_fail(db, err, "finding the latest run");
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW || sqlite3_column_type(st, 0) == SQLITE_NULL) {
        sqlite3_finalize(st);
        return hs_errf(err, HS_ENOTFOUND, "%s: holds no run", db->path);
    }
    *run_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return 0;
}

int hs_db_validations(hs_db *db, int64_t run_id, const char *device, const int64_t *iteration,
                      const int64_t *predicted_ns, const int64_t *measured_ns, int64_t n,
                      hs_err *err)
{
    sqlite3_stmt *st = NULL, *chk = NULL;
    int rc;
    if (db->open)
        return hs_errf(err, HS_ESTATE, "%s: run %lld is still open", db->path, (long long)db->run);
    if (sqlite3_prepare_v2(db->h, "SELECT 1 FROM runs WHERE id = ?1", -1, &chk, NULL) != SQLITE_OK)
        return db_fail(db, err, "checking the run");
    sqlite3_bind_int64(chk, 1, run_id);
    rc = sqlite3_step(chk);
    sqlite3_finalize(chk);
    if (rc != SQLITE_ROW)
        return hs_errf(err, HS_ENOTFOUND, "%s: no run %lld", db->path, (long long)run_id);
    if ((rc = db_exec(db, "BEGIN IMMEDIATE", "storing validations", err))) return rc;
    /* A device validated twice replaces its rows: the newest replay wins. */
    if (sqlite3_prepare_v2(db->h, "DELETE FROM validations WHERE run = ?1 AND device = ?2", -1,
                           &st, NULL) != SQLITE_OK) {
        rc = db_fail(db, err, "storing validations");
        goto fail;
    }
    sqlite3_bind_int64(st, 1, run_id);
    bind_text(st, 2, device);
    if ((rc = step_done(db, st, "replacing validations", err))) goto fail;
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db->h,
                           "INSERT INTO validations (run, device, iteration, predicted_ns, measured_ns) "
                           "VALUES (?1, ?2, ?3, ?4, ?5)", -1, &st, NULL) != SQLITE_OK) {
        st = NULL;
        rc = db_fail(db, err, "storing validations");
        goto fail;
    }
    for (int64_t i = 0; i < n; i++) {
        sqlite3_bind_int64(st, 1, run_id);
        bind_text(st, 2, device);
        sqlite3_bind_int64(st, 3, iteration[i]);
        sqlite3_bind_int64(st, 4, predicted_ns[i]);
        sqlite3_bind_int64(st, 5, measured_ns[i]);
        if ((rc = step_done(db, st, "inserting a validation", err))) goto fail;
    }
    sqlite3_finalize(st);
    if ((rc = db_exec(db, "COMMIT", "committing validations", err))) rollback(db);
    return rc;
fail:
    sqlite3_finalize(st);
    rollback(db);
    return rc;
}

int hs_db_sample(hs_db *db, int64_t run_id, const hs_sample_row *s, hs_err *err)
{
    int rc;
    if ((rc = check_run(db, run_id, err))) return rc;
    sqlite3_stmt *st = db->ins_sample;
    int b = 0;
    b |= sqlite3_bind_int64(st, 1, run_id);
    b |= sqlite3_bind_int(st, 2, s->replica);
    b |= sqlite3_bind_double(st, 3, s->t);
    b |= sqlite3_bind_double(st, 4, s->util);
    b |= sqlite3_bind_double(st, 5, s->kv_used);
    b |= sqlite3_bind_int64(st, 6, s->running);
    b |= sqlite3_bind_int64(st, 7, s->waiting);
    assert(b == SQLITE_OK);
    (void)b;
    return step_done(db, st, "inserting a sample", err);
}

sqlite3 *hs__db_handle(hs_db *db)
{
    return db->h;
}

const char *hs__db_path(const hs_db *db)
{
    return db->path;
}

int hs__db_busy(const hs_db *db)
{
    return db->open;
}
