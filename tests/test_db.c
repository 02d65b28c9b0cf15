/* test_db.c - the SQLite results writer: rows read back with plain sqlite3,
 * abort leaves nothing, reopening appends a run, newer or foreign files are
 * refused by name, identical runs give identical rows, results/schema.sql
 * builds the same schema as db.c, a version 3 file migrates, the views
 * (summary_wide, requests_ms) agree with the tables, the run's deployment
 * and planner are stored, the JSON result file has the view's keys and
 * values, and the insert speed (printed). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L  /* mkstemp, clock_gettime */
#endif
#include "out/db.h"

#include <cjson/cJSON.h>
#include <sqlite3.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "core/conf.h"

#define MS HS_NS_PER_MS

static char tmp_paths[16][64];
static int n_tmp;

/* A fresh empty file in /tmp (SQLite treats an empty file as a new db). */
static const char *tmp_db(void)
{
    char *p = tmp_paths[n_tmp++];
    snprintf(p, 64, "/tmp/hs_test_db_XXXXXX");
    int fd = mkstemp(p);
    if (fd < 0) {
        perror("mkstemp");
        exit(1);
    }
    close(fd);
    return p;
}

static void remove_tmp(void)
{
    for (int i = 0; i < n_tmp; i++) {
        char j[sizeof tmp_paths[i] + 8];
        size_t len = strlen(tmp_paths[i]);
        memcpy(j, tmp_paths[i], len);
        memcpy(j + len, "-journal", 9);
        unlink(tmp_paths[i]);
        unlink(j);
    }
}

static sqlite3 *raw_open(const char *path)
{
    sqlite3 *h = NULL;
    if (sqlite3_open(path, &h) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", path, sqlite3_errmsg(h));
        exit(1);
    }
    return h;
}

/* The first column of the first row as int64 (-1 on error, -2 if NULL). */
static int64_t q_int(sqlite3 *h, const char *sql)
{
    sqlite3_stmt *st;
    int64_t v = -1;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(h));
        return -1;
    }
    if (sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_type(st, 0) == SQLITE_NULL ? -2 : sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static double q_dbl(sqlite3 *h, const char *sql)
{
    sqlite3_stmt *st;
    double v = NAN;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) return NAN;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* Every row of a query as "a|b|c\n" text into buf. */
static void q_dump(sqlite3 *h, const char *sql, char *buf, size_t cap)
{
    sqlite3_stmt *st;
    size_t len = 0;
    buf[0] = '\0';
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(buf, cap, "error: %s", sqlite3_errmsg(h));
        return;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
        for (int c = 0; c < sqlite3_column_count(st); c++) {
            const unsigned char *t = sqlite3_column_text(st, c);
            len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s%s",
                                    c ? "|" : "", t ? (const char *)t : "NULL");
        }
        len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "\n");
    }
    sqlite3_finalize(st);
}

static int64_t count_all(sqlite3 *h)
{
    return q_int(h, "SELECT (SELECT count(*) FROM runs) + (SELECT count(*) FROM requests)"
                    " + (SELECT count(*) FROM replicas) + (SELECT count(*) FROM summary)"
                    " + (SELECT count(*) FROM validations)");
}

static hs_req_record mkrec(int64_t id, int32_t output, int dropped)
{
    hs_req_record r = {0};
    r.id = id;
    r.replica = dropped ? -1 : (int32_t)(id % 3);
    r.prompt = 100 + (int32_t)(id % 50);
    r.output = output;
    r.preemptions = (int32_t)(id % 2);
    r.dropped = dropped;
    r.why = dropped ? "too long" : NULL;
    r.arrival = id * 100 * MS;
    if (!dropped) {
        r.first_sched = r.arrival + 10 * MS;
        r.first_token = r.arrival + 50 * MS;
        r.finish = r.first_token + (output > 1 ? (output - 1) * 20 * MS : 0);
    }
    return r;
}

/* Writes one complete run of `nreq` synthetic requests; returns its id. */
static int64_t write_run(hs_db *db, int nreq, const char *label)
{
    hs_err err = {0};
    int64_t run = -1;
    hs_run_info info = {"{\"model\":\"llama-7b\"}", "abc123", label, UINT64_C(42)};
    hs_slo slo = {60, 25, 0};
    hs_metrics *m = hs_metrics_create(&slo);
    CHECK_OK(hs_db_run_begin(db, &info, &run, &err), &err);
    hs_replica_row rep[2] = {
        {0, "prefill", "a100-80g:0,1", 2, 1, 16, 4096, "roofline", "a100-80g: datasheet roofline, uncalibrated", -1, "vllm"},
        {1, "decode", "l4:0", 1, 1, 4, 1024, "table", "l4: measured table", 3.5, "none"},
    };
    for (int i = 0; i < 2; i++) CHECK_OK(hs_db_replica(db, run, &rep[i], &err), &err);
    for (int i = 1; i <= nreq; i++) {
        hs_req_record r = mkrec(i, i % 5 == 0 ? 1 : 8, i % 7 == 0);
        hs_metrics_request(m, &r);
        CHECK_OK(hs_db_request(db, run, &r, hs_metrics_slo_met(m, &r), &err), &err);
    }
    hs_metric_value v[64];
    int n = hs_metrics_summary(m, 2.5, v, 64);
    CHECK_OK(hs_db_summary(db, run, v, n, &err), &err);
    CHECK_OK(hs_db_run_commit(db, run, 1.5, 1234, &err), &err);
    hs_metrics_destroy(m);
    return run;
}

static void test_write_read(void)
{
    const char *path = tmp_db();
    hs_db *db = NULL;
    hs_err err = {0};
    CHECK_OK(hs_db_open(&db, path, &err), &err);
    if (!db) return;
    int64_t run = write_run(db, 10, "first");
    CHECK_INT(run, 1);
    hs_db_close(db);

    sqlite3 *h = raw_open(path);
    char buf[4096];
    CHECK_INT(q_int(h, "SELECT count(*) FROM runs"), 1);
    q_dump(h, "SELECT config, git_rev, seed, wall_s, events, label FROM runs", buf, sizeof buf);
    CHECK_STR(buf, "{\"model\":\"llama-7b\"}|abc123|42|1.5|1234|first\n");
    q_dump(h, "SELECT started GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T"
              "[0-9][0-9]:[0-9][0-9]:[0-9][0-9]Z' FROM runs", buf, sizeof buf);
    CHECK_STR(buf, "1\n");
    q_dump(h, "SELECT value FROM meta WHERE key = 'schema_version'", buf, sizeof buf);
    char want[32];
    snprintf(want, sizeof want, "%d\n", HS_DB_SCHEMA_VERSION);
    CHECK_STR(buf, want);

    q_dump(h, "SELECT * FROM replicas ORDER BY id", buf, sizeof buf);
    CHECK_STR(buf, "1|0|prefill|a100-80g:0,1|2|1|16|4096|roofline|a100-80g: datasheet roofline, uncalibrated|NULL|vllm\n"
                   "1|1|decode|l4:0|1|1|4|1024|table|l4: measured table|3.5|none\n");

    CHECK_INT(q_int(h, "SELECT count(*) FROM requests WHERE run = 1"), 10);
    /* Request 3: arrival 0.3 s, 8 tokens: ttft 50 ms, tpot 20 ms,
     * e2e 50 + 7*20 = 190 ms, queue 10 ms; SLO 60/25 met. */
    CHECK_NEAR(q_dbl(h, "SELECT arrival FROM requests WHERE id = 3"), 0.3, 1e-12);
    CHECK_NEAR(q_dbl(h, "SELECT ttft FROM requests WHERE id = 3"), 0.050, 1e-12);
    CHECK_NEAR(q_dbl(h, "SELECT tpot FROM requests WHERE id = 3"), 0.020, 1e-12);
    CHECK_NEAR(q_dbl(h, "SELECT e2e FROM requests WHERE id = 3"), 0.190, 1e-12);
    CHECK_NEAR(q_dbl(h, "SELECT queue_delay FROM requests WHERE id = 3"), 0.010, 1e-12);
    q_dump(h, "SELECT prompt, output, replica, preemptions, slo_met, dropped "
              "FROM requests WHERE id = 3", buf, sizeof buf);
    CHECK_STR(buf, "103|8|0|1|1|0\n");
    /* Request 5 has one output token: tpot NULL, the rest set. */
    q_dump(h, "SELECT tpot IS NULL, ttft IS NULL, e2e IS NULL FROM requests WHERE id = 5",
           buf, sizeof buf);
    CHECK_STR(buf, "1|0|0\n");
    /* Request 7 was dropped: all latencies and the replica NULL. */
    q_dump(h, "SELECT replica, ttft, tpot, e2e, queue_delay, slo_met, dropped "
              "FROM requests WHERE id = 7", buf, sizeof buf);
    CHECK_STR(buf, "NULL|NULL|NULL|NULL|NULL|0|1\n");

    CHECK_INT(q_int(h, "SELECT count(*) FROM summary WHERE run = 1"), 37);
    CHECK_INT(q_int(h, "SELECT value FROM summary WHERE metric = 'completed'"), 9);
    CHECK_INT(q_int(h, "SELECT value FROM summary WHERE metric = 'dropped'"), 1);
    CHECK_NEAR(q_dbl(h, "SELECT value FROM summary WHERE metric = 'ttft_mean_ms'"), 50, 1e-9);
    /* The SQL view of the requests agrees with the summary. */
    CHECK_NEAR(q_dbl(h, "SELECT avg(e2e) * 1000 FROM requests WHERE NOT dropped"),
               q_dbl(h, "SELECT value FROM summary WHERE metric = 'e2el_mean_ms'"), 1e-9);
    CHECK_INT(q_int(h, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
    sqlite3_close(h);
}

static void test_abort_and_errors(void)
{
    const char *path = tmp_db();
    hs_db *db = NULL;
    hs_err err = {0};
    CHECK_OK(hs_db_open(&db, path, &err), &err);
    if (!db) return;
    write_run(db, 5, "kept");
    sqlite3 *h = raw_open(path);
    int64_t before = count_all(h);
    CHECK(before > 0);

    /* An aborted run leaves no row in any table. */
    hs_run_info info = {"{}", "", "aborted", 1};
    int64_t run = -1;
    CHECK_OK(hs_db_run_begin(db, &info, &run, &err), &err);
    hs_replica_row rep = {0, "colocated", "h100:0", 1, 1, 16, 100, "roofline", "h100: datasheet roofline, uncalibrated", -1, "none"};
    CHECK_OK(hs_db_replica(db, run, &rep, &err), &err);
    hs_req_record r = mkrec(1, 4, 0);
    CHECK_OK(hs_db_request(db, run, &r, 1, &err), &err);
    hs_metric_value v = {"completed", 1};
    CHECK_OK(hs_db_summary(db, run, &v, 1, &err), &err);
    CHECK_INT(hs_db_summary(db, run, &v, 1, &err), HS_EDB);
    CHECK(strstr(err.msg, "summary metric completed") != NULL);
    /* A second begin while one is open is a state error. */
    int64_t run2;
    CHECK_INT(hs_db_run_begin(db, &info, &run2, &err), HS_ESTATE);
    hs_db_run_abort(db);
    hs_db_run_abort(db);   /* a no-op when none is open */
    CHECK_INT(count_all(h), before);
    /* Writing to the aborted run is refused. */
    CHECK_INT(hs_db_request(db, run, &r, 1, &err), HS_ESTATE);
    CHECK(strstr(err.msg, path) != NULL);

    /* A failing insert names the file and SQLite's reason; abort then
     * removes the rows written before it. */
    CHECK_OK(hs_db_run_begin(db, &info, &run, &err), &err);
    CHECK_OK(hs_db_request(db, run, &r, 1, &err), &err);
    hs_err_clear(&err);
    CHECK_INT(hs_db_request(db, run, &r, 1, &err), HS_EDB);
    CHECK(strstr(err.msg, path) != NULL);
    CHECK(strstr(err.msg, "UNIQUE constraint failed") != NULL);
    printf("duplicate insert: %s\n", err.msg);
    hs_db_run_abort(db);
    CHECK_INT(count_all(h), before);
    /* Closing with a run open rolls it back as well. */
    CHECK_OK(hs_db_run_begin(db, &info, &run, &err), &err);
    CHECK_OK(hs_db_request(db, run, &r, 1, &err), &err);
    hs_db_close(db);
    CHECK_INT(count_all(h), before);

    /* Reopening appends a second run. */
    db = NULL;
    CHECK_OK(hs_db_open(&db, path, &err), &err);
    if (db) {
        int64_t second = write_run(db, 5, "second");
        CHECK(second > 1);
        hs_db_close(db);
    }
    CHECK_INT(q_int(h, "SELECT count(*) FROM runs"), 2);
    CHECK_INT(q_int(h, "SELECT count(DISTINCT run) FROM requests"), 2);

    /* A newer schema is refused by name; the file is left untouched. */
    CHECK_INT(sqlite3_exec(h, "UPDATE meta SET value = '99' WHERE key = 'schema_version'",
                           NULL, NULL, NULL), SQLITE_OK);
    db = NULL;
    hs_err_clear(&err);
    CHECK_INT(hs_db_open(&db, path, &err), HS_EDB);
    CHECK(db == NULL);
    CHECK(strstr(err.msg, path) != NULL);
    CHECK(strstr(err.msg, "newer") != NULL);
    printf("newer schema: %s\n", err.msg);
    CHECK_INT(q_int(h, "SELECT value FROM meta WHERE key = 'schema_version'"), 99);
    /* So is a version that is not a number. */
    sqlite3_exec(h, "UPDATE meta SET value = 'x' WHERE key = 'schema_version'", NULL, NULL, NULL);
    CHECK_INT(hs_db_open(&db, path, &err), HS_EDB);
    CHECK(strstr(err.msg, "schema_version") != NULL);
    sqlite3_close(h);

    /* A SQLite file that is not ours. */
    const char *foreign = tmp_db();
    h = raw_open(foreign);
    sqlite3_exec(h, "CREATE TABLE t (x)", NULL, NULL, NULL);
    sqlite3_close(h);
    CHECK_INT(hs_db_open(&db, foreign, &err), HS_EDB);
    CHECK(strstr(err.msg, foreign) != NULL && strstr(err.msg, "not a hetsim") != NULL);

    /* A file that is not a database at all. */
    const char *junk = tmp_db();
    FILE *fp = fopen(junk, "w");
    for (int i = 0; i < 64; i++) fputs("this is not a database file\n", fp);
    fclose(fp);
    CHECK_INT(hs_db_open(&db, junk, &err), HS_EDB);
    CHECK(strstr(err.msg, junk) != NULL);
    printf("junk file: %s\n", err.msg);

    /* A path that cannot be created. */
    CHECK_INT(hs_db_open(&db, "/nonexistent-dir/x.db", &err), HS_EDB);
    CHECK(strstr(err.msg, "/nonexistent-dir/x.db") != NULL);
    CHECK_INT(hs_db_open(&db, "", &err), HS_EINVAL);
    hs_db_close(NULL);
}

/* Two runs from identical inputs give identical requests and summary rows
 * (compared exactly by SQL, not through text formatting). */
static void test_identical_runs(void)
{
    const char *path = tmp_db();
    hs_db *db = NULL;
    hs_err err = {0};
    CHECK_OK(hs_db_open(&db, path, &err), &err);
    if (!db) return;
    int64_t a = write_run(db, 200, "a"), b = write_run(db, 200, "b");
    hs_db_close(db);
    sqlite3 *h = raw_open(path);
    char sql[1024];
    static const char *const cols[2][2] = {
        {"requests", "id, arrival, prompt, output, replica, ttft, tpot, e2e, "
                     "queue_delay, preemptions, slo_met, dropped"},
        {"summary", "metric, value"},
    };
    for (int t = 0; t < 2; t++) {
        snprintf(sql, sizeof sql,
                 "SELECT (SELECT count(*) FROM %s WHERE run = %lld), "
                 "(SELECT count(*) FROM %s WHERE run = %lld)",
                 cols[t][0], (long long)a, cols[t][0], (long long)b);
        char buf[64];
        q_dump(h, sql, buf, sizeof buf);
        CHECK_STR(buf, t == 0 ? "200|200\n" : "37|37\n");
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM (SELECT %s FROM %s WHERE run = %lld "
                 "EXCEPT SELECT %s FROM %s WHERE run = %lld)",
                 cols[t][1], cols[t][0], (long long)a, cols[t][1], cols[t][0], (long long)b);
        CHECK_INT(q_int(h, sql), 0);
    }
    sqlite3_close(h);
}

/* results/schema.sql's text, in a buffer the caller may change (valid
 * until the next call); NULL when HS_ROOT is unset (what is skipped is
 * said) or the file cannot be read whole (a failed check). */
static char *read_schema(const char *what)
{
    static char text[65536];
    const char *root = getenv("HS_ROOT");
    if (!root || !*root) {
        printf("HS_ROOT unset: %s skipped\n", what);
        return NULL;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/results/schema.sql", root);
    FILE *fp = fopen(path, "rb");
    CHECK(fp != NULL);
    if (!fp) return NULL;
    size_t n = fread(text, 1, sizeof text - 1, fp);
    fclose(fp);
    /* a schema that outgrew the buffer would be compared cut short */
    CHECK(n < sizeof text - 1);
    if (n >= sizeof text - 1) return NULL;
    text[n] = '\0';
    return text;
}

/* results/schema.sql and the text db.c embeds create the same schema. */
static void test_schema_file(void)
{
    char *text = read_schema("schema.sql comparison");
    if (!text) return;

    const char *dbpath = tmp_db();
    hs_db *db = NULL;
    hs_err err = {0};
    CHECK_OK(hs_db_open(&db, dbpath, &err), &err);
    hs_db_close(db);

    sqlite3 *from_file = raw_open(":memory:"), *from_code = raw_open(dbpath);
    char *msg = NULL;
    CHECK_INT(sqlite3_exec(from_file, text, NULL, NULL, &msg), SQLITE_OK);
    if (msg) fprintf(stderr, "schema.sql: %s\n", msg);
    sqlite3_free(msg);
    static char a[65536], b[65536];
    const char *q = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name";
    q_dump(from_file, q, a, sizeof a);
    q_dump(from_code, q, b, sizeof b);
    CHECK(strlen(a) > 100);
    CHECK_STR(a, b);
    q_dump(from_file, "SELECT * FROM meta ORDER BY key", a, sizeof a);
    q_dump(from_code, "SELECT * FROM meta ORDER BY key", b, sizeof b);
    CHECK_STR(a, b);
    sqlite3_close(from_file);
    sqlite3_close(from_code);
}


/* summary_wide column -> summary metric it shows unchanged. */
static const char *const wide_map[][2] = {
    {"completed", "completed"}, {"dropped", "dropped"}, {"duration", "duration_s"},
    {"num_prompts", "arrivals"}, {"iterations", "iterations"}, {"simulated_s", "simulated_s"},
    {"request_throughput", "request_throughput"}, {"request_goodput", "goodput"},
    {"input_throughput", "input_token_throughput"}, {"output_throughput", "output_token_throughput"},
    {"total_token_throughput", "total_token_throughput"},
    {"mean_ttft_ms", "ttft_mean_ms"}, {"median_ttft_ms", "ttft_p50_ms"}, {"p90_ttft_ms", "ttft_p90_ms"},
    {"p95_ttft_ms", "ttft_p95_ms"}, {"p99_ttft_ms", "ttft_p99_ms"},
    {"mean_tpot_ms", "tpot_mean_ms"}, {"median_tpot_ms", "tpot_p50_ms"}, {"p90_tpot_ms", "tpot_p90_ms"},
    {"p95_tpot_ms", "tpot_p95_ms"}, {"p99_tpot_ms", "tpot_p99_ms"},
    {"mean_itl_ms", "itl_mean_ms"}, {"median_itl_ms", "itl_p50_ms"}, {"p90_itl_ms", "itl_p90_ms"},
    {"p95_itl_ms", "itl_p95_ms"}, {"p99_itl_ms", "itl_p99_ms"},
    {"mean_e2el_ms", "e2el_mean_ms"}, {"median_e2el_ms", "e2el_p50_ms"}, {"p90_e2el_ms", "e2el_p90_ms"},
    {"p95_e2el_ms", "e2el_p95_ms"}, {"p99_e2el_ms", "e2el_p99_ms"},
    {"mean_queue_ms", "queue_mean_ms"}, {"median_queue_ms", "queue_p50_ms"}, {"p90_queue_ms", "queue_p90_ms"},
    {"p95_queue_ms", "queue_p95_ms"}, {"p99_queue_ms", "queue_p99_ms"},
    {"slo_attainment", "slo_attainment"}, {"preemptions", "preemptions"}, {"cost_per_hour", "cost_per_hour"},
    {"tokens_per_dollar", "tokens_per_dollar"},
};
#define WIDE_N ((int)(sizeof wide_map / sizeof wide_map[0]))

/* Population standard deviation of v[0..n) (what numpy's std gives). */
static double stdev(const double *v, int n)
{
    double m = 0, ss = 0;
    for (int i = 0; i < n; i++) m += v[i];
    m /= n;
    for (int i = 0; i < n; i++) ss += (v[i] - m) * (v[i] - m);
    return sqrt(ss / n);
}

/* A run as `hetsim run` writes it: deployment and planner recorded, the
 * summary with the extra counters.  Fills the requests' latencies (ms) for
 * the std checks; returns the run id. */
static int64_t write_full_run(hs_db *db, int nreq, int rows, double *ttft, double *tpot, int *n_tpot,
                              double *e2e, int *n_done, int64_t *in_tok, int64_t *out_tok)
{
    hs_err err = {0};
    int64_t run = -1;
    hs_run_info info = {"{\"model\":\"llama-7b\",\"planner\":\"\"}", "abc", "wide", 7};
    hs_slo slo = {60, 25, 0};
    hs_metrics *m = hs_metrics_create(&slo);
    CHECK_OK(hs_db_run_begin(db, &info, &run, &err), &err);
    CHECK_OK(hs_db_run_deployment(db, run, "{\"model\":\"llama-7b\",\"planner\":\"hexgen2\",\"replicas\":[]}",
                                  "hexgen2", &err), &err);
    *n_tpot = *n_done = 0;
    *in_tok = *out_tok = 0;
    for (int i = 1; i <= nreq; i++) {
        /* latencies that differ per request, so the std is not 0 */
        hs_req_record r = mkrec(i, 2 + i % 9, i % 11 == 0);
        if (!r.dropped) {
            r.first_token += (i % 7) * 3 * MS;
            r.finish += (i % 7) * 3 * MS + (i % 5) * 17 * MS;
            ttft[*n_done] = (double)(r.first_token - r.arrival) / MS;
            e2e[*n_done] = (double)(r.finish - r.arrival) / MS;
            (*n_done)++;
            tpot[(*n_tpot)++] = (double)(r.finish - r.first_token) / MS / (r.output - 1);
            *in_tok += r.prompt;
            *out_tok += r.output;
        }
        hs_metrics_request(m, &r);
        if (rows) CHECK_OK(hs_db_request(db, run, &r, hs_metrics_slo_met(m, &r), &err), &err);
    }
    hs_metrics_itl(m, 20 * MS, 100);
    hs_metric_value v[64];
    int n = hs_metrics_summary(m, 2.5, v, 60);
    const struct { const char *n; double v; } extra[] = {
        {"arrivals", nreq}, {"iterations", 321}, {"simulated_s", 12.5},
    };
    for (size_t k = 0; k < 3; k++, n++) {
        snprintf(v[n].name, sizeof v[n].name, "%s", extra[k].n);
        v[n].value = extra[k].v;
    }
    CHECK_OK(hs_db_summary(db, run, v, n, &err), &err);
    CHECK_OK(hs_db_run_commit(db, run, 0.5, 99, &err), &err);
    hs_metrics_destroy(m);
    return run;
}

static void test_wide_view_and_json(void)
{
    const char *path = tmp_db();
    hs_db *db = NULL;
    hs_err err = {0};
    static double ttft[200], tpot[200], e2e[200];
    int n_tpot, n_done;
    int64_t in_tok, out_tok;
    char sql[512];
    CHECK_OK(hs_db_open(&db, path, &err), &err);
    if (!db) return;
    int64_t a = write_full_run(db, 120, 1, ttft, tpot, &n_tpot, e2e, &n_done, &in_tok, &out_tok);
    /* the same run without per-request rows: std columns are NULL */
    int64_t b = write_full_run(db, 120, 0, ttft, tpot, &n_tpot, e2e, &n_done, &in_tok, &out_tok);
    /* an older-style run with no deployment recorded */
    int64_t c = write_run(db, 10, "plain");

    sqlite3 *h = raw_open(path);
    CHECK_INT(q_int(h, "SELECT count(*) FROM summary_wide"), 3);
    /* every mapped column is the summary's value, exactly */
    for (int i = 0; i < WIDE_N; i++) {
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM summary_wide w JOIN summary s ON s.run = w.run AND s.metric = '%s' "
                 "WHERE w.%s = s.value",
                 wide_map[i][1], wide_map[i][0]);
        /* run c has no arrivals/iterations/simulated_s rows */
        int extra = !strcmp(wide_map[i][1], "arrivals") || !strcmp(wide_map[i][1], "iterations") ||
                    !strcmp(wide_map[i][1], "simulated_s");
        int64_t got = q_int(h, sql);
        if (got != (extra ? 2 : 3)) printf("summary_wide.%s vs summary.%s\n", wide_map[i][0], wide_map[i][1]);
        CHECK_INT(got, extra ? 2 : 3);
    }
    snprintf(sql, sizeof sql, "SELECT num_prompts IS NULL FROM summary_wide WHERE run = %lld", (long long)c);
    CHECK_INT(q_int(h, sql), 1);
    /* counts are integers, token totals exact */
    snprintf(sql, sizeof sql, "SELECT typeof(completed) || typeof(total_input_tokens) FROM summary_wide WHERE run = %lld",
             (long long)a);
    char buf[4096];
    q_dump(h, sql, buf, sizeof buf);
    CHECK_STR(buf, "integerinteger\n");
    snprintf(sql, sizeof sql, "SELECT total_input_tokens, total_output_tokens FROM summary_wide WHERE run = %lld",
             (long long)a);
    char want[128];
    snprintf(want, sizeof want, "%lld|%lld\n", (long long)in_tok, (long long)out_tok);
    q_dump(h, sql, buf, sizeof buf);
    CHECK_STR(buf, want);
    /* std from the requests rows, as numpy's std over the same values */
    snprintf(sql, sizeof sql, "SELECT std_ttft_ms FROM summary_wide WHERE run = %lld", (long long)a);
    CHECK_REL(q_dbl(h, sql), stdev(ttft, n_done), 1e-9);
    snprintf(sql, sizeof sql, "SELECT std_tpot_ms FROM summary_wide WHERE run = %lld", (long long)a);
    CHECK_REL(q_dbl(h, sql), stdev(tpot, n_tpot), 1e-9);
    snprintf(sql, sizeof sql, "SELECT std_e2el_ms FROM summary_wide WHERE run = %lld", (long long)a);
    CHECK_REL(q_dbl(h, sql), stdev(e2e, n_done), 1e-9);
    CHECK(stdev(ttft, n_done) > 1);
    snprintf(sql, sizeof sql, "SELECT std_ttft_ms IS NULL AND std_e2el_ms IS NULL FROM summary_wide WHERE run = %lld",
             (long long)b);
    CHECK_INT(q_int(h, sql), 1);
    /* the deployment and planner recorded; the old-style run falls back on
     * its config's planner, here absent */
    snprintf(sql, sizeof sql, "SELECT planner, json_extract(deployment, '$.planner') FROM runs WHERE id = %lld",
             (long long)a);
    q_dump(h, sql, buf, sizeof buf);
    CHECK_STR(buf, "hexgen2|hexgen2\n");
    snprintf(sql, sizeof sql, "SELECT w.planner, r.deployment FROM summary_wide w JOIN runs r ON r.id = w.run "
                              "WHERE w.run = %lld", (long long)c);
    q_dump(h, sql, buf, sizeof buf);
    CHECK_STR(buf, "NULL|NULL\n");
    /* requests_ms: the same rows, latencies in ms */
    CHECK_INT(q_int(h, "SELECT count(*) FROM requests_ms"), q_int(h, "SELECT count(*) FROM requests"));
    CHECK_INT(q_int(h, "SELECT count(*) FROM requests q JOIN requests_ms m USING (run, id) "
                       "WHERE m.ttft_ms IS 1000 * q.ttft AND m.tpot_ms IS 1000 * q.tpot "
                       "AND m.e2el_ms IS 1000 * q.e2e AND m.queue_ms IS 1000 * q.queue_delay"),
              q_int(h, "SELECT count(*) FROM requests"));
    snprintf(sql, sizeof sql, "SELECT avg(ttft_ms) FROM requests_ms WHERE run = %lld AND NOT dropped", (long long)a);
    double avg_ms = q_dbl(h, sql);
    snprintf(sql, sizeof sql, "SELECT mean_ttft_ms FROM summary_wide WHERE run = %lld", (long long)a);
    CHECK_REL(avg_ms, q_dbl(h, sql), 1e-12);

    /* the JSON result file: the view's columns under the same names and
     * values, the config and deployment as objects */
    char jpath[128];
    snprintf(jpath, sizeof jpath, "%s.json", path);
    CHECK_OK(hs_db_run_json(db, a, jpath, &err), &err);
    cJSON *j = NULL;
    CHECK_OK(hs_json_load(jpath, &j, &err), &err);
    sqlite3_stmt *st;
    snprintf(sql, sizeof sql, "SELECT * FROM summary_wide WHERE run = %lld", (long long)a);
    CHECK_INT(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    CHECK_INT(sqlite3_step(st), SQLITE_ROW);
    int cols = sqlite3_column_count(st);
    CHECK(cols > 40);
    for (int k = 0; j && k < cols; k++) {
        const char *name = sqlite3_column_name(st, k);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
        CHECK(v != NULL);
        if (!v) {
            printf("JSON lacks %s\n", name);
            continue;
        }
        switch (sqlite3_column_type(st, k)) {
        case SQLITE_NULL: CHECK(cJSON_IsNull(v)); break;
        case SQLITE_TEXT: CHECK(cJSON_IsString(v) && !strcmp(v->valuestring, (const char *)sqlite3_column_text(st, k))); break;
        default: CHECK(cJSON_IsNumber(v) && v->valuedouble == sqlite3_column_double(st, k));
        }
    }
    sqlite3_finalize(st);
    static const char *const vllm_keys[] = {"request_throughput", "output_throughput", "total_token_throughput",
                                            "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
                                            "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms",
                                            "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "mean_e2el_ms",
                                            "median_e2el_ms", "std_e2el_ms", "p99_e2el_ms", "request_goodput",
                                            "completed", "duration", "total_input_tokens", "total_output_tokens"};
    for (size_t k = 0; j && k < sizeof vllm_keys / sizeof vllm_keys[0]; k++)
        CHECK(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, vllm_keys[k])));
    if (j) {
        CHECK_INT((int64_t)cJSON_GetObjectItemCaseSensitive(j, "run")->valuedouble, a);
        CHECK(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "config")));
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "deployment");
        CHECK(cJSON_IsObject(d) && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(d, "replicas")));
        CHECK_STR(cJSON_GetObjectItemCaseSensitive(j, "planner")->valuestring, "hexgen2");
    }
    cJSON_Delete(j);
    unlink(jpath);
    /* a run that does not exist, a path that cannot be written */
    CHECK_INT(hs_db_run_json(db, 999, jpath, &err), HS_ENOTFOUND);
    CHECK(strstr(err.msg, "999") != NULL);
    CHECK(access(jpath, F_OK) != 0);
    CHECK_INT(hs_db_run_json(db, a, "/nonexistent-dir/r.json", &err), HS_EIO);
    CHECK(strstr(err.msg, "/nonexistent-dir/r.json") != NULL);
    /* the deployment can be recorded only on the open run */
    CHECK_INT(hs_db_run_deployment(db, a, "{}", "x", &err), HS_ESTATE);
    sqlite3_close(h);
    hs_db_close(db);
}

/* A version 3 file (results/schema.sql before its version 4 section) with
 * a run in it is migrated when opened: the run shows in summary_wide with
 * the planner from its config, and new runs record their deployment. */
static void test_migrate_v3(void)
{
    char *text = read_schema("migration test");
    if (!text) return;
    char *v4 = strstr(text, "-- Schema version 4");
    CHECK(v4 != NULL);
    if (!v4) return;
    *v4 = '\0';
    const char *dbpath = tmp_db();
    sqlite3 *h = raw_open(dbpath);
    CHECK_INT(sqlite3_exec(h, text, NULL, NULL, NULL), SQLITE_OK);
    CHECK_INT(q_int(h, "SELECT value FROM meta WHERE key = 'schema_version'"), 3);
    CHECK_INT(sqlite3_exec(h,
                           "INSERT INTO runs (started, config, seed, wall_s, events) VALUES "
                           "('2024-01-01T00:00:00Z', '{\"planner\":\"exegpt\"}', 1, 0.1, 10);"
                           "INSERT INTO summary VALUES (1, 'completed', 5), (1, 'ttft_p99_ms', 12.5);",
                           NULL, NULL, NULL), SQLITE_OK);
    hs_db *db = NULL;
    hs_err err = {0};
    CHECK_OK(hs_db_open(&db, dbpath, &err), &err);
    if (db) {
        write_run(db, 3, "after");
        hs_db_close(db);
    }
    CHECK_INT(q_int(h, "SELECT value FROM meta WHERE key = 'schema_version'"), HS_DB_SCHEMA_VERSION);
    char buf[256];
    q_dump(h, "SELECT run, planner, completed, p99_ttft_ms FROM summary_wide WHERE run = 1", buf, sizeof buf);
    CHECK_STR(buf, "1|exegpt|5|12.5\n");
    CHECK_INT(q_int(h, "SELECT count(*) FROM summary_wide"), 2);
    sqlite3_close(h);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Inserts HS_DB_BENCH_N requests (default 100000) in one run and prints the
 * rate; only the row count is checked, timing is not a pass criterion. */
static void test_speed(void)
{
    const char *env = getenv("HS_DB_BENCH_N");
    long n = env ? atol(env) : 100000;
    if (n <= 0) return;
    const char *path = tmp_db();
    hs_db *db = NULL;
    hs_err err = {0};
    CHECK_OK(hs_db_open(&db, path, &err), &err);
    if (!db) return;
    hs_run_info info = {"{}", "", "bench", 1};
    int64_t run = -1;
    double t0 = now_s();
    CHECK_OK(hs_db_run_begin(db, &info, &run, &err), &err);
    int bad = 0;
    /* Ids in a scrambled order, as requests finish out of arrival order. */
    for (long i = 0; i < n; i++) {
        hs_req_record r = mkrec((i * 7919) % n, 64, 0);
        bad += hs_db_request(db, run, &r, 1, &err) != 0;
    }
    double t1 = now_s();
    CHECK_OK(hs_db_run_commit(db, run, 0, n, &err), &err);
    double t2 = now_s();
    CHECK_INT(bad, 0);
    hs_db_close(db);
    sqlite3 *h = raw_open(path);
    CHECK_INT(q_int(h, "SELECT count(*) FROM requests"), n);
    sqlite3_close(h);
    printf("insert speed: %ld requests in %.3f s (%.0f rows/s; commit %.3f s)\n",
           n, t2 - t0, (double)n / (t2 - t0), t2 - t1);
}

int main(void)
{
    test_write_read();
    test_abort_and_errors();
    test_identical_runs();
    test_schema_file();
    test_wide_view_and_json();
    test_migrate_v3();
    test_speed();
    remove_tmp();
    return hs_check_result();
}
