/* test_overhead.c - engine profiles, the serving framework's host cost per
 * iteration (sim/perf/overhead.c), and how hs_perf_build applies them
 * (sim/perf/perf.c engine_terms, add_launch).
 *
 * The fit is checked on a synthetic file written here in the column layout
 * of Vidur's cpu_overheads.csv (a leading index column, *_mean and *_median
 * per component in ms, model_name, batch_size, tensor_parallel_degree, and
 * ray_comm_time_mean with no median).  Every component is planted as
 *     us = A[comp][class] + B[comp][class] * batch
 * per TP class (1, 2, 3+), for models a, b, c at TP 1, 2 and 4 and batches
 * 8..128; the mean columns hold 2 * median + 0.5 ms, so reading a mean where
 * a median exists shows; Ray time is 0 (not measured) at TP 1 unless asked.
 * One planted outlier: model b, TP 2, batch 32, schedule tripled.
 *
 * Checked: the reader (ms -> us, median before mean, mean alone when there
 * is no median, line numbers) and its errors "<file>:<line>: <column>: ...";
 * the fit recovers the planted lines (1e-9 where every point lies on its
 * line, and with the outlier to within the fit's documented 0.1% residual
 * floor, while least squares would be pulled 20x further), puts a Ray
 * component with no TP-1 sample on multi_gpu and one with TP-1 samples on
 * every GPU count, and refuses a component with fewer than two samples in
 * every class; hs_ovh_comp_us / hs_ovh_coef row selection (largest min_tp
 * <= tp, else the first row) and the multi_gpu rule (tp * pp > 1); write ->
 * load round trip with the writer's 4-significant-digit rounding; load
 * errors each naming the file and the key and leaving the struct zeroed;
 * hs_ovh_find by name, by path and unknown; hs_ovh_report's
 * leave-one-model-out on exact data (~0) and with one model 10% slow (its
 * held-out error 100/11 %, bias -100/11 %, computed by hand); hs_perf_build
 * (roofline, llama-2-7b on dgx-a100) with engine none, the shipped vllm and
 * a profile written here with every term non-zero, at TP 1 and 2 (step
 * coefficients equal to the profile's sums, the multi_gpu component absent
 * at TP 1, one collective launch per all-reduce added to every dense[t] and
 * head[k] at TP 2: the shipped vllm profile's launch may be 0, the written
 * one's is 7.5 us), hs_perf_step_ns, and an unknown engine. */
#include "check.h"
#include "fixture.h"

#include <sys/stat.h>
#include <unistd.h>

#include "perf/overhead.h"
#include "perf/perf.h"

#define NCOMP 5
static const char *const comp_names[NCOMP] = {"schedule", "sampler", "prepare_inputs", "process_outputs",
                                              "ray_comm"};
/* planted fixed (us) and per-sequence (us) cost per component and TP class */
static const double A[NCOMP][3] = {{30, 50, 60}, {600, 700, 900}, {150, 200, 250}, {80, 100, 120}, {100, 2000, 2500}};
static const double B[NCOMP][3] = {{2, 3, 4}, {3, 5, 6}, {1, 1.5, 2}, {25, 30, 35}, {5, 30, 40}};
static const int batches[] = {8, 16, 24, 32, 48, 64, 96, 128};
#define NB 8
static const int tps[] = {1, 2, 4};
#define OUTLIER_MODEL 1
#define OUTLIER_TP 2
#define OUTLIER_BATCH 32

static char tmpdir[256];

static int tp_class(int tp)
{
    return tp >= 3 ? 2 : tp - 1;
}

/* The planted value (us) of component k for one row, before any outlier or
 * perturbation. */
static double planted(int k, int tp, int batch, int ray_tp1)
{
    int cl = tp_class(tp);
    if (k == 4 && tp == 1 && !ray_tp1) return 0;
    return A[k][cl] + B[k][cl] * batch;
}

typedef struct gen_opts {
    int models;          /* models a, b, c, ... */
    int outlier;         /* 1: model b, TP 2, batch 32 has its schedule tripled */
    int ray_tp1;         /* 1: Ray time measured at TP 1 too */
    int slow_model;      /* index of a model whose every value is x slow_factor; -1: none */
    double slow_factor;
    int no_median;       /* 1: only the mean columns (holding the planted values) */
} gen_opts;

static double row_value(const gen_opts *o, int model, int k, int tp, int batch)
{
    double v = planted(k, tp, batch, o->ray_tp1);
    if (o->outlier && model == OUTLIER_MODEL && tp == OUTLIER_TP && batch == OUTLIER_BATCH && k == 0) v *= 3;
    if (model == o->slow_model) v *= o->slow_factor;
    return v;
}

static const char *gen_csv(const char *name, const gen_opts *o)
{
    static char path[2][512];
    static int which;
    char *p = path[which++ & 1];
    FILE *f;
    int idx = 0;
    snprintf(p, sizeof path[0], "%s/%s", tmpdir, name);
    f = fopen(p, "w");
    if (!f) {
        perror(p);
        exit(2);
    }
    if (o->no_median)
        fprintf(f, ",schedule_mean,sampler_e2e_mean,prepare_inputs_e2e_mean,model_execution_e2e_mean,"
                   "process_model_outputs_mean,model_name,batch_size,tensor_parallel_degree,ray_comm_time_mean\n");
    else
        fprintf(f, ",schedule_mean,sampler_e2e_mean,prepare_inputs_e2e_mean,model_execution_e2e_mean,"
                   "process_model_outputs_mean,schedule_median,sampler_e2e_median,prepare_inputs_e2e_median,"
                   "model_execution_e2e_median,process_model_outputs_median,model_name,batch_size,"
                   "tensor_parallel_degree,ray_comm_time_mean\n");
    for (int m = 0; m < o->models; m++)
        for (int t = 0; t < 3; t++)
            for (int b = 0; b < NB; b++) {
                double ms[NCOMP];
                for (int k = 0; k < NCOMP; k++) ms[k] = row_value(o, m, k, tps[t], batches[b]) / 1e3;
                fprintf(f, "%d", idx++);
                /* means: schedule, sampler, prepare, model_execution, process */
                if (o->no_median)
                    fprintf(f, ",%.17g,%.17g,%.17g,40.5,%.17g", ms[0], ms[1], ms[2], ms[3]);
                else
                    fprintf(f, ",%.17g,%.17g,%.17g,40.5,%.17g,%.17g,%.17g,%.17g,29.25,%.17g",
                            2 * ms[0] + 0.5, 2 * ms[1] + 0.5, 2 * ms[2] + 0.5, 2 * ms[3] + 0.5,
                            ms[0], ms[1], ms[2], ms[3]);
                fprintf(f, ",org/model-%c,%d,%d,%.17g\n", 'a' + m, batches[b], tps[t], ms[4]);
            }
    fclose(f);
    return p;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

static int is_zero(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i]) return 0;
    return 1;
}

/* CHECK that err.msg contains every one of the NULL-ended strings. */
static void msg_has(const hs_err *err, int line, const char *a, const char *b, const char *c)
{
    const char *w[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        if (!w[i]) continue;
        if (strstr(err->msg, w[i])) {
            hs__check_pass++;
        } else {
            hs__check_fail++;
            fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", __FILE__, line, err->msg, w[i]);
        }
    }
}

/* ---- reader -------------------------------------------------------------------- */

static void test_reader(void)
{
    gen_opts o = {3, 1, 0, -1, 1, 0};
    const char *csv = gen_csv("exact.csv", &o);
    hs_ovh_sample *s = NULL;
    hs_err err = {0};
    int n = -1;
    CHECK_OK(hs_ovh_read_vidur(csv, &s, &n, &err), &err);
    CHECK_INT(n, 3 * 3 * NB);
    if (s && n == 3 * 3 * NB) {
        int bad = 0;
        CHECK_STR(s[0].model, "org/model-a");
        CHECK_INT(s[0].tp, 1);
        CHECK_INT(s[0].batch, 8);
        CHECK_INT(s[0].line, 2);
        CHECK_INT(s[n - 1].line, n + 1);
        /* ms -> us, medians (not the 2x + 0.5 means), Ray from its mean */
        CHECK_NEAR(s[0].us[0], 30 + 2 * 8, 1e-9);
        CHECK_NEAR(s[0].us[3], 80 + 25 * 8, 1e-9);
        CHECK_NEAR(s[0].us[4], 0, 0);
        for (int i = 0; i < n; i++) {
            int m = s[i].model[10] - 'a';
            for (int k = 0; k < NCOMP; k++)
                bad += fabs(s[i].us[k] - row_value(&o, m, k, s[i].tp, s[i].batch)) > 1e-9;
        }
        CHECK_INT(bad, 0);
        /* the outlier row: model b, TP 2, batch 32 */
        {
            int i = 1 * 3 * NB + 1 * NB + 3;
            CHECK_STR(s[i].model, "org/model-b");
            CHECK_INT(s[i].tp, 2);
            CHECK_INT(s[i].batch, 32);
            CHECK_NEAR(s[i].us[0], 3 * (50 + 3 * 32), 1e-9);
        }
    }
    /* component names follow the file's order */
    for (int k = 0; k < NCOMP; k++) CHECK_STR(hs_ovh_vidur_comp[k].name, comp_names[k]);
    CHECK(hs_ovh_vidur_comp[NCOMP].name == NULL);
    CHECK(hs_ovh_vidur_comp[4].multi_gpu && !hs_ovh_vidur_comp[0].multi_gpu);
    free(s);

    /* only mean columns (the A40 layout lacks some medians): the means */
    {
        gen_opts om = {1, 0, 1, -1, 1, 1};
        csv = gen_csv("means.csv", &om);
        s = NULL;
        CHECK_OK(hs_ovh_read_vidur(csv, &s, &n, &err), &err);
        if (s && n == 3 * NB) {
            CHECK_NEAR(s[NB + 2].us[1], 700 + 5 * 24, 1e-9);
            CHECK_NEAR(s[0].us[4], 100 + 5 * 8, 1e-9);
        } else {
            CHECK_INT(n, 3 * NB);
        }
        free(s);
    }
}

/* One malformed file: the reader fails with code and a message holding
 * "<path>:<line>: " followed by want, and hands back nothing. */
static void bad_csv(int line, const char *text, int code, int at, const char *want)
{
    char path[400], where[512];
    static hs_ovh_sample sentinel;
    hs_ovh_sample *s = &sentinel; /* must come back NULL */
    hs_err err = {0};
    int n = 7;
    snprintf(path, sizeof path, "%s/bad.csv", tmpdir);
    write_file(path, text);
    {
        int rc = hs_ovh_read_vidur(path, &s, &n, &err);
        if (rc != code) {
            hs__check_fail++;
            fprintf(stderr, "%s:%d: rc %d, want %d (%s)\n", __FILE__, line, rc, code, err.msg);
        } else {
            hs__check_pass++;
        }
    }
    CHECK(s == NULL);
    CHECK_INT(n, 0);
    snprintf(where, sizeof where, "%s:%d: %s", path, at, want);
    msg_has(&err, line, where, NULL, NULL);
}

#define HDR ",schedule_median,sampler_e2e_median,prepare_inputs_e2e_median,process_model_outputs_median," \
            "model_name,batch_size,tensor_parallel_degree,ray_comm_time_mean\n"

static void test_reader_errors(void)
{
    {   /* the layout the error cases start from is good */
        char path[400];
        hs_ovh_sample *s = NULL;
        hs_err err = {0};
        int n = 0;
        snprintf(path, sizeof path, "%s/good.csv", tmpdir);
        write_file(path, HDR "0,0.1,0.6,0.15,0.3,m,8,2,2\n1,0.1,0.6,0.15,0.3,m,16,2,2\n");
        CHECK_OK(hs_ovh_read_vidur(path, &s, &n, &err), &err);
        CHECK_INT(n, 2);
        if (s && n == 2) CHECK_NEAR(s[1].us[1], 600, 1e-9);
        free(s);
    }
    bad_csv(__LINE__, ",schedule_median,prepare_inputs_e2e_median,process_model_outputs_median,"
                      "model_name,batch_size,tensor_parallel_degree,ray_comm_time_mean\n0,1,1,1,m,8,2,2\n",
            HS_EPARSE, 1, "no column sampler_e2e_median or sampler_e2e_mean");
    bad_csv(__LINE__, ",schedule_median,sampler_e2e_median,prepare_inputs_e2e_median,process_model_outputs_median,"
                      "model_name,batch_size,ray_comm_time_mean\n0,1,1,1,1,m,8,2\n",
            HS_EPARSE, 1, "header needs model_name, batch_size and tensor_parallel_degree");
    /* a value that is not a number names the column it sits in */
    bad_csv(__LINE__, HDR "0,0.1,0.6,0.15,0.3,m,8,2,2\n1,0.1,fast,0.15,0.3,m,16,2,2\n", HS_EPARSE, 3,
            "sampler_e2e_median: \"fast\" is not a number");
    bad_csv(__LINE__, HDR "0,0.1,0.6,0.15,0.3,m,8,2,2\n1,0.1,0.6,0.15,0.3,m,16,2,-2\n", HS_ERANGE, 3,
            "ray_comm_time_mean: -2 is outside");
    bad_csv(__LINE__, HDR "0,0.1,0.6,0.15,0.3,m,8,two,2\n", HS_EPARSE, 2,
            "tensor_parallel_degree: \"two\" is not an integer");
    bad_csv(__LINE__, HDR "0,0.1,0.6,0.15,0.3,m,8,1,2\n1,0.1,0.6,0.15,0.3,m,8,0,2\n", HS_ERANGE, 3,
            "tensor_parallel_degree: 0 is outside [1, 16]");
    bad_csv(__LINE__, HDR "0,0.1,0.6,0.15,0.3,m,8,32,2\n", HS_ERANGE, 2, "tensor_parallel_degree: 32 is outside");
    bad_csv(__LINE__, HDR "0,0.1,0.6,0.15,0.3,m,8.5,2,2\n", HS_EPARSE, 2, "batch_size: \"8.5\" is not an integer");
    bad_csv(__LINE__, HDR "0,0.1,0.6,0.15,0.3,m,8,2,2\n1,0.1,0.6,0.15,m,16,2,2\n", HS_EPARSE, 3,
            "expected 9 fields, got 8");
    bad_csv(__LINE__, HDR "0,0.1,0.6,0.15,0.3,,8,2,2\n", HS_EPARSE, 2, "model_name: empty");
    {   /* no rows; no file */
        char path[400];
        hs_ovh_sample *s = NULL;
        hs_err err = {0};
        int n = 3;
        snprintf(path, sizeof path, "%s/bad.csv", tmpdir);
        write_file(path, HDR);
        CHECK_INT(hs_ovh_read_vidur(path, &s, &n, &err), HS_EPARSE);
        msg_has(&err, __LINE__, path, "no rows", NULL);
        snprintf(path, sizeof path, "%s/absent.csv", tmpdir);
        CHECK_INT(hs_ovh_read_vidur(path, &s, &n, &err), HS_EIO);
        CHECK(s == NULL && n == 0);
        msg_has(&err, __LINE__, path, NULL, NULL);
    }
}

/* ---- fit ------------------------------------------------------------------------ */

/* The fit of a file of `models` models matches the planted lines; with
 * outlier, schedule's TP-2 class to the fit's floor. */
static void check_planted(const hs_ovh_profile *p, int ray_tp1, int models, int outlier, int line)
{
    CHECK_INT(p->n, NCOMP);
    for (int k = 0; k < NCOMP && k < p->n; k++) {
        const hs_ovh_comp *c = &p->comp[k];
        int first = (k == 4 && !ray_tp1) ? 1 : 0;
        CHECK_STR(c->name, comp_names[k]);
        CHECK_INT(c->n, 3 - first);
        CHECK_INT(c->multi_gpu, k == 4 && !ray_tp1);
        for (int r = 0; r < c->n && r + first < 3; r++) {
            int cl = r + first;
            /* a class holding the planted outlier: least absolute
             * deviation by IRLS with relative residuals floored at 0.1%
             * (overhead.c lad_fit) keeps every clean point within that
             * floor, not exactly on its line */
            double tol = (outlier && k == 0 && cl == 1) ? 1e-3 : 1e-9;
            CHECK_INT(c->row[r].min_tp, cl + 1);
            CHECK_INT(c->row[r].samples, models * NB);
            if (fabs(c->row[r].fixed_us - A[k][cl]) > tol * A[k][cl] ||
                fabs(c->row[r].per_seq_us - B[k][cl]) > tol * B[k][cl]) {
                hs__check_fail++;
                fprintf(stderr, "%s:%d (from %d): %s class %d: fixed %.12g per_seq %.12g, planted %g %g (rel tol %g)\n",
                        __FILE__, __LINE__, line, c->name, cl, c->row[r].fixed_us, c->row[r].per_seq_us, A[k][cl],
                        B[k][cl], tol);
            } else {
                hs__check_pass++;
            }
            CHECK_NEAR(c->row[r].per_token_us, 0, 0);
        }
    }
}

static void test_fit(void)
{
    gen_opts o = {3, 1, 0, -1, 1, 0};
    hs_ovh_sample *s = NULL;
    hs_ovh_profile p;
    hs_err err = {0};
    int n = 0;
    CHECK_OK(hs_ovh_read_vidur(gen_csv("exact.csv", &o), &s, &n, &err), &err);
    if (!s) return;
    CHECK_OK(hs_ovh_fit(&p, s, n, NULL, &err), &err);
    check_planted(&p, 0, 3, 1, __LINE__);
    CHECK(p.fit_med_ape < 0 && p.cv_med_ape < 0);
    /* the outlier is ignored: the clean points of its class stay within
     * the 0.1% floor, and the prediction at the outlier's batch is the
     * line's, not pulled toward 3x */
    if (p.n == NCOMP && p.comp[0].n == 3) {
        const hs_ovh_comp *c = &p.comp[0];
        double worst = 0, ls_a, ls_b;
        for (int b = 0; b < NB; b++) {
            double want = A[0][1] + B[0][1] * batches[b];
            double e = fabs(hs_ovh_comp_us(c, 2, 1, batches[b], 0) / want - 1);
            if (e > worst) worst = e;
        }
        CHECK(worst <= 1e-3);
        /* what ordinary least squares on the same 24 points would give:
         * the outlier moves the fixed cost by over 2% */
        {
            double sx = 0, sy = 0, sxx = 0, sxy = 0;
            int m = 0;
            for (int i = 0; i < n; i++) {
                if (s[i].tp != 2) continue;
                sx += s[i].batch;
                sy += s[i].us[0];
                sxx += (double)s[i].batch * s[i].batch;
                sxy += s[i].batch * s[i].us[0];
                m++;
            }
            ls_b = (m * sxy - sx * sy) / (m * sxx - sx * sx);
            ls_a = (sy - ls_b * sx) / m;
            CHECK(fabs(ls_a / A[0][1] - 1) > 20 * fabs(c->row[1].fixed_us / A[0][1] - 1));
            CHECK(fabs(ls_a / A[0][1] - 1) > 0.02 || fabs(ls_b / B[0][1] - 1) > 0.02);
        }
    }
    /* without model b (its outlier with it): exact everywhere */
    CHECK_OK(hs_ovh_fit(&p, s, n, "org/model-b", &err), &err);
    check_planted(&p, 0, 2, 0, __LINE__);
    free(s);

    /* Ray time measured at TP 1: the component is paid on one GPU too */
    o.ray_tp1 = 1;
    o.outlier = 0;
    s = NULL;
    CHECK_OK(hs_ovh_read_vidur(gen_csv("ray1.csv", &o), &s, &n, &err), &err);
    if (s) {
        CHECK_OK(hs_ovh_fit(&p, s, n, NULL, &err), &err);
        check_planted(&p, 1, 3, 0, __LINE__);
        /* one row per TP class needs two samples: a single model at a
         * single batch leaves every class with one */
        {
            hs_ovh_sample one[3];
            for (int t = 0; t < 3; t++) one[t] = s[t * NB];
            memset(&p, 0x5a, sizeof p);
            CHECK_INT(hs_ovh_fit(&p, one, 3, NULL, &err), HS_EINVAL);
            msg_has(&err, __LINE__, "component schedule", "fewer than two samples", NULL);
            CHECK(is_zero(&p, sizeof p));
            /* excluding every model leaves nothing */
            CHECK_INT(hs_ovh_fit(&p, one, 3, "org/model-a", &err), HS_EINVAL);
        }
        free(s);
    }
}

/* ---- evaluation and row selection ---------------------------------------------- */

static void test_select(void)
{
    hs_ovh_profile p;
    double f, sq, tk;
    memset(&p, 0, sizeof p);
    p.n = 3;
    /* rows at min_tp 1, 2, 4 */
    snprintf(p.comp[0].name, sizeof p.comp[0].name, "a");
    p.comp[0].n = 3;
    p.comp[0].row[0] = (hs_ovh_row){1, 10, 1, 0.5, 0};
    p.comp[0].row[1] = (hs_ovh_row){2, 20, 2, 0.25, 0};
    p.comp[0].row[2] = (hs_ovh_row){4, 40, 4, 0.125, 0};
    /* one row at min_tp 2: TP 1 takes it too (the first row) */
    snprintf(p.comp[1].name, sizeof p.comp[1].name, "b");
    p.comp[1].n = 1;
    p.comp[1].row[0] = (hs_ovh_row){2, 100, 3, 0, 0};
    /* multi_gpu, rows at min_tp 2 and 8 */
    snprintf(p.comp[2].name, sizeof p.comp[2].name, "ray");
    p.comp[2].multi_gpu = 1;
    p.comp[2].n = 2;
    p.comp[2].row[0] = (hs_ovh_row){2, 1000, 10, 0, 0};
    p.comp[2].row[1] = (hs_ovh_row){8, 3000, 30, 1, 0};

    /* cost = fixed + per_seq * S + per_token * T of the selected row */
    CHECK_NEAR(hs_ovh_comp_us(&p.comp[0], 1, 1, 5, 100), 10 + 5 + 50, 1e-12);
    CHECK_NEAR(hs_ovh_comp_us(&p.comp[0], 2, 1, 5, 100), 20 + 10 + 25, 1e-12);
    CHECK_NEAR(hs_ovh_comp_us(&p.comp[0], 3, 1, 5, 100), 20 + 10 + 25, 1e-12);
    for (int tp = 4; tp <= HS_MAX_TP; tp++) CHECK_NEAR(hs_ovh_comp_us(&p.comp[0], tp, 1, 5, 100), 40 + 20 + 12.5, 1e-12);
    CHECK_NEAR(hs_ovh_comp_us(&p.comp[0], 1, 4, 5, 100), 10 + 5 + 50, 1e-12); /* pp does not select rows */
    CHECK_NEAR(hs_ovh_comp_us(&p.comp[1], 1, 1, 2, 0), 106, 1e-12);
    CHECK_NEAR(hs_ovh_comp_us(&p.comp[1], 8, 1, 2, 0), 106, 1e-12);
    /* multi_gpu: nothing on one GPU, paid when tp * pp > 1 */
    CHECK_NEAR(hs_ovh_comp_us(&p.comp[2], 1, 1, 2, 7), 0, 0);
    CHECK_NEAR(hs_ovh_comp_us(&p.comp[2], 1, 2, 2, 7), 1020, 1e-12); /* first row below its min_tp */
    CHECK_NEAR(hs_ovh_comp_us(&p.comp[2], 2, 1, 2, 7), 1020, 1e-12);
    CHECK_NEAR(hs_ovh_comp_us(&p.comp[2], 7, 1, 2, 7), 1020, 1e-12);
    CHECK_NEAR(hs_ovh_comp_us(&p.comp[2], 8, 1, 2, 7), 3000 + 60 + 7, 1e-12);
    /* a component with no rows costs nothing */
    {
        hs_ovh_comp none;
        memset(&none, 0, sizeof none);
        CHECK_NEAR(hs_ovh_comp_us(&none, 2, 1, 5, 5), 0, 0);
    }

    /* the sums, in ns */
    hs_ovh_coef(&p, 1, 1, &f, &sq, &tk);
    CHECK_NEAR(f, (10 + 100) * 1e3, 1e-9);
    CHECK_NEAR(sq, (1 + 3) * 1e3, 1e-9);
    CHECK_NEAR(tk, 0.5 * 1e3, 1e-9);
    hs_ovh_coef(&p, 1, 2, &f, &sq, &tk);
    CHECK_NEAR(f, (10 + 100 + 1000) * 1e3, 1e-9);
    CHECK_NEAR(sq, (1 + 3 + 10) * 1e3, 1e-9);
    hs_ovh_coef(&p, 2, 1, &f, &sq, &tk);
    CHECK_NEAR(f, (20 + 100 + 1000) * 1e3, 1e-9);
    CHECK_NEAR(sq, (2 + 3 + 10) * 1e3, 1e-9);
    CHECK_NEAR(tk, 0.25 * 1e3, 1e-9);
    hs_ovh_coef(&p, 8, 2, &f, &sq, &tk);
    CHECK_NEAR(f, (40 + 100 + 3000) * 1e3, 1e-9);
    CHECK_NEAR(sq, (4 + 3 + 30) * 1e3, 1e-9);
    CHECK_NEAR(tk, (0.125 + 1) * 1e3, 1e-9);
    /* hs_ovh_coef agrees with the per-component costs at every TP and PP */
    {
        int bad = 0;
        for (int tp = 1; tp <= HS_MAX_TP; tp++)
            for (int pp = 1; pp <= 3; pp++) {
                double sum = 0;
                hs_ovh_coef(&p, tp, pp, &f, &sq, &tk);
                for (int k = 0; k < p.n; k++) sum += hs_ovh_comp_us(&p.comp[k], tp, pp, 6, 50);
                bad += fabs((f + 6 * sq + 50 * tk) / 1e3 - sum) > 1e-9;
            }
        CHECK_INT(bad, 0);
    }
    /* an empty profile */
    memset(&p, 0, sizeof p);
    hs_ovh_coef(&p, 2, 1, &f, &sq, &tk);
    CHECK(f == 0 && sq == 0 && tk == 0);
}

/* ---- writer and loader ---------------------------------------------------------- */

static void test_round_trip(void)
{
    hs_ovh_profile p, q;
    hs_err err = {0};
    char path[400];
    snprintf(path, sizeof path, "%s/rt.json", tmpdir);
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "rt");
    snprintf(p.display, sizeof p.display, "round trip");
    snprintf(p.source, sizeof p.source, "test_overhead.c");
    snprintf(p.licence, sizeof p.licence, "CC0");
    p.collective_launch_us = 17.5;
    p.fit_med_ape = 1.25;
    p.fit_p90_ape = 2.5;
    p.cv_med_ape = 6.375;
    p.n = 2;
    snprintf(p.comp[0].name, sizeof p.comp[0].name, "schedule");
    p.comp[0].n = 3;
    p.comp[0].row[0] = (hs_ovh_row){1, 19.33, 2.695, 0.0125, 13};
    p.comp[0].row[1] = (hs_ovh_row){2, 601.7, 3.266, 0, 26};
    p.comp[0].row[2] = (hs_ovh_row){3, 6936, 0, 1.5e-4, 143};
    snprintf(p.comp[1].name, sizeof p.comp[1].name, "ray_comm");
    p.comp[1].multi_gpu = 1;
    p.comp[1].n = 1;
    p.comp[1].row[0] = (hs_ovh_row){2, 2320, 32.73, 0, 0};
    CHECK_OK(hs_ovh_write(&p, path, &err), &err);
    memset(&q, 0x5a, sizeof q);
    CHECK_OK(hs_ovh_load(&q, path, &err), &err);
    CHECK_STR(q.name, "rt");
    CHECK_STR(q.display, "round trip");
    CHECK_STR(q.source, "test_overhead.c");
    CHECK_STR(q.licence, "CC0");
    CHECK_NEAR(q.collective_launch_us, 17.5, 0);
    CHECK_NEAR(q.fit_med_ape, 1.25, 0);
    CHECK_NEAR(q.fit_p90_ape, 2.5, 0);
    CHECK_NEAR(q.cv_med_ape, 6.375, 0);
    CHECK_INT(q.n, 2);
    for (int k = 0; k < 2 && q.n == 2; k++) {
        CHECK_STR(q.comp[k].name, p.comp[k].name);
        CHECK_INT(q.comp[k].multi_gpu, p.comp[k].multi_gpu);
        CHECK_INT(q.comp[k].n, p.comp[k].n);
        for (int r = 0; r < p.comp[k].n && r < q.comp[k].n; r++) {
            CHECK_INT(q.comp[k].row[r].min_tp, p.comp[k].row[r].min_tp);
            CHECK_NEAR(q.comp[k].row[r].fixed_us, p.comp[k].row[r].fixed_us, 0);
            CHECK_NEAR(q.comp[k].row[r].per_seq_us, p.comp[k].row[r].per_seq_us, 0);
            CHECK_NEAR(q.comp[k].row[r].per_token_us, p.comp[k].row[r].per_token_us, 0);
            CHECK_INT(q.comp[k].row[r].samples, p.comp[k].row[r].samples);
        }
    }
    /* equal coefficients on the hot path */
    for (int tp = 1; tp <= 8; tp *= 2) {
        double a[3], b[3];
        hs_ovh_coef(&p, tp, 1, &a[0], &a[1], &a[2]);
        hs_ovh_coef(&q, tp, 1, &b[0], &b[1], &b[2]);
        for (int i = 0; i < 3; i++) CHECK_NEAR(a[i], b[i], 0);
    }
    /* 4 significant digits on write: 123.456 comes back as 123.5; unknown
     * errors (< 0) are not written and load as -1 */
    p.comp[0].row[0].fixed_us = 123.456;
    p.fit_med_ape = p.fit_p90_ape = p.cv_med_ape = -1;
    CHECK_OK(hs_ovh_write(&p, path, &err), &err);
    CHECK_OK(hs_ovh_load(&q, path, &err), &err);
    CHECK_NEAR(q.comp[0].row[0].fixed_us, 123.5, 0);
    CHECK(q.fit_med_ape < 0 && q.fit_p90_ape < 0 && q.cv_med_ape < 0);
    /* an unwritable path */
    snprintf(path, sizeof path, "%s/no/such/dir/x.json", tmpdir);
    CHECK_INT(hs_ovh_write(&p, path, &err), HS_EIO);
    msg_has(&err, __LINE__, path, NULL, NULL);

    /* hs_ovh_find: by name under profiles/engines, by path, unknown */
    CHECK_OK(hs_ovh_find(&q, "vllm", &err), &err);
    CHECK_STR(q.name, "vllm");
    CHECK(q.n >= 1);
    CHECK_OK(hs_ovh_find(&q, "vllm-a40-host", &err), &err);
    CHECK_STR(q.name, "vllm-a40-host");
    snprintf(path, sizeof path, "%s/rt.json", tmpdir);
    CHECK_OK(hs_ovh_write(&p, path, &err), &err);
    CHECK_OK(hs_ovh_find(&q, path, &err), &err);
    CHECK_STR(q.name, "rt");
    CHECK_INT(hs_ovh_find(&q, "no-such-engine", &err), HS_ENOTFOUND);
    msg_has(&err, __LINE__, "perf.engine", "no-such-engine", NULL);
}

/* The good profile, and one-edit variants of it. */
static const char good_profile[] =
    "{\n"
    "  \"name\": \"t\",\n"
    "  \"source\": \"test\",\n"
    "  \"collective_launch_us\": 20,\n"
    "  \"components\": [\n"
    "    {\"name\": \"schedule\", \"multi_gpu\": false, \"rows\": [\n"
    "      {\"min_tp\": 1, \"fixed_us\": 30, \"per_seq_us\": 2, \"per_token_us\": 0, \"samples\": 4},\n"
    "      {\"min_tp\": 2, \"fixed_us\": 50, \"per_seq_us\": 3}]},\n"
    "    {\"name\": \"ray_comm\", \"multi_gpu\": true, \"rows\": [\n"
    "      {\"min_tp\": 2, \"fixed_us\": 2000, \"per_seq_us\": 30}]}\n"
    "  ]\n"
    "}\n";

static void bad_profile(int line, const char *text, int code, const char *want, const char *want2)
{
    const char *path = hs_test_tmpfile("ovh", text);
    hs_ovh_profile p;
    hs_err err = {0};
    int rc;
    memset(&p, 0x5a, sizeof p);
    rc = hs_ovh_load(&p, path, &err);
    if (rc != code) {
        hs__check_fail++;
        fprintf(stderr, "%s:%d: rc %d, want %d (%s)\n", __FILE__, line, rc, code, err.msg);
    } else {
        hs__check_pass++;
    }
    if (is_zero(&p, sizeof p)) {
        hs__check_pass++;
    } else {
        hs__check_fail++;
        fprintf(stderr, "%s:%d: the profile is not left zeroed after a failed load\n", __FILE__, line);
    }
    msg_has(&err, line, path, want, want2);
}

static void test_load_errors(void)
{
    hs_ovh_profile p;
    hs_err err = {0};
    CHECK_OK(hs_ovh_load(&p, hs_test_tmpfile("ovh", good_profile), &err), &err);
    CHECK(p.n == 2 && p.comp[0].n == 2 && p.comp[1].multi_gpu && !p.comp[0].multi_gpu);
    CHECK(p.fit_med_ape < 0 && p.cv_med_ape < 0);
    CHECK_NEAR(p.comp[0].row[1].per_token_us, 0, 0);
    CHECK_INT(p.comp[0].row[1].samples, 0);

    bad_profile(__LINE__, fx_variant(good_profile, "\"source\"", "\"colour\": 1, \"source\""), HS_EPARSE, "unknown key \"colour\"", NULL);
    bad_profile(__LINE__, fx_variant(good_profile, "\"samples\": 4", "\"per_batch_us\": 4"), HS_EPARSE,
                "components[0] (schedule): rows[0]: unknown key \"per_batch_us\"", NULL);
    bad_profile(__LINE__, fx_variant(good_profile, "\"multi_gpu\": true", "\"multi_gpu\": true, \"gpus\": 2"), HS_EPARSE,
                "components[1]: unknown key \"gpus\"", NULL);
    bad_profile(__LINE__, fx_variant(good_profile, "\"fixed_us\": 50, ", ""), HS_EPARSE, "components[0] (schedule): rows[1]",
                "\"fixed_us\"");
    bad_profile(__LINE__, fx_variant(good_profile, "\"min_tp\": 2, \"fixed_us\": 50", "\"min_tp\": 1, \"fixed_us\": 50"), HS_EPARSE,
                "components[0] (schedule): rows[1]: min_tp 1 must be above the previous row's 1", NULL);
    bad_profile(__LINE__, fx_variant(good_profile, "\"per_seq_us\": 30", "\"per_seq_us\": -30"), HS_ERANGE,
                "components[1] (ray_comm): rows[0]: per_seq_us: -30 is outside", NULL);
    bad_profile(__LINE__, fx_variant(good_profile, "\"fixed_us\": 30", "\"fixed_us\": -0.5"), HS_ERANGE,
                "components[0] (schedule): rows[0]: fixed_us: -0.5 is outside", NULL);
    bad_profile(__LINE__, fx_variant(good_profile, "\"collective_launch_us\": 20", "\"collective_launch_us\": -1"), HS_ERANGE,
                "collective_launch_us: -1 is outside", NULL);
    bad_profile(__LINE__, fx_variant(good_profile, "\"multi_gpu\": false", "\"multi_gpu\": 0"), HS_EPARSE, "components[0]",
                "multi_gpu: expected true or false");
    bad_profile(__LINE__, fx_variant(good_profile, "\"min_tp\": 2, \"fixed_us\": 2000", "\"min_tp\": 0, \"fixed_us\": 2000"),
                HS_ERANGE, "components[1] (ray_comm): rows[0]: min_tp: 0 is outside", NULL);
    bad_profile(__LINE__, fx_variant(good_profile, "\"name\": \"t\",\n", ""), HS_EPARSE, "\"name\"", NULL);
    bad_profile(__LINE__, "{\"name\": \"t\", \"source\": \"s\", \"components\": []}\n", HS_EPARSE,
                "components: expected an array of 1..", NULL);
    bad_profile(__LINE__, fx_variant(good_profile, "\"rows\": [\n      {\"min_tp\": 2, \"fixed_us\": 2000, \"per_seq_us\": 30}]",
                                  "\"rows\": []"),
                HS_EPARSE, "components[1] (ray_comm): rows: expected an array of 1..", NULL);
    /* malformed JSON: a missing comma at the end of line 4; the parser
     * stops at line 5 */
    {
        const char *text = fx_variant(good_profile, "\"collective_launch_us\": 20,", "\"collective_launch_us\": 20");
        const char *path = hs_test_tmpfile("ovh", text);
        char want[200];
        memset(&p, 0x5a, sizeof p);
        CHECK_INT(hs_ovh_load(&p, path, &err), HS_EPARSE);
        CHECK(is_zero(&p, sizeof p));
        snprintf(want, sizeof want, "%s:5: invalid JSON", path);
        CHECK_STR(err.msg, want);
    }
    bad_profile(__LINE__, "[1, 2]\n", HS_EPARSE, "expected a JSON object", NULL);
    {   /* missing file */
        char path[400];
        snprintf(path, sizeof path, "%s/absent.json", tmpdir);
        memset(&p, 0x5a, sizeof p);
        CHECK_INT(hs_ovh_load(&p, path, &err), HS_EIO);
        CHECK(is_zero(&p, sizeof p));
        msg_has(&err, __LINE__, path, NULL, NULL);
    }
}

/* ---- leave one model out ---------------------------------------------------------- */

static void read_all(FILE *f, char *buf, size_t cap)
{
    size_t n;
    rewind(f);
    n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
}

/* The log line of `leave out <model>`; "" when absent. */
static const char *log_line(const char *log, const char *model, char *out, size_t cap)
{
    char key[128];
    const char *at, *end;
    snprintf(key, sizeof key, "leave out %s ", model);
    out[0] = 0;
    if (!(at = strstr(log, key))) return out;
    end = strchr(at, '\n');
    snprintf(out, cap, "%.*s", (int)(end ? end - at : (ptrdiff_t)strlen(at)), at);
    return out;
}

static void test_report(void)
{
    static char log[65536];
    char line[512], out[400];
    gen_opts o = {3, 1, 0, -1, 1, 0};
    const char *csv = gen_csv("exact.csv", &o);
    hs_ovh_opts opts = {0};
    hs_fitstat cv;
    hs_ovh_profile p;
    hs_err err = {0};
    double bias = 99;
    FILE *f = tmpfile();
    if (!f) {
        perror("tmpfile");
        exit(2);
    }
    snprintf(out, sizeof out, "%s/fitted.json", tmpdir);
    opts.out = out;
    opts.name = "synthetic";
    opts.source = "planted lines";
    opts.collective_launch_us = 12.5;
    /* exact data: every held-out model is predicted by the others' fit;
     * the one row off its line is model b's outlier, so the pooled median
     * and p90 stay at the fit's floor (0.1%) */
    CHECK_OK(hs_ovh_report(csv, &opts, f, &cv, &bias, &err), &err);
    CHECK_INT(cv.n, 3 * 3 * NB);
    CHECK(cv.med_ape >= 0 && cv.med_ape < 0.1);
    CHECK(cv.p90_ape >= 0 && cv.p90_ape < 0.1);
    CHECK(fabs(bias) < 0.1);
    /* the outlier row is the worst: its schedule is 2 x 146 us above the
     * line; the row's total is 5274 us on the line */
    CHECK_NEAR(cv.max_ape, 100.0 * 292 / (5274 + 292), 0.1);
    read_all(f, log, sizeof log);
    CHECK(strstr(log, "leave-one-model-out, pooled") != NULL);
    CHECK(strstr(log_line(log, "org/model-a", line, sizeof line), "(24 rows)") != NULL);
    CHECK(strstr(log_line(log, "org/model-c", line, sizeof line), "median   0.0%") != NULL);
    CHECK(strstr(log, "wrote ") != NULL);
    /* the written profile loads and carries the fit, its errors and the
     * options */
    CHECK_OK(hs_ovh_load(&p, out, &err), &err);
    CHECK_STR(p.name, "synthetic");
    CHECK(strstr(p.source, "planted lines") && strstr(p.source, "exact.csv") && strstr(p.source, "(72 rows)"));
    CHECK_NEAR(p.collective_launch_us, 12.5, 0);
    CHECK(p.fit_med_ape >= 0 && p.fit_med_ape < 0.1);
    CHECK(p.cv_med_ape >= 0 && p.cv_med_ape < 0.1);
    CHECK_INT(p.n, NCOMP);
    if (p.n == NCOMP) {
        CHECK_NEAR(p.comp[1].row[2].fixed_us, A[1][2], 0);  /* 900: survives 4 digits */
        CHECK_NEAR(p.comp[3].row[0].per_seq_us, B[3][0], 0);
        CHECK(p.comp[4].multi_gpu);
    }
    fclose(f);

    /* model d 10% slow in every component: the fit on a, b and c is the
     * planted line, so each of d's rows is predicted at 1/1.1 of its
     * measurement: |1 - 1.1| / 1.1 = 100/11 % off, bias -100/11 % */
    {
        const double want = 100.0 / 11;
        hs_ovh_sample *s = NULL;
        hs_fitstat st;
        double b = 0;
        int n = 0;
        o.models = 4;
        o.slow_model = 3;
        o.slow_factor = 1.1;
        csv = gen_csv("slow-d.csv", &o);
        CHECK_OK(hs_ovh_read_vidur(csv, &s, &n, &err), &err);
        if (s) {
            CHECK_OK(hs_ovh_fit(&p, s, n, "org/model-d", &err), &err);
            hs_ovh_eval(&p, s, n, "org/model-d", &st, &b);
            CHECK_INT(st.n, 3 * NB);
            CHECK_NEAR(st.med_ape, want, 1e-3);
            CHECK_NEAR(st.max_ape, want, 1e-3);
            CHECK_NEAR(b, -want, 1e-3);
            /* a, b, c held out: the other two exact models outvote d, so
             * their rows stay within the 0.1% floor */
            CHECK_OK(hs_ovh_fit(&p, s, n, "org/model-a", &err), &err);
            hs_ovh_eval(&p, s, n, "org/model-a", &st, &b);
            CHECK(st.n == 3 * NB && st.max_ape < 0.1);
            free(s);
        }
        f = tmpfile();
        if (!f) exit(2);
        opts.out = NULL;
        CHECK_OK(hs_ovh_report(csv, &opts, f, &cv, &bias, &err), &err);
        read_all(f, log, sizeof log);
        fclose(f);
        log_line(log, "org/model-d", line, sizeof line);
        CHECK(strstr(line, "median   9.1%") != NULL);
        CHECK(strstr(line, "bias   -9.1%") != NULL);
        CHECK(strstr(line, "(24 rows)") != NULL);
        /* pooled over 96 rows: 71 within the floor, b's outlier row, then
         * d's 24 at 100/11 %: the median stays at the floor, p90 (rank
         * 85.5 of 0..95) and the maximum are d's */
        CHECK_INT(cv.n, 4 * 3 * NB);
        CHECK(cv.med_ape < 0.1);
        CHECK_NEAR(cv.p90_ape, want, 1e-3);
        CHECK_NEAR(cv.max_ape, want, 1e-3);
        CHECK(fabs(bias) < 0.1);
        /* nothing written without --out */
        CHECK(access(out, F_OK) == 0); /* the earlier file is still there */
    }
    /* one model in the file: no leave-one-model-out figure */
    {
        gen_opts one = {1, 0, 0, -1, 1, 0};
        csv = gen_csv("one.csv", &one);
        f = tmpfile();
        if (!f) exit(2);
        cv.n = 5;
        CHECK_OK(hs_ovh_report(csv, &opts, f, &cv, &bias, &err), &err);
        CHECK_INT(cv.n, 0);
        read_all(f, log, sizeof log);
        fclose(f);
        CHECK(strstr(log, "one model in the file") != NULL);
    }
    /* a malformed file fails the report, naming it */
    {
        char bad[400];
        snprintf(bad, sizeof bad, "%s/bad.csv", tmpdir);
        write_file(bad, HDR "0,0.1,0.6,0.15,0.3,m,8,zero,2\n");
        CHECK_INT(hs_ovh_report(bad, &opts, NULL, &cv, &bias, &err), HS_EPARSE);
        msg_has(&err, __LINE__, bad, NULL, NULL);
    }
}

/* ---- through hs_perf_build ----------------------------------------------------------- */

/* Builds llama-2-7b with the roofline on dgx-a100 at TP 1 and 2 for one
 * engine; 0 when both built. */
static int build_pair(hs_perf out[2], hs_perf_cfg *cfg, const char *engine, const hs_model *m,
                      const hs_cluster *c, int maxt, int maxs)
{
    hs_err err = {0};
    int ok = 1;
    if (snprintf(cfg->engine, sizeof cfg->engine, "%s", engine) >= (int)sizeof cfg->engine) SKIP("temp path too long");
    for (int i = 0; i < 2; i++) {
        hs_layout *l = fx_layout1(i + 1, m->layers);
        if (hs_perf_build(&out[i], cfg, m, c, l, maxt, maxs, &err)) {
            CHECK_OK(1, &err);
            memset(&out[i], 0, sizeof out[i]);
            ok = 0;
        }
        free(l);
    }
    return ok ? 0 : -1;
}

/* The engine's terms of eng against the engine-none build, at TP 1 (i 0)
 * and 2 (i 1): step coefficients are the profile's sums (by hand: the row
 * with the largest min_tp <= tp, else the first; multi_gpu only on several
 * GPUs) on top of perf.step_overhead_us; dense[t] carries two collective
 * launches per layer and head[k] one (the logits gather), on TP 2 only. */
static void check_engine(const hs_perf eng[2], const hs_perf none[2], const hs_ovh_profile *prof,
                         const hs_model *m, int maxt, int maxs, double step_us, int line)
{
    double launch = prof->collective_launch_us * 1e3;
    for (int i = 0; i < 2; i++) {
        int tp = i + 1, bad_d = 0, bad_h = 0;
        double f, s, t, fixed = 0, seq = 0, tok = 0;
        CHECK_STR(eng[i].engine, prof->name);
        hs_ovh_coef(prof, tp, 1, &f, &s, &t);
        for (int k = 0; k < prof->n; k++) {
            const hs_ovh_row *r = &prof->comp[k].row[0];
            if (prof->comp[k].multi_gpu && tp == 1) continue;
            for (int j = 1; j < prof->comp[k].n; j++)
                if (prof->comp[k].row[j].min_tp <= tp) r = &prof->comp[k].row[j];
            fixed += r->fixed_us;
            seq += r->per_seq_us;
            tok += r->per_token_us;
        }
        CHECK_NEAR(f, fixed * 1e3, 1e-6);
        CHECK_NEAR(eng[i].step_overhead, step_us * 1e3 + fixed * 1e3, 1e-6);
        CHECK_NEAR(eng[i].step_seq, seq * 1e3, 1e-9);
        CHECK_NEAR(eng[i].step_tok, tok * 1e3, 1e-9);
        if (!eng[i].pp || !none[i].pp) continue;
        for (int x = 1; x <= maxt; x++)
            bad_d += fabs(eng[i].stage[0].dense[x] - none[i].stage[0].dense[x] -
                          (tp > 1 ? m->layers * 2 * launch : 0)) > 1e-6;
        for (int k = 1; k <= maxs; k++)
            bad_h += fabs(eng[i].stage[0].head[k] - none[i].stage[0].head[k] - (tp > 1 ? launch : 0)) > 1e-6;
        if (bad_d || bad_h) {
            hs__check_fail++;
            fprintf(stderr, "%s:%d (from %d): tp %d: %d dense and %d head entries off the launch cost %g ns\n",
                    __FILE__, __LINE__, line, tp, bad_d, bad_h, launch);
        } else {
            hs__check_pass++;
        }
        /* the attention terms do not carry the engine */
        CHECK_NEAR(eng[i].stage[0].dec_fixed, none[i].stage[0].dec_fixed, 0);
        CHECK_NEAR(eng[i].stage[0].pre_fixed, none[i].stage[0].pre_fixed, 0);
    }
}

static void test_perf_build(void)
{
    enum { MAXT = 300, MAXS = 32 };
    hs_model m;
    hs_cluster *c = NULL;
    hs_perf_cfg cfg;
    hs_perf none[2], eng[2];
    hs_ovh_profile prof, q;
    hs_err err = {0};
    char path[400];
    if (hs_model_find(&m, "llama-2-7b", &err) || hs_cluster_find(&c, "dgx-a100", &err) ||
        hs_ovh_find(&prof, "vllm", &err)) {
        CHECK_OK(1, &err);
        hs_cluster_destroy(c);
        return;
    }
    CHECK(!m.parallel_attn); /* two all-reduces per layer */
    /* the shipped profile has a component paid only on several GPUs */
    {
        int multi = 0;
        for (int k = 0; k < prof.n; k++) multi += prof.comp[k].multi_gpu;
        CHECK(multi > 0);
    }
    hs_perf_cfg_defaults(&cfg);
    CHECK_STR(cfg.engine, "vllm");
    snprintf(cfg.model, sizeof cfg.model, "roofline");
    cfg.step_overhead_us = 123;

    /* engine none: the flat constant only */
    if (build_pair(none, &cfg, "none", &m, c, MAXT, MAXS) == 0)
        for (int i = 0; i < 2; i++) {
            CHECK_STR(none[i].engine, "none");
            CHECK_NEAR(none[i].step_overhead, 123e3, 0);
            CHECK_NEAR(none[i].step_seq, 0, 0);
            CHECK_NEAR(none[i].step_tok, 0, 0);
        }
    /* the shipped default */
    if (build_pair(eng, &cfg, "vllm", &m, c, MAXT, MAXS) == 0) {
        check_engine(eng, none, &prof, &m, MAXT, MAXS, 123, __LINE__);
        /* Ray is paid from two GPUs on */
        CHECK(eng[1].step_overhead > eng[0].step_overhead);
        {
            hs_batch_shape b;
            memset(&b, 0, sizeof b);
            b.tokens = 300;
            b.samples = 7;
            b.dec_seqs = 5;
            b.pre_chunks = 2;
            b.pre_tokens = 295;
            CHECK_NEAR(hs_perf_step_ns(&eng[1], &b),
                       eng[1].step_overhead + eng[1].step_seq * 7 + eng[1].step_tok * 300, 1e-6);
            CHECK_NEAR(hs_perf_step_ns(&none[1], &b), 123e3, 0);
        }
    }
    for (int i = 0; i < 2; i++) hs_perf_free(&eng[i]);

    /* a profile by path with rows per TP class, a multi_gpu component, a
     * per-token cost and a collective launch: every term non-zero */
    memset(&q, 0, sizeof q);
    snprintf(q.name, sizeof q.name, "tok");
    snprintf(q.source, sizeof q.source, "test");
    q.collective_launch_us = 7.5;
    q.n = 2;
    snprintf(q.comp[0].name, sizeof q.comp[0].name, "host");
    q.comp[0].n = 2;
    q.comp[0].row[0] = (hs_ovh_row){1, 100, 10, 0.5, 0};
    q.comp[0].row[1] = (hs_ovh_row){2, 200, 20, 0.25, 0};
    snprintf(q.comp[1].name, sizeof q.comp[1].name, "ray");
    q.comp[1].multi_gpu = 1;
    q.comp[1].n = 1;
    q.comp[1].row[0] = (hs_ovh_row){2, 1500, 4, 0, 0};
    snprintf(path, sizeof path, "%s/tok.json", tmpdir);
    CHECK_OK(hs_ovh_write(&q, path, &err), &err);
    cfg.step_overhead_us = 0;
    if (build_pair(eng, &cfg, path, &m, c, MAXT, MAXS) == 0) {
        hs_batch_shape b;
        check_engine(eng, none, &q, &m, MAXT, MAXS, 0, __LINE__);
        /* by hand: TP 1 pays the first row of host only; TP 2 its second
         * row and Ray; one launch of 7.5 us per all-reduce, 64 per pass */
        CHECK_NEAR(eng[0].step_overhead, 100e3, 1e-6);
        CHECK_NEAR(eng[0].step_seq, 10e3, 1e-9);
        CHECK_NEAR(eng[0].step_tok, 500, 1e-9);
        CHECK_NEAR(eng[1].step_overhead, 1700e3, 1e-6);
        CHECK_NEAR(eng[1].step_seq, 24e3, 1e-9);
        CHECK_NEAR(eng[1].step_tok, 250, 1e-9);
        if (eng[1].pp && none[1].pp) {
            CHECK_NEAR(eng[1].stage[0].dense[1] - none[1].stage[0].dense[1], 32 * 2 * 7.5e3, 1e-6);
            CHECK_NEAR(eng[1].stage[0].head[1] - none[1].stage[0].head[1], 7.5e3, 1e-6);
            CHECK_NEAR(eng[0].stage[0].dense[1] - none[0].stage[0].dense[1], 0, 1e-6);
        }
        memset(&b, 0, sizeof b);
        b.tokens = 64;
        b.samples = 4;
        b.dec_seqs = 3;
        b.pre_chunks = 1;
        CHECK_NEAR(hs_perf_step_ns(&eng[1], &b), 1700e3 + 24e3 * 4 + 250 * 64, 1e-6);
        CHECK_NEAR(hs_perf_step_ns(&eng[0], &b), 100e3 + 10e3 * 4 + 500 * 64, 1e-6);
        /* an encoder pass: its prompts count as prefill sequences and
         * tokens; cross-KV projections (the rest of enc_tokens) do not */
        memset(&b, 0, sizeof b);
        b.enc_tokens = 300 + 40;
        b.enc_seqs = 2;
        b.enc_new = 300;
        CHECK_NEAR(hs_perf_step_ns(&eng[1], &b), 1700e3 + 24e3 * 2 + 250 * 300, 1e-6);
    }
    for (int i = 0; i < 2; i++) {
        hs_perf_free(&eng[i]);
        hs_perf_free(&none[i]);
    }

    /* an unknown engine: HS_ENOTFOUND naming perf.engine, nothing built */
    {
        hs_layout *l = fx_layout1(2, m.layers);
        hs_perf p;
        snprintf(cfg.engine, sizeof cfg.engine, "no-such-engine");
        CHECK_INT(hs_perf_build(&p, &cfg, &m, c, l, MAXT, MAXS, &err), HS_ENOTFOUND);
        msg_has(&err, __LINE__, "perf.engine", "\"no-such-engine\"", NULL);
        CHECK(p.pp == 0 && p.stage[0].dense == NULL);
        free(l);
    }
    hs_cluster_destroy(c);
}


/* The dispatch floor (overhead.h): the profile's entries by GPU type with a
 * "" fallback; read, written and rejected as the rest of the profile (the
 * retired layer_us named); in the hot path a pass takes at least layers x
 * operators per layer x op_us, the slowest host of the stage deciding, and
 * a pass above the floor is unchanged; operators per layer follow the
 * model's structure (hs_model_layer_ops). */
static void test_dispatch(void)
{
    static const char *disp = "\"dispatch\": [{\"gpu\": \"a100-80g\", \"op_us\": 50}, {\"gpu\": \"\", \"op_us\": 30}],\n  \"components\"";
    char *text = strdup(fx_variant(good_profile, "\"components\"", disp)); /* fx_variant reuses its buffer */
    hs_ovh_profile p, q;
    hs_err err = {0};
    char out[400];
    CHECK_OK(hs_ovh_load(&p, hs_test_tmpfile("ovh", text), &err), &err);
    CHECK_INT(p.n_disp, 2);
    CHECK_NEAR(hs_ovh_op_us(&p, "a100-80g"), 50, 0);
    CHECK_NEAR(hs_ovh_op_us(&p, "h100-sxm-80g"), 30, 0);   /* the "" entry */
    {   /* without a "" entry an unlisted GPU has no floor */
        hs_ovh_profile r = p;
        r.n_disp = 1;
        CHECK_NEAR(hs_ovh_op_us(&r, "h100-sxm-80g"), 0, 0);
    }
    snprintf(out, sizeof out, "%s/disp.json", tmpdir);
    CHECK_OK(hs_ovh_write(&p, out, &err), &err);
    CHECK_OK(hs_ovh_load(&q, out, &err), &err);
    CHECK(q.n_disp == 2 && !strcmp(q.disp[0].gpu, "a100-80g") && q.disp[1].gpu[0] == 0);
    CHECK_NEAR(q.disp[0].op_us, 50, 0);
    bad_profile(__LINE__, fx_variant(text, "\"op_us\": 50", "\"op_us\": 50, \"cpu\": 1"), HS_EPARSE,
                "dispatch[0]: unknown key \"cpu\"", NULL);
    bad_profile(__LINE__, fx_variant(text, "\"op_us\": 50", "\"layer_us\": 500"), HS_EPARSE,
                "dispatch[0]: layer_us: replaced by op_us", NULL);
    bad_profile(__LINE__, fx_variant(text, "\"gpu\": \"\"", "\"gpu\": \"a100-80g\""), HS_EPARSE,
                "dispatch[1]: gpu \"a100-80g\" listed twice", NULL);
    bad_profile(__LINE__, fx_variant(text, "\"op_us\": 30", "\"op_us\": -3"), HS_ERANGE,
                "dispatch[1]: op_us: -3 is outside", NULL);
    /* operators per layer, as counted from vLLM's model code */
    {
        hs_model lm, bm, om;
        if (!hs_model_find(&lm, "llama-2-70b", &err) && !hs_model_find(&bm, "bloom-176b", &err) &&
            !hs_model_find(&om, "opt-13b", &err)) {
            CHECK_INT(hs_model_layer_ops(&lm, 8), 12); /* 2 fused norms, qkv, rope, 2 attention, o, 3 MLP, 2 all-reduces */
            CHECK_INT(hs_model_layer_ops(&lm, 1), 10); /* no all-reduce */
            CHECK_INT(hs_model_layer_ops(&bm, 8), 15); /* LayerNorm + add twice, no rope, bias after each all-reduce */
            CHECK_INT(hs_model_layer_ops(&om, 2), 15); /* the same structure, learned positions */
        } else {
            CHECK_OK(1, &err);
        }
    }
    bad_profile(__LINE__, fx_variant(text, "\"dispatch\": [{", "\"dispatch\": {\"x\": [{"), HS_EPARSE, NULL, NULL);
    /* the hot path: Llama-2-7B (32 layers) on 2 A100s with the shipped
     * vllm-eager profile */
    {
        hs_model m;
        hs_cluster *c = NULL;
        hs_perf_cfg cfg;
        hs_perf e, v;
        hs_layout l;
        hs_ovh_profile eager;
        memset(&l, 0, sizeof l);
        l.pp = 1;
        l.kv_bits = 16;
        l.stage[0] = (hs_stage_layout){.tp = 2, .layers = 32, .bits = 16, .gpus = {0, 1}};
        if (hs_model_find(&m, "llama-2-7b", &err) || hs_cluster_find(&c, "dgx-a100", &err) ||
            hs_ovh_find(&eager, "vllm-eager", &err)) {
            CHECK_OK(1, &err);
            hs_cluster_destroy(c);
            free(text);
            return;
        }
        hs_perf_cfg_defaults(&cfg);
        snprintf(cfg.engine, sizeof cfg.engine, "vllm-eager");
        CHECK_OK(hs_perf_build(&e, &cfg, &m, c, &l, 4096, 64, &err), &err);
        snprintf(cfg.engine, sizeof cfg.engine, "vllm");
        CHECK_OK(hs_perf_build(&v, &cfg, &m, c, &l, 4096, 64, &err), &err);
        {
            hs_batch_shape dec, pre;
            double floor = 32 * 12 * hs_ovh_op_us(&eager, "a100-80g") * 1e3; /* 12 operators at TP 2 */
            memset(&dec, 0, sizeof dec);
            dec.tokens = dec.samples = dec.dec_seqs = 1;
            dec.dec_ctx = 512;
            memset(&pre, 0, sizeof pre);
            pre.tokens = pre.pre_tokens = 4096;
            pre.samples = pre.pre_chunks = 1;
            pre.pre_self = 4096.0 * 4097 / 2;
            CHECK(floor > 0);
            CHECK_NEAR(e.stage[0].dispatch_ns, floor, 1e-6);
            CHECK_NEAR(v.stage[0].dispatch_ns, 0, 0);
            /* one sequence decoding: GPU work under the floor, the floor rules */
            CHECK(hs_perf_stage_ns(&v, 0, &dec) < floor);
            CHECK_NEAR(hs_perf_stage_ns(&e, 0, &dec), floor, 1e-6);
            /* a 4,096-token prefill is above it: unchanged */
            CHECK(hs_perf_stage_ns(&v, 0, &pre) > floor);
            CHECK_NEAR(hs_perf_stage_ns(&e, 0, &pre), hs_perf_stage_ns(&v, 0, &pre), 1e-6);
        }
        hs_perf_free(&e);
        hs_perf_free(&v);
        hs_cluster_destroy(c);
    }
    free(text);
}

int main(void)
{
    hs_test_root();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hs_ovh_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_reader();
    test_reader_errors();
    test_fit();
    test_select();
    test_round_trip();
    test_load_errors();
    test_report();
    test_perf_build();
    test_dispatch();
    {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    }
    return hs_check_result();
}
