/* hg2_baselines.c - the baselines of the HexGen-2 evaluation as planners,
 * on the same estimator (plan/hexgen2.h) so their searches compare like
 * with like:
 *   distserve - disaggregated, homogeneous replicas: one (TP, PP) for all
 *               prefill replicas and one for all decode replicas, and the
 *               replica counts, searched exhaustively for the most output
 *               tokens/s among placements whose estimated prefill latency
 *               and decode step meet the SLO (plan_opts ttft=, tpot= ms;
 *               DistServe's goodput search, Section 4 of its paper, with our
 *               estimator instead of its simulator); replicas take GPUs in
 *               id order so TP groups stay inside nodes;
 *   splitwise - a prefill pool and a decode pool of identical replicas
 *               (the smallest TP that holds the model, PP 1); the fastest
 *               replicas (FLOP/s) form the prefill pool, its size chosen
 *               for the most tokens/s;
 *   hexgen    - colocated replicas with asymmetric layouts found by the
 *               genetic algorithm (hexgen2.h, search=ga unless set).
 * vLLM is the uniform planner with the vllm policy. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/hexgen2.h"

static int fixed_alloc(hs_hg2_place *p, int n, hs_err *err)
{
    if (hs_hg2_place_alloc(p, n)) return hs_errf(err, HS_ENOMEM, "out of memory");
    p->t_only = calloc((size_t)n, sizeof *p->t_only);
    p->pp_only = calloc((size_t)n, sizeof *p->pp_only);
    if (!p->t_only || !p->pp_only) {
        hs_hg2_place_free(p);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    return 0;
}

extern const hs_planner_ops hs_planner_distserve, hs_planner_splitwise, hs_planner_hexgen;

static int common(const hs_plan_req *q, const hs_planner_ops *self, hs_hg2_opts *o, hs_hg2_ctx **x,
                  hs_err *err)
{
    const char *name = self->name;
    int rc;
    if ((rc = hs__hg2_opts_parse(self, o, q->opts, err))) return rc;
    if (q->cluster->n_gpus < 2 && strcmp(name, "hexgen"))
        return hs_errf(err, HS_ENOFIT, "%s: cluster %s has %d GPU, disaggregation needs 2", name,
                       q->cluster->name, q->cluster->n_gpus);
    return hs_hg2_ctx_create(x, q, o, err);
}

/* Fills groups of `size` GPUs in id order from GPU *next; role and fixed
 * layout per group; 0 when the GPUs ran out. */
static int take(hs_hg2_place *p, int *next, int k, int size, int role, int tp, int pp)
{
    if (*next + size > p->n_gpus) return 0;
    for (int i = 0; i < size; i++) p->group[(*next)++] = k;
    p->role[k] = role;
    p->t_only[k] = tp;
    p->pp_only[k] = pp;
    return 1;
}

static int distserve(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    hs_hg2_opts o;
    hs_hg2_ctx *x = NULL;
    hs_hg2_place p = {0}, best = {0};
    hs_hg2_eval ev = {0};
    int n = q->cluster->n_gpus, rc;
    double bv = 0;
    int bcfg[5] = {0};
    static const int pps[] = {1, 2, 4, 8};
    if ((rc = common(q, &hs_planner_distserve, &o, &x, err))) return rc;
    if ((rc = fixed_alloc(&p, n, err))) goto out;
    for (int tp1 = 1; tp1 <= HS_MAX_TP; tp1 *= 2)
        for (int a = 0; a < 4; a++)
            for (int tp2 = 1; tp2 <= HS_MAX_TP; tp2 *= 2)
                for (int b = 0; b < 4; b++) {
                    int gp = tp1 * pps[a], gd = tp2 * pps[b];
                    if (q->model->heads % tp1 || q->model->heads % tp2 || gp + gd > n) continue;
                    for (int np = 1; np * gp + gd <= n; np++) {
                        int next = 0, k = 0, nd = (n - np * gp) / gd, ok = 1;
                        for (int i = 0; i < n; i++) p.group[i] = -1;
                        for (int i = 0; i < np; i++, k++) take(&p, &next, k, gp, HS_HG2_PREFILL, tp1, pps[a]);
                        for (int i = 0; i < nd; i++, k++) take(&p, &next, k, gd, HS_HG2_DECODE, tp2, pps[b]);
                        p.K = k;
                        if ((rc = hs_hg2_evaluate(x, &p, &ev, err))) goto out;
                        /* SLO filter on the estimated TTFT (prefill latency) and TPOT */
                        for (int j = 0; j < k && ok; j++) ok = ev.cap[j] > 0;
                        if (!ok) continue;
                        {
                            int m = 0, *mem = malloc((size_t)n * sizeof *mem);
                            if (!mem) {
                                rc = hs_errf(err, HS_ENOMEM, "out of memory");
                                goto out;
                            }
                            /* Every group: on a mixed cluster later groups
                             * sit on other GPUs than the first of their phase. */
                            for (int kk = 0; kk < k && ok; kk++) {
                                int j = kk >= np;
                                const hs_hg2_group *gg;
                                m = 0;
                                for (int i = 0; i < n; i++)
                                    if (p.group[i] == kk) mem[m++] = i;
                                gg = hs_hg2_eval_group(x, mem, m, j ? HS_HG2_DECODE : HS_HG2_PREFILL,
                                                       j ? tp2 : tp1, pps[j ? b : a]);
                                if (!j && o.ttft_s > 0 && gg->lat_s > o.ttft_s) ok = 0;
                                if (j && o.tpot_s > 0 && gg->lat_s > o.tpot_s) ok = 0;
                            }
                            free(mem);
                        }
                        if (!ok || ev.tput <= bv * (1 + 1e-9)) continue;
                        bv = ev.tput;
                        bcfg[0] = tp1; bcfg[1] = pps[a]; bcfg[2] = tp2; bcfg[3] = pps[b]; bcfg[4] = np;
                        hs_hg2_place_free(&best);
                        if ((rc = fixed_alloc(&best, n, err))) goto out;
                        memcpy(best.group, p.group, (size_t)n * sizeof *p.group);
                        memcpy(best.role, p.role, (size_t)n * sizeof *p.role);
                        memcpy(best.t_only, p.t_only, (size_t)n * sizeof *p.t_only);
                        memcpy(best.pp_only, p.pp_only, (size_t)n * sizeof *p.pp_only);
                        best.K = p.K;
                    }
                }
    if (bv <= 0) {
        rc = hs_errf(err, HS_ENOFIT, "distserve: no homogeneous prefill/decode placement of %s on %s %s",
                     q->model->name, q->cluster->name,
                     o.ttft_s > 0 || o.tpot_s > 0 ? "meets the SLO (plan_opts ttft=, tpot=)" : "fits");
        goto out;
    }
    if (!o.quiet)
        fprintf(stderr, "distserve: prefill TP %d x PP %d x %d, decode TP %d x PP %d, %.0f tokens/s estimated\n",
                bcfg[0], bcfg[1], bcfg[4], bcfg[2], bcfg[3], bv);
    rc = hs_hg2_to_deploy(x, &best, "distserve", out, err);
out:
    hs_hg2_eval_free(&ev);
    hs_hg2_place_free(&p);
    hs_hg2_place_free(&best);
    rc = hs_hg2_check_oom(x, rc, out, err);
    hs_hg2_ctx_destroy(x);
    return rc;
}

static int splitwise(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    hs_hg2_opts o;
    hs_hg2_ctx *x = NULL;
    hs_hg2_place p = {0};
    hs_hg2_eval ev = {0};
    const hs_cluster *c = q->cluster;
    int n = c->n_gpus, rc, tp = 0, G = 0, *order = NULL, bnp = 0;
    double *speed = NULL, bv = 0;
    if ((rc = common(q, &hs_planner_splitwise, &o, &x, err))) return rc;
    if ((rc = fixed_alloc(&p, n, err))) goto out;
    order = malloc((size_t)n * sizeof *order);
    speed = malloc((size_t)n * sizeof *speed);
    if (!order || !speed) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    /* smallest TP whose in-node groups (GPU id order) hold the model */
    for (int t = 1; t <= HS_MAX_TP && !tp; t *= 2) {
        int ok_groups = 0;
        if (q->model->heads % t) continue;
        G = 0;
        for (int i = 0; i < n; i++) p.group[i] = -1;
        for (int i = 0; i + t <= n;) {
            int same = 1, m[HS_MAX_TP];
            for (int k = 1; k < t; k++) same &= c->gpu_node[i + k] == c->gpu_node[i];
            if (!same) { i++; continue; }
            for (int k = 0; k < t; k++) m[k] = i + k;
            if (hs_hg2_eval_group(x, m, t, HS_HG2_DECODE, t, 1)->ok) {
                for (int k = 0; k < t; k++) p.group[i + k] = G;
                speed[G] = t * hs_cluster_gpu(c, i)->flops16;
                p.t_only[G] = t;
                p.pp_only[G] = 1;
                G++;
                ok_groups++;
            }
            i += t;
        }
        if (ok_groups >= 2) tp = t;
    }
    if (!tp) {
        rc = hs_errf(err, HS_ENOFIT, "splitwise: %s fits fewer than two single-stage replicas on %s",
                     q->model->name, c->name);
        goto out;
    }
    for (int k = 0; k < G; k++) order[k] = k;
    for (int i = 1; i < G; i++) { /* fastest first, stable */
        int v = order[i], j = i;
        while (j > 0 && speed[order[j - 1]] < speed[v]) { order[j] = order[j - 1]; j--; }
        order[j] = v;
    }
    p.K = G;
    for (int np = 1; np < G; np++) {
        for (int k = 0; k < G; k++) p.role[order[k]] = k < np ? HS_HG2_PREFILL : HS_HG2_DECODE;
        if ((rc = hs_hg2_evaluate(x, &p, &ev, err))) goto out;
        if (ev.tput > bv * (1 + 1e-9)) {
            bv = ev.tput;
            bnp = np;
        }
    }
    for (int k = 0; k < G; k++) p.role[order[k]] = k < bnp ? HS_HG2_PREFILL : HS_HG2_DECODE;
    if (!o.quiet)
        fprintf(stderr, "splitwise: %d replicas of TP %d, %d prefill, %.0f tokens/s estimated\n", G, tp, bnp, bv);
    rc = hs_hg2_to_deploy(x, &p, "splitwise", out, err);
out:
    free(order);
    free(speed);
    hs_hg2_eval_free(&ev);
    hs_hg2_place_free(&p);
    rc = hs_hg2_check_oom(x, rc, out, err);
    hs_hg2_ctx_destroy(x);
    return rc;
}

static int hexgen(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    hs_hg2_opts o;
    int rc;
    if ((rc = hs__hg2_opts_parse(&hs_planner_hexgen, &o, q->opts, err))) return rc;
    /* HexGen's own search is the genetic algorithm */
    if (!q->opts || !strstr(q->opts, "search=")) o.search = HS_HG2_GA;
    return hs_hg2_plan_search(q, &o, 1, "hexgen", out, err);
}

const hs_planner_ops hs_planner_distserve = {
    .name = "distserve",
    .help = "DistServe: homogeneous prefill/decode replicas, TP x PP per phase searched for goodput (plan_opts ttft=, tpot=)",
    .plan = distserve,
    .opts = hs_hg2_opt_fields,
};
const hs_planner_ops hs_planner_splitwise = {
    .name = "splitwise",
    .help = "Splitwise: prefill pool (fastest replicas) + decode pool of identical single-stage replicas",
    .plan = splitwise,
    .opts = hs_hg2_opt_fields,
};
const hs_planner_ops hs_planner_hexgen = {
    .name = "hexgen",
    .help = "HexGen: colocated replicas with asymmetric TP/PP found by a genetic algorithm",
    .plan = hexgen,
    .opts = hs_hg2_opt_fields,
};
