/* uniform.c - the "uniform" planner: identical TP x PP replicas packed onto
 * the cluster in GPU order.
 *
 * Each stage's TP group is taken inside one node (the first node, in order,
 * with tp free GPUs), because tensor parallelism across a network is rarely
 * worth it; a TP group larger than every node spans nodes.  Layers are
 * split evenly over stages (the first stages take the remainder).  With
 * tp = 0 the smallest TP degree that divides the heads and leaves KV room
 * for one full context on every replica is chosen.  Replicas whose GPUs
 * cannot hold the model are an error naming the replica, never silently
 * skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

/* Fills out the GPUs of one stage; 0 when none are left. */
static int take_group(const hs_cluster *c, char *used, int tp, int *gpus)
{
    for (int node = 0; node < c->n_nodes; node++) {
        int n = 0;
        for (int g = 0; g < c->n_gpus && n < tp; g++)
            if (c->gpu_node[g] == node && !used[g]) gpus[n++] = g;
        if (n == tp) {
            for (int k = 0; k < tp; k++) used[gpus[k]] = 1;
            return 1;
        }
    }
    /* No node has tp free GPUs: span nodes only if no node could ever hold
     * the group, keeping GPU order. */
    {
        int biggest = 0, n = 0;
        for (int node = 0; node < c->n_nodes; node++) {
            int cnt = 0;
            for (int g = 0; g < c->n_gpus; g++) cnt += c->gpu_node[g] == node;
            if (cnt > biggest) biggest = cnt;
        }
        if (tp <= biggest) return 0;
        for (int g = 0; g < c->n_gpus && n < tp; g++)
            if (!used[g]) gpus[n++] = g;
        if (n < tp) return 0;
        for (int k = 0; k < tp; k++) used[gpus[k]] = 1;
        return 1;
    }
}

static int plan_tp(const hs_plan_req *q, int tp, hs_deploy *out, hs_err *err)
{
    const hs_cluster *c = q->cluster;
    char *used = calloc((size_t)c->n_gpus, 1);
    int rc = 0;
    if (!used) return hs_errf(err, HS_ENOMEM, "out of memory");
    memset(out, 0, sizeof *out);
    snprintf(out->model, sizeof out->model, "%s", q->model->name);
    snprintf(out->cluster, sizeof out->cluster, "%s", c->name);
    snprintf(out->planner, sizeof out->planner, "uniform");
    while (!q->max_replicas || out->n < q->max_replicas) {
        hs_deploy_replica r;
        int ok = 1, base = q->model->layers / q->pp, extra = q->model->layers % q->pp;
        memset(&r, 0, sizeof r);
        snprintf(r.role, sizeof r.role, "colocated");
        r.weight = 1;
        r.layout.pp = q->pp;
        r.layout.kv_bits = q->engine->kv_bits;
        for (int s = 0; s < q->pp && ok; s++) {
            r.layout.stage[s].tp = tp;
            r.layout.stage[s].bits = q->bits;
            r.layout.stage[s].layers = base + (s < extra);
            ok = take_group(c, used, tp, r.layout.stage[s].gpus);
        }
        if (!ok) break;
        if ((rc = hs_deploy_add(out, &r, err))) break;
    }
    free(used);
    if (!rc && q->prefill_replicas > 0) {
        if (q->prefill_replicas >= out->n)
            rc = hs_errf(err, HS_EINVAL,
                         "prefill_replicas: %d of %d replicas leaves none to decode",
                         q->prefill_replicas, out->n);
        for (int32_t i = 0; !rc && i < out->n; i++)
            snprintf(out->r[i].role, sizeof out->r[i].role, "%s",
                     i < q->prefill_replicas ? "prefill" : "decode");
    }
    if (!rc && out->n == 0)
        rc = hs_errf(err, HS_ENOFIT, "cluster %s has too few GPUs for one TP %d x PP %d replica (%d GPUs)",
                     c->name, tp, q->pp, c->n_gpus);
    if (rc) hs_deploy_free(out);
    return rc;
}

/* 0 when every replica holds its weights and one full context. */
static int fits(const hs_plan_req *q, const hs_deploy *d, hs_err *err)
{
    for (int32_t i = 0; i < d->n; i++) {
        const hs_layout *l = &d->r[i].layout;
        int64_t b = hs_layout_kv_blocks(q->model, q->cluster, l, q->engine, q->max_tokens, err);
        if (b < 0) return hs_err_prefix(err, "replica %d: ", i);
        if (b / l->pp * q->engine->block_size < q->max_model_len)
            return hs_errf(err, HS_ENOFIT,
                           "replica %d: %s leaves KV room for %lld tokens per lane, less than one %d-token context",
                           i, q->model->name, (long long)(b / l->pp * q->engine->block_size), q->max_model_len);
    }
    return 0;
}

static int plan(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    int rc;
    if (q->pp < 1) return hs_errf(err, HS_ERANGE, "pp: %d < 1", q->pp);
    if (q->pp > q->model->layers)
        return hs_errf(err, HS_ERANGE, "pp: %d stages for %d layers", q->pp, q->model->layers);
    if (q->tp) {
        if (q->model->heads % q->tp)
            return hs_errf(err, HS_EINVAL, "tp: %d does not divide the %d heads of %s",
                           q->tp, q->model->heads, q->model->name);
        if ((rc = plan_tp(q, q->tp, out, err))) return rc;
        if ((rc = fits(q, out, err))) hs_deploy_free(out);
        return rc;
    }
    {
        char last[HS_ERR_MSG_MAX] = "no TP degree divides the heads";
        for (int tp = 1; tp <= HS_MAX_TP; tp *= 2) {
            if (q->model->heads % tp) continue;
            if (tp * q->pp > q->cluster->n_gpus) break;
            if (plan_tp(q, tp, out, err)) continue;
            if (!fits(q, out, err)) return 0;
            if (err) snprintf(last, sizeof last, "%s", err->msg);
            hs_deploy_free(out);
        }
        return hs_errf(err, HS_ENOFIT, "%s does not fit on cluster %s with pp %d at any TP degree (last try: %s)",
                       q->model->name, q->cluster->name, q->pp, last);
    }
}

const hs_planner_ops hs_planner_uniform = {
    .name = "uniform",
    .help = "identical TP x PP replicas packed in GPU order, TP groups inside nodes",
    .plan = plan,
};
