/* iserve_plan.c - the "iserve" planner for `hetsim plan` / `hetsim run`:
 * one model on an empty cluster, configuration chosen by an intent
 * (--plan-opts intent=, default min-cost = memory x latency, as iServe's
 * default) from the fingerprint estimate, placed with per-layer memory
 * blocks (placement=, default first-feasible).  The result is an
 * ordinary deployment (one replica), so continuous batching, routing and
 * the database all apply.  Only the weight/KV formats are offered (pruned
 * variants are dense to the engine), and a configuration is kept only when
 * the engine's own memory model leaves one full context of KV per lane.
 * The ranking prices each format at its measured ratio to FP16
 * (hs_isv_variant.lat_ratio), and so does the run: the replica carries a
 * latency_scale that makes its one-sequence decode step at
 * HS_ISV_RATIO_CTX that ratio times its FP16 twin's (hs_solo_build, as
 * `hetsim iserve run` scales its instances), on the run's latency model. */
#include <stdlib.h>
#include <string.h>

#include "plan/iserve.h"
#include "plan/iserve_multi.h"
#include "plan/plan.h"
#include "core/progress.h"

/* The planner's options (--plan-opts). */
typedef struct isv_popts {
    char intent[24];
    double target;     /* latency-slo: s; cost-budget: GiB x s */
    int output;        /* output tokens of the reference request */
    char placement[16];
} isv_popts;

static const hs_field popts[] = {
    HS_FIELD_STR(isv_popts, intent, 0, "min-cost",
                 "min-latency, min-cost, min-memory, min-gpu-hours, latency-slo or cost-budget"),
    HS_FIELD_NUM(isv_popts, target, HS_F_DOUBLE, 0, 0, 0, 1e12,
                 "the intent's target: latency-slo s, cost-budget GiB x s"),
    HS_FIELD_NUM(isv_popts, output, HS_F_INT, 0, 128, 1, 1 << 20, "output tokens of the request the intent is judged on"),
    HS_FIELD_STR(isv_popts, placement, 0, "first", "hybrid, pack, least-loaded or first"),
    {0},
};

extern const hs_planner_ops hs_planner_iserve;

static int find_name(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}

static int plan(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    const hs_cluster *c = q->cluster;
    hs_isv_ctl k;
    hs_isv_opts o;
    hs_isv_cfg *sp = NULL;
    hs_isv_intent in;
    isv_popts po;
    hs_progress pg;
    double *fr = NULL, *zero = NULL;
    int n = 0, nr, rc, place;
    memset(&k, 0, sizeof k);
    memset(out, 0, sizeof *out);
    if ((rc = hs_planner_opts(&hs_planner_iserve, q->opts, &po, err))) return rc;
    in.kind = hs_isv_intent_parse(po.intent);
    in.target = po.target;
    in.output = po.output;
    if (in.kind < 0)
        return hs_errf(err, HS_EINVAL, "plan_opts: intent: \"%s\" is not one of min-latency, min-cost, "
                       "min-memory, min-gpu-hours, latency-slo, cost-budget", po.intent);
    if ((in.kind == HS_ISV_LATENCY_SLO || in.kind == HS_ISV_COST_BUDGET) && !(po.target > 0))
        return hs_errf(err, HS_EINVAL, "plan_opts: target: intent %s needs a target > 0", po.intent);
    if ((place = find_name(hs_isv_place_names, HS_ISV_NPLACE, po.placement)) < 0)
        return hs_errf(err, HS_EINVAL, "plan_opts: placement: \"%s\" is not hybrid, pack, least-loaded or first",
                       po.placement);
    hs_isv_opts_defaults(&o);
    if (q->perf) o.perf = *q->perf;   /* rank and scale on the model the run uses */
    if ((rc = hs_isv_ctl_init(&k, c, q->model, 1, &o, NULL, q->engine->gpu_mem_util, err))) return rc;
    if ((rc = hs_isv_space(q->model, c->n_gpus, &sp, &n, err))) goto done;
    fr = calloc((size_t)c->n_gpus, sizeof *fr);
    zero = calloc((size_t)c->n_gpus, sizeof *zero);
    if (!fr || !zero) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto done;
    }
    for (int g = 0; g < c->n_gpus; g++) fr[g] = hs_cluster_gpu(c, g)->mem_bytes * q->engine->gpu_mem_util;
    {
        int meet = 0;
        nr = hs_isv_rank(&k.est[0], &in, sp, n, &meet);
        if (nr < 0) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto done;
        }
        /* A target is a constraint here: the best-effort tail that ranking
         * appends after the configurations meeting it is not a plan. */
        if (meet < nr) nr = meet;
    }
    rc = HS_ENOFIT;
    hs_progress_start(&pg, "iserve search", 1, 0);
    for (int i = 0; i < nr; i++) {
        hs_isv_gpus g = {c->n_gpus, fr, zero, zero};
        hs_isv_placement pl;
        hs_deploy_replica r;
        int64_t blocks;
        if (hs_progress_due(&pg)) hs_progress_printf(&pg, "configuration %d of %d placed", i + 1, nr);
        if (hs_isv_var(sp[i].var)->prune != HS_ISV_PRUNE_NONE) continue;
        if (hs_isv_place(q->model, &k.est[0], &sp[i], &g, place, 0, &pl, NULL)) continue;
        blocks = hs_layout_kv_blocks(q->model, c, &pl.layout, q->engine, q->max_tokens, NULL);
        if (blocks < 0 || blocks / pl.layout.pp * q->engine->block_size < q->max_model_len) continue;
        memset(&r, 0, sizeof r);
        snprintf(r.role, sizeof r.role, "colocated");
        r.weight = 1;
        r.layout = pl.layout;
        {
            /* tables as the run's engine builds them (a fitted decode
             * attention depends on the batches it spans) */
            hs_solo so;
            char cs[64];
            hs_isv_cfg_str(&sp[i], cs, sizeof cs);
            if ((rc = hs_solo_build(&so, &o.perf, q->model, c, &pl.layout, q->max_tokens > 0 ? q->max_tokens : 1,
                                    q->engine->max_num_seqs > 0 ? q->engine->max_num_seqs : 1,
                                    hs_isv_var(sp[i].var)->lat_ratio, 0, err))) {
                hs_err_prefix(err, "iserve: %s: ", cs);
                break;
            }
            hs_solo_free(&so);   /* its tables; the factor stays */
            if (!(so.lat_factor >= HS_LATENCY_SCALE_MIN && so.lat_factor <= HS_LATENCY_SCALE_MAX)) {
                rc = hs_errf(err, HS_ERANGE, "iserve: %s: the latency model puts its format at %g times the "
                             "measured ratio, outside %g..%g", cs, 1 / so.lat_factor, HS_LATENCY_SCALE_MIN,
                             HS_LATENCY_SCALE_MAX);
                break;
            }
            if (so.lat_factor != 1) r.latency_scale = so.lat_factor;
            snprintf(out->summary, sizeof out->summary,
                     "iserve: %s, latency_scale %.4g (the format's measured decode ratio to FP16, %.4g)", cs,
                     so.lat_factor, hs_isv_var(sp[i].var)->lat_ratio);
        }
        snprintf(out->model, sizeof out->model, "%s", q->model->name);
        snprintf(out->cluster, sizeof out->cluster, "%s", c->name);
        snprintf(out->planner, sizeof out->planner, "iserve");
        rc = hs_deploy_add(out, &r, err);
        break;
    }
    hs_progress_end(&pg);
    if (rc == HS_ENOFIT)
        hs_errf(err, HS_ENOFIT, "iserve: %s fits cluster %s in no configuration%s", q->model->name, c->name,
                in.kind == HS_ISV_LATENCY_SLO || in.kind == HS_ISV_COST_BUDGET ? " that meets the intent's target" : "");
done:
    if (rc) hs_deploy_free(out);
    free(sp);
    free(fr);
    free(zero);
    hs_isv_ctl_free(&k);
    return rc;
}

const hs_planner_ops hs_planner_iserve = {
    .name = "iserve",
    .command = hs_iserve_command,
    .command_help = "iServe: fingerprint estimator, intents, multi-model cluster runs",
    .help = "iServe: fingerprint-estimated configuration (TP, PP, weight/KV format) for an intent (default min-cost = memory x latency), per-layer-block placement",
    .plan = plan,
    .opts = popts,
};
