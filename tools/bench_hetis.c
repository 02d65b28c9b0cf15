/* bench_hetis.c - the Hetis benchmark (tools/bench-hetis builds and runs
 * it; a benchmark, not a test).
 *
 * Cluster hetis-mixed12 (4x A100-80G; 2+2 RTX 3090 in two hosts; 4x
 * P100-12G; PCIe inside hosts, 100 Gb/s between).  Models Llama-2-13B,
 * OPT-30B, Llama-2-70B; length distributions like ShareGPT, HumanEval and
 * LongBench (synthetic, see `datasets` below; the paper's traces are not
 * used); Poisson arrivals.  Systems, each planned on the same cluster:
 *   Hetis      planner hetis + policy hetis (head offload to attention workers)
 *   Splitwise  planner hetis-splitwise + policy vllm (prefill/decode split, KV moved)
 *   HexGen     planner hetis-hexgen + policy vllm (asymmetric TP/PP, one stage per type)
 *   HexGen-GA  planner hexgen + policy vllm (HexGen's genetic search over asymmetric
 *              TP/PP replicas, sim/plan/hg2_baselines.c)
 * Prints: Table 1's per-device times from the latency model next to the
 * paper's; per model and dataset the available KV blocks (16 tokens), the
 * sustainable rate (highest Poisson rate with P95 TTFT <= 5 s, P95 TPOT
 * <= 0.5 s and nothing dropped over 60 s of arrivals, see sustains()), P95 TTFT / TPOT at the
 * paper's rates (SG 1.5, HE 6, LB 0.8 req/s), and the dispatcher's wall
 * time per arrival against the mean decode iteration. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hw/hw.h"
#include "llm/model.h"
#include "perf/perf.h"
#include "plan/plan.h"
#include "policy/policy.h"
#include "serve/deploy.h"
#include "serve/plugin.h"
#include "policy/hetis/hetis.h"
#include "workload/workload.h"

typedef struct dataset {
    const char *name;
    double paper_rate;
    const char *p_kind, *p_mean, *p_std, *p_min, *p_max;
    const char *o_kind, *o_mean, *o_std, *o_min, *o_max;
} dataset;

/* Length distributions (tokens).  ShareGPT: chat, medium prompts and
 * answers; HumanEval: short prompts, the most decode per prompt; LongBench:
 * long documents to summarise, short outputs (clipped to the context). */
static const dataset datasets[] = {
    {"SG", 1.5, "lognormal", "300", "350", "4", "3000", "lognormal", "250", "250", "1", "1500"},
    {"HE", 6.0, "normal", "160", "60", "40", "500", "lognormal", "300", "150", "16", "1024"},
    {"LB", 0.8, "lognormal", "2600", "700", "600", "3500", "lognormal", "150", "80", "16", "512"},
};

typedef struct sys_def {
    const char *name, *planner, *policy;
} sys_def;

static const sys_def systems[] = {
    {"Hetis", "hetis", "hetis"},
    {"Splitwise", "hetis-splitwise", "vllm"},
    {"HexGen", "hetis-hexgen", "vllm"},
    {"HexGen-GA", "hexgen", "vllm"},
};
#define NSYS ((int)(sizeof systems / sizeof systems[0]))

typedef struct collect {
    double *ttft, *tpot;
    int64_t n, cap, dropped;
} collect;

static int on_req(void *ctx, const hs_req_record *r)
{
    collect *c = ctx;
    if (r->dropped) {
        c->dropped++;
        return 0;
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 1024;
        c->ttft = realloc(c->ttft, sizeof *c->ttft * (size_t)c->cap);
        c->tpot = realloc(c->tpot, sizeof *c->tpot * (size_t)c->cap);
        if (!c->ttft || !c->tpot) return HS_ENOMEM;
    }
    c->ttft[c->n] = hs_ns_to_s(r->first_token - r->arrival);
    c->tpot[c->n] = r->output > 1 ? hs_ns_to_s(r->finish - r->first_token) / (r->output - 1) : NAN;
    c->n++;
    return 0;
}

static void on_itl(void *ctx, hs_ns iv, int64_t n)
{
    (void)ctx, (void)iv, (void)n;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double p95(double *v, int64_t n)
{
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(v[i])) v[m++] = v[i];
    if (!m) return NAN;
    qsort(v, (size_t)m, sizeof *v, cmp_d);
    return v[(int64_t)ceil(0.95 * m) - 1];
}

typedef struct result {
    double ttft95, tpot95, iter_ms;
    int64_t dropped, done, kv_blocks;
    hs_hetis_stats st;
} result;

typedef struct ctx {
    hs_model m;
    hs_cluster *c;
    hs_deploy d;
    const sys_def *sys;
    int32_t max_model_len;
} ctx;

static void die(const char *what, const hs_err *err)
{
    fprintf(stderr, "bench-hetis: %s: %s\n", what, err->msg);
    exit(1);
}

static void engine_cfg(const ctx *x, hs_engine_cfg *ec, int *max_tokens)
{
    hs_engine_cfg_defaults(ec);
    *max_tokens = hs_engine_pass_tokens(ec, hs_policy_find(x->sys->policy), NULL, x->max_model_len);
}

static void plan(ctx *x)
{
    hs_engine_cfg ec;
    hs_plan_req q;
    hs_err err = {0};
    int mt;
    engine_cfg(x, &ec, &mt);
    memset(&q, 0, sizeof q);
    q.model = &x->m;
    q.cluster = x->c;
    q.engine = &ec;
    q.pp = 1;
    q.bits = 16;
    q.max_tokens = mt;
    q.max_model_len = x->max_model_len;
    if (hs_planner_find(x->sys->planner)->plan(&q, &x->d, &err)) die(x->sys->planner, &err);
}

static void run_once(ctx *x, const dataset *ds, double rate, int64_t n, result *out)
{
    hs_engine_cfg ec;
    hs_perf_cfg pc;
    hs_workload_cfg wc;
    hs_replica *rp = NULL;
    hs_source *src = NULL;
    hs_engine *e = NULL;
    hs_err err = {0};
    collect col = {0};
    hs_sink sink = {&col, on_req, on_itl};
    char buf[32], pmax[16];
    int mt;
    const hs_policy_ops *pol = hs_policy_find(x->sys->policy);
    memset(out, 0, sizeof *out);
    engine_cfg(x, &ec, &mt);
    hs_perf_cfg_defaults(&pc);
    if (hs_replicas_build(&rp, &x->d, &x->m, x->c, &ec, &pc, mt, x->max_model_len, &err)) die("replicas", &err);
    if (!strcmp(x->sys->policy, "hetis")) {
        hs_hetis_cfg hc;
        hs_hetis_cfg_defaults(&hc);
        if (hs_hetis_attach(rp, x->d.n, &x->d, &x->m, x->c, &ec, &pc, &hc, 1, &err)) die("hetis", &err);
    }
    for (int32_t i = 0; i < x->d.n; i++) out->kv_blocks += rp[i].kv_blocks;
    hs_workload_defaults(&wc);
    hs_workload_set(&wc, "preset", "", NULL);
    hs_workload_set(&wc, "kind", "synthetic", NULL);
    snprintf(buf, sizeof buf, "%g", rate);
    hs_workload_set(&wc, "rate", buf, NULL);
    hs_workload_set(&wc, "prompt.kind", ds->p_kind, NULL);
    hs_workload_set(&wc, "prompt.mean", ds->p_mean, NULL);
    hs_workload_set(&wc, "prompt.std", ds->p_std, NULL);
    hs_workload_set(&wc, "prompt.min", ds->p_min, NULL);
    /* prompts stay below the context (OPT-30B has 2048 tokens) */
    snprintf(pmax, sizeof pmax, "%d", atoi(ds->p_max) < x->max_model_len - 64 ? atoi(ds->p_max) : x->max_model_len - 64);
    hs_workload_set(&wc, "prompt.max", pmax, NULL);
    if (atof(ds->p_mean) > x->max_model_len * 0.8) {
        snprintf(buf, sizeof buf, "%d", (int)(x->max_model_len * 0.75));
        hs_workload_set(&wc, "prompt.mean", buf, NULL);
    }
    hs_workload_set(&wc, "output.kind", ds->o_kind, NULL);
    hs_workload_set(&wc, "output.mean", ds->o_mean, NULL);
    hs_workload_set(&wc, "output.std", ds->o_std, NULL);
    hs_workload_set(&wc, "output.min", ds->o_min, NULL);
    hs_workload_set(&wc, "output.max", ds->o_max, NULL);
    wc.max_requests = n;
    wc.seed = 7;
    if (hs_source_open(&src, &wc, &err)) die("workload", &err);
    if (hs_engine_create(&e, &ec, pol, NULL, hs_router_find("lor"), rp, x->d.n, src, &sink, x->max_model_len, x->c,
                         &err))
        die("engine", &err);
    if (hs_engine_run(e, &err)) die("run", &err);
    out->done = col.n;
    out->dropped = col.dropped;
    out->ttft95 = p95(col.ttft, col.n);
    out->tpot95 = p95(col.tpot, col.n);
    {
        /* mean iteration of the busiest lanes: simulated time / iterations per lane */
        double lanes = 0;
        for (int32_t i = 0; i < x->d.n; i++) lanes += rp[i].n_lanes;
        out->iter_ms = e->iterations ? hs_ns_to_s(e->end_time) * 1e3 * lanes / (double)e->iterations : 0;
    }
    hs_hetis_totals(rp, x->d.n, &out->st);
    hs_engine_destroy(e);
    hs_source_close(src);
    hs_hetis_detach(rp, x->d.n);
    hs_replicas_free(rp, x->d.n);
    free(col.ttft);
    free(col.tpot);
}

/* A rate is sustained when 60 s of Poisson arrivals (at least 200
 * requests) finish with P95 TTFT <= 5 s, P95 TPOT <= 0.5 s and nothing
 * dropped: 10% overload leaves a ~6 s backlog by the end, which the P95
 * TTFT sees; the TPOT bound catches a disaggregated decode side that falls
 * behind (requests wait for decode memory after their first token). */
static int sustains(ctx *x, const dataset *ds, double rate)
{
    result r;
    int64_t n = (int64_t)(rate * 60);
    run_once(x, ds, rate, n < 200 ? 200 : n, &r);
    return r.dropped == 0 && r.ttft95 <= 5.0 && r.tpot95 <= 0.5;
}

/* Doubling from 0.25 req/s, then three bisections (12.5% resolution). */
static double sustainable(ctx *x, const dataset *ds)
{
    double lo = 0, hi = 0.25;
    while (hi < 64 && sustains(x, ds, hi)) lo = hi, hi *= 2;
    for (int i = 0; i < 3; i++) {
        double mid = (lo + hi) / 2;
        if (sustains(x, ds, mid)) lo = mid;
        else hi = mid;
    }
    return lo;
}

static void table1(void)
{
    /* Table 1 gives no model or batch; Llama-2-13B at TP 1 over all layers
     * (weights need not fit: only times), one 512-token prompt and a decode
     * step of 8 sequences at 512 tokens. */
    const char *gpus[] = {"a100-80g", "rtx-3090", "p100-12g"};
    const double paper_pre[] = {0.06, 0.147, 1.47}, paper_dec[] = {0.0097, 0.0143, 0.077};
    hs_model m;
    hs_cluster *c = NULL;
    hs_err err = {0};
    double pre[3], dec[3];
    int gid[3] = {0, 4, 8};
    if (hs_model_find(&m, "llama-2-13b", &err)) die("model", &err);
    if (hs_cluster_find(&c, "hetis-mixed12", &err)) die("cluster", &err);
    for (int i = 0; i < 3; i++) {
        hs_layout l;
        hs_perf p;
        hs_perf_cfg pc;
        hs_batch_shape b;
        memset(&l, 0, sizeof l);
        l.pp = 1;
        l.kv_bits = 16;
        l.stage[0].tp = 1;
        l.stage[0].layers = m.layers;
        l.stage[0].bits = 16;
        l.stage[0].gpus[0] = gid[i];
        hs_perf_cfg_defaults(&pc);
        memset(&p, 0, sizeof p);
        if (hs_perf_build(&p, &pc, &m, c, &l, 1024, 64, &err)) die("perf", &err);
        memset(&b, 0, sizeof b);
        b.tokens = 512;
        b.samples = 1;
        b.pre_chunks = 1;
        b.pre_self = 512.0 * 513 / 2;
        b.pre_tokens = 512;
        pre[i] = (hs_perf_stage_ns(&p, 0, &b) + hs_perf_step_ns(&p, &b)) * 1e-9;
        memset(&b, 0, sizeof b);
        b.tokens = b.samples = b.dec_seqs = 8;
        b.dec_ctx = 8 * 512;
        dec[i] = (hs_perf_stage_ns(&p, 0, &b) + hs_perf_step_ns(&p, &b)) * 1e-9;
        hs_perf_free(&p);
    }
    printf("Table 1 check (roofline latency model, Llama-2-13B TP1; prefill 512 tokens, decode 8 x 512 ctx):\n");
    printf("  %-9s %10s %10s %9s %9s | %10s %10s %9s %9s\n", "device", "prefill s", "paper s", "x A100",
           "paper x", "decode s", "paper s", "x A100", "paper x");
    for (int i = 0; i < 3; i++)
        printf("  %-9s %10.4f %10.4f %9.2f %9.2f | %10.4f %10.4f %9.2f %9.2f\n", gpus[i], pre[i], paper_pre[i],
               pre[i] / pre[0], paper_pre[i] / paper_pre[0], dec[i], paper_dec[i], dec[i] / dec[0],
               paper_dec[i] / paper_dec[0]);
    hs_cluster_destroy(c);
}

/* Fig. 14's setting (§7.3): Llama-2-13B, ShareGPT-like, one A100 primary
 * and two RTX 3090 attention workers; the share of heads on the workers
 * and each device's peak cache use as the load grows. */
static void fig14(void)
{
    ctx x;
    hs_err err = {0};
    hs_deploy_replica r;
    hs_deploy_attn a;
    const double rates[] = {0.25, 0.5, 1, 1.5, 2, 2.5};
    memset(&x, 0, sizeof x);
    if (hs_model_find(&x.m, "llama-2-13b", &err)) die("model", &err);
    if (hs_cluster_find(&x.c, "hetis-a100-3090x2", &err)) die("cluster", &err);
    x.sys = &systems[0];
    x.max_model_len = x.m.max_seq_len;
    snprintf(x.d.model, sizeof x.d.model, "llama-2-13b");
    snprintf(x.d.cluster, sizeof x.d.cluster, "hetis-a100-3090x2");
    memset(&r, 0, sizeof r);
    snprintf(r.role, sizeof r.role, "colocated");
    r.weight = 1;
    r.layout.pp = 1;
    r.layout.kv_bits = 16;
    r.layout.stage[0].tp = 1;
    r.layout.stage[0].layers = x.m.layers;
    r.layout.stage[0].bits = 16;
    r.layout.stage[0].gpus[0] = 0;
    if (hs_deploy_add(&x.d, &r, &err)) die("deploy", &err);
    for (int g = 1; g <= 2; g++) {
        a.replica = 0, a.stage = 0, a.gpu = g;
        if (hs_deploy_add_attn(&x.d, &a, &err)) die("deploy", &err);
    }
    printf("\nFig. 14 check (Llama-2-13B, SG, 1x A100 primary + 2x RTX 3090 attention workers, 400 requests):\n");
    printf("  %8s %14s %11s %11s\n", "rate r/s", "heads on 3090", "P95 TPOT ms", "P95 TTFT s");
    for (size_t i = 0; i < sizeof rates / sizeof *rates; i++) {
        result res;
        run_once(&x, &datasets[0], rates[i], 400, &res);
        printf("  %8.2f %13.1f%% %11.1f %11.2f\n", rates[i],
               res.st.placed_groups ? 100.0 * res.st.offloaded_groups / res.st.placed_groups : 0, res.tpot95 * 1e3,
               res.ttft95);
    }
    hs_deploy_free(&x.d);
    hs_cluster_destroy(x.c);
}

int main(int argc, char **argv)
{
    const char *models[] = {"llama-2-13b", "opt-30b", "llama-2-70b"};
    const char *only = argc > 1 ? argv[1] : NULL;
    hs_err err = {0};
    double best_thr = 0, best_lat = 0;
    table1();
    if (!only || !strcmp(only, "fig14")) fig14();
    if (only && !strcmp(only, "fig14")) return 0;
    for (int mi = 0; mi < 3; mi++) {
        if (only && strcmp(only, models[mi])) continue;
        printf("\n== %s on hetis-mixed12 ==\n", models[mi]);
        ctx x[NSYS];
        for (int s = 0; s < NSYS; s++) {
            memset(&x[s], 0, sizeof x[s]);
            if (hs_model_find(&x[s].m, models[mi], &err)) die("model", &err);
            if (hs_cluster_find(&x[s].c, "hetis-mixed12", &err)) die("cluster", &err);
            x[s].sys = &systems[s];
            x[s].max_model_len = x[s].m.max_seq_len;
            {
                struct timespec t0, t1;
                clock_gettime(CLOCK_MONOTONIC, &t0);
                plan(&x[s]);
                clock_gettime(CLOCK_MONOTONIC, &t1);
                printf("  %-9s planned in %.2f s; %d replicas, %d attention workers:", systems[s].name,
                       (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9, x[s].d.n, x[s].d.n_attn);
            }
            for (int32_t i = 0; i < x[s].d.n; i++) {
                char buf[256];
                hs_layout_gpus_str(&x[s].d.r[i].layout, x[s].c, buf, sizeof buf);
                printf(" %s[%s]", x[s].d.r[i].role[0] == 'c' ? "" : x[s].d.r[i].role, buf);
            }
            printf("\n");
        }
        printf("  %-4s %-9s %9s %11s %11s %11s %9s %10s %12s\n", "data", "system", "KV blocks", "sustain r/s",
               "P95 TTFT s", "P95 TPOT ms", "dropped", "iter ms", "dispatch CPU us");
        for (int di = 0; di < 3; di++) {
            double thr[NSYS], ttft[NSYS], tpot[NSYS];
            for (int s = 0; s < NSYS; s++) {
                result r;
                thr[s] = sustainable(&x[s], &datasets[di]);
                run_once(&x[s], &datasets[di], datasets[di].paper_rate, 500, &r);
                ttft[s] = r.ttft95;
                tpot[s] = r.tpot95 * 1e3;
                printf("  %-4s %-9s %9lld %11.2f %11.2f %11.1f %9lld %10.1f", datasets[di].name, systems[s].name,
                       (long long)r.kv_blocks, thr[s], r.ttft95, r.tpot95 * 1e3, (long long)r.dropped, r.iter_ms);
                if (r.st.dispatched_reqs)
                    printf(" %7.1f (p99 <%.0f), %.0f%% of heads offloaded", r.st.dispatch_wall_s / r.st.dispatched_reqs * 1e6,
                           hs_hetis_dispatch_quantile(&r.st, 0.99) * 1e6,
                           r.st.placed_groups ? 100.0 * r.st.offloaded_groups / r.st.placed_groups : 0);
                printf("\n");
            }
            {
                double tb = 0, lb = INFINITY, pb = INFINITY;
                for (int b = 1; b < NSYS; b++) {
                    tb = fmax(tb, thr[b]);
                    lb = fmin(lb, ttft[b]);
                    pb = fmin(pb, tpot[b]);
                }
                printf("  %-4s Hetis vs best baseline: throughput %.2fx, P95 TTFT %.2fx lower, P95 TPOT %.2fx lower\n",
                       datasets[di].name, tb > 0 ? thr[0] / tb : INFINITY, ttft[0] > 0 ? lb / ttft[0] : 0,
                       tpot[0] > 0 ? pb / tpot[0] : 0);
                if (tb > 0 && thr[0] / tb > best_thr) best_thr = thr[0] / tb;
                if (ttft[0] > 0 && lb / ttft[0] > best_lat) best_lat = lb / ttft[0];
            }
        }
        for (int s = 0; s < NSYS; s++) {
            hs_deploy_free(&x[s].d);
            hs_cluster_destroy(x[s].c);
        }
    }
    printf("\nbest Hetis gain over the better baseline: throughput %.2fx (paper: up to 2.25x), "
           "P95 TTFT %.2fx lower (paper: latency 1.49x lower)\n", best_thr, best_lat);
    return 0;
}
