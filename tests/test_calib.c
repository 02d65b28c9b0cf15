/* test_calib.c - the shipped calibration (sim/perf/calib.c, hs_calib_build
 * in crossval.c) and how perf.model auto reports where a replica's kernel
 * times come from (sim/perf/measured.c).
 *
 * A temporary tables root is built from the fixture
 * tests/fixtures/perf/tables/a100-80g/tiny-test (one GPU, one model) with
 * hs_ptable_create/add/sort/write:
 *   a100-80g/tiny-test   the fixture as it is
 *   a100-80g/phi-2       the fixture's rows x 3 (a second model on the A100,
 *                        so its entry has a leave-one-model-out figure)
 *   a40/tiny-test        the fixture's rows x 2 (a second GPU, so the
 *                        transfer entry has a leave-one-GPU-out figure)
 * Checked: hs_calib_build gives one entry per GPU (its tables, models and
 * cross-validated errors) and the transfer entry (gpu "", every table,
 * the median and range of its two GPU folds); its report gives the 10+ us
 * medians, every GPU's held-out models pooled, the by-GPU figure and no
 * fit stopped at the pass cap;
 * write -> load round trip with equal predictions for every kind
 * (hs_fit_op_us on a GPU it was trained on and on one it was not,
 * hs_fit_attn_us for decode and prefill) and equal metadata; hs_calib_for
 * picks the GPU's own entry, else the transfer one, else NULL; load errors
 * name the file and the key (a par list of the wrong length, a zero
 * parameter other than k_c, an unknown kind, ...) and leave the struct
 * zeroed, while k_c = 0 loads; an error of the build names the folder.
 * Then hs_perf_build with perf.model auto and perf.tables = the temporary
 * root holding a calibration.json written here (the built one with
 * distinct cv figures per entry): llama-2-7b (no table) on the A100 and on
 * the A40 is "fitted on its tables" with the expected error of that GPU's
 * entry; tiny-test on an H100 (no table) is "transferred from a100-80g,a40,
 * uncalibrated" with the transfer entry's by-GPU error and range; tiny-test on the A100 is
 * "measured table" with no expected error; perf.model roofline is
 * "datasheet roofline, uncalibrated". */
#include "check.h"
#include "fixture.h"

#include <sys/stat.h>
#include <unistd.h>

#include "perf/calib.h"
#include "perf/fitted.h"
#include "perf/perf.h"
#include "perf/table.h"

static char root[128], fixture[1100];

static void rm_rf(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static int is_zero(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i]) return 0;
    return 1;
}

static void msg_has(const hs_err *err, int line, const char *a, const char *b)
{
    const char *w[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        if (!w[i]) continue;
        if (strstr(err->msg, w[i])) {
            hs__check_pass++;
        } else {
            hs__check_fail++;
            fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", __FILE__, line, err->msg, w[i]);
        }
    }
}

/* Writes t's rows times `factor` as the table of gpu/model under root. */
static int write_scaled(const hs_ptable *t, const char *gpu, const char *model, double factor, hs_err *err)
{
    hs_ptable *u = NULL;
    char dir[512];
    int rc;
    if ((rc = hs_ptable_create(&u, err))) return rc;
    u->meta = t->meta;
    snprintf(u->meta.gpu, sizeof u->meta.gpu, "%s", gpu);
    snprintf(u->meta.model, sizeof u->meta.model, "%s", model);
    snprintf(u->meta.source, sizeof u->meta.source, "test_calib.c: the tiny-test fixture x %g", factor);
    for (size_t i = 0; !rc && i < t->n_dense; i++)
        rc = hs_ptable_add_dense(u, t->dense[i].op, t->dense[i].tp, t->dense[i].bits, t->dense[i].tokens,
                                 t->dense[i].us * factor, err);
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; !rc && i < t->n_attn[k]; i++)
            rc = hs_ptable_add_attn(u, k, t->attn[k][i].tp, t->attn[k][i].x, t->attn[k][i].y,
                                    t->attn[k][i].us * factor, err);
        for (size_t i = 0; !rc && i < t->n_comm[k]; i++)
            rc = hs_ptable_add_comm(u, k, t->comm[k][i].gpus, t->comm[k][i].bytes, t->comm[k][i].us * factor, err);
    }
    snprintf(dir, sizeof dir, "%s/%s/%s", root, gpu, model);
    if (!rc) rc = hs_ptable_sort(u, err);
    if (!rc) rc = hs_ptable_write(u, dir, err);
    hs_ptable_destroy(u);
    return rc;
}

static int make_root(void)
{
    hs_ptable *t = NULL;
    hs_err err = {0};
    int rc;
    snprintf(root, sizeof root, "/tmp/hs_cal_XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        exit(2);
    }
    if ((rc = hs_ptable_read(&t, fixture, &err)) || (rc = write_scaled(t, "a100-80g", "tiny-test", 1, &err)) ||
        (rc = write_scaled(t, "a100-80g", "phi-2", 3, &err)) || (rc = write_scaled(t, "a40", "tiny-test", 2, &err)))
        CHECK_OK(rc, &err);
    hs_ptable_destroy(t);
    return rc;
}

static const hs_calib_entry *entry(const hs_calib *c, const char *gpu)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->e[i].gpu, gpu)) return &c->e[i];
    return NULL;
}

/* ---- build, write, load ---------------------------------------------------------- */

/* Every kind of a and b predicts the same (to 1e-12), on GPUs of the
 * training set and on one outside it; returns the number of kinds
 * compared. */
static int same_predictions(const hs_fit *a, const hs_fit *b, const hs_model *m, const hs_gpu *gpus, int ng,
                            int line)
{
    int kinds = 0, bad = 0;
    for (int k = 0; k < HS_FK_COUNT; k++) {
        if (a->k[k].from != b->k[k].from || a->k[k].memory_only != b->k[k].memory_only ||
            a->k[k].sm_term != b->k[k].sm_term || a->k[k].rows != b->k[k].rows) {
            bad++;
            fprintf(stderr, "%s:%d (from %d): kind %s: from %d/%d, memory_only %d/%d, rows %d/%d\n", __FILE__,
                    __LINE__, line, hs_fit_kind_name(k), a->k[k].from, b->k[k].from, a->k[k].memory_only,
                    b->k[k].memory_only, a->k[k].rows, b->k[k].rows);
        }
        if (a->k[k].from < 0) continue;
        kinds++;
        for (int g = 0; g < ng; g++)
            for (int tp = 1; tp <= 2; tp++)
                for (int x = 1; x <= 4096; x *= 8) {
                    double pa, pb;
                    if (k < HS_OP_COUNT) {
                        pa = hs_fit_op_us(a, k, m, &gpus[g], tp, 16, x);
                        pb = hs_fit_op_us(b, k, m, &gpus[g], tp, 16, x);
                    } else {
                        pa = hs_fit_attn_us(a, k, m, &gpus[g], tp, 16, x, 300);
                        pb = hs_fit_attn_us(b, k, m, &gpus[g], tp, 16, x, 300);
                    }
                    /* cJSON writes 15 significant digits where they read
                     * back within DBL_EPSILON, so the last bit may move */
                    if (!(pa > 0 && isfinite(pa)) || fabs(pa - pb) > 1e-12 * pa) {
                        bad++;
                        fprintf(stderr, "%s:%d (from %d): kind %s on %s, tp %d, x %d: %.17g before, %.17g after\n",
                                __FILE__, __LINE__, line, hs_fit_kind_name(k), gpus[g].name, tp, x, pa, pb);
                    }
                }
    }
    if (bad) hs__check_fail++;
    else hs__check_pass++;
    return kinds;
}

static void test_build_round_trip(hs_calib *cal)
{
    static hs_calib back;
    hs_err err = {0};
    hs_model m;
    hs_gpu g[3];
    char path[256];
    const hs_calib_entry *a100, *a40, *tr;
    FILE *log = tmpfile();
    char text[16384] = "";
    memset(cal, 0, sizeof *cal);
    CHECK_OK(hs_calib_build(cal, root, log, &err), &err);
    if (log) { /* the report perf calibrate prints */
        size_t got;
        rewind(log);
        got = fread(text, 1, sizeof text - 1, log);
        text[got] = '\0';
        fclose(log);
    }
    /* an op with rows under 10 us gets its median over the others too */
    CHECK(strstr(text, " of 10+ us: ") != NULL);
    /* the transfer's figure for one new GPU, over the two GPUs held out */
    CHECK(strstr(text, "over the 2 GPUs held out") != NULL);
    /* every fitted kind accounted for, none stopped at the pass cap */
    CHECK(strstr(text, "fitted kinds in the entries, 0 stopped at the robust fit's pass cap") != NULL);
    CHECK_INT(cal->n, 3);
    CHECK(strstr(cal->source, "3 measured tables of 2 GPU types") != NULL);
    a100 = entry(cal, "a100-80g");
    a40 = entry(cal, "a40");
    tr = entry(cal, "");
    CHECK(a100 && a40 && tr);
    /* every GPU's held-out models pooled: here only the A100 has two
     * tables, so the pooled layer points are its own */
    {
        const char *sec = strstr(text, "every GPU together: leave-one-model-out:");
        const char *lay = sec ? strstr(sec, "    layer ") : NULL;
        const char *pts = lay ? strstr(lay, "(") : NULL;
        int n = -1;
        CHECK(pts != NULL);
        if (pts && sscanf(pts, "(%d points)", &n) == 1 && a100) CHECK_INT(n, a100->cv.n);
        else CHECK(0);
    }
    if (!a100 || !a40 || !tr) return;
    /* per GPU: its own tables, trained on it alone */
    CHECK_INT(a100->n_tables, 2);
    CHECK_STR(a100->models, "phi-2,tiny-test");
    CHECK_INT(a100->fit.n_gpus, 1);
    CHECK_STR(a100->fit.gpus[0], "a100-80g");
    CHECK_INT(a40->n_tables, 1);
    CHECK_STR(a40->models, "tiny-test");
    CHECK_INT(a40->fit.n_gpus, 1);
    CHECK_STR(a40->fit.gpus[0], "a40");
    /* two models on the A100: leave-one-model-out is measured; one on the
     * A40: it is not */
    CHECK(a100->cv.layer_med >= 0 && a100->cv.n > 0);
    CHECK(a40->cv.layer_med < 0 && a40->cv.n == 0);
    /* the transfer entry: every table, both GPUs, leave-one-GPU-out */
    CHECK_INT(tr->n_tables, 3);
    CHECK_STR(tr->models, "all");
    CHECK_INT(tr->fit.n_gpus, 2);
    CHECK(tr->cv.layer_med >= 0 && tr->cv.n > 0);
    /* and each GPU held out alone: two folds, their median between them */
    CHECK_INT(tr->cv.folds, 2);
    CHECK(tr->cv.fold_lo >= 0 && tr->cv.fold_lo <= tr->cv.fold_med && tr->cv.fold_med <= tr->cv.fold_hi);
    CHECK_NEAR(tr->cv.fold_med, (tr->cv.fold_lo + tr->cv.fold_hi) / 2, 1e-9);
    CHECK(a100->cv.fold_med < 0 && a100->cv.folds == 0); /* per-GPU entries: not measured */
    /* every kind of the fixture's tables is fitted (all ten ops, both
     * attention kinds) */
    for (int i = 0; i < cal->n; i++)
        for (int k = 0; k < HS_FK_COUNT; k++) CHECK(cal->e[i].fit.k[k].from >= 0);
    /* memory-only kinds: the cross-GPU form on the transfer entry only */
    for (int k = 0; k < HS_OP_COUNT; k++) {
        CHECK_INT(tr->fit.k[k].sm_term, tr->fit.k[k].memory_only);
        CHECK_INT(a100->fit.k[k].sm_term, 0);
    }

    /* write -> load */
    snprintf(path, sizeof path, "%s/cal-rt.json", root);
    CHECK_OK(hs_calib_write(cal, path, &err), &err);
    memset(&back, 0x5a, sizeof back);
    CHECK_OK(hs_calib_load(&back, path, &err), &err);
    CHECK_INT(back.n, cal->n);
    CHECK_STR(back.source, cal->source);
    if (hs_model_find(&m, "llama-2-7b", &err) || hs_gpu_find(&g[0], "a100-80g", &err) ||
        hs_gpu_find(&g[1], "a40", &err) || hs_gpu_find(&g[2], "h100-sxm-80g", &err)) {
        CHECK_OK(1, &err);
        return;
    }
    for (int i = 0; i < cal->n && i < back.n; i++) {
        const hs_calib_entry *x = &cal->e[i], *y = &back.e[i];
        CHECK_STR(y->gpu, x->gpu);
        CHECK_INT(y->n_tables, x->n_tables);
        CHECK_STR(y->models, x->models);
        CHECK_INT(y->fit.n_gpus, x->fit.n_gpus);
        for (int j = 0; j < x->fit.n_gpus && j < y->fit.n_gpus; j++) CHECK_STR(y->fit.gpus[j], x->fit.gpus[j]);
        CHECK_NEAR(y->cv.layer_med, x->cv.layer_med, 0);
        CHECK_NEAR(y->cv.layer_p90, x->cv.layer_p90, 0);
        CHECK_NEAR(y->cv.layer_bias, x->cv.layer_bias, 0);
        CHECK_NEAR(y->cv.attn_med, x->cv.attn_med, 0);
        CHECK_INT(y->cv.n, x->cv.n);
        /* cJSON prints 15 digits when they read back within an ulp */
        CHECK_NEAR(y->cv.fold_med, x->cv.fold_med, 1e-12 * fabs(x->cv.fold_med));
        CHECK_NEAR(y->cv.fold_lo, x->cv.fold_lo, 1e-12 * fabs(x->cv.fold_lo));
        CHECK_NEAR(y->cv.fold_hi, x->cv.fold_hi, 1e-12 * fabs(x->cv.fold_hi));
        CHECK_INT(y->cv.folds, x->cv.folds);
        CHECK_INT(same_predictions(&x->fit, &y->fit, &m, g, 3, __LINE__), HS_FK_COUNT);
    }

    /* the entry serving a GPU: its own, else the transfer one */
    CHECK(hs_calib_for(&back, "a100-80g") == &back.e[a100 - cal->e]);
    CHECK(hs_calib_for(&back, "a40") == &back.e[a40 - cal->e]);
    CHECK(hs_calib_for(&back, "h100-sxm-80g") == &back.e[tr - cal->e]);
    CHECK_STR(hs_calib_for(&back, "t4")->gpu, "");
    /* ... and NULL without a transfer entry */
    {
        static hs_calib one;
        one = back;
        one.n = 0;
        for (int i = 0; i < back.n; i++)
            if (back.e[i].gpu[0]) one.e[one.n++] = back.e[i];
        CHECK_INT(one.n, 2);
        CHECK(hs_calib_for(&one, "h100-sxm-80g") == NULL);
        CHECK_STR(hs_calib_for(&one, "a40")->gpu, "a40");
        one.n = 0;
        CHECK(hs_calib_for(&one, "a40") == NULL);
    }

    /* no tables: an error naming the folder, the struct zeroed */
    {
        static hs_calib none;
        char empty[256];
        snprintf(empty, sizeof empty, "%s/empty", root);
        CHECK(mkdir(empty, 0755) == 0);
        memset(&none, 0x5a, sizeof none);
        CHECK_INT(hs_calib_build(&none, empty, NULL, &err), HS_ENOTFOUND);
        msg_has(&err, __LINE__, empty, "no measured tables");
        CHECK(is_zero(&none, sizeof none));
        rmdir(empty);
    }
}

/* ---- load errors ------------------------------------------------------------------- */

static const char good_calib[] =
    "{\"source\": \"test\", \"entries\": [\n"
    "  {\"gpu\": \"a100-80g\", \"tables\": 1, \"models\": \"tiny-test\", \"trained_on\": [\"a100-80g\"],\n"
    "   \"cv\": {\"layer_median_ape\": 3.5, \"layer_p90_ape\": 9, \"layer_bias\": -1, \"attention_median_ape\": 4,"
    " \"layer_points\": 10},\n"
    "   \"kinds\": [\n"
    "     {\"kind\": \"emb\", \"from\": \"emb\", \"rows\": 8, \"memory_only\": true,"
    " \"par\": [1.5, 0.7, 1, 4, 0.25, 0, 1000]},\n"
    "     {\"kind\": \"lm_head\", \"from\": \"mlp_up\", \"rows\": 0, \"memory_only\": false,"
    " \"par\": [3, 0.5, 64, 4, 0.8, 0, 1]}]},\n"
    "  {\"gpu\": \"\", \"trained_on\": [\"a100-80g\", \"a40\"], \"kinds\": []}]}\n";

static void bad_calib(int line, const char *text, int code, const char *want, const char *want2)
{
    static hs_calib c;
    const char *path = hs_test_tmpfile("cal", text);
    hs_err err = {0};
    int rc;
    memset(&c, 0x5a, sizeof c);
    rc = hs_calib_load(&c, path, &err);
    if (rc != code) {
        hs__check_fail++;
        fprintf(stderr, "%s:%d: rc %d, want %d (%s)\n", __FILE__, line, rc, code, err.msg);
    } else {
        hs__check_pass++;
    }
    if (is_zero(&c, sizeof c)) {
        hs__check_pass++;
    } else {
        hs__check_fail++;
        fprintf(stderr, "%s:%d: the calibration is not left zeroed after a failed load\n", __FILE__, line);
    }
    msg_has(&err, line, path, want);
    if (want2) msg_has(&err, line, want2, NULL);
}

static void test_load_errors(void)
{
    static hs_calib c;
    hs_err err = {0};
    const char *kinds = "entries[0]: kinds[0] (emb)";
    /* the good file: k_c = 0 is allowed, a borrowed kind keeps its source */
    CHECK_OK(hs_calib_load(&c, hs_test_tmpfile("cal", good_calib), &err), &err);
    CHECK_INT(c.n, 2);
    if (c.n == 2) {
        const hs_kindfit *e = &c.e[0].fit.k[HS_OP_EMB], *h = &c.e[0].fit.k[HS_OP_LM_HEAD];
        CHECK_INT(e->from, HS_OP_EMB);
        CHECK_INT(h->from, HS_OP_MLP_UP);
        CHECK(e->memory_only && !h->memory_only);
        CHECK_NEAR(e->par[HS_FP_KC], 0, 0);
        CHECK_NEAR(e->par[HS_FP_BC], 1000, 0);
        CHECK_NEAR(c.e[0].cv.layer_med, 3.5, 0);
        CHECK_INT(c.e[0].cv.n, 10);
        CHECK_INT(c.e[0].fit.k[HS_OP_QKV].from, -1);      /* absent kinds */
        CHECK_NEAR(c.e[1].cv.layer_med, -1, 0);            /* no cv: not measured */
        CHECK_INT(c.e[1].fit.n_gpus, 2);
        CHECK(hs_calib_for(&c, "h100-sxm-80g") == &c.e[1]);
        CHECK_NEAR(e->par[HS_FP_HBM], 1, 0); /* no hbm_factor: 1 */
    }
    /* an sm_term kind's HBM factor loads; another kind may not have one */
    CHECK_OK(hs_calib_load(&c, hs_test_tmpfile("cal", fx_variant(good_calib, "\"memory_only\": true",
                                                                 "\"memory_only\": true, \"sm_term\": true, \"hbm_factor\": 0.8")),
                           &err), &err);
    if (c.n == 2) CHECK_NEAR(c.e[0].fit.k[HS_OP_EMB].par[HS_FP_HBM], 0.8, 0);
    bad_calib(__LINE__, fx_variant(good_calib, "\"memory_only\": true", "\"memory_only\": true, \"hbm_factor\": 0.8"),
              HS_EPARSE, kinds, "hbm_factor: only sm_term kinds");
    bad_calib(__LINE__, fx_variant(good_calib, "\"memory_only\": true", "\"memory_only\": true, \"sm_term\": true, \"hbm_factor\": 0"),
              HS_ERANGE, kinds, "hbm_factor");

    bad_calib(__LINE__, fx_variant(good_calib, "\"par\": [1.5, 0.7, 1, 4, 0.25, 0, 1000]", "\"par\": [1.5, 0.7, 1, 4, 0.25, 0]"),
              HS_EPARSE, kinds, "par: expected 7 numbers");
    bad_calib(__LINE__, fx_variant(good_calib, "\"par\": [1.5, 0.7, 1, 4, 0.25, 0, 1000]", "\"par\": [1.5, 0.7, 1, 4, 0.25, 0, 1000, 1]"),
              HS_EPARSE, kinds, "par: expected 7 numbers");
    bad_calib(__LINE__, fx_variant(good_calib, "[1.5, 0.7, 1, 4,", "[0, 0.7, 1, 4,"), HS_EPARSE, kinds, "par[0]: expected a finite number > 0");
    bad_calib(__LINE__, fx_variant(good_calib, "0.25, 0, 1000]", "0.25, 0, 0]"), HS_EPARSE, kinds, "par[6]");
    bad_calib(__LINE__, fx_variant(good_calib, "[1.5, 0.7, 1, 4,", "[1.5, 0.7, 1, -4,"), HS_EPARSE, kinds, "par[3]");
    bad_calib(__LINE__, fx_variant(good_calib, "[1.5, 0.7, 1, 4,", "[1.5, \"x\", 1, 4,"), HS_EPARSE, kinds, "par[1]");
    bad_calib(__LINE__, fx_variant(good_calib, "\"kind\": \"emb\"", "\"kind\": \"gate\""), HS_EPARSE, "entries[0]: kinds[0]",
              "kind: unknown \"gate\"");
    bad_calib(__LINE__, fx_variant(good_calib, "\"from\": \"mlp_up\"", "\"from\": \"mlp\""), HS_EPARSE,
              "entries[0]: kinds[1] (lm_head)", "from: unknown \"mlp\"");
    bad_calib(__LINE__, fx_variant(good_calib, "\"memory_only\": true", "\"memory_only\": 1"), HS_EPARSE, kinds,
              "memory_only: expected true or false");
    bad_calib(__LINE__, fx_variant(good_calib, "\"memory_only\": true", "\"memory_only\": true, \"sm_term\": \"yes\""),
              HS_EPARSE, kinds, "sm_term: expected true or false");
    bad_calib(__LINE__, fx_variant(good_calib, "\"memory_only\": false", "\"memory_only\": false, \"sm_term\": true"),
              HS_EPARSE, "kinds[1] (lm_head)", "sm_term: only memory-only kinds");
    bad_calib(__LINE__, fx_variant(good_calib, "\"gpu\": \"a100-80g\", ", ""), HS_EPARSE, "entries[0]", "\"gpu\"");
    bad_calib(__LINE__, fx_variant(good_calib, "\"trained_on\": [\"a100-80g\"],", "\"trained_on\": \"a100-80g\","), HS_EPARSE,
              "entries[0]", "trained_on");
    bad_calib(__LINE__, fx_variant(good_calib, "\"layer_median_ape\": 3.5", "\"layer_median_ape\": -3.5"), HS_ERANGE,
              "entries[0]: cv", "layer_median_ape");
    bad_calib(__LINE__, fx_variant(good_calib, "\"kinds\": []", "\"kinds\": 3"), HS_EPARSE, "entries[1]", "kinds: expected an array");
    bad_calib(__LINE__,
              fx_variant(good_calib, "\"layer_points\": 10}",
                         "\"layer_points\": 10, \"gpu_fold_median_ape\": 30, \"gpu_fold_min_ape\": 4,"
                         " \"gpu_fold_max_ape\": 20, \"gpu_folds\": 8}"),
              HS_ERANGE, "entries[0]: cv", "gpu_fold_median_ape: 30 is not within");
    bad_calib(__LINE__,
              fx_variant(good_calib, "\"layer_points\": 10}",
                         "\"layer_points\": 10, \"gpu_fold_median_ape\": 18, \"gpu_fold_max_ape\": 20, \"gpu_folds\": 8}"),
              HS_EPARSE, "entries[0]: cv", "gpu_fold_min_ape: missing");
    bad_calib(__LINE__, "{\"source\": \"s\", \"entries\": {}}\n", HS_EPARSE, "entries: expected an array", NULL);
    bad_calib(__LINE__, "{\"source\": \"s\"}\n", HS_EPARSE, "entries: expected an array", NULL);
    bad_calib(__LINE__, fx_variant(good_calib, "\"rows\": 8,", "\"rows\": 8"), HS_EPARSE, "invalid JSON", NULL);
    {
        char path[256];
        snprintf(path, sizeof path, "%s/absent.json", root);
        memset(&c, 0x5a, sizeof c);
        CHECK_INT(hs_calib_load(&c, path, &err), HS_EIO);
        CHECK(is_zero(&c, sizeof c));
        msg_has(&err, __LINE__, path, NULL);
        snprintf(path, sizeof path, "%s/no/such/dir/x.json", root);
        CHECK_INT(hs_calib_write(&c, path, &err), HS_EIO);
        msg_has(&err, __LINE__, path, NULL);
    }
}

/* ---- provenance through hs_perf_build ---------------------------------------------- */

/* Builds model on cluster at TP 2 (all layers, one stage); 0 on success. */
static int build(hs_perf *p, const hs_perf_cfg *cfg, const char *model, const char *cluster)
{
    hs_model m;
    hs_cluster *c = NULL;
    hs_layout *l;
    hs_err err = {0};
    int rc;
    memset(p, 0, sizeof *p);
    if ((rc = hs_model_find(&m, model, &err)) || (rc = hs_cluster_find(&c, cluster, &err))) {
        CHECK_OK(rc, &err);
        return rc;
    }
    l = fx_layout1(2, m.layers);
    rc = hs_perf_build(p, cfg, &m, c, l, 256, 16, &err);
    CHECK_OK(rc, &err);
    free(l);
    hs_cluster_destroy(c);
    return rc;
}

static void has(const char *s, const char *want, int yes, int line)
{
    if (!!strstr(s, want) == yes) {
        hs__check_pass++;
    } else {
        hs__check_fail++;
        fprintf(stderr, "%s:%d: \"%s\" %s \"%s\"\n", __FILE__, line, s, yes ? "lacks" : "holds", want);
    }
}

static void test_provenance(const hs_calib *built)
{
    static hs_calib cal;
    hs_perf_cfg cfg;
    hs_perf p;
    hs_err err = {0};
    char path[256];
    /* the calibration this root ships: the built one with distinct cv
     * figures per entry, so each reported error shows which entry served */
    cal = *built;
    for (int i = 0; i < cal.n; i++) {
        cal.e[i].cv.layer_med = !strcmp(cal.e[i].gpu, "a100-80g") ? 7.25 : !strcmp(cal.e[i].gpu, "a40") ? 3.5 : 12.5;
        if (!cal.e[i].gpu[0]) { /* the transfer: one new GPU expects the median by GPU held out */
            cal.e[i].cv.fold_med = 20.4;
            cal.e[i].cv.fold_lo = 4.25;
            cal.e[i].cv.fold_hi = 47.6;
        }
    }
    snprintf(path, sizeof path, "%s/calibration.json", root);
    CHECK_OK(hs_calib_write(&cal, path, &err), &err);
    hs_perf_cfg_defaults(&cfg);
    snprintf(cfg.model, sizeof cfg.model, "auto");
    snprintf(cfg.tables, sizeof cfg.tables, "%s", root);

    /* a model with no table on a calibrated GPU: that GPU's entry */
    if (build(&p, &cfg, "llama-2-7b", "dgx-a100") == 0) {
        has(p.calib, "a100-80g: fitted on its tables", 1, __LINE__);
        has(p.calib, "(+-7% per layer)", 1, __LINE__);
        has(p.calib, "table +", 0, __LINE__);
        has(p.calib, "uncalibrated", 0, __LINE__);
        has(p.model_name, "fitted", 1, __LINE__);
        CHECK_NEAR(p.expected_err, 7.25, 0);
        CHECK_INT(p.uncalibrated, 0);
        hs_perf_free(&p);
    }
    if (build(&p, &cfg, "llama-2-7b", "exegpt-a40x4") == 0) {
        has(p.calib, "a40: fitted on its tables", 1, __LINE__);
        CHECK_NEAR(p.expected_err, 3.5, 0);
        CHECK_INT(p.uncalibrated, 0);
        hs_perf_free(&p);
    }
    /* a GPU with no table at all: the transfer entry, uncalibrated */
    if (build(&p, &cfg, "tiny-test", "h100x8") == 0) {
        has(p.calib, "h100-sxm-80g: transferred from a100-80g,a40, uncalibrated", 1, __LINE__);
        has(p.calib, "(+-20% per layer, 4-48% by GPU held out)", 1, __LINE__);
        CHECK_NEAR(p.expected_err, 20.4, 0);
        CHECK_INT(p.uncalibrated, 1);
        hs_perf_free(&p);
    }
    /* a GPU and model with a complete table: measured, no expected error */
    if (build(&p, &cfg, "tiny-test", "dgx-a100") == 0) {
        CHECK_STR(p.calib, "a100-80g: measured table");
        CHECK_STR(p.model_name, "table");
        CHECK(p.expected_err < 0);
        CHECK_INT(p.uncalibrated, 0);
        hs_perf_free(&p);
    }
    /* the roofline */
    snprintf(cfg.model, sizeof cfg.model, "roofline");
    if (build(&p, &cfg, "tiny-test", "dgx-a100") == 0) {
        CHECK_STR(p.calib, "a100-80g: datasheet roofline, uncalibrated");
        CHECK(p.expected_err < 0);
        CHECK_INT(p.uncalibrated, 1);
        hs_perf_free(&p);
    }
    /* a malformed calibration under perf.tables fails the build, naming it */
    snprintf(cfg.model, sizeof cfg.model, "auto");
    {
        FILE *f = fopen(path, "w");
        if (!f) exit(2);
        fputs("{\"entries\": [{\"gpu\": \"a40\", \"trained_on\": [], \"kinds\": [{\"kind\": \"emb\"}]}]}\n", f);
        fclose(f);
        hs_perf_cache_clear(); /* the same size and second could hit the cache */
        {
            hs_model m;
            hs_cluster *c = NULL;
            hs_layout *l = fx_layout1(2, 2);
            if (hs_model_find(&m, "tiny-test", &err) == 0 && hs_cluster_find(&c, "dgx-a100", &err) == 0) {
                CHECK_INT(hs_perf_build(&p, &cfg, &m, c, l, 64, 8, &err), HS_EPARSE);
                msg_has(&err, __LINE__, path, "entries[0]: kinds[0]");
            } else {
                CHECK_OK(1, &err);
            }
            hs_cluster_destroy(c);
            free(l);
        }
    }
    hs_perf_cache_clear();
}

/* Every GPU's held-out models pooled in the calibrate report: with two
 * tables on each of two GPUs, its layer points are the sum of the two
 * GPUs' leave-one-model-out points (an A100-only pool would fail it). */
static void test_pooled_lomo(void)
{
    static hs_calib cal;
    char keep[sizeof root], text[32768] = "";
    hs_ptable *t = NULL;
    hs_err err = {0};
    FILE *log = tmpfile();
    int rc;
    memcpy(keep, root, sizeof root);
    snprintf(root, sizeof root, "/tmp/hs_cal_XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        exit(2);
    }
    if ((rc = hs_ptable_read(&t, fixture, &err)) || (rc = write_scaled(t, "a100-80g", "tiny-test", 1, &err)) ||
        (rc = write_scaled(t, "a100-80g", "phi-2", 3, &err)) || (rc = write_scaled(t, "a40", "tiny-test", 2, &err)) ||
        (rc = write_scaled(t, "a40", "phi-2", 5, &err)))
        CHECK_OK(rc, &err);
    hs_ptable_destroy(t);
    if (!rc && log) {
        CHECK_OK(rc = hs_calib_build(&cal, root, log, &err), &err);
        if (!rc) {
            const hs_calib_entry *a100 = entry(&cal, "a100-80g"), *a40 = entry(&cal, "a40");
            const char *sec, *lay, *pts;
            size_t got;
            int n = -1;
            rewind(log);
            got = fread(text, 1, sizeof text - 1, log);
            text[got] = '\0';
            CHECK(got < sizeof text - 1); /* the whole report */
            sec = strstr(text, "every GPU together: leave-one-model-out:");
            lay = sec ? strstr(sec, "    layer ") : NULL;
            pts = lay ? strstr(lay, "(") : NULL;
            CHECK(a100 && a40 && pts);
            if (a100 && a40 && pts && sscanf(pts, "(%d points)", &n) == 1) {
                CHECK(a100->cv.n > 0 && a40->cv.n > 0);
                CHECK_INT(n, a100->cv.n + a40->cv.n);
            } else {
                CHECK(0);
            }
        }
    }
    if (log) fclose(log);
    rm_rf(root);
    memcpy(root, keep, sizeof root);
}

int main(void)
{
    static hs_calib cal;
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/perf/tables/a100-80g/tiny-test", hs_test_root());
    if (make_root() == 0) {
        test_build_round_trip(&cal);
        test_load_errors();
        if (cal.n == 3) test_provenance(&cal);
        test_pooled_lomo();
    }
    rm_rf(root);
    return hs_check_result();
}
