/* test_hetis.c - Hetis: the dispatch program against enumeration, the
 * head and memory books through whole runs (pressure, pipelines), partial
 * migration, the planners (step 3 keeps a low-end stage only when it raises
 * throughput; the HexGen baseline's one GPU type per stage). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hw/hw.h"
#include "llm/model.h"
#include "policy/hetis/hetis_lp.h"
#include "plan/plan.h"
#include "policy/policy.h"
#include "serve/deploy.h"
#include "serve/plugin.h"
#include "policy/hetis/hetis.h"
#include "workload/workload.h"

/* ---- dispatch program vs enumeration ---- */

static uint64_t rng = 88172645463325252ull;
static double urand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* Best objective over all integral placements, or INFINITY when none fits. */
static double enum_best(const hs_hetis_lp *p, double *x, int r)
{
    int G = p->n_dev, H = p->groups;
    double best = INFINITY;
    if (r == p->n_req) return hs_hetis_lp_feasible(p, x) ? hs_hetis_lp_eval(p, x) : INFINITY;
    /* compositions of H into G parts */
    int v[HS_HETIS_MAX_DEV] = {0};
    v[0] = H;
    for (;;) {
        double z;
        for (int g = 0; g < G; g++) x[r * G + g] = v[g];
        z = enum_best(p, x, r + 1);
        if (z < best) best = z;
        /* next composition: move one unit right (lexicographic walk) */
        {
            int k = G - 2;
            while (k >= 0 && v[k] == 0) k--;
            if (k < 0) break;
            v[k]--;
            {
                int tail = v[G - 1];
                v[G - 1] = 0;
                v[k + 1] = tail + 1;
            }
        }
    }
    return best;
}

static void test_lp_enumeration(void)
{
    int solved = 0, infeasible = 0;
    for (int trial = 0; trial < 60; trial++) {
        int G = 2 + trial % 3, R = 1 + trial % 2, H = 2 + trial % 4;
        double base[4], fixed[4], cap[4], coef[2 * 4], mem[2], x[8], xe[8], z, zr, best;
        hs_hetis_lp p = {G, R, H, base, fixed, cap, coef, mem, 1, NULL, 0, 0};
        hs_err err = {0};
        int rc;
        for (int g = 0; g < G; g++) {
            base[g] = urand() < 0.3 ? 0 : 1000 * urand();
            fixed[g] = base[g] > 0 ? 0 : 300 * urand();
            cap[g] = 4000 * urand() * (trial % 7 == 6 ? 0.1 : 1);
        }
        for (int r = 0; r < R; r++) {
            mem[r] = 100 + 900 * urand();
            for (int g = 0; g < G; g++) coef[r * G + g] = 50 + 400 * urand();
        }
        best = enum_best(&p, xe, 0);
        rc = hs_hetis_lp_solve(&p, x, &z, &err);
        if (isinf(best)) {
            CHECK(rc == HS_ENOFIT);
            infeasible++;
            continue;
        }
        CHECK_OK(rc, &err);
        CHECK(hs_hetis_lp_feasible(&p, x));
        CHECK(fabs(z - best) <= 1e-6 * (1 + best));
        CHECK(fabs(hs_hetis_lp_eval(&p, x) - z) <= 1e-9 * (1 + z));
        /* the relaxation is a lower bound up to the fixed costs it may
         * spread fractionally; never above the integral optimum when no
         * device has a fixed cost */
        p.integral = 0;
        CHECK_OK(hs_hetis_lp_solve(&p, x, &zr, &err), &err);
        {
            double fsum = 0;
            for (int g = 0; g < G; g++) fsum += fixed[g];
            CHECK(zr <= best + fsum + 1e-6 * (1 + best));
        }
        solved++;
    }
    CHECK(solved > 30);
    CHECK(infeasible > 0);
}

/* A hand-checked case: two identical devices, one free and one busy; the
 * request's 4 groups split to equalise them. */
static void test_lp_known(void)
{
    double base[2] = {400, 0}, fixed[2] = {0, 0}, cap[2] = {1e9, 1e9}, coef[2] = {100, 100}, mem[1] = {10};
    double x[2], z;
    hs_hetis_lp p = {2, 1, 4, base, fixed, cap, coef, mem, 1, NULL, 0, 0};
    hs_err err = {0};
    CHECK_OK(hs_hetis_lp_solve(&p, x, &z, &err), &err);
    CHECK(x[0] == 0 && x[1] == 4);
    CHECK(fabs(z - 400) < 1e-6);
    /* memory forces 3 groups onto the busy device */
    cap[1] = 10;
    CHECK_OK(hs_hetis_lp_solve(&p, x, &z, &err), &err);
    CHECK(x[0] == 3 && x[1] == 1);
    CHECK(fabs(z - 700) < 1e-6);
    /* and no room at all */
    cap[0] = cap[1] = 5;
    CHECK(hs_hetis_lp_solve(&p, x, &z, &err) == HS_ENOFIT);
}

static void test_moved_groups(void)
{
    int16_t a[4] = {5, 2, 1, 0}, b[4] = {4, 2, 0, 2}, c[4] = {5, 2, 1, 0};
    CHECK(hs_hetis_moved_groups(a, b, 4) == 2); /* one from dev 0, one from dev 2, both to dev 3 */
    CHECK(hs_hetis_moved_groups(a, c, 4) == 0);
    CHECK(hs_hetis_moved_groups(b, a, 4) == 2);
}

/* ---- whole runs ---- */

typedef struct sink_ctx {
    int64_t done, dropped;
} sink_ctx;

static int on_req(void *ctx, const hs_req_record *r)
{
    sink_ctx *s = ctx;
    if (r->dropped) s->dropped++;
    else s->done++;
    return 0;
}

static void on_itl(void *ctx, hs_ns iv, int64_t n)
{
    (void)ctx, (void)iv, (void)n;
}

static const char *run_policy = "hetis";
static int run_offload = 1;

typedef struct run_out {
    sink_ctx sk;
    hs_hetis_stats st;
    int64_t arrivals, preemptions, kv_blocks;
    int tracked_left;
    double end_s;
} run_out;

/* Runs deployment d (JSON text) under policy hetis; gpu_mem_util squeezes
 * memory to force pressure. */
static void run_deploy(const char *json, const char *model, double mem_util, const char *rate, int64_t n,
                       const char *out_max, run_out *o)
{
    hs_model m;
    hs_cluster *c = NULL;
    hs_deploy d;
    hs_replica *rp = NULL;
    hs_engine_cfg ec;
    hs_perf_cfg pc;
    hs_workload_cfg wc;
    hs_source *src = NULL;
    hs_engine *e = NULL;
    hs_hetis_cfg hc;
    hs_err err = {0};
    const char *path = hs_test_tmpfile("deploy", json);
    sink_ctx *sk = &o->sk;
    hs_sink sink = {sk, on_req, on_itl};
    int mtokens, hetis = !strcmp(run_policy, "hetis");
    memset(o, 0, sizeof *o);
    CHECK_OK(hs_model_find(&m, model, &err), &err);
    CHECK_OK(hs_cluster_find(&c, "hetis-mixed12", &err), &err);
    CHECK_OK(hs_deploy_read(&d, path, &err), &err);
    CHECK_OK(hs_deploy_check(&d, &m, c, path, &err), &err);
    hs_engine_cfg_defaults(&ec);
    ec.gpu_mem_util = mem_util;
    ec.audit = 1;
    hs_perf_cfg_defaults(&pc);
    mtokens = hs_engine_pass_tokens(&ec, hs_policy_find("hetis"), NULL, 2048);
    CHECK(mtokens > 0);
    CHECK_OK(hs_replicas_build(&rp, &d, &m, c, &ec, &pc, mtokens, 2048, &err), &err);
    hs_hetis_cfg_defaults(&hc);
    hc.period = 4; /* check balance often so re-dispatch is exercised */
    hc.offload = run_offload;
    if (hetis) CHECK_OK(hs_hetis_attach(rp, d.n, &d, &m, c, &ec, &pc, &hc, 1, &err), &err);
    o->kv_blocks = rp[0].kv_blocks;
    hs_workload_defaults(&wc);
    hs_workload_set(&wc, "preset", "", NULL);
    hs_workload_set(&wc, "kind", "synthetic", NULL);
    hs_workload_set(&wc, "rate", rate, NULL);
    hs_workload_set(&wc, "prompt.kind", "uniform", NULL);
    hs_workload_set(&wc, "prompt.min", "50", NULL);
    hs_workload_set(&wc, "prompt.max", "1500", NULL);
    hs_workload_set(&wc, "output.kind", "uniform", NULL);
    hs_workload_set(&wc, "output.min", "1", NULL);
    hs_workload_set(&wc, "output.max", out_max, NULL);
    wc.max_requests = n;
    CHECK_OK(hs_source_open(&src, &wc, &err), &err);
    CHECK_OK(hs_engine_create(&e, &ec, hs_policy_find(run_policy), NULL, hs_router_find("lor"), rp, d.n, src, &sink,
                              2048, c, &err), &err);
    CHECK_OK(hs_engine_run(e, &err), &err);
    o->arrivals = e->arrivals;
    o->preemptions = e->preemptions;
    o->end_s = hs_ns_to_s(e->end_time);
    for (int32_t i = 0; i < d.n && hetis; i++) {
        CHECK(hs_hetis_of(&rp[i]) != NULL);
        CHECK(hs_hetis_sane(e, hs_hetis_of(&rp[i]), -1)); /* INV-HEAD, INV-HMEM */
        o->tracked_left += hs_hetis_of(&rp[i])->n_tracked;
    }
    hs_hetis_totals(rp, d.n, &o->st);
    hs_engine_destroy(e);
    hs_source_close(src);
    hs_hetis_detach(rp, d.n);
    hs_replicas_free(rp, d.n);
    hs_deploy_free(&d);
    hs_cluster_destroy(c);
}

static const char *ONE_STAGE =
    "{\"model\":\"llama-2-13b\",\"cluster\":\"hetis-mixed12\",\"replicas\":[{\"role\":\"colocated\",\"stages\":"
    "[{\"tp\":1,\"layers\":40,\"gpus\":[0]}]}],\"attention\":[{\"replica\":0,\"stage\":0,\"gpu\":4},"
    "{\"replica\":0,\"stage\":0,\"gpu\":8},{\"replica\":0,\"stage\":0,\"gpu\":9}]}";

static const char *TWO_STAGES =
    "{\"model\":\"llama-2-13b\",\"cluster\":\"hetis-mixed12\",\"replicas\":[{\"role\":\"colocated\",\"stages\":"
    "[{\"tp\":1,\"layers\":24,\"gpus\":[0]},{\"tp\":2,\"layers\":16,\"gpus\":[4,5]}]}],"
    "\"attention\":[{\"replica\":0,\"stage\":0,\"gpu\":8},{\"replica\":0,\"stage\":1,\"gpu\":9},"
    "{\"replica\":0,\"stage\":1,\"gpu\":10}]}";

static void check_books(const run_out *o, int64_t n)
{
    CHECK(o->arrivals == n);
    CHECK(o->sk.done + o->sk.dropped == n);
    CHECK(o->tracked_left == 0); /* every member's heads released */
    /* placed groups: 40 per request per stage at least once */
    CHECK(o->st.placed_groups >= 40 * (o->sk.done - o->sk.dropped) / 2);
    /* partial migration: a migration moves fewer groups than a request has */
    if (o->st.migrations) CHECK(o->st.moved_groups < 40 * o->st.migrations);
}

static void test_runs(void)
{
    run_out a, b, p;
    /* light memory: offload happens, no pressure */
    run_deploy(ONE_STAGE, "llama-2-13b", 0.9, "4", 150, "400", &a);
    check_books(&a, 150);
    CHECK(a.sk.dropped == 0);
    CHECK(a.st.offloaded_groups > 0);
    CHECK(a.st.dispatches > 0);
    /* squeezed memory and long outputs: pressure, migrations, fallback */
    run_deploy(ONE_STAGE, "llama-2-13b", 0.42, "8", 150, "1500", &b);
    check_books(&b, 150);
    printf("pressure run: %lld migrations (%lld groups), %lld fallback preemptions, %lld redispatches, %lld preemptions\n",
           (long long)b.st.migrations, (long long)b.st.moved_groups, (long long)b.st.fallback_preempts,
           (long long)b.st.redispatches, (long long)b.preemptions);
    CHECK(b.st.migrations > 0);
    CHECK(b.st.checks > 0 && b.st.redispatches > 0);
    /* without offload the same pressure can only preempt (fallback), and
     * nothing lands on a worker */
    {
        run_out f;
        run_offload = 0;
        run_deploy(ONE_STAGE, "llama-2-13b", 0.42, "8", 150, "1500", &f);
        run_offload = 1;
        check_books(&f, 150);
        CHECK(f.st.fallback_preempts > 0);
        CHECK(f.st.offloaded_groups == 0 && f.st.migrations == 0);
        printf("no-offload pressure run: %lld fallback preemptions\n", (long long)f.st.fallback_preempts);
    }
    /* two pipeline stages (two lanes sharing workers) */
    run_deploy(TWO_STAGES, "llama-2-13b", 0.6, "6", 120, "800", &p);
    check_books(&p, 120);
    CHECK(p.st.offloaded_groups > 0);
}

/* A replica's latency_scale covers its attention workers and the KV it
 * sends them: with every request queued at once, a replica at scale 2
 * makes the same decisions and ends at twice the time. */
static void test_scaled(void)
{
    static const char *SCALED =
        "{\"model\":\"llama-2-13b\",\"cluster\":\"hetis-mixed12\",\"replicas\":[{\"role\":\"colocated\","
        "\"latency_scale\":2,\"stages\":[{\"tp\":1,\"layers\":40,\"gpus\":[0]}]}],\"attention\":["
        "{\"replica\":0,\"stage\":0,\"gpu\":4},{\"replica\":0,\"stage\":0,\"gpu\":8},"
        "{\"replica\":0,\"stage\":0,\"gpu\":9}]}";
    run_out a, b;
    run_deploy(ONE_STAGE, "llama-2-13b", 0.42, "1e9", 80, "1500", &a);
    run_deploy(SCALED, "llama-2-13b", 0.42, "1e9", 80, "1500", &b);
    check_books(&b, 80);
    CHECK(a.st.offloaded_groups > 0 && a.st.migrations > 0);
    CHECK(b.st.offloaded_groups == a.st.offloaded_groups && b.st.migrations == a.st.migrations &&
          b.st.dispatches == a.st.dispatches && b.preemptions == a.preemptions);
    CHECK_REL(b.end_s, 2 * a.end_s, 1e-6);
}

/* Offload adds cache: the pooled KV blocks exceed the primary's own. */
static void test_pooled_blocks(void)
{
    run_out a;
    run_deploy("{\"model\":\"llama-2-13b\",\"cluster\":\"hetis-mixed12\",\"replicas\":[{\"stages\":"
               "[{\"tp\":1,\"layers\":40,\"gpus\":[0]}]}]}",
               "llama-2-13b", 0.9, "2", 50, "100", &a);
    {
        run_out b;
        run_deploy(ONE_STAGE, "llama-2-13b", 0.9, "2", 50, "100", &b);
        CHECK(b.kv_blocks > a.kv_blocks);
        CHECK(a.st.offloaded_groups == 0); /* no workers: everything on the primary */
    }
    {
        /* With nothing offloaded the head model is the perf model: the same
         * run under vllm ends at the same nanosecond. */
        run_out v;
        run_policy = "vllm";
        run_deploy("{\"model\":\"llama-2-13b\",\"cluster\":\"hetis-mixed12\",\"replicas\":[{\"stages\":"
                   "[{\"tp\":1,\"layers\":40,\"gpus\":[0]}]}]}",
                   "llama-2-13b", 0.9, "2", 50, "100", &v);
        run_policy = "hetis";
        CHECK(v.end_s == a.end_s);
        CHECK(v.sk.done == a.sk.done);
    }
}

static void test_planners(void)
{
    const char *models[] = {"llama-2-13b", "llama-2-70b"};
    hs_cluster *c = NULL;
    hs_err err = {0};
    CHECK_OK(hs_cluster_find(&c, "hetis-mixed12", &err), &err);
    for (int i = 0; i < 2; i++) {
        hs_model m;
        hs_engine_cfg ec;
        hs_plan_req q;
        const char *pl[] = {"hetis", "hetis-splitwise", "hetis-hexgen"};
        CHECK_OK(hs_model_find(&m, models[i], &err), &err);
        hs_engine_cfg_defaults(&ec);
        memset(&q, 0, sizeof q);
        q.model = &m;
        q.cluster = c;
        q.engine = &ec;
        q.pp = 1;
        q.bits = 16;
        q.max_tokens = hs_engine_pass_tokens(&ec, hs_policy_find("hetis"), NULL, 4096);
        q.max_model_len = 4096;
        for (int k = 0; k < 3; k++) {
            hs_deploy d;
            const hs_planner_ops *ops = hs_planner_find(pl[k]);
            CHECK(ops != NULL);
            CHECK_OK(ops->plan(&q, &d, &err), &err);
            CHECK_OK(hs_deploy_check(&d, &m, c, pl[k], &err), &err);
            if (k == 0 && i == 1) {
                /* Llama-70B: the paper's roles: A100s and 3090s primary,
                 * P100s attention workers */
                CHECK(d.n_attn == 4);
                for (int32_t a = 0; a < d.n_attn; a++)
                    CHECK(!strcmp(hs_cluster_gpu(c, d.attn[a].gpu)->name, "p100-12g"));
            }
            if (k == 1) {
                int pre = 0, dec = 0;
                for (int32_t r = 0; r < d.n; r++) {
                    pre += !strcmp(d.r[r].role, "prefill");
                    dec += !strcmp(d.r[r].role, "decode");
                }
                CHECK(pre > 0 && dec > 0);
            }
            if (k == 2) CHECK(d.n_attn == 0);
            /* JSON round trip keeps the attention workers */
            {
                const char *path = hs_test_tmpfile("plan", "{}");
                hs_deploy r;
                CHECK_OK(hs_deploy_write(&d, path, &err), &err);
                CHECK_OK(hs_deploy_read(&r, path, &err), &err);
                CHECK(r.n == d.n && r.n_attn == d.n_attn);
                for (int32_t a = 0; a < d.n_attn; a++)
                    CHECK(r.attn[a].gpu == d.attn[a].gpu && r.attn[a].stage == d.attn[a].stage);
                hs_deploy_free(&r);
            }
            hs_deploy_free(&d);
        }
    }
    hs_cluster_destroy(c);
}

/* ---- the planners' rules ---- */

/* Plans with `planner` (opts: --plan-opts text) for model on cluster c. */
static void plan_on(const char *planner, const char *opts, const hs_model *m, const hs_cluster *c, hs_deploy *d)
{
    hs_engine_cfg ec;
    hs_plan_req q;
    hs_err err = {0};
    hs_engine_cfg_defaults(&ec);
    memset(&q, 0, sizeof q);
    q.model = m;
    q.cluster = c;
    q.engine = &ec;
    q.pp = 1;
    q.bits = 16;
    q.max_tokens = hs_engine_pass_tokens(&ec, hs_policy_find("hetis"), NULL, 4096);
    q.max_model_len = 4096;
    q.opts = opts;
    memset(d, 0, sizeof *d);
    CHECK_OK(hs_planner_find(planner)->plan(&q, d, &err), &err);
}

/* Seconds a saturating burst of 600 requests (1024-token prompts, 256
 * output tokens, the planned load R) takes on deployment d under policy
 * hetis: lower is higher throughput. */
static double burst_s(const hs_deploy *d, const hs_model *m, const hs_cluster *c)
{
    hs_replica *rp = NULL;
    hs_engine_cfg ec;
    hs_perf_cfg pc;
    hs_workload_cfg wc;
    hs_source *src = NULL;
    hs_engine *e = NULL;
    hs_hetis_cfg hc;
    hs_err err = {0};
    sink_ctx sk = {0, 0};
    hs_sink sink = {&sk, on_req, on_itl};
    double t;
    int mt;
    hs_engine_cfg_defaults(&ec);
    hs_perf_cfg_defaults(&pc);
    mt = hs_engine_pass_tokens(&ec, hs_policy_find("hetis"), NULL, 4096);
    CHECK_OK(hs_replicas_build(&rp, d, m, c, &ec, &pc, mt, 4096, &err), &err);
    hs_hetis_cfg_defaults(&hc);
    CHECK_OK(hs_hetis_attach(rp, d->n, d, m, c, &ec, &pc, &hc, 1, &err), &err);
    hs_workload_defaults(&wc);
    hs_workload_set(&wc, "preset", "", NULL);
    hs_workload_set(&wc, "kind", "synthetic", NULL);
    hs_workload_set(&wc, "rate", "40", NULL);
    hs_workload_set(&wc, "prompt.kind", "fixed", NULL);
    hs_workload_set(&wc, "prompt.mean", "1024", NULL);
    hs_workload_set(&wc, "output.kind", "fixed", NULL);
    hs_workload_set(&wc, "output.mean", "256", NULL);
    wc.max_requests = 600;
    CHECK_OK(hs_source_open(&src, &wc, &err), &err);
    CHECK_OK(hs_engine_create(&e, &ec, hs_policy_find("hetis"), NULL, hs_router_find("lor"), rp, d->n, src, &sink,
                              4096, c, &err), &err);
    CHECK_OK(hs_engine_run(e, &err), &err);
    CHECK(sk.done == 600);
    t = hs_ns_to_s(e->end_time);
    hs_engine_destroy(e);
    hs_source_close(src);
    hs_replicas_free(rp, d->n);
    return t;
}

static int stages_on(const hs_deploy *d, const hs_cluster *c, const char *gpu)
{
    int n = 0;
    for (int32_t r = 0; r < d->n; r++)
        for (int s = 0; s < d->r[r].layout.pp; s++)
            n += !strcmp(hs_cluster_gpu(c, d->r[r].layout.stage[s].gpus[0])->name, gpu);
    return n;
}

/* Step 3 weighs throughput.  Keep: one A40 on its own host beside one
 * A100 serving Llama-3-8B (GQA: little cache per token, so a second stage
 * costs the lanes no batch); as a 10-layer stage the A40 raises the
 * estimated throughput by ~21% (> eps) and is kept, where stage time
 * alone (pp x slowest stage) stripped it; the simulation agrees (the
 * stripped plan, eps = 1e9, serves the burst ~13% slower).  Strip: one
 * P100 on another host beside the A100 serving Llama-2-13B; as a stage it
 * lowers throughput (its layers run ~15x slower than the A100's in
 * prefill and a second stage halves each lane's MHA cache), so even with
 * eps = 0 it becomes an attention worker, and every layer split that keeps
 * it as a stage is slower in the simulation. */
static void test_prune_rule(void)
{
    hs_model m;
    hs_cluster *keep = NULL, *strip = NULL;
    hs_deploy d, d_strip;
    hs_err err = {0};
    const char *kp = hs_test_tmpfile(
        "c-keep", "{\"name\": \"t-keep\", \"nodes\": ["
                  "{\"name\": \"h0\", \"gpu\": \"a100-80g\", \"count\": 1, \"intra_bw_gbs\": 32, \"intra_latency_us\": 5},"
                  "{\"name\": \"h1\", \"gpu\": \"a40\", \"count\": 1, \"intra_bw_gbs\": 32, \"intra_latency_us\": 5}],"
                  "\"inter_bw_gbs\": 12.5, \"inter_latency_us\": 20}");
    CHECK_OK(hs_model_find(&m, "llama-3-8b", &err), &err);
    CHECK_OK(hs_cluster_load(&keep, kp, &err), &err);
    plan_on("hetis", "prompt=1024,output=256", &m, keep, &d);
    CHECK_INT(d.n, 1);
    CHECK_INT(d.n_attn, 0);
    CHECK_INT(d.r[0].layout.pp, 2);
    CHECK_INT(stages_on(&d, keep, "a40"), 1);
    plan_on("hetis", "prompt=1024,output=256,eps=1e9", &m, keep, &d_strip);
    CHECK_INT(stages_on(&d_strip, keep, "a40"), 0);
    CHECK_INT(d_strip.n_attn, 1);
    {
        double t_keep = burst_s(&d, &m, keep), t_strip = burst_s(&d_strip, &m, keep);
        printf("prune keep case: burst %.1f s with the A40 stage, %.1f s stripped\n", t_keep, t_strip);
        CHECK(t_keep < 0.95 * t_strip);
    }
    hs_deploy_free(&d);
    hs_deploy_free(&d_strip);

    CHECK_OK(hs_model_find(&m, "llama-2-13b", &err), &err);
    const char *sp = hs_test_tmpfile(
        "c-strip", "{\"name\": \"t-strip\", \"nodes\": ["
                   "{\"name\": \"h0\", \"gpu\": \"a100-80g\", \"count\": 1, \"intra_bw_gbs\": 32, \"intra_latency_us\": 5},"
                   "{\"name\": \"h1\", \"gpu\": \"p100-12g\", \"count\": 1, \"intra_bw_gbs\": 16, \"intra_latency_us\": 5}],"
                   "\"inter_bw_gbs\": 12.5, \"inter_latency_us\": 20}");
    CHECK_OK(hs_cluster_load(&strip, sp, &err), &err);
    /* eps = 0: stripped only because the estimate is higher without it */
    plan_on("hetis", "prompt=1024,output=256,eps=0", &m, strip, &d);
    CHECK_INT(d.n, 1);
    CHECK_INT(d.r[0].layout.pp, 1);
    CHECK_INT(d.n_attn, 1);
    CHECK_STR(hs_cluster_gpu(strip, d.attn[0].gpu)->name, "p100-12g");
    {
        double t_plan = burst_s(&d, &m, strip);
        for (int l = 35; l <= 38; l++) {
            hs_deploy k;
            hs_deploy_replica r;
            memset(&k, 0, sizeof k);
            memset(&r, 0, sizeof r);
            snprintf(k.model, sizeof k.model, "llama-2-13b");
            snprintf(k.cluster, sizeof k.cluster, "t-strip");
            snprintf(r.role, sizeof r.role, "colocated");
            r.weight = 1;
            r.layout.pp = 2;
            r.layout.kv_bits = 16;
            r.layout.stage[0] = (hs_stage_layout){.tp = 1, .layers = l, .bits = 16, .gpus = {0}};
            r.layout.stage[1] = (hs_stage_layout){.tp = 1, .layers = 40 - l, .bits = 16, .gpus = {1}};
            CHECK_OK(hs_deploy_add(&k, &r, &err), &err);
            double t = burst_s(&k, &m, strip);
            printf("prune strip case: burst %.1f s as planned, %.1f s with the P100 as a %d-layer stage\n", t_plan, t,
                   40 - l);
            CHECK(t_plan < 0.9 * t);
            hs_deploy_free(&k);
        }
    }
    hs_deploy_free(&d);
    hs_cluster_destroy(keep);
    hs_cluster_destroy(strip);
}

/* The HexGen baseline as Hetis's §7.2 deploys it: every GPU serves, each
 * stage holds one GPU type on one host; Llama-2-70B on the paper's cluster
 * is its four-stage pipeline (A100 TP4, 3090 TP2, 3090 TP2, P100 TP4). */
static void test_hexgen_baseline(void)
{
    const char *models[] = {"llama-2-13b", "opt-30b", "llama-2-70b"};
    hs_cluster *c = NULL;
    hs_err err = {0};
    CHECK_OK(hs_cluster_find(&c, "hetis-mixed12", &err), &err);
    for (int i = 0; i < 3; i++) {
        hs_model m;
        hs_deploy d;
        int used = 0;
        CHECK_OK(hs_model_find(&m, models[i], &err), &err);
        plan_on("hetis-hexgen", NULL, &m, c, &d);
        for (int32_t r = 0; r < d.n; r++)
            for (int s = 0; s < d.r[r].layout.pp; s++) {
                const hs_stage_layout *st = &d.r[r].layout.stage[s];
                for (int k = 0; k < st->tp; k++, used++) {
                    CHECK(c->gpu_type[st->gpus[k]] == c->gpu_type[st->gpus[0]]);
                    CHECK(c->gpu_node[st->gpus[k]] == c->gpu_node[st->gpus[0]]);
                }
            }
        CHECK_INT(used, c->n_gpus);
        CHECK_INT(d.n_attn, 0);
        if (i == 2) {
            const char *want[] = {"a100-80g", "rtx-3090", "rtx-3090", "p100-12g"};
            const int tp[] = {4, 2, 2, 4};
            CHECK_INT(d.n, 1);
            CHECK_INT(d.r[0].layout.pp, 4);
            for (int s = 0; s < 4 && s < d.r[0].layout.pp; s++) {
                CHECK_STR(hs_cluster_gpu(c, d.r[0].layout.stage[s].gpus[0])->name, want[s]);
                CHECK_INT(d.r[0].layout.stage[s].tp, tp[s]);
            }
        }
        hs_deploy_free(&d);
    }
    hs_cluster_destroy(c);
}

/* Bad deployments name the field. */
static void test_bad_attn(void)
{
    hs_model m;
    hs_cluster *c = NULL;
    hs_deploy d;
    hs_err err = {0};
    const char *path = hs_test_tmpfile(
        "bad", "{\"model\":\"llama-2-13b\",\"cluster\":\"hetis-mixed12\",\"replicas\":[{\"stages\":"
               "[{\"tp\":1,\"layers\":40,\"gpus\":[0]}]}],\"attention\":[{\"replica\":0,\"stage\":0,\"gpu\":0}]}");
    CHECK_OK(hs_model_find(&m, "llama-2-13b", &err), &err);
    CHECK_OK(hs_cluster_find(&c, "hetis-mixed12", &err), &err);
    CHECK_OK(hs_deploy_read(&d, path, &err), &err);
    CHECK(hs_deploy_check(&d, &m, c, path, &err) == HS_EINVAL);
    CHECK(strstr(err.msg, "attention[0].gpu") != NULL);
    hs_deploy_free(&d);
    path = hs_test_tmpfile(
        "bad2", "{\"model\":\"llama-2-13b\",\"cluster\":\"hetis-mixed12\",\"replicas\":[{\"stages\":"
                "[{\"tp\":1,\"layers\":40,\"gpus\":[0]}]}],\"attention\":[{\"replica\":0,\"stage\":1,\"gpu\":5}]}");
    CHECK_OK(hs_deploy_read(&d, path, &err), &err);
    CHECK(hs_deploy_check(&d, &m, c, path, &err) == HS_ERANGE);
    CHECK(strstr(err.msg, "attention[0].stage") != NULL);
    hs_deploy_free(&d);
    hs_cluster_destroy(c);
}

int main(void)
{
    hs_test_root();
    test_lp_known();
    test_lp_enumeration();
    test_moved_groups();
    test_bad_attn();
    test_pooled_blocks();
    test_runs();
    test_scaled();
    test_planners();
    test_prune_rule();
    test_hexgen_baseline();
    return hs_check_result();
}
