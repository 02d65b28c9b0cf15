/* fixture.h - builds a whole simulation in-process for engine tests:
 * model + cluster + uniform plan + replicas + workload + engine, with a sink
 * that keeps every record and checks ordering as records arrive. */
#ifndef HS_TEST_FIXTURE_H
#define HS_TEST_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw/hw.h"
#include "llm/model.h"
#include "plan/plan.h"
#include "policy/policy.h"
#include "serve/deploy.h"
#include "serve/plugin.h"
#include "workload/workload.h"

typedef struct fx_opts {
    const char *model, *cluster, *policy, *router;   /* registry names */
    int tp, pp, max_model_len, max_replicas, prefill_replicas;
    hs_engine_cfg ec;
    hs_popts po[HS_MAX_POLICIES];   /* every policy's options (fx_popt) */
    hs_perf_cfg pc;
    hs_workload_cfg wc;
    const hs_timeline *tl;          /* optional timeline observer (sink.h) */
} fx_opts;

typedef struct fx_result {
    hs_req_record *rec;
    int64_t n, cap;
    int64_t arrivals, completed, dropped, preemptions, truncated, iterations;
    int64_t itl_count;
    double itl_sum_ns;
    int clock_back;          /* a record was emitted earlier than the previous one */
    hs_ns last_emit;
} fx_result;

static inline void fx_defaults(fx_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model = "llama-2-7b";
    o->cluster = "dgx-a100";
    o->policy = "vllm";
    o->router = "lor";
    o->tp = 1;
    o->pp = 1;
    hs_engine_cfg_defaults(&o->ec);
    hs_policies_opts_defaults(o->po);
    hs_perf_cfg_defaults(&o->pc);
    hs_workload_defaults(&o->wc);
}

/* Sets a policy option (an engine.* key a policy declares) in every policy
 * that declares it; a key none declares is a defect of the test: it exits. */
static inline void fx_popt(fx_opts *o, const char *key, const char *value)
{
    hs_err err = {0};
    if (hs_policies_opt_set(o->po, key, value, "test", &err)) {
        fprintf(stderr, "fx_popt %s=%s: %s\n", key, value, err.msg[0] ? err.msg : "no policy declares it");
        exit(2);
    }
}

/* The options of o's policy. */
static inline const void *fx_popts(const fx_opts *o)
{
    const hs_policy_ops *p = hs_policy_find(o->policy);
    return p ? hs_policy_opts_of(o->po, p) : NULL;
}

/* The KV-pressure scenario several tests share: T4s holding Llama-2-7B
 * leave room for a few thousand tokens of KV, so uniform 100-1200-token
 * prompts and 1-900-token outputs at `rate` req/s force preemptions.
 * n requests; the audit is on. */
static inline void fx_pressure(fx_opts *o, const char *rate, int64_t n)
{
    fx_defaults(o);
    o->model = "llama-2-7b";
    o->cluster = "llmpq-c9"; /* 4 x T4-16G */
    o->max_model_len = 2048;
    o->ec.audit = 1;
    hs_workload_set(&o->wc, "preset", "", NULL);
    hs_workload_set(&o->wc, "kind", "synthetic", NULL);
    hs_workload_set(&o->wc, "rate", rate, NULL);
    hs_workload_set(&o->wc, "prompt.kind", "uniform", NULL);
    hs_workload_set(&o->wc, "prompt.min", "100", NULL);
    hs_workload_set(&o->wc, "prompt.max", "1200", NULL);
    hs_workload_set(&o->wc, "output.kind", "uniform", NULL);
    hs_workload_set(&o->wc, "output.min", "1", NULL);
    hs_workload_set(&o->wc, "output.max", "900", NULL);
    o->wc.max_requests = n;
}

static inline int fx_sink_req(void *ctx, const hs_req_record *r)
{
    fx_result *x = ctx;
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 1024;
        x->rec = realloc(x->rec, (size_t)x->cap * sizeof *x->rec);
        if (!x->rec) return HS_ENOMEM;
    }
    /* Records are emitted at the current simulated time: finish for
     * completions, drop time for drops; both must never go back. */
    if (r->finish < x->last_emit) x->clock_back = 1;
    x->last_emit = r->finish;
    x->rec[x->n++] = *r;
    return 0;
}

static inline void fx_sink_itl(void *ctx, hs_ns dt, int64_t n)
{
    fx_result *x = ctx;
    x->itl_count += n;
    x->itl_sum_ns += (double)dt * (double)n;
}

/* ---- hand recomputation of iteration times (single-stage replicas) ---- */

/* End of an iteration started at `start`: exactly the engine's arithmetic. */
static inline hs_ns fx_step(const hs_perf *p, hs_ns start, const hs_batch_shape *b)
{
    return (hs_ns)ceil((double)start + hs_perf_step_ns(p, b) + hs_perf_stage_ns(p, 0, b));
}

/* n prefill chunks of len[i] tokens after prefix[i] cached ones (NULL: 0);
 * callers set .samples (chunks that complete their prompt). */
static inline hs_batch_shape fx_prefill(int n, const int *len, const int *prefix)
{
    hs_batch_shape b = {0};
    for (int i = 0; i < n; i++) {
        int p = prefix ? prefix[i] : 0;
        b.tokens += len[i];
        b.pre_chunks++;
        b.pre_self += (double)len[i] * (len[i] + 1) / 2.0;
        b.pre_tokens += len[i];
        b.pre_cross += (double)len[i] * p;
        b.pre_prefix += p;
    }
    return b;
}

/* A decode step of n sequences attending ctx tokens in all. */
static inline hs_batch_shape fx_decode(int n, int64_t ctx)
{
    hs_batch_shape b = {0};
    b.tokens = b.samples = b.dec_seqs = n;
    b.dec_ctx = ctx;
    return b;
}

static inline const hs_req_record *fx_find(const fx_result *x, int64_t id)
{
    for (int64_t i = 0; i < x->n; i++)
        if (x->rec[i].id == id) return &x->rec[i];
    return NULL;
}

static inline void fx_free(fx_result *x) { free(x->rec); memset(x, 0, sizeof *x); }

/* One stage of `layers` layers on GPUs 0..tp-1, 16-bit weights and KV
 * (the caller frees it). */
static inline hs_layout *fx_layout1(int tp, int layers)
{
    hs_layout *l = calloc(1, sizeof *l);
    if (!l) exit(2);
    l->pp = 1;
    l->kv_bits = 16;
    l->stage[0].tp = tp;
    l->stage[0].layers = layers;
    l->stage[0].bits = 16;
    for (int i = 0; i < tp; i++) l->stage[0].gpus[i] = i;
    return l;
}

/* base with its first `from` replaced by `to`, in a static buffer (valid
 * until the next call): bad-input variants of a good file.  A `from` that
 * base lacks is a defect of the test: it exits. */
static inline const char *fx_variant(const char *base, const char *from, const char *to)
{
    static char buf[8192];
    const char *at = strstr(base, from);
    if (!at) {
        fprintf(stderr, "fx_variant: \"%s\" not in the base text\n", from);
        exit(2);
    }
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
    return buf;
}

/* Runs o's workload and policy on built replicas (owned by the caller);
 * fills x.  Returns 0 or the error code (message in err). */
static inline int fx_run_replicas(const fx_opts *o, const hs_engine_cfg *ec, hs_replica *reps,
                                  int32_t n, int32_t mml, const hs_cluster *c, fx_result *x,
                                  hs_err *err)
{
    hs_source *src = NULL;
    hs_engine *e = NULL;
    hs_sink sink = {x, fx_sink_req, fx_sink_itl};
    const hs_policy_ops *pol = hs_policy_find(o->policy);
    const hs_router_ops *router = hs_router_find(o->router);
    int rc;
    if (!pol) return hs_errf(err, HS_ENOTFOUND, "policy %s", o->policy);
    if (!router) return hs_errf(err, HS_ENOTFOUND, "router %s", o->router);
    if ((rc = hs_source_open(&src, &o->wc, err))) return rc;
    if (!(rc = hs_engine_create(&e, ec, pol, fx_popts(o), router, reps, n, src, &sink, mml, c, err))) {
        hs_engine_stats st;
        if (o->tl) hs_engine_set_timeline(e, o->tl);
        rc = hs_engine_run(e, err);
        hs_engine_stats_get(e, &st);
        x->arrivals = st.arrivals;
        x->completed = st.completed;
        x->dropped = st.dropped;
        x->preemptions = st.preemptions;
        x->truncated = st.truncated;
        x->iterations = st.iterations;
    }
    hs_engine_destroy(e);
    hs_source_close(src);
    return rc;
}

/* Returns 0 or the error code (message in err). */
static inline int fx_run(const fx_opts *o, fx_result *x, hs_err *err)
{
    hs_model m;
    hs_cluster *c = NULL;
    hs_deploy d;
    hs_replica *reps = NULL;
    hs_engine_cfg ec = o->ec;
    hs_plan_req pr;
    int rc, max_tokens;
    int32_t mml;
    const hs_policy_ops *pol = hs_policy_find(o->policy);
    memset(x, 0, sizeof *x);
    memset(&d, 0, sizeof d);
    if (!pol) return hs_errf(err, HS_ENOTFOUND, "policy %s", o->policy);
    if ((rc = hs_model_find(&m, o->model, err))) return rc;
    if ((rc = hs_cluster_find(&c, o->cluster, err))) return rc;
    mml = o->max_model_len ? o->max_model_len : hs_model_max_context(&m);
    max_tokens = hs_engine_pass_tokens(&ec, pol, fx_popts(o), mml);
    if (max_tokens < 0) {
        rc = hs_errf(err, HS_ERANGE, "forward pass too large");
        goto out;
    }
    memset(&pr, 0, sizeof pr);
    pr.model = &m;
    pr.cluster = c;
    pr.engine = &ec;
    pr.tp = o->tp;
    pr.pp = o->pp;
    pr.bits = 16;
    pr.max_replicas = o->max_replicas;
    pr.prefill_replicas = o->prefill_replicas;
    pr.max_tokens = max_tokens;
    pr.max_model_len = mml;
    if ((rc = hs_planner_find("uniform")->plan(&pr, &d, err))) goto out;
    if ((rc = hs_replicas_build(&reps, &d, &m, c, &ec, &o->pc, max_tokens, mml, err))) goto out;
    rc = fx_run_replicas(o, &ec, reps, d.n, mml, c, x, err);
out:
    hs_replicas_free(reps, d.n);
    hs_deploy_free(&d);
    hs_cluster_destroy(c);
    return rc;
}

#endif
