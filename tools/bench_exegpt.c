/* bench_exegpt.c - ExeGPT benchmark (tools/bench-exegpt runs it).
 *
 *   bench-exegpt des      estimator vs discrete-event run of chosen schedules
 *   bench-exegpt paper    RRA / WAA / FasterTransformer throughput per latency
 *                         bound on the paper's clusters and models, ratios next
 *                         to the paper's
 *   bench-exegpt table6   Table 6 case study and scheduler time
 *   bench-exegpt example [CLUSTER]
 *                         the paper's worked example alone (Sec. 7.3, also
 *                         part of `paper`), on exegpt-a40x16 or a cluster
 *                         name or JSON path (a sensitivity run)
 *   bench-exegpt all      everything (default)
 *   --json F              also writes the headline rows (Table 6, ExeGPT/FT)
 *                         as [{"claim": ..., "paper": x, "ours": y}, ...]
 *
 * Prints its figures; asserts nothing (tests/test_exegpt_runtime.c does).
 * Environment: HS_BENCH_ADJUST (dynamic adjustment threshold of the DES
 * runs, 0.1), HS_BENCH_DEBUG=1 (estimator and DES internals per row; the
 * worked example's FT points, batch by batch). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hw/hw.h"
#include "llm/model.h"
#include "plan/exegpt.h"
#include "plan/plan.h"
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

/* The latency model: defaults, perf.model from HS_BENCH_PERF_MODEL. */
static void bench_perf(hs_perf_cfg *pc)
{
    const char *m = getenv("HS_BENCH_PERF_MODEL");
    hs_perf_cfg_defaults(pc);
    if (m && *m) snprintf(pc->model, sizeof pc->model, "%s", m);
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
    bench_perf(&k->pc);
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
        if (getenv("HS_BENCH_ADJUST")) eo.adjust = atof(getenv("HS_BENCH_ADJUST"));
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

static double g_plan_max, g_plan_sum;
static int g_wins[2][2];   /* [long-output task][WAA won] where both ran */
static int g_plan_n;
static double g_dsi_sum, g_dsi_dev;   /* ExeGPT / simulated DSI; worst |sim - analytic| / analytic */
static int g_dsi_n;

/* Headline rows for --json (claim, paper, ours). */
typedef struct headline {
    char claim[160];
    double paper, ours;
} headline;
static headline g_head[32];
static int g_nhead;

static void head_add(const char *claim, double paper, double ours)
{
    if (g_nhead == (int)(sizeof g_head / sizeof g_head[0])) return;
    snprintf(g_head[g_nhead].claim, sizeof g_head[g_nhead].claim, "%s", claim);
    g_head[g_nhead].paper = paper;
    g_head[g_nhead].ours = ours;
    g_nhead++;
}

/* Writes the headline rows as a JSON array (null for a figure not run). */
static void write_json(const char *path)
{
    FILE *fp = fopen(path, "w");
    if (!fp) {
        fprintf(stderr, "bench-exegpt: cannot write %s\n", path);
        exit(1);
    }
    fprintf(fp, "[\n");
    for (int i = 0; i < g_nhead; i++) {
        fprintf(fp, "  {\"claim\": \"%s\", \"paper\": ", g_head[i].claim);
        if (isfinite(g_head[i].paper)) fprintf(fp, "%.6g, \"ours\": ", g_head[i].paper);
        else fprintf(fp, "null, \"ours\": ");
        if (isfinite(g_head[i].ours)) fprintf(fp, "%.6g}", g_head[i].ours);
        else fprintf(fp, "null}");
        fprintf(fp, "%s\n", i + 1 < g_nhead ? "," : "");
    }
    fprintf(fp, "]\n");
    if (fclose(fp)) {
        fprintf(stderr, "bench-exegpt: cannot write %s\n", path);
        exit(1);
    }
}

static int plan_best(ctx *k, unsigned mask, double bound, hs_exegpt_result *r)
{
    double t0 = now_s(), dt;
    int found = plan_best_mode(k, mask, bound, HS_EXEGPT_BD_STEADY, r);
    dt = now_s() - t0;
    g_plan_sum += dt;
    g_plan_n++;
    if (dt > g_plan_max) g_plan_max = dt;
    if (dt > 1) printf("  (slow search: %.2f s, %s on %s, policies %s, bound %g)\n", dt, k->m.name, k->c->name,
                       mask == 1u ? "RRA" : "WAA", bound);
    return found;
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
        printf("  [fit %d, bd paper %.1f steady %.1f, mem %.1f/%.1f GiB, t_enc %.3f t_dec %.4f cycle %.3f xfer %.4f pp %d/%d]\n",
               es.fit, ep.bd, es.bd, es.mem_peak / 1073741824.0, es.mem_cap / 1073741824.0, es.t_enc, es.t_dec,
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
        /* encoder-decoder: T5-11B on one 8xA40 node (the paper's T5 setup) */
        {"t5-11b", "exegpt-a40x8", "S", INFINITY},
        {"t5-11b", "exegpt-a40x8", "S", 3.0},
        {"t5-11b", "exegpt-a40x8", "T", INFINITY},
        {"t5-11b", "exegpt-a40x8", "C1", INFINITY},
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
        /* WAA-C on its own: the compute split the paper's estimate prices. */
        if (plan_best(&k, 1u << HS_EXEGPT_WAA_C, cases[i].bound, &r) && r.cfg.policy == HS_EXEGPT_WAA_C)
            des_row(&k, &r.cfg, 5000, NULL, NULL);
        ctx_close(&k);
    }
}

/* ---- FasterTransformer baseline and the paper's comparison --------------------- */

typedef struct ft_point {
    int batch;
    double thr;      /* queries/s on the task's lengths */
    double lat;      /* s, a batch generating the longest output (FT's bound) */
} ft_point;

static int ft_sim(ctx *k, const char *policy, int b, int me, int md, const hs_workload_cfg *w0, int64_t n,
                  double *thr, double *lat);

/* FT's layout: TP inside a node (dividing the heads), a stage per node. */
static int ft_tp(const ctx *k)
{
    int node = 0, tp;
    for (int g = 0; g < k->c->n_gpus; g++) node += k->c->gpu_node[g] == 0;
    tp = node;
    while (tp > 1 && (k->m.heads % tp)) tp /= 2;
    return tp;
}

static int ft_stages(const ctx *k) { return k->c->n_gpus / ft_tp(k); }

/* FT at batch b: throughput on the task's lengths, and the time of one
 * batch generating the longest output with prompts padded to the longest
 * prompt (FT does not terminate early, so that is its latency).  Returns
 * 0 when b does not fit. */
static int ft_run(ctx *k, int b, ft_point *out)
{
    hs_workload_cfg w = k->wc;
    double dummy;
    out->batch = b;
    if (!ft_sim(k, "static", b, 0, 0, &k->wc, 6 * b > 300 ? 6 * b : 300, &out->thr, &dummy)) return 0;
    snprintf(w.prompt.kind, sizeof w.prompt.kind, "fixed");
    snprintf(w.output.kind, sizeof w.output.kind, "fixed");
    w.prompt.mean = (double)k->din.max;
    w.output.mean = (double)k->dout.max;
    /* (b + 1) per lane: a lane's first batch starts with the only query
     * that has arrived when it wakes, its second is full; *lat is the
     * longest batch.  b is per lane (a pipeline stage's micro-batch). */
    if (!ft_sim(k, "static", b, 0, 0, &w, (int64_t)ft_stages(k) * (b + 1), &dummy, &out->lat)) return 0;
    return 1;
}

/* One run of a baseline on one TP x PP replica over all GPUs (TP inside a
 * node), n queries all queued.  static: batches of b, *thr over the whole
 * run, *lat the longest batch.  vllm: at most b sequences per lane,
 * *thr over the middle 60% of completions, *lat the p99-length query's
 * latency from admission (ExeGPT's measure). */
static int ft_sim(ctx *k, const char *policy, int b, int me, int md, const hs_workload_cfg *w0, int64_t n,
                  double *thr, double *lat)
{
    hs_err err = {0};
    hs_engine_cfg ec;
    hs_plan_req pr;
    hs_deploy d;
    hs_exegpt_play pl;
    int is_dsi = !strcmp(policy, "dsi"), is_static = is_dsi || !strcmp(policy, "static");
    int32_t mml = (int32_t)(k->din.max + k->dout.max);
    int tp = ft_tp(k), ok = 0, max_tokens;
    int64_t blocks;
    hs_popts po[HS_MAX_POLICIES];
    char bs[32];
    hs_engine_cfg_defaults(&ec);
    hs_policies_opts_defaults(po);
    snprintf(bs, sizeof bs, "%d", b);
    if (hs_policies_opt_set(po, is_dsi ? "dsi_batch" : "static_batch", bs, "bench", &err)) die(&err);
    if (is_dsi) {
        snprintf(bs, sizeof bs, "%d", me);
        if (hs_policies_opt_set(po, "dsi_prompt_mb", bs, "bench", &err)) die(&err);
        snprintf(bs, sizeof bs, "%d", md);
        if (hs_policies_opt_set(po, "dsi_gen_mb", bs, "bench", &err)) die(&err);
    }
    ec.max_num_seqs = b;
    ec.max_model_len = mml;
    ec.watermark = 0;
    max_tokens = hs_engine_pass_tokens(&ec, hs_policy_find(policy), hs_policy_opts_of(po, hs_policy_find(policy)), mml);
    memset(&pr, 0, sizeof pr);
    memset(&d, 0, sizeof d);
    pr.model = &k->m;
    pr.cluster = k->c;
    pr.engine = &ec;
    pr.tp = tp;
    pr.pp = k->c->n_gpus / tp;
    pr.bits = 16;
    pr.max_replicas = 1;
    pr.max_tokens = max_tokens;
    pr.max_model_len = mml;
    if (max_tokens < 0 || hs_planner_find("uniform")->plan(&pr, &d, &err)) goto out;
    /* A static slot holds a whole context: b must fit in a lane's KV. */
    blocks = hs_layout_kv_blocks(&k->m, k->c, &d.r[0].layout, &ec, max_tokens, &err);
    if (blocks < 0 ||
        (is_static && blocks / (is_dsi ? 1 : d.r[0].layout.pp) < (int64_t)b * ((mml + ec.block_size - 1) / ec.block_size)))
        goto out;
    if (hs_exegpt_play_run(&k->m, k->c, &d, policy, &ec, hs_policy_opts_of(po, hs_policy_find(policy)), w0, n, &k->pc, &pl, &err)) die(&err);
    if (!is_static) {
        int64_t cnt;
        ok = !hs_exegpt_measure(&pl, hs_exegpt_dist_quantile(&k->dout, 0.99), thr, lat, &cnt) && *thr > 0 &&
             cnt > 0;
    } else {
        /* Batches: queries sharing a start; a batch lasts until its longest. */
        double lat_max = 0;
        int64_t nb = 0;
        for (int64_t i = 0; i < pl.n;) {
            int64_t j = i;
            hs_ns end = 0;
            for (int64_t q = 0; q < pl.n; q++)
                if (pl.rec[q].first_sched == pl.rec[i].first_sched && pl.rec[q].finish > end) end = pl.rec[q].finish;
            while (j < pl.n && pl.rec[j].first_sched == pl.rec[i].first_sched) j++;
            if ((end - pl.rec[i].first_sched) * 1e-9 > lat_max) lat_max = (end - pl.rec[i].first_sched) * 1e-9;
            nb++;
            i = j;
        }
        *thr = pl.n / pl.sim_s;
        *lat = nb ? lat_max : NAN;
        ok = 1;
    }
    hs_exegpt_play_free(&pl);
out:
    hs_deploy_free(&d);
    return ok;
}

/* Enough queries for a steady middle: many times the decoding population
 * and the encoder batch. */
static int64_t des_queries(const hs_exegpt_result *r)
{
    double n = fmax(3000, fmax(10 * r->est.bd, 30.0 * r->cfg.be));
    return (int64_t)fmin(n, 60000);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* DeepSpeed-Inference's hybrid micro-batching: FT's layout (TP inside a
 * node, a stage per node), batch sizes as FT's, prompt and decode micro-
 * batch counts in powers of two up to twice the stages, the decode count at
 * most the prompt one.  The analytic form (hs_exegpt_dsi) ranks the
 * configurations (hundreds per bound); the best whose batch meets the
 * bound is then simulated with the dsi policy (throughput on the task's
 * lengths, latency of a batch of the longest), the baseline reported;
 * *ana gets the analytic throughput beside it. */
static double dsi_best(ctx *k, double bound, char *lab, size_t cap, double *ana)
{
    hs_err err = {0};
    int tp = ft_tp(k), stages = ft_stages(k), bb = 0, bme = 0, bmd = 0;
    double best = 0, thr = 0, lat = 0, dummy;
    hs_workload_cfg w = k->wc;
    snprintf(lab, cap, "NS");
    *ana = 0;
    for (int b = 4; b <= 512; b += b < 64 ? 4 : 32)
        for (int me = 1; me <= 2 * stages && me <= b; me *= 2)
            for (int md = 1; md <= me; md *= 2) {
                double t, l;
                int fits;
                if (hs_exegpt_dsi(k->x[1], tp, stages, b, me, md, &t, &l, &fits, &err)) die(&err);
                if (fits && l <= bound && t > best) {
                    best = t;
                    bb = b, bme = me, bmd = md;
                }
            }
    if (!bb) return 0;
    *ana = best;
    snprintf(lab, cap, "b%d m%d/%d", bb, bme, bmd);
    if (!ft_sim(k, "dsi", bb, bme, bmd, &k->wc, 6 * bb > 300 ? 6 * bb : 300, &thr, &dummy)) return 0;
    snprintf(w.prompt.kind, sizeof w.prompt.kind, "fixed");
    snprintf(w.output.kind, sizeof w.output.kind, "fixed");
    w.prompt.mean = (double)k->din.max;
    w.output.mean = (double)k->dout.max;
    if (!ft_sim(k, "dsi", bb, bme, bmd, &w, bb + 1, &dummy, &lat)) return 0;
    /* the bound holds for the simulated batch too (else no schedule) */
    return lat <= bound * 1.0001 ? thr : 0;
}

/* One (model, cluster, task): FT over batch sizes (multiples of 4), the
 * bounds at FT's 10/30/70% latencies and infinity, and per bound the
 * best FT, RRA and WAA throughput (ExeGPT's by the planner, checked by a
 * DES run).  Accumulates ExeGPT/FT ratios. */
/* FT over the paper's batch grid (Sec. 7.1: "minimum to maximum batch sizes
 * in multiples of four"; 4, 8, ... to 512) until a batch does not fit;
 * returns the points.  The bounds are percentiles over them, so a grid
 * denser at small batches would tighten every bound. */
static int ft_grid(ctx *k, ft_point *ft, int cap)
{
    int nft = 0;
    for (int b = 4; b <= 512 && nft < cap; b += 4) {
        if (!ft_run(k, b, &ft[nft])) break;
        nft++;
    }
    return nft;
}

/* FT's best point whose batch latency meets bound (NULL: none). */
static const ft_point *ft_best(const ft_point *ft, int nft, double bound)
{
    const ft_point *best = NULL;
    for (int j = 0; j < nft; j++)
        if (ft[j].lat <= bound && (!best || ft[j].thr > best->thr)) best = &ft[j];
    return best;
}

/* FT's latency bound at percentile q (0.1, 0.3, 0.7) over the sorted
 * batch latencies lats[0..n-1], the paper's batches 4, 8, ... (Sec. 7.1). */
static double ft_bound(const double *lats, int n, double q)
{
    return lats[(int)floor(q * (n - 1) + 0.5)];
}

/* The bounds the paper states for a case, 0 where it states none: Table 6
 * (OPT-13B, task S) gives all three, Sec. 7.3 the tightest for GPT-3 39B,
 * task S. */
static void paper_bounds(const char *model, const char *task, double out[3])
{
    out[0] = out[1] = out[2] = 0;
    if (!strcmp(task, "S") && !strcmp(model, "opt-13b")) out[0] = 3.1, out[1] = 5.9, out[2] = 11.5;
    if (!strcmp(task, "S") && !strcmp(model, "gpt-3-39b")) out[0] = 9.8;
}

/* Our FT's bounds beside the paper's, and the largest batch (a multiple of
 * 4, FT's batches 4..B) whose bounds come closest to the paper's (least
 * squares in log): the paper's bounds are percentiles over its FT's batch
 * range, so they measure how far that range reached. */
static void bounds_vs_paper(const char *model, const char *task, const ft_point *ft, int nft, const double ours[3])
{
    double pb[3], best = INFINITY, at[3] = {0, 0, 0};
    int bmax = 0, blo = 0, nb = 0;
    char claim[128];
    static const double q[3] = {0.1, 0.3, 0.7};
    paper_bounds(model, task, pb);
    if (pb[0] <= 0 || nft < 2) return;
    for (int i = 0; i < 3; i++) nb += pb[i] > 0;
    for (int m = 2; m <= nft; m++) {
        double lats[128], e = 0;
        for (int j = 0; j < m; j++) lats[j] = ft[j].lat;
        qsort(lats, (size_t)m, sizeof *lats, cmp_dbl);
        for (int i = 0; i < 3; i++)
            if (pb[i] > 0) e += pow(log(ft_bound(lats, m, q[i]) / pb[i]), 2);
        /* ties (one bound matches a range of grids): keep the range */
        if (e < best - 1e-12) {
            best = e;
            blo = ft[m - 1].batch;
        }
        if (e <= best + 1e-12) {
            bmax = ft[m - 1].batch;
            for (int i = 0; i < 3; i++) at[i] = ft_bound(lats, m, q[i]);
        }
    }
    printf("  FT's bounds, ours (batches 4..%d) / the paper's:", ft[nft - 1].batch);
    for (int i = 0; i < 3; i++)
        if (pb[i] > 0) printf(" %.2f / %.1f s (%+.0f%%)", ours[i], pb[i], 100 * (ours[i] / pb[i] - 1));
    if (blo < bmax) printf("; closest with batches 4..B, B %d to %d:", blo, bmax);
    else printf("; closest with batches 4..%d:", bmax);
    for (int i = 0; i < 3; i++)
        if (pb[i] > 0) printf(" %.2f", at[i]);
    printf(" s\n");
    for (int i = 0; i < 3; i++)
        if (pb[i] > 0) {
            snprintf(claim, sizeof claim, "FT latency bound, %s task %s, %d%% of FT's batch latencies (s)", model, task,
                     (int)(100 * q[i] + 0.5));
            head_add(claim, pb[i], ours[i]);
        }
    if (nb < 2) return;   /* one bound fixes no batch range */
    snprintf(claim, sizeof claim, "FT's largest batch whose bounds come closest to the paper's, %s task %s", model,
             task);
    head_add(claim, NAN, bmax);
}

static double g_large_inf_sum, g_large_min = INFINITY, g_large_max;   /* large models' ExeGPT / FT */
static int g_large_inf_n;
/* FT's throughput with no bound over its throughput at the tightest bound:
 * how steep FT's curve is (the paper's worked example implies 5.4x). */
static double g_ftspan_sum, g_ftspan_min = INFINITY, g_ftspan_max;
static int g_ftspan_n;

static void paper_case(const char *model, const char *cluster, const char *task, int large,
                       double *ratio_sum, int *ratio_n)
{
    ctx k;
    ft_point ft[128], vl[64];
    double lats[128], bounds[4];
    int nft, nv;
    ctx_open(&k, model, cluster, task);
    nft = ft_grid(&k, ft, 128);
    for (int j = 0; j < nft; j++) lats[j] = ft[j].lat;
    printf("%s on %s, task %s: FT batches 4..%d per stage x %d stages (%d points)\n", model, cluster, task,
           nft ? ft[nft - 1].batch : 0, ft_stages(&k), nft);
    if (nft < 1) {
        printf("  FT fits no batch: case skipped\n");
        ctx_close(&k);
        return;
    }
    {
        /* The analytic DSI with one micro-batch per stage in both phases is
         * FT's schedule: its batch latency (prompts all of the longest
         * length) must agree with FT's discrete-event runs; throughput
         * differs where FT's prompt GEMMs skip the padding DSI computes. */
        double ethr = 0, elat = 0;
        int tp = ft_tp(&k), st = ft_stages(&k);
        for (int j = 0; j < nft; j++) {
            hs_err err = {0};
            int fits;
            double dthr, dlat;
            if (hs_exegpt_dsi(k.x[1], tp, st, st * ft[j].batch, st, st, &dthr, &dlat, &fits, &err)) die(&err);
            ethr = fmax(ethr, fabs(dthr - ft[j].thr) / ft[j].thr);
            elat = fmax(elat, fabs(dlat - ft[j].lat) / ft[j].lat);
        }
        printf("  DSI analytic with FT's micro-batches vs FT's DES runs: batch latency within %.1f%% (longest prompts), "
               "throughput %.1f%% (FT's prompt GEMMs on each prompt's own tokens, DSI's padded; FT's stages run "
               "independent batches, DSI one global batch)\n", 100 * elat, 100 * ethr);
    }
    /* vLLM (ORCA-style iteration-level scheduling) at max_num_seqs 4, 8, ... */
    nv = 0;
    for (int b = 4; b <= 512 && nv < 64; b *= 2) {
        if (!ft_sim(&k, "vllm", b, 0, 0, &k.wc, 3000, &vl[nv].thr, &vl[nv].lat)) continue;
        vl[nv].batch = b;
        nv++;
    }
    qsort(lats, (size_t)nft, sizeof *lats, cmp_dbl);
    bounds[0] = ft_bound(lats, nft, 0.1);
    bounds[1] = ft_bound(lats, nft, 0.3);
    bounds[2] = ft_bound(lats, nft, 0.7);
    bounds[3] = INFINITY;
    bounds_vs_paper(model, task, ft, nft, bounds);
    {
        const ft_point *lo = ft_best(ft, nft, bounds[0]), *hi = ft_best(ft, nft, INFINITY);
        if (lo && hi && lo->thr > 0) {
            double span = hi->thr / lo->thr;
            printf("  FT with no bound / FT at L_B %.2f s: %.2fx throughput\n", bounds[0], span);
            g_ftspan_sum += span;
            g_ftspan_n++;
            g_ftspan_min = fmin(g_ftspan_min, span);
            g_ftspan_max = fmax(g_ftspan_max, span);
        }
    }
    printf("  %-7s | %-8s %-5s %-6s %-7s %-7s %-7s %-13s | %-40s %7s %7s | %-40s %7s %7s | %-6s %-6s\n", "L_B s",
           "FT q/s", "b", "lat s", "vLLM", "DSI sim", "(anal.)", "(b m_E/m_D)", "RRA schedule", "est", "DES", "WAA schedule", "est", "DES", "best",
           "x FT");
    for (int i = 0; i < 4; i++) {
        double thr[2] = {0, 0};
        const ft_point *fb = ft_best(ft, nft, bounds[i]);
        double best_ft = fb ? fb->thr : 0, lat_ft = fb ? fb->lat : NAN;
        int bft = fb ? fb->batch : 0;
        char lab[2][128];
        double best_vl = 0;
        char dlab[32];
        double best_dsi, ana_dsi;
        for (int j = 0; j < nv; j++)
            if (vl[j].lat <= bounds[i] && vl[j].thr > best_vl) best_vl = vl[j].thr;
        best_dsi = dsi_best(&k, bounds[i], dlab, sizeof dlab, &ana_dsi);
        for (int p = 0; p < 2; p++) {
            hs_exegpt_result r;
            snprintf(lab[p], sizeof lab[p], "NS");
            if ((p == 1 && large) || !plan_best(&k, p == 0 ? RRA_MASK : WAA_MASK, bounds[i], &r)) continue;
            hs_exegpt_cfg_str(&r.cfg, &r.est, lab[p], sizeof lab[p]);
            {
                hs_exegpt_des ds;
                hs_err err = {0};
                if (hs_exegpt_des_run(k.x[1], &r.cfg, &k.wc, des_queries(&r), r.est.bd, 0.1, &k.pc, &ds, &err))
                    die(&err);
                thr[p] = ds.thr;
                snprintf(lab[p] + strlen(lab[p]), sizeof lab[p] - strlen(lab[p]), "|%.2f", r.est.thr);
            }
        }
        {
            int w = thr[1] > thr[0];
            double best = thr[w];
            char *bar0 = strchr(lab[0], '|'), *bar1 = strchr(lab[1], '|');
            double e0 = bar0 ? atof(bar0 + 1) : NAN, e1 = bar1 ? atof(bar1 + 1) : NAN;
            if (bar0) *bar0 = 0;
            if (bar1) *bar1 = 0;
            printf("  %-7.2f | %-8.2f %-5d %-6.2f %-7.2f %-7.2f %-7.2f %-13s | %-40s %7.2f %7.2f | %-40s %7.2f %7.2f | %-6s %5.2fx\n",
                   bounds[i], best_ft, bft, lat_ft, best_vl, best_dsi, ana_dsi, dlab, lab[0], e0, thr[0], lab[1], e1, thr[1],
                   best > 0 ? (w ? "WAA" : "RRA") : "-",
                   best_ft > 0 ? best / best_ft : NAN);
            if (best_ft > 0 && best > 0) {
                *ratio_sum += best / best_ft;
                (*ratio_n)++;
                if (large) {
                    g_large_min = fmin(g_large_min, best / best_ft);
                    g_large_max = fmax(g_large_max, best / best_ft);
                    if (isinf(bounds[i])) {
                        g_large_inf_sum += best / best_ft;
                        g_large_inf_n++;
                    }
                }
            }
            if (best_dsi > 0 && best > 0) {
                g_dsi_sum += best / best_dsi;
                g_dsi_n++;
            }
            if (best_dsi > 0 && ana_dsi > 0) g_dsi_dev = fmax(g_dsi_dev, fabs(best_dsi - ana_dsi) / ana_dsi);
            if (thr[0] > 0 && thr[1] > 0) g_wins[strcmp(task, "T") == 0 || strcmp(task, "G") == 0][w]++;
        }
    }
    ctx_close(&k);
}

/* The paper's worked example (Sec. 7.3): GPT-3 39B, task S, L_B 9.8 s, where
 * ExeGPT (WAA) gains 5.4x over FT, meets the bound at 7.8 s, and matches
 * the throughput FT reaches with no bound, at FT's latency of 47 s.  The
 * only FT figures the paper gives in its text: they show the shape of its
 * FT curve, which the plots give only as bars. */
static void paper_example(const char *cluster)
{
    const double lb = 9.8;
    ctx k;
    ft_point ft[128];
    const ft_point *fb, *fi;
    double ex = 0, ex_lat = NAN;
    char lab[128] = "NS";
    int nft;
    ctx_open(&k, "gpt-3-39b", cluster ? cluster : "exegpt-a40x16", "S");
    nft = ft_grid(&k, ft, 128);
    fb = ft_best(ft, nft, lb);
    fi = ft_best(ft, nft, INFINITY);
    if (getenv("HS_BENCH_DEBUG"))
        for (int j = 0; j < nft; j++) printf("  [FT batch %d: %.2f q/s, %.2f s]\n", ft[j].batch, ft[j].thr, ft[j].lat);
    for (int p = 0; p < 2; p++) {
        hs_exegpt_result r;
        hs_exegpt_des ds;
        hs_err err = {0};
        if (!plan_best(&k, p == 0 ? RRA_MASK : WAA_MASK, lb, &r)) continue;
        if (hs_exegpt_des_run(k.x[1], &r.cfg, &k.wc, des_queries(&r), r.est.bd, 0.1, &k.pc, &ds, &err)) die(&err);
        if (ds.thr > ex) {
            ex = ds.thr;
            ex_lat = ds.lat_b;
            hs_exegpt_cfg_str(&r.cfg, &r.est, lab, sizeof lab);
        }
    }
    printf("== The paper's worked example (Sec. 7.3): GPT-3 39B on %s, task S, L_B 9.8 s ==\n", k.c->name);
    if (!fb || !fi || ex <= 0 || !(fb->thr > 0)) {
        printf("  (not run: FT or ExeGPT has no schedule under 9.8 s)\n");
        ex = NAN;
        fb = fi = NULL;
    }
    if (fb && fi) {
        printf("  FT at L_B 9.8 s: batch %d, %.2f q/s, %.2f s | FT with no bound: batch %d, %.2f q/s, %.2f s (paper 47 s)\n",
               fb->batch, fb->thr, fb->lat, fi->batch, fi->thr, fi->lat);
        printf("  ExeGPT at L_B 9.8 s: %s, %.2f q/s (DES), p99-length query %.2f s (paper 7.8 s)\n", lab, ex, ex_lat);
        printf("  ExeGPT / FT at 9.8 s %.2fx (paper 5.4x); ExeGPT at 9.8 s / FT with no bound %.2fx (paper: equal, 1x);\n"
               "  FT with no bound / FT at 9.8 s %.2fx (paper: 5.4x, implied); FT's latency / ExeGPT's %.2fx (paper 6x)\n",
               ex / fb->thr, ex / fi->thr, fi->thr / fb->thr, fi->lat / ex_lat);
    }
    /* a figure not run is written as null */
    head_add("Sec. 7.3 example (GPT-3 39B, task S, L_B 9.8 s): ExeGPT / FT throughput", 5.4, fb ? ex / fb->thr : NAN);
    head_add("Sec. 7.3 example: ExeGPT's p99-length latency, s", 7.8, fb ? ex_lat : NAN);
    head_add("Sec. 7.3 example: FT's batch latency with no bound, s", 47, fi ? fi->lat : NAN);
    head_add("Sec. 7.3 example: ExeGPT at 9.8 s / FT with no bound, throughput", 1.0, fi ? ex / fi->thr : NAN);
    head_add("Sec. 7.3 example: FT with no bound / FT at 9.8 s, throughput (implied)", 5.4,
             fb && fi ? fi->thr / fb->thr : NAN);
    ctx_close(&k);
}

static void bench_paper(void)
{
    static const struct { const char *model, *cluster; int large; } models[] = {
        {"t5-11b", "exegpt-a40x8", 0},
        {"opt-13b", "exegpt-a40x4", 0},
        {"gpt-3-39b", "exegpt-a40x16", 0},
        {"gpt-3-101b", "exegpt-a100x16", 1},
        {"gpt-3-175b", "exegpt-a100x16", 1},
        {"gpt-3-341b", "exegpt-a100x16", 1},
    };
    static const char *const small_tasks[] = {"S", "T", "C1"}, *const large_tasks[] = {"G", "C1", "C2"};
    double sum[2] = {0, 0};
    int cnt[2] = {0, 0};
    printf("== ExeGPT vs FasterTransformer (paper Fig. 6 and 8): throughput in queries/s per latency bound\n"
           "   (bounds: FT's bottom 10/30/70%% latencies over batch sizes 4, 8, ..., and infinity;\n"
           "   ExeGPT's bound holds for the p99-length query, FT's for a batch generating the longest output;\n"
           "   RRA/WAA: planner's best (steady-state estimator), estimated and measured by a DES run;\n"
           "   vLLM: continuous batching at the best max_num_seqs meeting the bound (p99-length query from admission);\n"
           "   DSI: DeepSpeed-Inference hybrid micro-batching (policy dsi: one static batch, m_E prompt / m_D decode\n"
           "   micro-batches in flight), simulated, chosen by and printed beside the analytic form;\n"
           "   large models RRA only, as in the paper; NS: no schedule meets the bound) ==\n");
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        for (int t = 0; t < 3; t++) {
            double t0 = now_s();
            paper_case(models[i].model, models[i].cluster,
                       models[i].large ? large_tasks[t] : small_tasks[t], models[i].large, &sum[models[i].large],
                       &cnt[models[i].large]);
            printf("  (case time %.1f s)\n", now_s() - t0);
        }
    printf("ExeGPT / FT average: small/mid models %.2fx over %d points (paper 2.0x), large models %.2fx over %d "
           "points (paper 3.2x)\n", cnt[0] ? sum[0] / cnt[0] : NAN, cnt[0], cnt[1] ? sum[1] / cnt[1] : NAN, cnt[1]);
    printf("Large models: ExeGPT / FT %.2fx-%.2fx (paper 1.1-15.2x), with no bound %.2fx on average over %d points "
           "(paper 2.2x)\n", cnt[1] ? g_large_min : NAN, cnt[1] ? g_large_max : NAN,
           g_large_inf_n ? g_large_inf_sum / g_large_inf_n : NAN, g_large_inf_n);
    printf("FT with no bound / FT at the tightest bound: %.2fx on average, %.2fx-%.2fx over %d cases "
           "(the paper's worked example implies 5.4x at its 9.8 s bound)\n",
           g_ftspan_n ? g_ftspan_sum / g_ftspan_n : NAN, g_ftspan_n ? g_ftspan_min : NAN,
           g_ftspan_n ? g_ftspan_max : NAN, g_ftspan_n);
    printf("ExeGPT / DSI (simulated) average: %.2fx over %d points; simulated DSI within %.1f%% of the analytic\n",
           g_dsi_n ? g_dsi_sum / g_dsi_n : NAN, g_dsi_n, 100 * g_dsi_dev);
    head_add("ExeGPT / FasterTransformer throughput, small and mid models (average over bounds)", 2.0,
             cnt[0] ? sum[0] / cnt[0] : NAN);
    head_add("ExeGPT / FasterTransformer throughput, large models, RRA (average over bounds)", 3.2,
             cnt[1] ? sum[1] / cnt[1] : NAN);
    head_add("ExeGPT / FasterTransformer throughput, average over all scenarios", 2.9,
             cnt[0] + cnt[1] ? (sum[0] + sum[1]) / (cnt[0] + cnt[1]) : NAN);
    head_add("ExeGPT / FasterTransformer throughput, large models, no latency bound (average)", 2.2,
             g_large_inf_n ? g_large_inf_sum / g_large_inf_n : NAN);
    head_add("ExeGPT / FasterTransformer throughput, large models, largest gain", 15.2,
             g_large_max > 0 ? g_large_max : NAN);
    paper_example(NULL);
    printf("Where both run: short-output tasks (S, C1, C2) WAA best %d / RRA best %d (paper: WAA); long-output tasks "
           "(T, G) WAA best %d / RRA best %d (paper: RRA)\n", g_wins[0][1], g_wins[0][0], g_wins[1][1], g_wins[1][0]);
    printf("Scheduler (branch and bound per policy family and bound): %d searches, mean %.3f s, max %.3f s "
           "(paper: 3 s - 2 min RRA, 1 - 5 min WAA; target < 1 s)\n", g_plan_n, g_plan_n ? g_plan_sum / g_plan_n : 0,
           g_plan_max);
}

static void bench_table6(void)
{
    hs_perf_cfg pc;
    hs_err err = {0};
    bench_perf(&pc);
    printf("== Table 6 case study (paper's choices next to ours), B_D by the paper's formula, then the steady state ==\n");
    hs_exegpt_result r[4];
    static const double paper[4] = {22.41, 23.76, 25.23, 26.15}, lb[4] = {3.1, 5.9, 11.5, INFINITY};
    if (hs_exegpt_table6(stdout, &pc, HS_EXEGPT_BD_PAPER, NULL, NULL, &err) ||
        hs_exegpt_table6(stdout, &pc, HS_EXEGPT_BD_STEADY, r, NULL, &err))
        die(&err);
    for (int i = 0; i < 4; i++) {
        char c[96];
        snprintf(c, sizeof c, "Table 6 OPT-13B task S, L_B %g s: planned throughput, q/s", lb[i]);
        head_add(c, paper[i], r[i].found ? r[i].est.thr : NAN);
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
    const char *json = NULL, *what = "all";
    /* --json F anywhere: the headline rows as JSON */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--json")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bench-exegpt: --json needs a file\n");
                return 2;
            }
            json = argv[i + 1];
            memmove(&argv[i], &argv[i + 2], (size_t)(argc - i - 2) * sizeof *argv);
            argc -= 2;
            i--;
        }
    if (argc > 1) what = argv[1];
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
    if (all || !strcmp(what, "table6")) bench_table6();
    if (all || !strcmp(what, "paper")) bench_paper();
    if (!strcmp(what, "example")) paper_example(argc > 2 ? argv[2] : NULL);
    if (json) write_json(json);
    return 0;
}
