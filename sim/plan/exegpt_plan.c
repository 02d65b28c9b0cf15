/* exegpt_plan.c - ExeGPT's XScheduler: branch and bound (plan/bnb.h) per
 * policy and TP degree over the estimator of exegpt_est.c; the deployment
 * of a schedule; the Table 6 case study.  See exegpt.h.
 *
 * Variables and their orientation (bnb.h needs throughput and latency
 * non-decreasing in every index):
 *   x0 = B_E in [1, max_be]            (larger batch: more of both);
 *   x1 = N_D as nd_max - x1, RRA only  (encoding more often: more of both,
 *                                       Sec. 4.2 "Encoding frequency");
 *   xk = k as k_max - xk, when t > 1   (fewer TP GPUs: deeper pipeline,
 *                                       more latency and throughput).
 * Memory is non-decreasing along the same directions, which makes "does
 * not fit" a valid bottom-corner prune.  WAA's split N_E steps with B_E, so
 * its B_E range is searched in runs of one N_E (hs_exegpt_plan).  The estimator is only close to
 * monotone (integer stage splits, micro-batch rounding); tests compare the
 * search with exhaustive enumeration on the real estimator. */
#include "plan/exegpt.h"
#include "core/progress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/time.h"

/* ---- the planner ------------------------------------------------------------------ */

void hs_exegpt_plan_opts_defaults(hs_exegpt_plan_opts *o)
{
    memset(o, 0, sizeof *o);
    o->lat_bound = INFINITY;
    o->sla = HS_EXEGPT_SLA_B;
    o->split = HS_BNB_SPLIT_PAPER;
}

typedef struct search_ctx {
    hs_exegpt *x;
    int policy, tp, nd_max, k_max, sla, dim;
} search_ctx;

static void point_cfg(const search_ctx *s, const int *v, hs_exegpt_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->policy = s->policy;
    cfg->tp = s->tp;
    cfg->be = v[0];
    if (s->policy == HS_EXEGPT_RRA) {
        cfg->nd = s->nd_max - v[1];
        cfg->tp_groups = s->tp > 1 ? s->k_max - v[2] : 0;
    } else {
        cfg->tp_groups = s->tp > 1 ? s->k_max - v[1] : 0;
    }
}

static int perf_cb(void *ctx, const int *v, hs_bnb_val *out, hs_err *err)
{
    const search_ctx *s = ctx;
    hs_exegpt_cfg cfg;
    hs_exegpt_est e;
    int rc;
    point_cfg(s, v, &cfg);
    if ((rc = hs_exegpt_estimate(s->x, &cfg, &e, err))) return rc;
    out->thr = e.thr;
    out->lat = s->sla == HS_EXEGPT_SLA_A ? e.lat_a : e.lat_b;
    out->ok = e.fit == HS_EXEGPT_FITS;
    return 0;
}

/* 1 when (ea) beats (eb): throughput, then latency. */
static int est_better(const hs_exegpt_est *ea, const hs_exegpt_est *eb, int sla)
{
    double la = sla == HS_EXEGPT_SLA_A ? ea->lat_a : ea->lat_b;
    double lb = sla == HS_EXEGPT_SLA_A ? eb->lat_a : eb->lat_b;
    if (ea->thr != eb->thr) return ea->thr > eb->thr;
    return la < lb;
}

/* One branch-and-bound search: policy, TP degree t, B_E in [b_lo, b_hi]. */
static int search_box(hs_exegpt *x, const hs_exegpt_plan_opts *o, int pol, int t, int b_lo,
                      int b_hi, hs_exegpt_result *out, hs_err *err)
{
    search_ctx s;
    hs_bnb_opts bo;
    hs_bnb_result r;
    int lo[3] = {b_lo, 0, 0}, hi[3] = {b_hi, 0, 0}, rc;
    memset(&s, 0, sizeof s);
    s.x = x;
    s.policy = pol;
    s.tp = t;
    s.nd_max = hs_exegpt_max_nd(x);
    s.k_max = hs_exegpt_gpus(x) / t;
    s.sla = o->sla;
    s.dim = 1;
    if (pol == HS_EXEGPT_RRA) hi[s.dim++] = s.nd_max - 1;
    if (t > 1) hi[s.dim++] = s.k_max;
    hs_bnb_opts_defaults(&bo);
    bo.lat_bound = o->lat_bound;
    bo.eps_t = o->eps_t;
    bo.eps_l = o->eps_l;
    bo.split = o->split;
    bo.exhaustive = o->exhaustive;
    if ((rc = hs_bnb_solve(s.dim, lo, hi, perf_cb, &s, &bo, &r, err))) {
        hs_err_prefix(err, "exegpt plan %s TP %d: ", hs_exegpt_policy_name(pol), t);
        return rc;
    }
    out->evals += r.evals;
    out->evals_by[pol] += r.evals;
    out->points += r.points;
    out->searches++;
    if (r.found) {
        hs_exegpt_cfg cfg;
        hs_exegpt_est e;
        point_cfg(&s, r.x, &cfg);
        if ((rc = hs_exegpt_estimate(x, &cfg, &e, err))) return rc;
        if (!out->found_by[pol] || est_better(&e, &out->est_by[pol], o->sla)) {
            out->found_by[pol] = 1;
            out->cfg_by[pol] = cfg;
            out->est_by[pol] = e;
        }
        if (!out->found || est_better(&e, &out->est, o->sla)) {
            out->found = 1;
            out->cfg = cfg;
            out->est = e;
        }
    }
    return 0;
}

int hs_exegpt_plan(hs_exegpt *x, const hs_exegpt_plan_opts *o, hs_exegpt_result *out, hs_err *err)
{
    const hs_model *m = hs_exegpt_model(x);
    unsigned mask = o->policies ? o->policies : (1u << HS_EXEGPT_NPOLICY) - 1;
    int n = hs_exegpt_gpus(x), max_tp = o->max_tp ? o->max_tp : hs_exegpt_node_gpus(x);
    int max_be = o->max_be ? o->max_be : hs_exegpt_max_be(x), rc = 0;
    hs_progress pg;
    memset(out, 0, sizeof *out);
    if (isnan(o->lat_bound) || !(o->lat_bound > 0) || max_be < 1 || max_tp < 1 ||
        (o->sla != HS_EXEGPT_SLA_A && o->sla != HS_EXEGPT_SLA_B))
        return hs_errf(err, HS_EINVAL, "exegpt plan: bound %g s, max B_E %d, max TP %d, sla %d",
                       o->lat_bound, max_be, max_tp, o->sla);
    if (max_tp > hs_exegpt_node_gpus(x)) max_tp = hs_exegpt_node_gpus(x);
    if (max_tp > HS_MAX_TP) max_tp = HS_MAX_TP;
    hs_progress_start(&pg, "exegpt search", 1, 0);
    for (int pol = 0; pol < HS_EXEGPT_NPOLICY; pol++) {
        if (!(mask & (1u << pol))) continue;
        if (pol != HS_EXEGPT_RRA && n < 2) continue;  /* WAA needs an encode and a decode GPU */
        for (int t = 1; t <= max_tp && t <= n; t++) {
            if (m->heads % t) continue;
            /* WAA: a TP group must fit on one side. */
            if (pol != HS_EXEGPT_RRA && t > 1 && t > n - 1) continue;
            /* WAA's split N_E depends on B_E and changes the pipelines (and
             * throughput) in steps, which breaks monotonicity in B_E across
             * a step (WAA-M moves GPUs to decoding as B_E grows, Sec. 4.1).
             * Within a run of B_E with one N_E the functions are monotone,
             * so each run is searched as its own box. */
            for (int b_lo = 1, b_hi; b_lo <= max_be; b_lo = b_hi + 1) {
                b_hi = max_be;
                if (pol != HS_EXEGPT_RRA) {
                    int ne0, ne;
                    if ((rc = hs_exegpt_waa_split(x, pol, b_lo, &ne0, err))) goto end;
                    for (b_hi = b_lo; b_hi < max_be; b_hi++) {
                        if ((rc = hs_exegpt_waa_split(x, pol, b_hi + 1, &ne, err))) goto end;
                        if (ne != ne0) break;
                    }
                }
                if (hs_progress_due(&pg))
                    hs_progress_printf(&pg, "%s TP %d B_E %d-%d, %lld evaluations", hs_exegpt_policy_name(pol), t,
                                       b_lo, b_hi, (long long)out->evals);
                if ((rc = search_box(x, o, pol, t, b_lo, b_hi, out, err))) goto end;
            }
        }
    }
end:
    hs_progress_end(&pg);
    return rc;
}

void hs_exegpt_cfg_str(const hs_exegpt_cfg *cfg, const hs_exegpt_est *e, char *buf, size_t cap)
{
    int k = e ? e->tp_groups : cfg->tp_groups;
    if (cfg->policy == HS_EXEGPT_RRA)
        snprintf(buf, cap, "RRA B_E=%d N_D=%d TP=%dx%d", cfg->be, cfg->nd, cfg->tp, cfg->tp > 1 ? k : 0);
    else if (e)
        snprintf(buf, cap, "%s B_E=%d TP=%dx%d B_m=%d GPUs %dE+%dD", hs_exegpt_policy_name(cfg->policy),
                 cfg->be, cfg->tp, cfg->tp > 1 ? k : 0, e->bm, e->n_enc, e->n_dec);
    else
        snprintf(buf, cap, "%s B_E=%d TP=%dx%d", hs_exegpt_policy_name(cfg->policy), cfg->be,
                 cfg->tp, cfg->tp > 1 ? k : 0);
}

int hs_exegpt_deploy(hs_exegpt *x, const hs_exegpt_cfg *cfg, hs_deploy *out, hs_err *err)
{
    const hs_model *m = hs_exegpt_model(x);
    hs_layout enc, dec;
    hs_deploy_replica r;
    int rc;
    memset(out, 0, sizeof *out);
    if ((rc = hs_exegpt_layouts(x, cfg, &enc, &dec, err))) return rc;
    snprintf(out->model, sizeof out->model, "%s", m->name);
    snprintf(out->planner, sizeof out->planner, "exegpt");
    memset(&r, 0, sizeof r);
    r.weight = 1;
    r.layout = enc;
    snprintf(r.role, sizeof r.role, "%s",
             cfg->policy == HS_EXEGPT_RRA ? "colocated" : "prefill");
    if ((rc = hs_deploy_add(out, &r, err))) goto fail;
    if (cfg->policy != HS_EXEGPT_RRA) {
        r.layout = dec;
        snprintf(r.role, sizeof r.role, "decode");
        if ((rc = hs_deploy_add(out, &r, err))) goto fail;
    }
    return 0;
fail:
    hs_deploy_free(out);
    return rc;
}

/* ---- Table 6 ------------------------------------------------------------------ */

int hs_exegpt_table6(FILE *fp, const hs_perf_cfg *pc, int bd_mode, hs_exegpt_result *out,
                     double *wall_s, hs_err *err)
{
    static const struct {
        double lb;
        const char *sched, *vars;
        double lat, thr;
    } paper[4] = {
        {3.1, "WAA", "B_E=4, TP=2", 3.01, 22.41},
        {5.9, "WAA", "B_E=10, TP=2", 4.11, 23.76},
        {11.5, "RRA", "B_E=52, N_D=13, TP=4", 10.23, 25.23},
        {INFINITY, "RRA", "B_E=49, N_D=7, TP=4", 16.87, 26.15},
    };
    hs_model m;
    hs_cluster *c = NULL;
    hs_workload_cfg wc;
    hs_exegpt_dist din = {0, NULL}, dout = {0, NULL};
    hs_exegpt_opts eo;
    hs_exegpt *x = NULL;
    int rc;
    if ((rc = hs_model_find(&m, "opt-13b", err)) ||
        (rc = hs_cluster_find(&c, "exegpt-a40x4", err)))
        goto done;
    hs_workload_defaults(&wc);
    if ((rc = hs_workload_set(&wc, "preset", "S", err)) ||
        (rc = hs_exegpt_dist_from_lendist(&din, &wc.prompt, err)) ||
        (rc = hs_exegpt_dist_from_lendist(&dout, &wc.output, err)))
        goto done;
    hs_exegpt_opts_defaults(&eo);
    if (pc) eo.perf = *pc;
    eo.bd_mode = bd_mode;
    if ((rc = hs_exegpt_create(&x, &m, c, &din, &dout, &eo, err))) goto done;
    fprintf(fp, "ExeGPT Table 6: OPT-13B on exegpt-a40x4 (4x A40-48GB, PCIe), task S "
                "(in %.0f avg, out %.1f avg, p99 %d tokens), SLA (b), latency model %s, B_D %s\n",
            hs_exegpt_dist_mean(&din), hs_exegpt_dist_mean(&dout), hs_exegpt_dist_quantile(&dout, 0.99),
            eo.perf.model, bd_mode == HS_EXEGPT_BD_PAPER ? "paper" : "steady");
    fprintf(fp, "%-6s | %-28s %7s %8s | %-44s %7s %8s %7s %7s %8s\n", "L_B", "paper schedule", "lat s",
            "q/s", "hetsim schedule", "lat s", "q/s", "evals", "of box", "time s");
    for (int i = 0; i < 4; i++) {
        hs_exegpt_plan_opts po;
        hs_exegpt_result pl;
        char lb[16], ours[96], pp[64];
        double t0;
        hs_exegpt_plan_opts_defaults(&po);
        po.lat_bound = paper[i].lb;
        t0 = hs_wall_s();
        if ((rc = hs_exegpt_plan(x, &po, &pl, err))) goto done;
        t0 = hs_wall_s() - t0;
        if (out) out[i] = pl;
        if (wall_s) wall_s[i] = t0;
        snprintf(lb, sizeof lb, isinf(paper[i].lb) ? "Inf" : "%.1f", paper[i].lb);
        snprintf(pp, sizeof pp, "%s %s", paper[i].sched, paper[i].vars);
        if (pl.found) hs_exegpt_cfg_str(&pl.cfg, &pl.est, ours, sizeof ours);
        else snprintf(ours, sizeof ours, "(none meets the bound)");
        fprintf(fp, "%-6s | %-28s %7.2f %8.2f | %-44s %7.2f %8.2f %7lld %6.2f%% %8.3f\n", lb, pp,
                paper[i].lat, paper[i].thr, ours, pl.found ? pl.est.lat_b : NAN,
                pl.found ? pl.est.thr : NAN, (long long)pl.evals,
                pl.points ? 100.0 * pl.evals / pl.points : 0.0, t0);
        for (int pol = 0; pol < HS_EXEGPT_NPOLICY; pol++) {
            char s[96];
            if (!pl.found_by[pol]) {
                fprintf(fp, "%-6s   best %-5s: none\n", "", hs_exegpt_policy_name(pol));
                continue;
            }
            hs_exegpt_cfg_str(&pl.cfg_by[pol], &pl.est_by[pol], s, sizeof s);
            fprintf(fp, "%-6s   best %-5s: %-44s lat %.2f s, %.2f q/s, B_D %.1f, mem %.1f/%.1f GiB, %lld evals\n",
                    "", hs_exegpt_policy_name(pol), s, pl.est_by[pol].lat_b, pl.est_by[pol].thr,
                    pl.est_by[pol].bd, pl.est_by[pol].mem_peak / 1073741824.0,
                    pl.est_by[pol].mem_cap / 1073741824.0, (long long)pl.evals_by[pol]);
        }
    }
done:
    hs_exegpt_destroy(x);
    hs_exegpt_dist_free(&din);
    hs_exegpt_dist_free(&dout);
    hs_cluster_destroy(c);
    return rc;
}
