/* exegpt_des.c - runs an ExeGPT schedule on the event-driven engine and
 * measures it the way the estimator predicts it (exegpt.h), so the two can
 * be compared: the estimator is an expected-value timeline, the engine
 * plays every query with its own lengths, KV blocks, hand-overs over the
 * links and pipeline reservations. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan/exegpt.h"
#include "policy/policy.h"
#include "serve/engine.h"
#include "core/time.h"

typedef struct des_sink {
    hs_exegpt_play *out;
    int64_t cap;
    double itl_n, itl_sum;     /* tokens and their summed intervals, ns */
} des_sink;

static void des_itl(void *ctx, hs_ns dt, int64_t n)
{
    des_sink *s = ctx;
    s->itl_n += (double)n;
    s->itl_sum += (double)dt * (double)n;
}

static int des_req(void *ctx, const hs_req_record *r)
{
    des_sink *s = ctx;
    hs_exegpt_play *o = s->out;
    if (o->n == s->cap) {
        int64_t nc = s->cap ? 2 * s->cap : 4096;
        hs_req_record *nr = realloc(o->rec, (size_t)nc * sizeof *nr);
        if (!nr) return HS_ENOMEM;
        o->rec = nr;
        s->cap = nc;
    }
    o->rec[o->n++] = *r;
    return 0;
}

int hs_exegpt_play_run(const hs_model *m, const hs_cluster *c, const hs_deploy *d, const char *policy,
                       const hs_engine_cfg *ec, const void *popts, const hs_workload_cfg *wc, int64_t n,
                       const hs_perf_cfg *pc, hs_exegpt_play *out, hs_err *err)
{
    hs_replica *reps = NULL;
    hs_source *src = NULL;
    hs_engine *e = NULL;
    hs_engine_cfg cfg = *ec;
    hs_workload_cfg w = *wc;
    des_sink sk = {out, 0, 0, 0};
    hs_sink sink = {&sk, des_req, des_itl};
    const hs_policy_ops *pol = hs_policy_find(policy);
    int32_t mml = cfg.max_model_len ? cfg.max_model_len : hs_model_max_context(m);
    int rc, max_tokens;
    double t0;
    memset(out, 0, sizeof *out);
    if (!pol) return hs_errf(err, HS_ENOTFOUND, "exegpt: unknown policy %s", policy);
    /* ExeGPT measures throughput with the queue never empty. */
    w.max_requests = n;
    w.rate = 1e6;
    snprintf(w.arrival, sizeof w.arrival, "constant");
    max_tokens = hs_engine_pass_tokens(&cfg, pol, popts, mml);
    if (max_tokens < 0) return hs_errf(err, HS_ERANGE, "exegpt: forward pass too large");
    if ((rc = hs_replicas_build(&reps, d, m, c, &cfg, pc, max_tokens, mml, err))) goto out;
    if ((rc = hs_source_open(&src, &w, err))) goto out;
    if ((rc = hs_engine_create(&e, &cfg, pol, popts, hs_router_find("lor"), reps, d->n, src, &sink, mml, c, err)))
        goto out;
    t0 = hs_wall_s();
    if ((rc = hs_engine_run(e, err))) goto out;
    out->wall_s = hs_wall_s() - t0;
    {
        hs_engine_stats st;
        hs_engine_stats_get(e, &st);
        out->completed = st.completed;
        out->preemptions = st.preemptions;
        out->iterations = st.iterations;
        out->sim_s = st.end_time * 1e-9;
    }
    out->itl = sk.itl_n > 0 ? sk.itl_sum / sk.itl_n * 1e-9 : 0;
out:
    hs_engine_destroy(e);
    hs_source_close(src);
    hs_replicas_free(reps, d->n);
    if (rc) hs_exegpt_play_free(out);
    return rc;
}

void hs_exegpt_play_free(hs_exegpt_play *p)
{
    free(p->rec);
    p->rec = NULL;
    p->n = 0;
}

int hs_exegpt_measure(const hs_exegpt_play *p, int32_t p99, double *thr, double *lat, int64_t *n_lat)
{
    /* Records arrive in finish order: the steady part is the middle 60%. */
    int64_t lo = p->n / 5, hi = p->n - p->n / 5 - 1, cnt = 0;
    double sum = 0;
    *thr = 0;
    *lat = NAN;
    *n_lat = 0;
    if (hi <= lo || p->rec[hi].finish <= p->rec[lo].finish) return HS_ESTATE;
    *thr = (double)(hi - lo) / ((p->rec[hi].finish - p->rec[lo].finish) * 1e-9);
    /* Latency is close to linear in the output length near the p99, so
     * the queries within two tokens of it average to its latency (wider
     * when none is that close). */
    for (int pass = 2; pass < 8 && cnt == 0; pass++)
        for (int64_t i = lo; i <= hi; i++) {
            const hs_req_record *r = &p->rec[i];
            if (r->dropped || abs(r->output - p99) > pass) continue;
            sum += (r->finish - r->first_sched) * 1e-9;
            cnt++;
        }
    *n_lat = cnt;
    if (cnt) *lat = sum / cnt;
    return 0;
}

int hs_exegpt_des_run(hs_exegpt *x, const hs_exegpt_cfg *cfg, const hs_workload_cfg *wc, int64_t n,
                      double bd_steady, double adjust, const hs_perf_cfg *pc, hs_exegpt_des *out,
                      hs_err *err)
{
    const hs_model *m = hs_exegpt_model(x);
    const hs_cluster *c = hs_exegpt_cluster(x);
    hs_deploy d;
    hs_engine_cfg ec;
    hs_exegpt_rt rt;
    hs_exegpt_play pl;
    int rc;
    memset(out, 0, sizeof *out);
    if (n < 50) return hs_errf(err, HS_EINVAL, "exegpt: a DES check needs at least 50 queries, not %lld", (long long)n);
    hs_engine_cfg_defaults(&ec);
    {
        hs_exegpt_est est;
        if ((rc = hs_exegpt_estimate(x, cfg, &est, err))) return rc;
        est.bd = bd_steady;
        hs_exegpt_engine_cfg(x, cfg, &est, adjust, &ec, &rt);
    }
    if ((rc = hs_exegpt_deploy(x, cfg, &d, err))) return rc;
    snprintf(d.cluster, sizeof d.cluster, "%s", c->name);
    rc = hs_exegpt_play_run(m, c, &d, cfg->policy == HS_EXEGPT_RRA ? "rra" : "waa", &ec, &rt, wc, n, pc, &pl, err);
    hs_deploy_free(&d);
    if (rc) return rc;
    out->wall_s = pl.wall_s;
    out->completed = pl.completed;
    out->preemptions = pl.preemptions;
    out->iterations = pl.iterations;
    out->sim_s = pl.sim_s;
    out->itl = pl.itl;
    if (hs_exegpt_measure(&pl, hs_exegpt_out_p99(x), &out->thr, &out->lat_b, &out->n_lat))
        rc = hs_errf(err, HS_ESTATE, "exegpt: DES run too short to measure");
    hs_exegpt_play_free(&pl);
    return rc;
}
