/* iserve_plan.c - the "iserve" planner for `hetsim plan` / `hetsim run`:
 * one model on an empty cluster, configuration chosen by iServe's default
 * intent (minimise cost = memory x latency) from the fingerprint estimate,
 * placed first-feasible with per-layer memory blocks.  The result is an
 * ordinary deployment (one replica), so continuous batching, routing and
 * the database all apply.  Only the weight/KV formats are offered (pruned
 * variants need a latency factor a deployment JSON does not carry), and a
 * configuration is kept only when the engine's own memory model leaves one
 * full context of KV per lane. */
#include <stdlib.h>
#include <string.h>

#include "plan/iserve.h"
#include "plan/plan.h"

static int plan(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    const hs_cluster *c = q->cluster;
    hs_isv_ctl k;
    hs_isv_opts o;
    hs_isv_cfg *sp = NULL;
    hs_isv_intent in = {HS_ISV_MIN_COST, 0, 128};
    double *fr = NULL, *zero = NULL;
    int n = 0, nr, rc;
    memset(&k, 0, sizeof k);
    memset(out, 0, sizeof *out);
    hs_isv_opts_defaults(&o);
    if ((rc = hs_isv_ctl_init(&k, c, q->model, 1, &o, NULL, q->engine->gpu_mem_util, err))) return rc;
    if ((rc = hs_isv_space(q->model, c->n_gpus, &sp, &n, err))) goto done;
    fr = calloc((size_t)c->n_gpus, sizeof *fr);
    zero = calloc((size_t)c->n_gpus, sizeof *zero);
    if (!fr || !zero) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto done;
    }
    for (int g = 0; g < c->n_gpus; g++) fr[g] = hs_cluster_gpu(c, g)->mem_bytes * q->engine->gpu_mem_util;
    nr = hs_isv_rank(&k.est[0], &in, sp, n, NULL);
    rc = HS_ENOFIT;
    for (int i = 0; i < nr; i++) {
        hs_isv_gpus g = {c->n_gpus, fr, zero, zero};
        hs_isv_placement pl;
        hs_deploy_replica r;
        int64_t blocks;
        if (hs_isv_var(sp[i].var)->prune != HS_ISV_PRUNE_NONE) continue;
        if (hs_isv_place(q->model, &k.est[0], &sp[i], &g, HS_ISV_PLACE_FIRST, 0, &pl, NULL)) continue;
        blocks = hs_layout_kv_blocks(q->model, c, &pl.layout, q->engine, q->max_tokens, NULL);
        if (blocks < 0 || blocks / pl.layout.pp * q->engine->block_size < q->max_model_len) continue;
        memset(&r, 0, sizeof r);
        snprintf(r.role, sizeof r.role, "colocated");
        r.weight = 1;
        r.layout = pl.layout;
        snprintf(out->model, sizeof out->model, "%s", q->model->name);
        snprintf(out->cluster, sizeof out->cluster, "%s", c->name);
        snprintf(out->planner, sizeof out->planner, "iserve");
        rc = hs_deploy_add(out, &r, err);
        break;
    }
    if (rc == HS_ENOFIT)
        hs_errf(err, HS_ENOFIT, "iserve: %s fits cluster %s in no configuration", q->model->name, c->name);
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
    .help = "iServe: fingerprint-estimated configuration (TP, PP, weight/KV format) minimising memory x latency, per-layer-block placement",
    .plan = plan,
};
