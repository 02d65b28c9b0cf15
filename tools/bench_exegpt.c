/* bench_exegpt.c - ExeGPT benchmark (tools/bench-exegpt runs it).
 *
 *   bench-exegpt des      estimator vs discrete-event run of chosen schedules
 *   bench-exegpt paper    RRA / WAA / FasterTransformer throughput per latency
 *                         bound on the paper's clusters and models, ratios next
 *                         to the paper's
 *   bench-exegpt table6   Table 6 case study and scheduler time
 *   bench-exegpt all      everything (default)
 *
 * Prints its figures; asserts nothing (tests/test_exegpt_runtime.c does).
 * Environment: HS_BENCH_ADJUST (dynamic adjustment threshold of the DES
 * runs, 0.1), HS_BENCH_DEBUG=1 (estimator and DES internals per row). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hw/hw.h"
#include "llm/model.h"
#include "plan/exegpt.h"
#include "policy/policy.h"
#include "serve/engine.h"
#include "workload/workload.h"

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const hs_err *err)
{
    fprintf(stderr, "bench-exegpt: %s\n", err->msg);
    exit(1);
}

typedef struct ctx {
    hs_model m;
    hs_cluster *c;
    hs_workload_cfg wc;
    hs_exegpt_dist din, dout;
    hs_exegpt *x[2];            /* PAPER and STEADY B_D modes */
    hs_perf_cfg pc;
} ctx;

static void ctx_open(ctx *k, const char *model, const char *cluster, const char *task)
{
    hs_err err = {0};
    hs_exegpt_opts eo;
    memset(k, 0, sizeof *k);
    hs_perf_cfg_defaults(&k->pc);
    if (hs_model_find(&k->m, model, &err) || hs_cluster_find(&k->c, cluster, &err)) die(&err);
    hs_workload_defaults(&k->wc);
    if (hs_workload_set(&k->wc, "preset", task, &err) ||
        hs_exegpt_dist_from_lendist(&k->din, &k->wc.prompt, &err) ||
        hs_exegpt_dist_from_lendist(&k->dout, &k->wc.output, &err))
        die(&err);
    for (int mode = 0; mode < 2; mode++) {
        hs_exegpt_opts_defaults(&eo);
        eo.perf = k->pc;
        eo.bd_mode = mode;
        if (hs_exegpt_create(&k->x[mode], &k->m, k->c, &k->din, &k->dout, &eo, &err)) die(&err);
    }
}

static void ctx_close(ctx *k)
{
    hs_exegpt_destroy(k->x[0]);
    hs_exegpt_destroy(k->x[1]);
    hs_exegpt_dist_free(&k->din);
    hs_exegpt_dist_free(&k->dout);
    hs_cluster_destroy(k->c);
}

/* Best schedule of one policy family under a bound (steady-state estimator
 * unless mode says otherwise). */
static int plan_best_mode(ctx *k, unsigned mask, double bound, int mode, hs_exegpt_result *r)
{
    hs_err err = {0};
    hs_exegpt_plan_opts po;
    hs_exegpt_plan_opts_defaults(&po);
    po.lat_bound = bound;
    po.policies = mask;
    if (hs_exegpt_plan(k->x[mode], &po, r, &err)) die(&err);
    return r->found;
}

static int plan_best(ctx *k, unsigned mask, double bound, hs_exegpt_result *r)
{
    return plan_best_mode(k, mask, bound, HS_EXEGPT_BD_STEADY, r);
}

#define RRA_MASK (1u << HS_EXEGPT_RRA)
#define WAA_MASK ((1u << HS_EXEGPT_WAA_C) | (1u << HS_EXEGPT_WAA_M))

/* ---- estimator vs DES ---------------------------------------------------------- */

static void des_row(ctx *k, const hs_exegpt_cfg *cfg, int64_t n, double *ethr, double *dthr)
{
    hs_err err = {0};
    hs_exegpt_est ep, es;
    hs_exegpt_des ds;
    char lab[128];
    if (hs_exegpt_estimate(k->x[0], cfg, &ep, &err) || hs_exegpt_estimate(k->x[1], cfg, &es, &err))
        die(&err);
    if (hs_exegpt_des_run(k->x[1], cfg, &k->wc, n, es.bd, getenv("HS_BENCH_ADJUST") ? atof(getenv("HS_BENCH_ADJUST")) : 0.1, &k->pc, &ds, &err)) die(&err);
    hs_exegpt_cfg_str(cfg, &es, lab, sizeof lab);
    if (getenv("HS_BENCH_DEBUG")) printf("  [des itl %.4f s, sim %.1f s, iters %lld]\n", ds.itl, ds.sim_s, (long long)ds.iterations);
    if (getenv("HS_BENCH_DEBUG"))
        printf("  [bd paper %.1f steady %.1f, mem %.1f/%.1f GiB, t_enc %.3f t_dec %.4f cycle %.3f xfer %.4f pp %d/%d]\n",
               ep.bd, es.bd, es.mem_peak / 1073741824.0, es.mem_cap / 1073741824.0, es.t_enc, es.t_dec,
               es.t_cycle, es.t_xfer, es.pp, es.pp_dec);
    printf("  %-44s thr est %6.2f (paper B_D %6.2f) des %6.2f q/s  %+6.1f%% | lat_b est %6.2f des %6.2f s (%lld q) %+6.1f%% | preempt %lld, %.2f s wall\n",
           lab, es.thr, ep.thr, ds.thr, 100 * (ds.thr - es.thr) / es.thr, es.lat_b, ds.lat_b,
           (long long)ds.n_lat, 100 * (ds.lat_b - es.lat_b) / es.lat_b, (long long)ds.preemptions, ds.wall_s);
    if (ethr) *ethr = es.thr;
    if (dthr) *dthr = ds.thr;
}

static void bench_des(void)
{
    static const struct { const char *model, *cluster, *task; double bound; } cases[] = {
        {"opt-13b", "exegpt-a40x4", "S", INFINITY},
        {"opt-13b", "exegpt-a40x4", "S", 5.9},
        {"opt-13b", "exegpt-a40x4", "T", INFINITY},
        {"opt-13b", "exegpt-a40x4", "C1", INFINITY},
        {"opt-13b", "exegpt-a40x4", "G", INFINITY},
    };
    printf("== estimator vs discrete-event run (the planner's best RRA and WAA schedule per case;\n"
           "   est = steady-state B_D estimator, DES = 5000 queries all queued, middle 60%% of completions) ==\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ctx k;
        hs_exegpt_result r;
        ctx_open(&k, cases[i].model, cases[i].cluster, cases[i].task);
        printf("%s on %s, task %s, L_B %g s:\n", cases[i].model, cases[i].cluster, cases[i].task, cases[i].bound);
        if (plan_best(&k, RRA_MASK, cases[i].bound, &r)) des_row(&k, &r.cfg, 5000, NULL, NULL);
        if (plan_best(&k, WAA_MASK, cases[i].bound, &r)) des_row(&k, &r.cfg, 5000, NULL, NULL);
        ctx_close(&k);
    }
}

/* One schedule given on the command line:
 *   des1 MODEL CLUSTER TASK rra|waa-c|waa-m B_E N_D TP GROUPS */
static void bench_des1(char **a)
{
    ctx k;
    hs_exegpt_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.policy = !strcmp(a[3], "rra") ? HS_EXEGPT_RRA : !strcmp(a[3], "waa-c") ? HS_EXEGPT_WAA_C : HS_EXEGPT_WAA_M;
    cfg.be = atoi(a[4]);
    cfg.nd = atoi(a[5]);
    cfg.tp = atoi(a[6]);
    cfg.tp_groups = atoi(a[7]);
    ctx_open(&k, a[0], a[1], a[2]);
    des_row(&k, &cfg, 5000, NULL, NULL);
    ctx_close(&k);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    int all = !strcmp(what, "all");
    if (!strcmp(what, "des1")) {
        if (argc != 10) {
            fprintf(stderr, "usage: bench-exegpt des1 MODEL CLUSTER TASK rra|waa-c|waa-m B_E N_D TP GROUPS\n");
            return 2;
        }
        bench_des1(argv + 2);
        return 0;
    }
    if (all || !strcmp(what, "des")) bench_des();
    return 0;
}
