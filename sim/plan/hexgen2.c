/* hexgen2.c - the HexGen-2 planner's front: plan_opts parsing, the search
 * context (creation, statistics, destruction), the deployment a placement
 * becomes, and the "hexgen2" planner; see hexgen2.h for the method.
 *
 * The estimator is in hexgen2_est.c, placements and their flow network in
 * hexgen2_place.c, the searches in hexgen2_search.c; what they share, the
 * context's layout and its invariants, in hexgen2_int.h.
 *
 * Invariants kept here:
 *   - a context is valid for planning once hs_hg2_ctx_create returned 0:
 *     1 <= s_in, 1 <= s_out, s_in + s_out <= mml (the planned request is
 *     one the engine serves), 1 <= n_tps, rng != 0, every buffer allocated;
 *   - a deployment lists decode (and colocated) replicas before prefill
 *     ones and only groups with capacity; a prefill replica's kv_route
 *     (flows of the placement's evaluation; absent when there is no decode
 *     replica) covers every replica. */
#include "plan/hexgen2.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/hexgen2_int.h"
#include "core/time.h"

/* ---------------------------------------------------------------- options */

/* The options as written (--plan-opts), converted by hs__hg2_opts_parse. */
typedef struct hg2_raw {
    char search[16], prefill[16], trace[512];
    double in, out, period;
    int conc;
    double tol, time;
    int iters, pop, width, cands, depth, first;
    double reserve;
    int maxtp;
    double ttft, tpot;
    int verbose;
} hg2_raw;

#define HG2_SEARCH_HELP "guided, hill, random, ga or none"
const hs_field hs_hg2_opt_fields[] = {
    HS_FIELD_STR(hg2_raw, search, 0, "guided", "search after the initial placement: " HG2_SEARCH_HELP
                 " (guided: the paper's swap + re-partition loop; hill: the earlier hill-climb with restarts)"),
    HS_FIELD_STR(hg2_raw, prefill, 0, "latency", "prefill groups' layout: latency (the paper's) or throughput"),
    HS_FIELD_NUM(hg2_raw, in, HS_F_DOUBLE, 0, 0, 0, 1e9, "mean prompt tokens planned for (0: the workload's mean; 1024 without one)"),
    HS_FIELD_NUM(hg2_raw, out, HS_F_DOUBLE, 0, 0, 0, 1e9, "mean output tokens planned for (0: the workload's mean; 256 without one)"),
    HS_FIELD_NUM(hg2_raw, period, HS_F_DOUBLE, 0, 60, 1e-9, 1e9, "planning period T, s"),
    HS_FIELD_NUM(hg2_raw, conc, HS_F_INT, 0, 32, 1, 1e6, "requests whose KV sizes a group's memory"),
    HS_FIELD_NUM(hg2_raw, tol, HS_F_DOUBLE, 0, 0.25, 0, 10, "memory balance tolerance of the partition"),
    HS_FIELD_NUM(hg2_raw, time, HS_F_DOUBLE, 0, 0, 0, 1e9, "search time limit, s (0: none)"),
    HS_FIELD_NUM(hg2_raw, iters, HS_F_INT, 0, 0, 0, 1e9, "guided rounds / random tries / GA generations (0: default)"),
    HS_FIELD_NUM(hg2_raw, pop, HS_F_INT, 0, 24, 4, 512, "GA population"),
    HS_FIELD_NUM(hg2_raw, width, HS_F_INT, 0, 8, 1, 1e6, "guided, hill: donors and receivers tried per step"),
    HS_FIELD_NUM(hg2_raw, cands, HS_F_INT, 0, 0, 0, 1e9, "guided: swap candidates per step solved by max-flow, best predicted first (0: 512 / groups, at least 16)"),
    HS_FIELD_NUM(hg2_raw, depth, HS_F_INT, 0, 3, 0, 1e6, "guided: swap steps a round tries past its best before returning to it"),
    HS_FIELD_NUM(hg2_raw, first, HS_F_BOOL, 0, 0, 0, 1, "guided, hill: take the first improving move, not the best"),
    HS_FIELD_NUM(hg2_raw, reserve, HS_F_DOUBLE, 0, 1, 0, 1, "decode batch = KV tokens / (in + reserve x out)"),
    HS_FIELD_NUM(hg2_raw, maxtp, HS_F_INT, 0, HS_MAX_TP, 1, HS_MAX_TP, "largest TP degree tried"),
    HS_FIELD_NUM(hg2_raw, ttft, HS_F_DOUBLE, 0, 0, 0, 1e12, "distserve: TTFT target, ms (0: none)"),
    HS_FIELD_NUM(hg2_raw, tpot, HS_F_DOUBLE, 0, 0, 0, 1e12, "distserve: TPOT target, ms (0: none)"),
    HS_FIELD_STR(hg2_raw, trace, 0, "", "write \"seconds best_tokens_per_s\" lines of the search here"),
    HS_FIELD_NUM(hg2_raw, verbose, HS_F_BOOL, 0, 0, 0, 1, "print the search's progress"),
    {0},
};

int hs__hg2_opts_parse(const hs_planner_ops *p, hs_hg2_opts *o, const char *s, hs_err *err)
{
    hg2_raw r;
    int rc;
    memset(o, 0, sizeof *o);
    if ((rc = hs_planner_opts(p, s, &r, err))) return rc;
    if (!strcmp(r.search, "guided")) o->search = HS_HG2_GUIDED;
    else if (!strcmp(r.search, "hill")) o->search = HS_HG2_HILL;
    else if (!strcmp(r.search, "random")) o->search = HS_HG2_RANDOM;
    else if (!strcmp(r.search, "ga")) o->search = HS_HG2_GA;
    else if (!strcmp(r.search, "none")) o->search = HS_HG2_NONE;
    else return hs_errf(err, HS_EINVAL, "plan_opts: search: \"%s\" is not " HG2_SEARCH_HELP, r.search);
    if (!strcmp(r.prefill, "latency")) o->prefill_tput = 0;
    else if (!strcmp(r.prefill, "throughput")) o->prefill_tput = 1;
    else return hs_errf(err, HS_EINVAL, "plan_opts: prefill: \"%s\" is not latency or throughput", r.prefill);
    o->s_in = r.in;
    o->s_out = r.out;
    o->period = r.period;
    o->conc = r.conc;
    o->mem_tol = r.tol;
    o->time_limit = r.time;
    o->max_iters = r.iters;
    o->pop = r.pop;
    o->width = r.width;
    o->depth = r.depth;
    o->cands = r.cands;
    o->first = r.first;
    o->kv_reserve = r.reserve;
    o->max_tp = r.maxtp;
    o->ttft_s = r.ttft / 1e3;
    o->tpot_s = r.tpot / 1e3;
    o->quiet = !r.verbose;
    snprintf(o->trace, sizeof o->trace, "%s", r.trace);
    return 0;
}

extern const hs_planner_ops hs_planner_hexgen2;

int hs_hg2_opts_parse(hs_hg2_opts *o, const char *s, hs_err *err)
{
    return hs__hg2_opts_parse(&hs_planner_hexgen2, o, s, err);
}

/* ---------------------------------------------------------------- context */

int hs_hg2_ctx_create(hs_hg2_ctx **out, const hs_plan_req *req,
                      const hs_hg2_opts *o, hs_err *err)
{
    hs_hg2_ctx *x = calloc(1, sizeof *x);
    if (!x) return hs_errf(err, HS_ENOMEM, "out of memory");
    x->m = req->model;
    x->c = req->cluster;
    x->ec = *req->engine;
    if (req->perf) x->pc = *req->perf;
    else hs_perf_cfg_defaults(&x->pc);
    /* the host cost the simulation will charge (perf.c engine_terms) */
    if (x->pc.engine[0] && strcmp(x->pc.engine, "none")) {
        int rc = hs_ovh_find(&x->ovh, x->pc.engine, err);
        if (rc) {
            free(x);
            return rc;
        }
    }
    x->bits = req->bits ? req->bits : 16;
    x->max_tokens = req->max_tokens > 0 ? req->max_tokens : 8192;
    x->mml = req->max_model_len > 0 ? req->max_model_len : hs_model_max_context(req->model);
    x->o = *o;
    if (req->slo) x->slo = *req->slo;
    /* Lengths not given: the workload's means (rounded, so the plan does
     * not hang on the sample's last digit). */
    if (x->o.s_in <= 0 || x->o.s_out <= 0) {
        hs_plan_lengths L;
        double in = 1024, outl = 256;
        if (req->workload) {
            int rc = hs_plan_lengths_get(req->workload, &L, err);
            if (rc) {
                hs_hg2_ctx_destroy(x);
                return rc;
            }
            in = L.in_mean > 1 ? floor(L.in_mean + 0.5) : 1;
            outl = L.out_mean > 1 ? floor(L.out_mean + 0.5) : 1;
        }
        if (x->o.s_in <= 0) x->o.s_in = in;
        if (x->o.s_out <= 0) x->o.s_out = outl;
    }
    o = &x->o;
    /* The planned request must be one the engine would serve. */
    if (!(o->s_in >= 1 && o->s_out >= 1 && o->s_in + o->s_out <= x->mml)) {
        int mml = x->mml;
        hs_hg2_ctx_destroy(x);
        return hs_errf(err, HS_ERANGE, "plan_opts: in=%g + out=%g tokens must be at least 1 each and fit the %d-token context",
                       o->s_in, o->s_out, mml);
    }
    for (int t = 1; t <= HS_MAX_TP && t <= o->max_tp; t *= 2)
        if (req->model->heads % t == 0) x->tps[x->n_tps++] = t;
    /* TP 1 divides every head count: build_layout always has a cap */
    assert(x->n_tps >= 1 && x->n_tps <= (int)(sizeof x->tps / sizeof x->tps[0]) && x->tps[0] == 1);
    x->kvbtl = hs_model_kv_bytes_token_layer(req->model, 1, x->ec.kv_bits);
    hs_rng_seed(&x->rng, req->seed);
    x->tab_cap = 1024;
    x->tab = malloc((size_t)x->tab_cap * sizeof *x->tab);
    x->scratch = malloc((size_t)req->cluster->n_gpus * sizeof *x->scratch);
    x->kvbuf = calloc((size_t)req->cluster->n_gpus * 2, sizeof *x->kvbuf);
    x->touched = malloc((size_t)req->cluster->n_gpus * 2 * sizeof *x->touched);
    x->nicbw = calloc((size_t)req->cluster->n_gpus * 2, sizeof *x->nicbw);
    if (!x->tab || !x->scratch || !x->kvbuf || !x->touched || !x->nicbw) {
        hs_hg2_ctx_destroy(x);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    {
        /* each GPU's NIC (hw/net.h): its best link off the node, both ways;
         * read for every group of every placement evaluated */
        const hs_cluster *c = req->cluster;
        int n = c->n_gpus;
        for (int g = 0; g < n; g++)
            for (int k = 0; k < n; k++) {
                if (c->gpu_node[k] == c->gpu_node[g]) continue;
                if (hs_cluster_bw(c, g, k) > x->nicbw[g]) x->nicbw[g] = hs_cluster_bw(c, g, k);
                if (hs_cluster_bw(c, k, g) > x->nicbw[n + g]) x->nicbw[n + g] = hs_cluster_bw(c, k, g);
            }
    }
    memset(x->tab, 0xff, (size_t)x->tab_cap * sizeof *x->tab);
    x->t0 = hs_wall_s();
    x->prog_tty = -1;
    if (o->trace[0] && !(x->trace = fopen(o->trace, "w"))) {
        hs_hg2_ctx_destroy(x);
        return hs_errf(err, HS_EIO, "plan_opts: trace: cannot write %s", o->trace);
    }
    *out = x;
    return 0;
}

int hs_hg2_check_oom(const hs_hg2_ctx *x, int rc, hs_deploy *out, hs_err *err)
{
    if (!x->oom) return rc;
    if (!rc) hs_deploy_free(out);
    return hs_errf(err, HS_ENOMEM, "out of memory while evaluating placements");
}

void hs_hg2_ctx_destroy(hs_hg2_ctx *x)
{
    if (!x) return;
    for (long i = 0; i < x->n_ent; i++) {
        free(x->ent[i]->key);
        free(x->ent[i]->g.tp);
        free(x->ent[i]);
    }
    free(x->ent);
    free(x->tab);
    free(x->pkey);
    free(x->pval);
    free(x->scratch);
    free(x->kvbuf);
    free(x->touched);
    free(x->nicbw);
    free(x->sp_key);
    free(x->sp_val);
    free(x->sp_cross);
    free(x->cbase);
    free(x->cres);
    free(x->crho);
    free(x->sg);
    free(x->sg_n);
    free(x->rm_key);
    free(x->rm_off);
    free(x->rm_m);
    free(x->rm_lat);
    free(x->rm_pool);
    if (x->trace) fclose(x->trace);
    free(x);
}

void hs_hg2_stats_get(const hs_hg2_ctx *x, hs_hg2_stats *st)
{
    *st = x->st;
}

/* ---------------------------------------------------------------- output */

int hs_hg2_to_deploy(hs_hg2_ctx *x, const hs_hg2_place *p, const char *planner,
                     hs_deploy *out, hs_err *err)
{
    hs_hg2_eval ev = {0};
    int K = p->K, n = p->n_gpus, rc, *idx = NULL, *mem = NULL, n_dec = 0;
    double ttft_est = 0, tpot_est = 0;   /* s, the slowest prefill / decode group's */
    memset(out, 0, sizeof *out);
    if ((rc = hs_hg2_evaluate(x, p, &ev, err))) return rc;
    /* the weights route the requests: no group loaded past its share */
    if ((rc = hs__hg2_balance(p, &ev, err))) goto out;
    if (ev.flow <= 0) {
        rc = hs_errf(err, HS_ENOFIT, "%s: no placement of %s on cluster %s serves any request "
                     "(the model fits no group, or no prefill group reaches a decode group)",
                     planner, x->m->name, x->c->name);
        goto out;
    }
    idx = malloc((size_t)K * sizeof *idx);
    mem = malloc((size_t)n * sizeof *mem);
    if (!idx || !mem) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    snprintf(out->model, sizeof out->model, "%s", x->m->name);
    snprintf(out->cluster, sizeof out->cluster, "%s", x->c->name);
    snprintf(out->planner, sizeof out->planner, "%s", planner);
    for (int k = 0; k < K; k++) idx[k] = -1;
    /* replicas in group order; decode replicas get indices first so each
     * prefill replica's kv_route can be filled as it is added */
    for (int pass = 0; pass < 2 && !rc; pass++)
        for (int k = 0; k < K && !rc; k++) {
            hs_deploy_replica r;
            const hs_hg2_group *g;
            int m = 0;
            if (ev.cap[k] <= 0) continue;
            if ((pass == 0) != (p->role[k] != HS_HG2_PREFILL)) continue;
            for (int i = 0; i < n; i++)
                if (p->group[i] == k) mem[m++] = i;
            g = hs_hg2_eval_group(x, mem, m, p->role[k], p->t_only ? p->t_only[k] : 0,
                                  p->pp_only ? p->pp_only[k] : 0);
            assert(g->ok && g->id >= 0); /* cap > 0: evaluated, fits and cached above */
            memset(&r, 0, sizeof r);
            snprintf(r.role, sizeof r.role, "%s", p->role[k] == HS_HG2_PREFILL ? "prefill"
                                                  : p->role[k] == HS_HG2_DECODE ? "decode" : "colocated");
            r.weight = ev.gflow[k];
            if (p->role[k] == HS_HG2_PREFILL && g->lat_s > ttft_est) ttft_est = g->lat_s;
            if (p->role[k] == HS_HG2_DECODE && g->lat_s > tpot_est) tpot_est = g->lat_s;
            hs_hg2_group_layout(x, g, &r.layout);
            if (p->role[k] == HS_HG2_PREFILL && n_dec) {
                r.kv_route = calloc((size_t)out->n + 1, sizeof *r.kv_route);
                if (!r.kv_route) {
                    rc = hs_errf(err, HS_ENOMEM, "out of memory");
                    break;
                }
                r.n_kv_route = out->n + 1;
                for (int j = 0; j < K; j++)
                    if (idx[j] >= 0) r.kv_route[idx[j]] = ev.pair[(size_t)k * K + j];
            }
            if (p->role[k] == HS_HG2_DECODE) n_dec++;
            idx[k] = out->n;
            if ((rc = hs_deploy_add(out, &r, err))) free(r.kv_route);
        }
    /* kv_route vectors cover every replica */
    for (int32_t i = 0; !rc && i < out->n; i++) {
        hs_deploy_replica *r = &out->r[i];
        if (r->kv_route && r->n_kv_route < out->n) {
            double *nr = realloc(r->kv_route, (size_t)out->n * sizeof *nr);
            if (!nr) {
                rc = hs_errf(err, HS_ENOMEM, "out of memory");
                break;
            }
            for (int32_t j = r->n_kv_route; j < out->n; j++) nr[j] = 0;
            r->kv_route = nr;
            r->n_kv_route = out->n;
        }
    }
    if (!rc) {
        /* A plan that its own estimate says misses the run's targets is
         * still returned (the best found), but never silently. */
        double tt = x->o.ttft_s > 0 ? x->o.ttft_s : x->slo.ttft_ms / 1e3;
        double tp = x->o.tpot_s > 0 ? x->o.tpot_s : x->slo.tpot_ms / 1e3;
        if (tt > 0 && ttft_est > tt)
            fprintf(stderr, "%s: warning: estimated TTFT %.0f ms (slowest prefill group, a %g-token prompt, no queueing) "
                    "misses the %.0f ms target\n", planner, ttft_est * 1e3, x->o.s_in, tt * 1e3);
        if (tp > 0 && tpot_est > tp)
            fprintf(stderr, "%s: warning: estimated TPOT %.1f ms (slowest decode group) misses the %.1f ms target\n",
                    planner, tpot_est * 1e3, tp * 1e3);
    }
out:
    if (rc) hs_deploy_free(out);
    free(idx);
    free(mem);
    hs_hg2_eval_free(&ev);
    return rc;
}

int hs_hg2_plan_search(const hs_plan_req *q, const hs_hg2_opts *o, int colocated, const char *name,
                       hs_deploy *out, hs_err *err)
{
    hs_hg2_ctx *x = NULL;
    hs_hg2_place p = {0};
    int rc;
    if ((rc = hs_hg2_ctx_create(&x, q, o, err))) return rc;
    snprintf(x->name, sizeof x->name, "%s", name);
    rc = hs_hg2_search(x, &p, colocated, err);
    if (x->prog_shown && isatty(2)) fprintf(stderr, "\n");
    if (!rc) rc = hs_hg2_to_deploy(x, &p, name, out, err);
    if (!rc && !o->quiet) {
        hs_hg2_stats st;
        hs_hg2_stats_get(x, &st);
        /* appended fields only: tools/bench-hexgen2 reads fields 2 and 5 */
        fprintf(stderr, "%s: %.0f tokens/s estimated, %.3f s, %ld evaluations, %ld group evaluations, "
                "%ld iterations, %ld swaps, %ld re-partitions kept, %ld phase-1 re-runs kept, %.3f s CPU\n", name,
                st.best_tput, st.seconds, st.evals, st.group_evals, st.steps, st.swaps, st.repart_gains,
                st.k_changes, st.cpu_seconds);
    }
    hs_hg2_place_free(&p);
    rc = hs_hg2_check_oom(x, rc, out, err);
    hs_hg2_ctx_destroy(x);
    return rc;
}

static int plan(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    hs_hg2_opts o;
    int rc;
    if ((rc = hs_hg2_opts_parse(&o, q->opts, err))) return rc;
    if (q->cluster->n_gpus < 2)
        return hs_errf(err, HS_ENOFIT, "hexgen2: cluster %s has %d GPU, disaggregation needs 2",
                       q->cluster->name, q->cluster->n_gpus);
    return hs_hg2_plan_search(q, &o, 0, "hexgen2", out, err);
}

const hs_planner_ops hs_planner_hexgen2 = {
    .name = "hexgen2",
    .help = "HexGen-2: graph partition + max-flow + guided swaps and re-partition rounds, prefill/decode groups with KV routing (plan_opts)",
    .plan = plan,
    .opts = hs_hg2_opt_fields,
};
