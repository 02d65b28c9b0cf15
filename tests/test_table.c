/* test_table.c - measured latency tables (sim/perf/table.c) and the "table"
 * and "auto" builders over them (sim/perf/measured.c).
 *
 * The fixture tests/fixtures/perf/tables/a100-80g/tiny-test/ holds synthetic
 * numbers written for this test (rows deliberately out of key order):
 *   dense.csv         op k (0 = emb .. 9 = lm_head), tp 1 and 2, tokens 1, 8,
 *                     64, 512: time = (k + 1) * (1 + 0.01 * tokens / tp)
 *   attn_decode.csv   5/tp + 0.5 B + (0.002/tp) B context, B 1/4/16, ctx 64/512
 *   attn_prefill.csv  8/tp + (1e-4/tp) W + (0.01/tp) P, chunk 16/128/512, prefix 0/256
 *   allreduce.csv     2 and 4 GPUs at 1e3, 1e6, 1e8 bytes
 *   sendrecv.csv      5 + 1e-5 bytes
 * Checked: the reader (counts, meta, sorting); malformed inputs, each
 * rejected with "<file>:<line>: ..." naming the field or both duplicate
 * lines; missing ops and attention named with their TP; interpolation exact
 * at measured points, monotone between, flat below and proportional above;
 * the linear coefficient fits recover the generating coefficients exactly
 * and never go negative; row weights shift a fit as computed by hand; the
 * five-term prefill fit recovers a per-token cost and, weighted by time,
 * favours long chunks; all-reduce smoothing replaces planted outliers with
 * exact values, leaves clean curves as measured and never falls below its
 * latency floor; on Vidur's real A100 table (../shared/data) the prefill
 * fit's median error is under 5% and the smoothed curves are monotone;
 * write -> read round trip; the "table" builder's
 * dense[T] equals the layer composition at measured points; "auto" on a
 * model without a table falls back to the fitted model (with the GPU's
 * measured all-reduce, so "table+fitted"), with no tables at all to
 * "roofline"; 8-bit KV takes attention from the fitted model; a send
 * between stages in one node comes from sendrecv.csv; a TP group of two GPU
 * types is at least as slow as its measured type. */
#include "check.h"
#include "fixture.h"

#include <sys/stat.h>
#include <unistd.h>

#include "perf/fitted.h"
#include "perf/overhead.h"
#include "perf/perf.h"
#include "perf/table.h"

static char fixture[1100], tables_root[1024];

static void set_root(void)
{
    const char *env = getenv("HS_ROOT");
    if (env && *env) setenv("HETSIM_ROOT", env, 1);
    snprintf(tables_root, sizeof tables_root, "%s/tests/fixtures/perf/tables", hs_data_root());
    snprintf(fixture, sizeof fixture, "%s/a100-80g/tiny-test", tables_root);
}

static double fx_dense(int op, int tp, int tokens)
{
    return (op + 1) * (1 + 0.01 * tokens / tp);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[2048];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "w");
    if (!f) { perror(path); exit(2); }
    fputs(text, f);
    fclose(f);
}

static void make_tmpdir(char *buf, size_t cap)
{
    snprintf(buf, cap, "/tmp/hs_test_table_XXXXXX");
    if (!mkdtemp(buf)) { perror("mkdtemp"); exit(2); }
}

/* A fresh table directory with tiny-test's meta on a100-80g and one dense
 * row, for the tests that write attention rows beside them. */
static void attn_table_dir(char *dir, size_t cap)
{
    make_tmpdir(dir, cap);
    write_text(dir, "meta.json", "{\"gpu\": \"a100-80g\", \"model\": \"tiny-test\", \"backend\": \"cuda\"}\n");
    write_text(dir, "dense.csv", "op,tp,bits,tokens,time_us\nqkv,1,16,1,3\n");
}

static void rm_rf(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static void test_read_fixture(void)
{
    hs_ptable *t = NULL;
    hs_err err = {0};
    CHECK_OK(hs_ptable_read(&t, fixture, &err), &err);
    if (!t) return;
    CHECK_INT(t->n_dense, 80);
    CHECK_INT(t->n_attn[HS_ATTN_DECODE], 12);
    CHECK_INT(t->n_attn[HS_ATTN_PREFILL], 12);
    CHECK_INT(t->n_comm[HS_COMM_ALLREDUCE], 6);
    CHECK_INT(t->n_comm[HS_COMM_SENDRECV], 3);
    CHECK_STR(t->meta.gpu, "a100-80g");
    CHECK_STR(t->meta.model, "tiny-test");
    CHECK_STR(t->meta.backend, "cpu");
    CHECK_INT(t->meta.mem_total_bytes, 85899345920LL);
    CHECK_INT(t->meta.kv_blocks, 1000);
    CHECK_INT(t->meta.kv_block_size, 16);
    CHECK_STR(t->meta.timing, "");
    /* sorted: first row is emb, tp 1, tokens 1 */
    CHECK_INT(t->dense[0].op, HS_OP_EMB);
    CHECK_INT(t->dense[0].tp, 1);
    CHECK_INT(t->dense[0].tokens, 1);
    CHECK_NEAR(t->dense[0].us, 1.01, 1e-12);
    for (size_t i = 0; i < t->n_dense; i++)
        CHECK_NEAR(t->dense[i].us, fx_dense(t->dense[i].op, t->dense[i].tp, t->dense[i].tokens), 1e-9);
    CHECK(hs_ptable_has_op(t, HS_OP_LM_HEAD, 2, 16));
    CHECK(!hs_ptable_has_op(t, HS_OP_LM_HEAD, 4, 16));
    CHECK(!hs_ptable_has_op(t, HS_OP_QKV, 1, 4));
    CHECK(hs_ptable_has_attn(t, HS_ATTN_PREFILL, 2));
    CHECK(!hs_ptable_has_attn(t, HS_ATTN_DECODE, 4));
    CHECK_INT(hs_op_find("mlp_down"), HS_OP_MLP_DOWN);
    CHECK_INT(hs_op_find("gate"), -1);
    CHECK_STR(hs_op_name(HS_OP_ATTN_OUT), "attn_out");
    hs_ptable_destroy(t);
    hs_ptable_destroy(NULL);
}

/* One malformed table per case: the reader must fail with code and a
 * message containing `want`. */
static void bad_case(const char *file, const char *text, int code, const char *want)
{
    char dir[256], msg_want[512];
    hs_ptable *t = NULL;
    hs_err err = {0};
    int rc;
    attn_table_dir(dir, sizeof dir);
    write_text(dir, file, text);
    rc = hs_ptable_read(&t, dir, &err);
    CHECK_INT(rc, code);
    CHECK(t == NULL);
    snprintf(msg_want, sizeof msg_want, "%s/%s", dir, want);
    if (!strstr(err.msg, msg_want)) {
        hs__check_fail++;
        fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__, err.msg, msg_want);
    } else {
        hs__check_pass++;
    }
    rm_rf(dir);
}

static void test_malformed(void)
{
    bad_case("dense.csv", "op,tp,bit,tokens,time_us\n", HS_EPARSE,
             "dense.csv:1: header must be \"op,tp,bits,tokens,time_us\"");
    bad_case("dense.csv", "op,tp,bits,tokens,time_us\nqkv,1,16,1,3\ngate,1,16,2,3\n", HS_EPARSE,
             "dense.csv:3: op: unknown operator \"gate\"");
    bad_case("dense.csv", "op,tp,bits,tokens,time_us\nqkv,1,5,1,3\n", HS_ERANGE,
             "dense.csv:2: bits: 5 is not one of 16, 8, 4, 3");
    bad_case("dense.csv", "op,tp,bits,tokens,time_us\nqkv,1,16,1,3\n\nqkv,1,16,2\n", HS_EPARSE,
             "dense.csv:4: expected 5 fields, got 4");
    bad_case("dense.csv", "op,tp,bits,tokens,time_us\nqkv,1,16,1,-1\n", HS_ERANGE,
             "dense.csv:2: time_us: -1 is outside");
    bad_case("dense.csv", "op,tp,bits,tokens,time_us\nqkv,x,16,1,3\n", HS_EPARSE,
             "dense.csv:2: tp: \"x\" is not an integer");
    bad_case("dense.csv", "op,tp,bits,tokens,time_us\nqkv,32,16,1,3\n", HS_ERANGE,
             "dense.csv:2: tp: 32 is outside [1, 16]");
    bad_case("dense.csv", "op,tp,bits,tokens,time_us\nqkv,1,16,1,3\nadd,1,16,1,2\nqkv,1,16,1,4\n", HS_EPARSE,
             "dense.csv:4: duplicate of line 2 (op qkv, tp 1, bits 16, tokens 1)");
    bad_case("dense.csv", "op,tp,bits,tokens,time_us\nqkv,1,16,1,0\n", HS_ERANGE,
             "dense.csv:2: time_us: 0 must be > 0");
    bad_case("attn_decode.csv", "tp,batch,context,time_us\n1,1,64,5\n1,2.5,64,5\n", HS_EPARSE,
             "attn_decode.csv:3: batch: \"2.5\" is not an integer");
    bad_case("attn_prefill.csv", "tp,chunk,prefix,time_us\n1,0,0,5\n", HS_ERANGE,
             "attn_prefill.csv:2: chunk: 0 is outside");
    bad_case("attn_prefill.csv", "tp,batch,context,time_us\n", HS_EPARSE,
             "attn_prefill.csv:1: header must be \"tp,chunk,prefix,time_us\"");
    bad_case("allreduce.csv", "gpus,bytes,time_us\n1,100,5\n", HS_ERANGE,
             "allreduce.csv:2: gpus: 1 is outside");
    bad_case("sendrecv.csv", "bytes,time_us\n100,5\n200,nan\n", HS_EPARSE,
             "sendrecv.csv:3: time_us: \"nan\" is not a number");
    bad_case("meta.json", "{\"gpu\": \"a\", \"model\": \"b\", \"backend\": \"cuda\", \"colour\": 1}", HS_EPARSE,
             "meta.json: unknown key \"colour\"");
    bad_case("meta.json", "{\"gpu\": \"a\", \"model\": \"b\", \"backend\": \"tpu\"}", HS_EPARSE,
             "meta.json: backend: \"tpu\" is not cuda, cpu or vidur");
    bad_case("meta.json", "{\"gpu\": \"a\", \"backend\": \"cuda\"}", HS_EPARSE,
             "meta.json: missing required key \"model\"");
    {   /* no dense.csv at all */
        char dir[256];
        hs_ptable *t = NULL;
        hs_err err = {0};
        make_tmpdir(dir, sizeof dir);
        write_text(dir, "meta.json", "{\"gpu\": \"a\", \"model\": \"b\", \"backend\": \"cuda\"}\n");
        CHECK_INT(hs_ptable_read(&t, dir, &err), HS_EIO);
        CHECK(strstr(err.msg, "dense.csv: cannot open") != NULL);
        rm_rf(dir);
    }
    bad_case("meta.json", "{\"gpu\": \"a\", \"model\": \"b\", \"backend\": \"cuda\", \"rest\": -1}",
             HS_ERANGE, "meta.json: rest: -1 is outside [0, 10]");
    bad_case("meta.json", "{\"gpu\": \"a\", \"model\": \"b\", \"backend\": \"cuda\", \"timing\": \"warm\"}",
             HS_EPARSE, "meta.json: timing: \"warm\" is not alone, cold or stream");
    {   /* hetsim-exec's timing method and clock monitor are read and written back */
        char dir[256], again[300];
        hs_ptable *t = NULL, *u = NULL;
        hs_err err = {0};
        make_tmpdir(dir, sizeof dir);
        write_text(dir, "meta.json", "{\"gpu\": \"a100-80g\", \"model\": \"tiny-test\", \"backend\": \"cuda\", \"timing\": \"stream\", \"rest\": 1, \"kv_pool_bytes\": 139586437120, "
                   "\"clock_monitor\": \"NVML (driver 575.57), NVIDIA H200 at 00000000:17:00.0\"}\n");
        write_text(dir, "dense.csv", "op,tp,bits,tokens,time_us\nqkv,1,16,1,3\n");
        CHECK_OK(hs_ptable_read(&t, dir, &err), &err);
        if (t) {
            CHECK_STR(t->meta.timing, "stream");
            CHECK(t->meta.kv_pool_bytes == 139586437120LL);
            CHECK(t->meta.rest == 1);
            snprintf(again, sizeof again, "%s/again", dir);
            CHECK_OK(hs_ptable_write(t, again, &err), &err);
            CHECK_OK(hs_ptable_read(&u, again, &err), &err);
            if (u) CHECK_STR(u->meta.timing, "stream");
            if (u) CHECK(u->meta.kv_pool_bytes == 139586437120LL);
            if (u) CHECK(u->meta.rest == 1);
            CHECK_STR(t->meta.clock_monitor, "NVML (driver 575.57), NVIDIA H200 at 00000000:17:00.0");
            if (u) CHECK_STR(u->meta.clock_monitor, t->meta.clock_monitor);
        }
        hs_ptable_destroy(t);
        hs_ptable_destroy(u);
        rm_rf(dir);
    }
}

static void test_check_missing(void)
{
    hs_ptable *t = NULL;
    hs_err err = {0};
    hs_ptable_need need = {4, 16, 1u << HS_OP_QKV | 1u << HS_OP_LM_HEAD, 1, 0};
    if (hs_ptable_read(&t, fixture, &err)) {
        CHECK_OK(1, &err);
        return;
    }
    CHECK_INT(hs_ptable_check(t, &need, &err), HS_ENOTFOUND);
    CHECK(strstr(err.msg, "missing qkv, lm_head at tp 4, bits 16 in dense.csv; no attn_decode.csv rows at tp 4") != NULL);
    CHECK(strstr(err.msg, fixture) != NULL);
    need.tp = 2;
    need.prefill = 1;
    CHECK_OK(hs_ptable_check(t, &need, &err), &err);
    need.bits = 8;
    need.decode = need.prefill = 0;
    CHECK_INT(hs_ptable_check(t, &need, &err), HS_ENOTFOUND);
    CHECK(strstr(err.msg, "missing qkv, lm_head at tp 2, bits 8") != NULL);
    {
        hs_curve c;
        CHECK_INT(hs_ptable_op_curve(t, HS_OP_ROPE, 8, 16, &c, &err), HS_ENOTFOUND);
        CHECK(strstr(err.msg, "dense.csv: no rows for op rope at tp 8, bits 16") != NULL);
        CHECK_INT(hs_ptable_allreduce_curve(t, 8, &c, &err), HS_ENOTFOUND);
        CHECK(strstr(err.msg, "allreduce.csv: no rows for 8 GPUs") != NULL);
    }
    hs_ptable_destroy(t);
}

static void test_interpolation(void)
{
    /* steffen through a convex increasing set: exact at the points,
     * monotone between, no overshoot */
    double x[] = {1, 2, 4, 8, 16, 64, 256, 1024}, y[8];
    hs_curve c;
    hs_err err = {0};
    int bad = 0;
    for (int i = 0; i < 8; i++) y[i] = 5 + 0.02 * x[i] * x[i] / (x[i] + 30);
    CHECK_OK(hs_curve_init(&c, x, y, 8, &err), &err);
    for (int i = 0; i < 8; i++) CHECK_NEAR(hs_curve_eval(&c, x[i]), y[i], 1e-12);
    for (double v = 1, prev = 0; v <= 1024; v += 0.25) {
        double e = hs_curve_eval(&c, v);
        int k = 0;
        while (k < 7 && x[k + 1] < v) k++;
        if (e < prev - 1e-12) bad++;                  /* monotone */
        if (e < y[k] - 1e-12 || e > y[k + 1] + 1e-12) bad++; /* within its segment */
        prev = e;
    }
    CHECK_INT(bad, 0);
    CHECK_NEAR(hs_curve_eval(&c, 0.5), y[0], 0);        /* flat below */
    CHECK_NEAR(hs_curve_eval(&c, 2048), y[7] * 2, 1e-9); /* proportional above */
    hs_curve_free(&c);
    hs_curve_free(&c); /* idempotent */

    /* two points: linear; one point: constant then proportional */
    CHECK_OK(hs_curve_init(&c, x, (double[]){10, 20}, 2, &err), &err);
    CHECK_NEAR(hs_curve_eval(&c, 1.5), 15, 1e-12);
    hs_curve_free(&c);
    CHECK_OK(hs_curve_init(&c, (double[]){4}, (double[]){7}, 1, &err), &err);
    CHECK_NEAR(hs_curve_eval(&c, 2), 7, 0);
    CHECK_NEAR(hs_curve_eval(&c, 8), 14, 1e-12);
    hs_curve_free(&c);
    CHECK_INT(hs_curve_init(&c, (double[]){1, 1}, (double[]){1, 2}, 2, &err), HS_EINVAL);
    CHECK_INT(hs_curve_init(&c, x, y, 0, &err), HS_EINVAL);

    /* on the fixture: exact at measured tokens */
    {
        hs_ptable *t = NULL;
        if (hs_ptable_read(&t, fixture, &err) == 0) {
            CHECK_OK(hs_ptable_op_curve(t, HS_OP_MLP_UP, 2, 16, &c, &err), &err);
            CHECK_NEAR(hs_curve_eval(&c, 64), fx_dense(HS_OP_MLP_UP, 2, 64), 1e-9);
            CHECK_NEAR(hs_curve_eval(&c, 512), fx_dense(HS_OP_MLP_UP, 2, 512), 1e-9);
            /* the data is linear in tokens: steffen reproduces lines */
            CHECK_NEAR(hs_curve_eval(&c, 300), fx_dense(HS_OP_MLP_UP, 2, 300), 1e-9);
            hs_curve_free(&c);
            CHECK_OK(hs_ptable_allreduce_curve(t, 4, &c, &err), &err);
            CHECK_NEAR(hs_curve_eval(&c, 1e6), 30, 1e-9);
            hs_curve_free(&c);
            hs_ptable_destroy(t);
        } else {
            CHECK_OK(1, &err);
        }
    }
}

static void test_coef_fits(void)
{
    hs_ptable *t = NULL;
    hs_err err = {0};
    double c[4], sr[2];
    hs_fitstat st;
    if (hs_ptable_read(&t, fixture, &err)) {
        CHECK_OK(1, &err);
        return;
    }
    for (int tp = 1; tp <= 2; tp++) {
        CHECK_OK(hs_ptable_attn_coef(t, HS_ATTN_DECODE, tp, c, &st, &err), &err);
        CHECK_NEAR(c[0], 5.0 / tp, 1e-7);
        CHECK_NEAR(c[1], 0.5, 1e-7);
        CHECK_NEAR(c[2], 0.002 / tp, 1e-10);
        CHECK_INT(st.n, 6);
        CHECK(st.max_ape < 1e-6);
        CHECK_OK(hs_ptable_attn_coef(t, HS_ATTN_PREFILL, tp, c, &st, &err), &err);
        /* the fixture is 8/tp + 1e-4/tp * c*(p + (c+1)/2) + 0.01/tp * p, so the
         * causal-triangle and prefix-pair terms come out equal */
        CHECK_NEAR(c[0], 8.0 / tp, 1e-7);
        CHECK_NEAR(c[1], 1e-4 / tp, 1e-12);
        CHECK_NEAR(c[2], 1e-4 / tp, 1e-12);
        CHECK_NEAR(c[3], 0.01 / tp, 1e-9);
        CHECK(st.max_ape < 1e-6);
    }
    CHECK_INT(hs_ptable_attn_coef(t, HS_ATTN_DECODE, 8, c, &st, &err), HS_ENOTFOUND);
    CHECK(strstr(err.msg, "attn_decode.csv: no rows at tp 8") != NULL);
    CHECK_OK(hs_ptable_sendrecv_coef(t, sr, &st, &err), &err);
    CHECK_NEAR(sr[0], 5, 1e-7);
    CHECK_NEAR(sr[1], 1e-5, 1e-12);
    hs_ptable_destroy(t);

    /* a column whose free coefficient is negative is dropped: y = 10 - 0.01 x
     * over x in 1..100 cannot take a negative slope, so the fit is a
     * constant, and every coefficient is >= 0 */
    {
        double X[200], y[100];
        for (int i = 0; i < 100; i++) {
            X[2 * i] = 1;
            X[2 * i + 1] = i + 1;
            y[i] = 10 - 0.01 * (i + 1);
        }
        CHECK_OK(hs_linfit_rel(X, y, 100, 2, c, &st, &err), &err);
        CHECK_NEAR(c[1], 0, 0);
        CHECK(c[0] > 9 && c[0] < 10);
        CHECK(st.max_ape < 6);
        CHECK_INT(hs_linfit_rel(X, y, 0, 2, c, NULL, &err), HS_EINVAL);
    }
    /* percentiles of the error statistics */
    {
        double p[] = {110, 90, 100, 150, 100}, m[] = {100, 100, 100, 100, 100};
        hs_fitstat_compute(&st, p, m, 5);
        CHECK_INT(st.n, 5);
        CHECK_NEAR(st.med_ape, 10, 1e-12);
        CHECK_NEAR(st.max_ape, 50, 1e-12);
        CHECK_NEAR(st.p90_ape, 10 + 0.6 * 40, 1e-12);
    }
}

/* The smoothing of measured all-reduce points (hs_curve_smooth), on a
 * synthetic curve sampled every 8 KiB as Vidur's is: a latency plateau of
 * 20 us up to 64 KiB, then +10 us per 8 KiB, with planted faults. */
static void test_smooth(void)
{
    enum { N = 16 };
    double x[N], y[N], clean[N];
    /* expected, point by point:
     *   0   70 -> 20  a high first point: over twice the median of the first
     *                 seven, it takes that median
     *   3   90 -> 20  a spike, 4.5x the median of its 7-point window
     *   5    5 -> 20  a dip under half the median
     *  11  200 -> 65  a spike on the slope takes its window's median (30, 40,
     *                 50, 200, 70, 65, 90 -> 65); the clean 50 and 70 beside
     *                 it keep their values
     *  12, 13  70, 65 -> 67.5, 67.5  a fall within 2x is no outlier: the
     *                 isotonic pass pools the two at their mean
     *  15  400 -> 96  the last point, over twice the extension in
     *                 proportion to bytes from 90 us at 120 KiB, takes it
     *                 (the clean 100 is within it) 
     * every other point keeps its measured value exactly. */
    const double want[N] = {20, 20, 20, 20, 20, 20, 20, 20, 30, 40, 50, 65, 67.5, 67.5, 90, 96};
    hs_err err = {0};
    for (int i = 0; i < N; i++) {
        x[i] = 8192.0 * (i + 1);
        clean[i] = y[i] = i < 8 ? 20 : 20 + 10 * (i - 7);
    }
    y[0] = 70;
    y[3] = 90;
    y[5] = 5;
    y[11] = 200;
    y[13] = 65;
    y[15] = 400;
    {
        double z[N];
        memcpy(z, y, sizeof z);
        CHECK_OK(hs_curve_smooth(x, z, N, &err), &err);
        for (int i = 0; i < N; i++) CHECK_NEAR(z[i], want[i], 1e-9);
    }
    /* the same rows through a table: the all-reduce curve passes exactly
     * through the smoothed points, never falls, holds the smallest value
     * below the first size (the latency floor) and grows in proportion to
     * bytes above the last */
    {
        hs_ptable *t = NULL;
        hs_curve c;
        int bad = 0;
        CHECK_OK(hs_ptable_create(&t, &err), &err);
        for (int i = N - 1; t && i >= 0; i--) CHECK_OK(hs_ptable_add_comm(t, HS_COMM_ALLREDUCE, 2, x[i], y[i], &err), &err);
        if (t && hs_ptable_sort(t, &err) == 0 && hs_ptable_allreduce_curve(t, 2, &c, &err) == 0) {
            for (int i = 0; i < N; i++) CHECK_NEAR(hs_curve_eval(&c, x[i]), want[i], 1e-9);
            for (double b = 1024, prev = 0; b <= 2.0 * x[N - 1]; b += 512) {
                double v = hs_curve_eval(&c, b);
                if (v < prev - 1e-12) bad++;
                prev = v;
            }
            CHECK_INT(bad, 0);
            CHECK_NEAR(hs_curve_eval(&c, 100), 20, 0);
            CHECK_NEAR(hs_curve_eval(&c, 2 * x[N - 1]), 2 * 96, 1e-9);
            hs_curve_free(&c);
        } else {
            CHECK_OK(1, &err);
        }
        hs_ptable_destroy(t);
    }
    /* clean data is left as measured: the clean synthetic curve, an
     * alpha-beta curve on doubling sizes (10 us + 1 us/KB), pure bandwidth
     * on doubling sizes (each point exactly 2x its neighbour), a single
     * point */
    {
        double z[N], xs[12], ys[12], zs[12];
        memcpy(z, clean, sizeof z);
        CHECK_OK(hs_curve_smooth(x, z, N, &err), &err);
        CHECK(memcmp(z, clean, sizeof z) == 0);
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < 12; i++) {
                xs[i] = 1000.0 * pow(2, i);
                zs[i] = ys[i] = (k ? 0 : 10) + xs[i] / 1000;
            }
            CHECK_OK(hs_curve_smooth(xs, zs, 12, &err), &err);
            CHECK(memcmp(zs, ys, sizeof zs) == 0);
        }
        zs[0] = 7;
        CHECK_OK(hs_curve_smooth(xs, zs, 1, &err), &err);
        CHECK_NEAR(zs[0], 7, 0);
        /* a spike on the doubling alpha-beta curve moves alone: it takes
         * the median of its window, its right neighbour's value */
        for (int i = 0; i < 12; i++) zs[i] = ys[i] = 10 + xs[i] / 1000;
        zs[4] = 10 * ys[4];
        CHECK_OK(hs_curve_smooth(xs, zs, 12, &err), &err);
        for (int i = 0; i < 12; i++) CHECK_NEAR(zs[i], i == 4 ? ys[5] : ys[i], 0);
    }
    /* decreasing pairs pool to their lower median; bad input is rejected */
    {
        double z[2] = {30, 10};
        CHECK_OK(hs_curve_smooth(x, z, 2, &err), &err);
        CHECK_NEAR(z[0], 10, 0);
        CHECK_NEAR(z[1], 10, 0);
        CHECK_INT(hs_curve_smooth(x, z, 0, &err), HS_EINVAL);
        CHECK_INT(hs_curve_smooth((double[]){1, 1}, z, 2, &err), HS_EINVAL);
        CHECK(strstr(err.msg, "not increasing at 1") != NULL);
        CHECK_INT(hs_curve_smooth((double[]){0, 1}, z, 2, &err), HS_EINVAL);
        CHECK(strstr(err.msg, "must be positive") != NULL);
    }
}

/* Prefill rows of one sequence per chunk c after prefix p, at tp 2, from
 * 6 + 2e-4 Q + 8e-5 X + 0.008 P + 0.1 c (us), times `bump` on 64-token
 * chunks. */
static size_t prefill_rows(hs_attn_row *r, double bump)
{
    static const int cs[] = {64, 256, 1024, 4096}, ps[] = {0, 512, 2048};
    size_t n = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) {
            double c = cs[i], p = ps[j];
            double us = 6 + 2e-4 * c * (c + 1) / 2 + 8e-5 * c * p + 0.008 * p + 0.1 * c;
            r[n++] = (hs_attn_row){2, cs[i], ps[j], us * (cs[i] == 64 ? bump : 1), 0};
        }
    return n;
}

static void test_coef5(void)
{
    hs_ptable *t = NULL;
    hs_err err = {0};
    hs_fitstat st;
    double c[HS_ATTN_NCOEF], c4[4];
    /* weighted relative least squares: a constant through y = 1 and 2
     * minimises w1 (c - 1)^2 + w2 (c / 2 - 1)^2, so c = (w1 + w2 / 2) /
     * (w1 + w2 / 4): 1.2 unweighted, 4/3 with the second row weighted 2 */
    {
        double X[2] = {1, 1}, y[2] = {1, 2}, k5[10] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0};
        CHECK_OK(hs_linfit_relw(X, y, NULL, 2, 1, c, &st, &err), &err);
        CHECK_NEAR(c[0], 1.2, 1e-12);
        CHECK_NEAR(st.max_ape, 40, 1e-9); /* unweighted statistics */
        CHECK_OK(hs_linfit_relw(X, y, (double[]){1, 2}, 2, 1, c, NULL, &err), &err);
        CHECK_NEAR(c[0], 4.0 / 3, 1e-12);
        CHECK_OK(hs_linfit_rel(X, y, 2, 1, c, NULL, &err), &err);
        CHECK_NEAR(c[0], 1.2, 1e-12);
        CHECK_INT(hs_linfit_relw(X, y, (double[]){1, -1}, 2, 1, c, NULL, &err), HS_EINVAL);
        CHECK(strstr(err.msg, "row 1: weight -1") != NULL);
        CHECK_INT(hs_linfit_relw(X, y, (double[]){1, NAN}, 2, 1, c, NULL, &err), HS_EINVAL);
        CHECK_INT(hs_linfit_relw(X, y, NULL, 2, HS_LINFIT_MAXK + 1, c, NULL, &err), HS_EINVAL);
        /* five columns are beyond hs_linfit_rel's contract (k <= 4) */
        CHECK_INT(hs_linfit_rel(k5, y, 2, 5, c, NULL, &err), HS_EINVAL);
    }
    /* on the fixture: prefill recovers its generator with no per-token
     * term; decode is exactly hs_ptable_attn_coef's */
    if (hs_ptable_read(&t, fixture, &err) == 0) {
        for (int tp = 1; tp <= 2; tp++) {
            CHECK_OK(hs_ptable_attn_coef5(t, HS_ATTN_PREFILL, tp, c, &st, &err), &err);
            CHECK_NEAR(c[0], 8.0 / tp, 1e-7);
            CHECK_NEAR(c[1], 1e-4 / tp, 1e-12);
            CHECK_NEAR(c[2], 1e-4 / tp, 1e-12);
            CHECK_NEAR(c[3], 0.01 / tp, 1e-9);
            CHECK_NEAR(c[HS_ATTN_TOK], 0, 1e-9);
            CHECK(st.max_ape < 1e-6);
            CHECK_OK(hs_ptable_attn_coef5(t, HS_ATTN_DECODE, tp, c, &st, &err), &err);
            CHECK_OK(hs_ptable_attn_coef(t, HS_ATTN_DECODE, tp, c4, NULL, &err), &err);
            for (int j = 0; j < 3; j++) CHECK_NEAR(c[j], c4[j], 0);
            CHECK_NEAR(c[3], 0, 0);
            CHECK_NEAR(c[HS_ATTN_TOK], 0, 0);
        }
        CHECK_INT(hs_ptable_attn_coef5(t, HS_ATTN_PREFILL, 8, c, &st, &err), HS_ENOTFOUND);
        CHECK(strstr(err.msg, "attn_prefill.csv: no rows at tp 8") != NULL);
        hs_ptable_destroy(t);
    } else {
        CHECK_OK(1, &err);
    }
    CHECK_INT(hs_attn_coef5_rows(HS_ATTN_PREFILL, NULL, 0, c, NULL, &err), HS_EINVAL);
    /* rows with a per-token cost: the five-term fit recovers it exactly,
     * the four-term one cannot fit them (chunk 4096 alone is off by more
     * than 10%) */
    {
        hs_attn_row r[12];
        size_t n = prefill_rows(r, 1);
        CHECK_OK(hs_attn_coef5_rows(HS_ATTN_PREFILL, r, n, c, &st, &err), &err);
        CHECK_REL(c[0], 6, 1e-6);
        CHECK_REL(c[1], 2e-4, 1e-6);
        CHECK_REL(c[2], 8e-5, 1e-6);
        CHECK_REL(c[3], 0.008, 1e-6);
        CHECK_REL(c[HS_ATTN_TOK], 0.1, 1e-6);
        CHECK(st.max_ape < 1e-6);
        CHECK_OK(hs_attn_coef_rows(HS_ATTN_PREFILL, r, n, c4, &st, &err), &err);
        CHECK(st.max_ape > 10);
    }
    /* rows the form cannot fit (64-token chunks 20% slow, as tile effects
     * make small chunks): weighting by time keeps the error on the chunks
     * of 1,024+ tokens, where a pass's time is, under the unweighted fit's
     * (1.3% against 2.6%) */
    {
        hs_attn_row r[12];
        size_t n = prefill_rows(r, 1.2);
        double X[12 * HS_ATTN_NCOEF], y[12], cu[HS_ATTN_NCOEF], ew = 0, eu = 0;
        CHECK_OK(hs_attn_coef5_rows(HS_ATTN_PREFILL, r, n, c, NULL, &err), &err);
        for (size_t i = 0; i < n; i++) {
            double *xi = X + i * HS_ATTN_NCOEF, cc = r[i].x, p = r[i].y;
            xi[0] = 1;
            xi[1] = cc * (cc + 1) / 2;
            xi[2] = cc * p;
            xi[3] = p;
            xi[HS_ATTN_TOK] = cc;
            y[i] = r[i].us;
        }
        CHECK_OK(hs_linfit_relw(X, y, NULL, (int)n, HS_ATTN_NCOEF, cu, NULL, &err), &err);
        for (size_t i = 0; i < n; i++) {
            double pw = 0, pu = 0;
            if (r[i].x < 1024) continue;
            for (int j = 0; j < HS_ATTN_NCOEF; j++) {
                pw += c[j] * X[i * HS_ATTN_NCOEF + j];
                pu += cu[j] * X[i * HS_ATTN_NCOEF + j];
            }
            if (fabs(pw / y[i] - 1) > ew) ew = fabs(pw / y[i] - 1);
            if (fabs(pu / y[i] - 1) > eu) eu = fabs(pu / y[i] - 1);
        }
        CHECK(ew < 0.015);
        CHECK(eu > 0.02);
    }
}

/* On Vidur's A100 profiles (Llama-2-70B shape, TP2), when ../shared/data is
 * present: the five-term prefill fit within 5% median error, under 3% on
 * chunks of 1,024+ tokens; the smoothed all-reduce curves never fall, move
 * under 5% of the points by more than half, and follow the sizes from
 * 4 MiB up (bandwidth bound, a few % of jitter) to within 1% at the median
 * and 20% at worst. */
static void test_real_tables(void)
{
    const char *shared = hs_shared_data();
    char vd[1024];
    hs_ptable *t = NULL;
    hs_err err = {0};
    if (!shared) {
        printf("HS_SHARED_DATA not set: skipping the checks on Vidur's real profiles\n");
        return;
    }
    snprintf(vd, sizeof vd, "%s/profiles/vidur", shared);
    CHECK_OK(hs_vidur_import(&t, vd, "a100", "meta-llama/Llama-2-70b-hf", "", &err), &err);
    if (!t) return;
    {
        double c[HS_ATTN_NCOEF], c4[4], *e = malloc(t->n_attn[HS_ATTN_PREFILL] * sizeof *e);
        hs_fitstat st, st4;
        int m = 0;
        CHECK_OK(hs_ptable_attn_coef5(t, HS_ATTN_PREFILL, 2, c, &st, &err), &err);
        CHECK_OK(hs_ptable_attn_coef(t, HS_ATTN_PREFILL, 2, c4, &st4, &err), &err);
        CHECK(st.med_ape <= 5);
        CHECK(st.med_ape < st4.med_ape);
        for (size_t i = 0; e && i < t->n_attn[HS_ATTN_PREFILL]; i++) {
            const hs_attn_row *r = &t->attn[HS_ATTN_PREFILL][i];
            double x = r->x, p = r->y;
            if (r->x < 1024) continue;
            e[m++] = fabs((c[0] + c[1] * x * (x + 1) / 2 + c[2] * x * p + c[3] * p + c[HS_ATTN_TOK] * x) / r->us - 1);
        }
        if (e && m) {
            int under = 0;
            for (int i = 0; i < m; i++) under += e[i] <= 0.03;
            CHECK(2 * under >= m); /* median <= 3% */
        }
        free(e);
        CHECK_OK(hs_ptable_attn_coef5(t, HS_ATTN_DECODE, 2, c, &st, &err), &err);
        CHECK_OK(hs_ptable_attn_coef(t, HS_ATTN_DECODE, 2, c4, &st4, &err), &err);
        CHECK_NEAR(st.med_ape, st4.med_ape, 0);
    }
    for (int g = 2; g <= 8; g *= 2) {
        const hs_comm_row *r = t->comm[HS_COMM_ALLREDUCE];
        size_t n = 0, first = 0;
        hs_curve c;
        int moved = 0, falls = 0, far = 0, big = 0, close = 0;
        while (first < t->n_comm[0] && r[first].gpus != g) first++;
        while (first + n < t->n_comm[0] && r[first + n].gpus == g) n++;
        if (!n || hs_ptable_allreduce_curve(t, g, &c, &err)) {
            CHECK_OK(1, &err);
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            double v = hs_curve_eval(&c, r[first + i].bytes), raw = r[first + i].us;
            moved += fabs(v / raw - 1) > 0.5;
            if (i && v < hs_curve_eval(&c, r[first + i - 1].bytes)) falls++;
            if (r[first + i].bytes >= 4.0 * 1024 * 1024) {
                big++;
                close += fabs(v / raw - 1) <= 0.01;
                far += fabs(v / raw - 1) > 0.2;
            }
        }
        CHECK_INT(falls, 0);
        CHECK(moved * 20 < (int)n);
        CHECK_INT(far, 0);
        CHECK(big > 0 && 2 * close >= big);
        hs_curve_free(&c);
    }
    hs_ptable_destroy(t);
}

static void test_round_trip(void)
{
    hs_ptable *t = NULL, *u = NULL;
    hs_err err = {0};
    char dir[256], sub[512];
    make_tmpdir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/x/a100-80g/tiny-test", dir);
    if (hs_ptable_read(&t, fixture, &err)) {
        CHECK_OK(1, &err);
        rm_rf(dir);
        return;
    }
    CHECK_OK(hs_ptable_write(t, sub, &err), &err);
    CHECK_OK(hs_ptable_read(&u, sub, &err), &err);
    if (u) {
        CHECK_INT(u->n_dense, t->n_dense);
        for (size_t i = 0; i < t->n_dense && i < u->n_dense; i++) {
            CHECK_INT(u->dense[i].op, t->dense[i].op);
            CHECK_INT(u->dense[i].tokens, t->dense[i].tokens);
            CHECK_REL(u->dense[i].us, t->dense[i].us, 1e-9);
        }
        for (int k = 0; k < 2; k++) {
            CHECK_INT(u->n_attn[k], t->n_attn[k]);
            CHECK_INT(u->n_comm[k], t->n_comm[k]);
            for (size_t i = 0; i < t->n_attn[k] && i < u->n_attn[k]; i++)
                CHECK_REL(u->attn[k][i].us, t->attn[k][i].us, 1e-9);
            for (size_t i = 0; i < t->n_comm[k] && i < u->n_comm[k]; i++)
                CHECK_REL(u->comm[k][i].bytes, t->comm[k][i].bytes, 1e-15);
        }
        CHECK_STR(u->meta.source, t->meta.source);
        CHECK_INT(u->meta.mem_usable_bytes, t->meta.mem_usable_bytes);
    }
    /* an in-memory table with no attention rows writes no attention file */
    {
        hs_ptable *m = NULL;
        char p[1024];
        struct stat sb;
        CHECK_OK(hs_ptable_create(&m, &err), &err);
        if (m) {
            snprintf(m->meta.gpu, sizeof m->meta.gpu, "a40");
            snprintf(m->meta.model, sizeof m->meta.model, "tiny-test");
            CHECK_OK(hs_ptable_add_dense(m, HS_OP_ADD, 1, 16, 4, 2.5, &err), &err);
            CHECK_INT(hs_ptable_add_dense(m, HS_OP_ADD, 1, 16, 4, -1, &err), HS_ERANGE);
            CHECK_INT(hs_ptable_add_dense(m, HS_OP_ADD, 1, 7, 4, 1, &err), HS_ERANGE);
            CHECK_OK(hs_ptable_sort(m, &err), &err);
            snprintf(sub, sizeof sub, "%s/y", dir);
            CHECK_OK(hs_ptable_write(m, sub, &err), &err);
            snprintf(p, sizeof p, "%s/attn_decode.csv", sub);
            CHECK(stat(p, &sb) != 0);
            CHECK_OK(hs_ptable_add_dense(m, HS_OP_ADD, 1, 16, 4, 3, &err), &err);
            CHECK_INT(hs_ptable_sort(m, &err), HS_EPARSE);
            CHECK(strstr(err.msg, "duplicate") != NULL);
            hs_ptable_destroy(m);
        }
    }
    hs_ptable_destroy(t);
    hs_ptable_destroy(u);
    rm_rf(dir);
}

static void test_builders(void)
{
    hs_model m, m7;
    hs_cluster *c = NULL;
    hs_perf_cfg cfg;
    hs_perf p;
    hs_err err = {0};
    hs_layout *l = fx_layout1(2, 2);
    if (hs_model_find(&m, "tiny-test", &err) || hs_model_find(&m7, "llama-2-7b", &err) ||
        hs_cluster_find(&c, "dgx-a100", &err)) {
        CHECK_OK(1, &err);
        free(l);
        return;
    }
    hs_perf_cfg_defaults(&cfg);
    CHECK_STR(cfg.tables, "");
    CHECK_STR(cfg.fit_from, "");
    CHECK(hs_perf_find("table") && hs_perf_find("fitted") && hs_perf_find("auto"));
    if (snprintf(cfg.tables, sizeof cfg.tables, "%s", tables_root) >= (int)sizeof cfg.tables) SKIP("path too long");
    snprintf(cfg.model, sizeof cfg.model, "table");
    CHECK_OK(hs_perf_build(&p, &cfg, &m, c, l, 600, 8, &err), &err);
    if (p.pp == 1) {
        const hs_perf_stage *s = &p.stage[0];
        /* at tokens 64 (measured): per layer qkv + rope + attn_out + mlp_up
         * + act + mlp_down + 2 norm + 2 add, two layers, plus emb; plus the
         * measured all-reduce of 64 * 256 * 2 bytes, two per layer */
        double layer = 0, us, ar;
        hs_curve arc;
        for (int op = 0; op < HS_OP_COUNT; op++)
            if (op != HS_OP_EMB && op != HS_OP_LM_HEAD)
                layer += (op == HS_OP_NORM || op == HS_OP_ADD ? 2 : 1) * fx_dense(op, 2, 64);
        {
            hs_ptable *t = NULL;
            CHECK_OK(hs_ptable_read(&t, fixture, &err), &err);
            CHECK_OK(hs_ptable_allreduce_curve(t, 2, &arc, &err), &err);
            ar = hs_curve_eval(&arc, 64 * 256 * 2.0);
            hs_curve_free(&arc);
            hs_ptable_destroy(t);
        }
        /* the default engine profile launches every all-reduce from the
         * host (perf.c engine_terms): two per layer and the logits gather */
        double launch = 0;
        {
            hs_ovh_profile ov;
            CHECK_OK(hs_ovh_find(&ov, cfg.engine, &err), &err);
            launch = ov.collective_launch_us;
        }
        us = 2 * layer + fx_dense(HS_OP_EMB, 2, 64) + 2 * 2 * (ar + launch);
        CHECK_STR(p.model_name, "table");
        CHECK_NEAR(s->dense[64], us * 1e3, 1e-6);
        CHECK_NEAR(s->head[8], (fx_dense(HS_OP_LM_HEAD, 2, 8) + fx_dense(HS_OP_NORM, 2, 8)) * 1e3 +
                                   hs_allreduce_s(c, l->stage[0].gpus, 2, 8 * 1000 / 2 * 4.0, cfg.link_eff) / 2 * 1e9 +
                                   launch * 1e3,
                   1e-6);
        /* attention coefficients per layer times layers, in ns */
        CHECK_NEAR(s->dec_fixed, 2 * 2.5 * 1e3, 1e-3);
        CHECK_NEAR(s->dec_seq, 2 * 0.5 * 1e3, 1e-3);
        CHECK_NEAR(s->dec_ctx, 2 * 0.001 * 1e3, 1e-6);
        CHECK_NEAR(s->pre_self, 2 * 5e-5 * 1e3, 1e-8);
        CHECK_NEAR(s->pre_cross, 2 * 5e-5 * 1e3, 1e-8);
        /* the decode grid (3 batches x 2 contexts at tp 2): the fixture is
         * bilinear in (B, context), so interpolation and the linear
         * extension past its edges give it back exactly; below the first
         * context the grid stays flat */
        CHECK(s->dg_b != NULL && s->dg_nb == 3 && s->dg_nc == 2);
        if (s->dg_b) {
#define FX_DEC(B, ctx) (2 * (2.5 + 0.5 * (B) + 0.001 * (B) * (ctx)) * 1e3)
            CHECK_NEAR(hs_perf_dec_grid_ns(s, 8, 8 * 300), FX_DEC(8, 300), 1e-6);
            CHECK_NEAR(hs_perf_dec_grid_ns(s, 32, 32 * 1000), FX_DEC(32, 1000), 1e-6);
            CHECK_NEAR(hs_perf_dec_grid_ns(s, 4, 4 * 10), FX_DEC(4, 64), 1e-6);
            {
                hs_batch_shape b = {0};
                b.tokens = b.samples = b.dec_seqs = 4;
                b.dec_ctx = 4 * 512;
                CHECK_NEAR(hs_perf_stage_ns(&p, 0, &b), s->dense[4] + s->head[4] + FX_DEC(4, 512), 1e-6);
            }
#undef FX_DEC
        }
        for (int t = 2; t <= 600; t++)
            if (s->dense[t] < s->dense[t - 1]) {
                CHECK(s->dense[t] >= s->dense[t - 1]);
                break;
            }
        hs_perf_free(&p);
    }
    /* perf.decode_grid = 0: the linear fit alone */
    cfg.decode_grid = 0;
    CHECK_OK(hs_perf_build(&p, &cfg, &m, c, l, 64, 8, &err), &err);
    if (p.pp == 1) CHECK(p.stage[0].dg_b == NULL);
    hs_perf_free(&p);
    cfg.decode_grid = 1;
    /* table mode needs every op at the layout's TP */
    {
        hs_layout *l4 = fx_layout1(4, 2);
        CHECK_INT(hs_perf_build(&p, &cfg, &m, c, l4, 64, 8, &err), HS_ENOTFOUND);
        CHECK(strstr(err.msg, "at tp 4, bits 16 in dense.csv") != NULL);
        free(l4);
    }
    /* ... and a table for the model at all */
    CHECK_INT(hs_perf_build(&p, &cfg, &m7, c, l, 64, 8, &err), HS_ENOTFOUND);
    CHECK(strstr(err.msg, "no measured table") != NULL);

    /* auto: tiny-test has a table (table), llama-2-7b has none (fitted on
     * the tiny-test table); with no tables at all, roofline */
    snprintf(cfg.model, sizeof cfg.model, "auto");
    CHECK_OK(hs_perf_build(&p, &cfg, &m, c, l, 64, 8, &err), &err);
    CHECK_STR(p.model_name, "table");
    hs_perf_free(&p);
    CHECK_OK(hs_perf_build(&p, &cfg, &m7, c, l, 64, 8, &err), &err);
    /* ops fitted; the all-reduce comes from the A100's measured table of the
     * other model (collectives do not depend on the model) */
    CHECK_STR(p.model_name, "table+fitted");
    CHECK(p.pp == 1 && p.stage[0].dense[64] > 0 && p.stage[0].dense[64] >= p.stage[0].dense[1]);
    hs_perf_free(&p);
    {
        char empty[200];
        make_tmpdir(empty, sizeof empty);
        snprintf(cfg.tables, sizeof cfg.tables, "%s", empty);
        CHECK_OK(hs_perf_build(&p, &cfg, &m7, c, l, 64, 8, &err), &err);
        CHECK_STR(p.model_name, "roofline");
        hs_perf_free(&p);
        snprintf(cfg.model, sizeof cfg.model, "fitted");
        CHECK_INT(hs_perf_build(&p, &cfg, &m7, c, l, 64, 8, &err), HS_ENOTFOUND);
        CHECK(strstr(err.msg, "no measured tables") != NULL);
        rm_rf(empty);
    }
    /* 8-bit KV: the table holds FP16 caches */
    if (snprintf(cfg.tables, sizeof cfg.tables, "%s", tables_root) >= (int)sizeof cfg.tables) SKIP("path too long");
    snprintf(cfg.model, sizeof cfg.model, "table");
    l->kv_bits = 8;
    CHECK_INT(hs_perf_build(&p, &cfg, &m, c, l, 64, 8, &err), HS_EUNSUPPORTED);
    snprintf(cfg.model, sizeof cfg.model, "auto");
    CHECK_OK(hs_perf_build(&p, &cfg, &m, c, l, 64, 8, &err), &err);
    CHECK_STR(p.model_name, "table+fitted");
    hs_perf_free(&p);
    /* two stages in one node: the send is fitted on sendrecv.csv
     * (5 us + 1e-5 us/byte, 256 * 2 bytes per token) */
    snprintf(cfg.model, sizeof cfg.model, "table");
    l->kv_bits = 16;
    l->pp = 2;
    l->stage[0].layers = l->stage[1].layers = 1;
    l->stage[1] = l->stage[0];
    l->stage[1].gpus[0] = 2;
    l->stage[1].gpus[1] = 3;
    CHECK_OK(hs_perf_build(&p, &cfg, &m, c, l, 64, 8, &err), &err);
    if (p.pp == 2) {
        CHECK_NEAR(p.stage[0].send_alpha, 5e3, 1e-3);
        CHECK_NEAR(p.stage[0].send_token, 1e-5 * 512 * 1e3, 1e-6);
        CHECK_NEAR(p.stage[0].head[8], 0, 0);
        CHECK(p.stage[1].head[8] > 0);
        /* the first stage carries the embedding */
        CHECK_NEAR(p.stage[0].dense[64] - p.stage[1].dense[64], fx_dense(HS_OP_EMB, 2, 64) * 1e3, 1e-6);
        hs_perf_free(&p);
    }
    hs_cluster_destroy(c);
    /* a TP group of two GPU types (A100 with a table, RTX 3090 without):
     * auto times each type and keeps the slower at every entry */
    if (hs_cluster_find(&c, "hetis-a100-3090x2", &err) == 0) {
        double table_sum = 0;
        snprintf(cfg.model, sizeof cfg.model, "auto");
        l->pp = 1;
        l->stage[0].layers = 2;
        l->stage[0].gpus[0] = 0;
        l->stage[0].gpus[1] = 1;
        CHECK_OK(hs_perf_build(&p, &cfg, &m, c, l, 64, 8, &err), &err);
        CHECK_STR(p.model_name, "table+fitted");
        for (int op = 0; op < HS_OP_COUNT; op++)
            if (op != HS_OP_LM_HEAD)
                table_sum += (op == HS_OP_NORM || op == HS_OP_ADD ? 2 : 1) * (op == HS_OP_EMB ? 1 : 2) *
                             fx_dense(op, 2, 64);
        if (p.pp == 1) CHECK(p.stage[0].dense[64] >= table_sum * 1e3);
        hs_perf_free(&p);
        hs_cluster_destroy(c);
    } else {
        CHECK_OK(1, &err);
    }
    hs_perf_cache_clear();
    free(l);
}

/* A collectives-only table (model "", no dense.csv) under <gpu>/_network
 * serves the TP all-reduce of a model whose own table has none: the stage's
 * dense time moves from alpha-beta to the measured curve by exactly
 * layers x 2 x (curve - alpha-beta) at every token count. */
static void test_network_table(void)
{
    char dir[256], path[600];
    hs_ptable *t = NULL, *n = NULL, *back = NULL;
    hs_model m;
    hs_cluster *c = NULL;
    hs_perf_cfg cfg;
    hs_perf with, without;
    hs_err err = {0};
    hs_layout *l = fx_layout1(2, 2);
    make_tmpdir(dir, sizeof dir);
    if (hs_model_find(&m, "tiny-test", &err) || hs_cluster_find(&c, "dgx-a100", &err) ||
        hs_ptable_read(&t, fixture, &err) || hs_ptable_create(&n, &err)) {
        CHECK_OK(1, &err);
        goto out;
    }
    t->n_comm[HS_COMM_ALLREDUCE] = 0; /* the model's table measured no all-reduce */
    snprintf(path, sizeof path, "%s/a100-80g/tiny-test", dir);
    CHECK_OK(hs_ptable_write(t, path, &err), &err);
    snprintf(n->meta.gpu, sizeof n->meta.gpu, "a100-80g");
    n->meta.model[0] = '\0';
    for (int i = 0; i < 6; i++) /* 1 KiB .. 1 MiB, non-decreasing, far from alpha-beta */
        CHECK_OK(hs_ptable_add_comm(n, HS_COMM_ALLREDUCE, 2, 1024.0 * (1 << (2 * i)), 30.0 + 10 * i, &err), &err);
    CHECK_OK(hs_ptable_sort(n, &err), &err);
    snprintf(path, sizeof path, "%s/a100-80g/_network", dir);
    CHECK_OK(hs_ptable_write(n, path, &err), &err);
    /* it reads back as written, without a dense.csv */
    CHECK_OK(hs_ptable_read(&back, path, &err), &err);
    if (back) {
        CHECK_STR(back->meta.model, "");
        CHECK_INT((int)back->n_dense, 0);
        CHECK_INT((int)back->n_comm[HS_COMM_ALLREDUCE], 6);
    }
    snprintf(path, sizeof path, "%s/a100-80g/_network/dense.csv", dir);
    CHECK(access(path, F_OK) != 0);
    hs_perf_cfg_defaults(&cfg);
    snprintf(cfg.model, sizeof cfg.model, "table");
    snprintf(cfg.engine, sizeof cfg.engine, "none");
    snprintf(cfg.tables, sizeof cfg.tables, "%s", dir);
    CHECK_OK(hs_perf_build(&with, &cfg, &m, c, l, 600, 8, &err), &err);
    snprintf(path, sizeof path, "rm -r '%s/a100-80g/_network'", dir);
    CHECK_INT(system(path), 0);
    hs_perf_cache_clear();
    CHECK_OK(hs_perf_build(&without, &cfg, &m, c, l, 600, 8, &err), &err);
    if (with.pp == 1 && without.pp == 1 && back) {
        hs_curve cv;
        int bad = 0;
        CHECK_OK(hs_ptable_allreduce_curve(back, 2, &cv, &err), &err);
        for (int tok = 1; cv.n && tok <= 600; tok++) {
            double bytes = tok * (double)m.hidden * 2.0;
            double want = 2 * 2 * (hs_curve_eval(&cv, bytes) * 1e3 -
                                   hs_allreduce_s(c, l->stage[0].gpus, 2, bytes, cfg.link_eff) * 1e9);
            if (fabs(with.stage[0].dense[tok] - without.stage[0].dense[tok] - want) > 1e-6 * fabs(want) + 1e-6) bad++;
        }
        CHECK_INT(bad, 0);
        hs_curve_free(&cv);
    }
    hs_perf_free(&with);
    hs_perf_free(&without);
out:
    hs_perf_cache_clear();
    hs_ptable_destroy(t);
    hs_ptable_destroy(n);
    hs_ptable_destroy(back);
    hs_cluster_destroy(c);
    free(l);
    rm_rf(dir);
}

/* hs_ptable_decode_grid keeps only full grids; hs_perf_dec_grid_ns is
 * bilinear in (sequences, mean context) on a grid that is not. */
static void test_decode_grid(void)
{
    char dir[1024];
    hs_ptable *t = NULL;
    hs_err err = {0};
    double *g = NULL;
    int nb, nc;
    attn_table_dir(dir, sizeof dir);
    write_text(dir, "attn_decode.csv",
               "tp,batch,context,time_us\n1,3,10,5\n1,1,30,2\n1,1,10,1\n1,3,30,10\n2,1,10,7\n");
    CHECK_OK(hs_ptable_read(&t, dir, &err), &err);
    if (t) {
        CHECK_OK(hs_ptable_decode_grid(t, 1, &nb, &nc, &g, &err), &err);
        CHECK(g != NULL && nb == 2 && nc == 2);
        if (g) {
            /* axes ascending, values row-major by batch whatever the row order */
            CHECK(g[0] == 1 && g[1] == 3 && g[2] == 10 && g[3] == 30);
            CHECK(g[4] == 1 && g[5] == 2 && g[6] == 5 && g[7] == 10);
            hs_perf_stage st;
            memset(&st, 0, sizeof st);
            st.dg_b = g;
            st.dg_c = g + 2;
            st.dg_ns = g + 4;
            st.dg_nb = st.dg_nc = 2;
            CHECK_NEAR(hs_perf_dec_grid_ns(&st, 2, 40), 4.5, 1e-12);   /* the cell's middle */
            CHECK_NEAR(hs_perf_dec_grid_ns(&st, 1, 30), 2, 1e-12);     /* a grid point */
            CHECK_NEAR(hs_perf_dec_grid_ns(&st, 3, 3 * 50), 15, 1e-12); /* past the last context */
            CHECK_NEAR(hs_perf_dec_grid_ns(&st, 5, 5 * 10), 9, 1e-12);  /* past the last batch */
            CHECK_NEAR(hs_perf_dec_grid_ns(&st, 1, 2), 1, 1e-12);       /* flat below */
            CHECK(hs_perf_dec_grid_ns(&st, 0, 0) == 0);
            free(g);
        }
        /* one context at tp 2: no grid, the fit describes it */
        CHECK_OK(hs_ptable_decode_grid(t, 2, &nb, &nc, &g, &err), &err);
        CHECK(g == NULL);
        CHECK_OK(hs_ptable_decode_grid(t, 4, &nb, &nc, &g, &err), &err);
        CHECK(g == NULL);
        hs_ptable_destroy(t);
        t = NULL;
    }
    /* a batch missing a context: not a grid */
    write_text(dir, "attn_decode.csv", "tp,batch,context,time_us\n1,1,10,1\n1,1,30,2\n1,3,10,5\n");
    CHECK_OK(hs_ptable_read(&t, dir, &err), &err);
    if (t) {
        CHECK_OK(hs_ptable_decode_grid(t, 1, &nb, &nc, &g, &err), &err);
        CHECK(g == NULL);
        hs_ptable_destroy(t);
    }
}

/* The wave model's makespan against issuing the blocks one by one, each to
 * the slot free first, in launch order (partition-major, as the kernel's
 * grid (heads, sequences, partitions) is dispatched). */
static double wave_brute(const hs_dec_wave *w, int64_t b, int64_t ctx, double *ends, int64_t *len_out)
{
    const int64_t S = (int64_t)w->sms * w->resident, base = (int64_t)w->heads * b;
    int64_t len = w->part_max, parts;
    double span = 0;
    if (base < (int64_t)w->fill * w->sms) {
        int64_t split = ((int64_t)w->fill * w->sms + base - 1) / base;
        len = (ctx + split - 1) / split;
        len = (len + w->part_align - 1) / w->part_align * w->part_align;
        if (len < w->part_min) len = w->part_min;
        if (len > w->part_max) len = w->part_max;
    }
    parts = (ctx + len - 1) / len;
    for (int64_t i = 0; i < S; i++) ends[i] = 0;
    for (int64_t z = 0; z < parts; z++) {
        int64_t keys = z < parts - 1 ? len : ctx - (parts - 1) * len;
        for (int64_t k = 0; k < base; k++) {
            int64_t at = 0;
            for (int64_t i = 1; i < S; i++)
                if (ends[i] < ends[at]) at = i;
            ends[at] += w->a + w->b * (double)keys;
            if (ends[at] > span) span = ends[at];
        }
    }
    *len_out = len;
    return w->c0 + span + (parts > 1 ? w->cm * (double)(base * parts) / (double)S : 0);
}

/* hs_dec_wave_time: the kernel's split rule and the greedy makespan in
 * closed form; hs_ptable_decode_wave recovers the coefficients from a grid
 * the model made, and only when meta.json describes the kernel. */
static void test_decode_wave(void)
{
    hs_dec_wave w = {.heads = 4, .sms = 6, .resident = 2, .part_max = 64, .part_min = 16,
                     .part_align = 8, .fill = 4, .c0 = 3, .a = 2, .b = 0.25, .cm = 1.5};
    double ends[12], k[4];
    int64_t len;
    for (int64_t b = 1; b <= 9; b++)
        for (int64_t ctx = 1; ctx <= 300; ctx += 7) {
            double want = wave_brute(&w, b, ctx, ends, &len);
            double got = hs_dec_wave_time(&w, b, (double)ctx, k);
            CHECK_NEAR(got, want, 1e-9 * want);
            /* the multipliers reproduce the time */
            CHECK_NEAR(k[0] * w.c0 + k[1] * w.a + k[2] * w.b + k[3] * w.cm, got, 1e-9 * got);
        }
    /* the split: 4 heads x 1 sequence < 4 x 6 wanted, so 6 partitions of
     * ceil(200 / 6) = 34 -> 40 keys (a multiple of 8): 5 of them */
    wave_brute(&w, 1, 200, ends, &len);
    CHECK_INT(len, 40);
    /* a mean context is rounded up as the kernel does with the sum */
    CHECK_NEAR(hs_dec_wave_time(&w, 3, 99.2, NULL), hs_dec_wave_time(&w, 3, 100, NULL), 1e-12);
    CHECK(hs_dec_wave_time(&w, 0, 100, NULL) == 0);

    char dir[1024], row[96];
    hs_ptable *t = NULL;
    hs_err err = {0};
    hs_fitstat st;
    hs_dec_wave f;
    const int bs[] = {1, 2, 4, 8, 16}, cs[] = {16, 64, 128, 256, 512, 1024};
    size_t cap = 8192, n;
    char *csv = malloc(cap);
    attn_table_dir(dir, sizeof dir);
    n = (size_t)snprintf(csv, cap, "tp,batch,context,time_us\n");
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 6; j++) {
            snprintf(row, sizeof row, "1,%d,%d,%.9f\n", bs[i], cs[j], hs_dec_wave_time(&w, bs[i], cs[j], NULL));
            n += (size_t)snprintf(csv + n, cap - n, "%s", row);
        }
    write_text(dir, "attn_decode.csv", csv);
    /* a grid of 2 x 2 rows cannot fit four coefficients: no wave model */
    write_text(dir, "meta.json",
               "{\"gpu\": \"a100-80g\", \"model\": \"tiny-test\", \"backend\": \"cuda\", \"decode_sms\": 6,"
               " \"decode_resident\": 2, \"decode_part_max\": 64, \"decode_part_min\": 16,"
               " \"decode_part_align\": 8, \"decode_fill\": 4}\n");
    write_text(dir, "attn_decode.csv", "tp,batch,context,time_us\n1,1,16,5\n1,1,64,7\n1,2,16,6\n1,2,64,9\n");
    CHECK_OK(hs_ptable_read(&t, dir, &err), &err);
    if (t) {
        CHECK_OK(hs_ptable_decode_wave(t, 1, 4, &f, NULL, &err), &err);
        CHECK(f.sms == 0 && f.c0 == 0);
        hs_ptable_destroy(t);
        t = NULL;
    }
    write_text(dir, "attn_decode.csv", csv);
    /* no split in the meta: no wave model */
    write_text(dir, "meta.json", "{\"gpu\": \"a100-80g\", \"model\": \"tiny-test\", \"backend\": \"cuda\"}\n");
    CHECK_OK(hs_ptable_read(&t, dir, &err), &err);
    if (t) {
        CHECK_OK(hs_ptable_decode_wave(t, 1, 4, &f, NULL, &err), &err);
        CHECK(f.sms == 0);
        hs_ptable_destroy(t);
        t = NULL;
    }
    write_text(dir, "meta.json",
               "{\"gpu\": \"a100-80g\", \"model\": \"tiny-test\", \"backend\": \"cuda\", \"decode_sms\": 6,"
               " \"decode_resident\": 2, \"decode_part_max\": 64, \"decode_part_min\": 16,"
               " \"decode_part_align\": 8, \"decode_fill\": 4}\n");
    CHECK_OK(hs_ptable_read(&t, dir, &err), &err);
    if (t) {
        CHECK_INT(t->meta.decode_sms, 6);
        CHECK_INT(t->meta.decode_part_align, 8);
        CHECK_OK(hs_ptable_decode_wave(t, 1, 4, &f, &st, &err), &err);
        CHECK(f.sms == 6 && f.resident == 2 && f.heads == 4);
        CHECK_NEAR(f.c0, w.c0, 1e-6);
        CHECK_NEAR(f.a, w.a, 1e-6);
        CHECK_NEAR(f.b, w.b, 1e-8);
        CHECK_NEAR(f.cm, w.cm, 1e-6);
        CHECK(st.n == 30 && st.max_ape < 1e-6);
        /* no tp 2 rows: none */
        CHECK_OK(hs_ptable_decode_wave(t, 2, 4, &f, NULL, &err), &err);
        CHECK(f.sms == 0);
        /* the split survives a write and a read */
        {
            char dir2[1024];
            hs_ptable *t2 = NULL;
            make_tmpdir(dir2, sizeof dir2);
            CHECK_OK(hs_ptable_write(t, dir2, &err), &err);
            CHECK_OK(hs_ptable_read(&t2, dir2, &err), &err);
            if (t2) {
                CHECK_INT(t2->meta.decode_resident, 2);
                CHECK_INT(t2->meta.decode_part_min, 16);
                CHECK_INT(t2->meta.decode_fill, 4);
                hs_ptable_destroy(t2);
            }
            rm_rf(dir2);
        }
        hs_ptable_destroy(t);
    }
    free(csv);
    rm_rf(dir);
}

/* hs_ptable_prefill_grid keeps a chunk x prefix table whose chunks stop
 * at different prefixes; hs_pre_grid_ns interpolates it and says when it
 * cannot; hs_perf_pre_scaled gives a one-chunk pass the table's value. */
static void test_prefill_grid(void)
{
    char dir[1024];
    hs_ptable *t = NULL;
    hs_err err = {0};
    hs_pre_grid g;
    attn_table_dir(dir, sizeof dir);
    /* chunk 10 at prefixes 0, 100, 200; chunk 30 at 0 and 100; chunk 50 at 0 and 300 */
    write_text(dir, "attn_prefill.csv",
               "tp,chunk,prefix,time_us\n1,30,100,40\n1,10,0,10\n1,10,200,30\n1,30,0,20\n1,10,100,20\n"
               "1,50,0,60\n1,50,300,90\n2,10,0,5\n");
    CHECK_OK(hs_ptable_read(&t, dir, &err), &err);
    if (t) {
        CHECK_OK(hs_ptable_prefill_grid(t, 1, &g, &err), &err);
        CHECK_INT(g.nx, 3);
        if (g.nx == 3) {
            CHECK(g.x[0] == 10 && g.x[1] == 30 && g.x[2] == 50);
            CHECK(g.off[0] == 0 && g.off[1] == 3 && g.off[2] == 5 && g.off[3] == 7);
            CHECK_NEAR(hs_pre_grid_ns(&g, 10, 150), 25, 1e-12);  /* along a row */
            CHECK_NEAR(hs_pre_grid_ns(&g, 20, 50), 22.5, 1e-12); /* between rows: 15 and 30 */
            CHECK_NEAR(hs_pre_grid_ns(&g, 40, 0), 40, 1e-12);
            CHECK(hs_pre_grid_ns(&g, 20, 150) < 0);   /* past chunk 30's last prefix */
            CHECK(hs_pre_grid_ns(&g, 5, 0) < 0);      /* before the first chunk */
            CHECK(hs_pre_grid_ns(&g, 60, 0) < 0);     /* past the last */
            /* the last chunk exactly, past the row before it */
            CHECK_NEAR(hs_pre_grid_ns(&g, 50, 150), 75, 1e-12);
            {
                hs_perf_stage st;
                hs_batch_shape b;
                memset(&st, 0, sizeof st);
                memset(&b, 0, sizeof b);
                st.pg = g;
                st.pre_fixed = 4;
                st.pre_tok = 0.5;
                st.pre_cross = 0.01;
                /* one chunk of 20 after 50: the fit says 4 + 10 + 10 = 24, the grid 22.5 */
                b.pre_chunks = 1;
                b.pre_tokens = 20;
                b.pre_prefix = 50;
                b.pre_self = 20 * 21 / 2.0;
                b.pre_cross = 20 * 50;
                CHECK_NEAR(hs_perf_pre_scaled(&st, &b, 24), 22.5, 1e-12);
                /* outside the grid the fit stands */
                b.pre_prefix = 500;
                CHECK_NEAR(hs_perf_pre_scaled(&st, &b, 24), 24, 1e-12);
            }
            free(g.x);
        }
        /* one chunk length at tp 2: no grid; no rows at tp 4: none */
        CHECK_OK(hs_ptable_prefill_grid(t, 2, &g, &err), &err);
        CHECK(g.nx == 0 && g.x == NULL);
        CHECK_OK(hs_ptable_prefill_grid(t, 4, &g, &err), &err);
        CHECK(g.nx == 0);
        hs_ptable_destroy(t);
    }
    rm_rf(dir);
}

int main(void)
{
    set_root();
    test_read_fixture();
    test_malformed();
    test_check_missing();
    test_interpolation();
    test_coef_fits();
    test_smooth();
    test_coef5();
    test_real_tables();
    test_round_trip();
    test_builders();
    test_network_table();
    test_decode_grid();
    test_decode_wave();
    test_prefill_grid();
    return hs_check_result();
}
