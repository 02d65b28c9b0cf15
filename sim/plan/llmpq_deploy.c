/* llmpq_deploy.c - LLM-PQ plans as deployments, and the registry entries
 * `llmpq`, `pipeedge` and `uniform-pp`.
 *
 * A plan is one replica with one stage per GPU (tp 1).  Each stage's
 * `bits` is its most common bit-width (a summary) and the layout's
 * layer_bits hold every layer's, written per stage as "layer_bits" (the
 * engine times and sizes each layer at its own width, perf/perf.h) with
 * LLM-PQ's kernels ("quant_kernels": "lptorch"); the workload (B, s, n)
 * and micro-batch sizes go in a top-level "llmpq" object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conf.h"
#include "plan/llmpq.h"
#include "plan/plan.h"

int hs_pq_to_deploy(const hs_pq_plan *p, const hs_model *m, const hs_cluster *c,
                    int kv_bits, hs_deploy *d, hs_err *err)
{
    hs_deploy_replica r;
    static const char *names[] = {"llmpq", "pipeedge", "uniform-pp"};
    memset(d, 0, sizeof *d);
    memset(&r, 0, sizeof r);
    snprintf(d->model, sizeof d->model, "%s", m->name);
    snprintf(d->cluster, sizeof d->cluster, "%s", c->name);
    snprintf(d->planner, sizeof d->planner, "%s", names[p->kind]);
    snprintf(r.role, sizeof r.role, "colocated");
    r.weight = 1;
    /* LLM-PQ's runtime runs its 8/4/3-bit layers with LLM.int8 and GPTQ's
     * kernels, as its cost model priced the plan */
    snprintf(r.quant_kernels, sizeof r.quant_kernels, "lptorch");
    if (p->first[p->ndev] > HS_MAX_LAYERS)
        return hs_errf(err, HS_ERANGE, "an LLM-PQ plan of %d layers: a deployment names at most %d",
                       p->first[p->ndev], HS_MAX_LAYERS);
    r.layout.pp = p->ndev;
    r.layout.kv_bits = kv_bits;
    for (int l = 0; l < p->first[p->ndev]; l++) r.layout.layer_bits[l] = p->bits[l];
    for (int j = 0; j < p->ndev; j++) {
        hs_stage_layout *st = &r.layout.stage[j];
        int cnt[HS_NBITS] = {0}, bestk = 0;
        for (int l = p->first[j]; l < p->first[j + 1]; l++) cnt[hs_bits_index(p->bits[l])]++;
        for (int k = 1; k < HS_NBITS; k++)
            if (cnt[k] > cnt[bestk]) bestk = k;
        st->tp = 1;
        st->layers = p->first[j + 1] - p->first[j];
        st->bits = hs_bits_set[bestk];
        st->gpus[0] = p->dev[j];
    }
    return hs_deploy_add(d, &r, err);
}

char *hs_pq_deploy_json(const hs_pq_plan *p, const hs_model *m, const hs_cluster *c,
                        const hs_pq_cfg *cfg)
{
    hs_deploy d;
    char *txt, *res = NULL;
    cJSON *root, *x;
    if (hs_pq_to_deploy(p, m, c, cfg->kv_bits, &d, NULL)) return NULL;
    txt = hs_deploy_to_json(&d);
    hs_deploy_free(&d);
    if (!txt) return NULL;
    root = cJSON_Parse(txt);
    free(txt);
    if (!root) return NULL;
    x = cJSON_AddObjectToObject(root, "llmpq");
    cJSON_AddNumberToObject(x, "B", cfg->B);
    cJSON_AddNumberToObject(x, "s", cfg->s);
    cJSON_AddNumberToObject(x, "n", cfg->n);
    cJSON_AddNumberToObject(x, "eta", p->eta);
    cJSON_AddNumberToObject(x, "xi", p->xi);
    cJSON_AddNumberToObject(x, "theta", cfg->theta);
    cJSON_AddNumberToObject(x, "objective_s", p->obj);
    cJSON_AddNumberToObject(x, "quality", p->quality);
    /* where the plan's FP16 times came from (qlat.h), as its trust line said */
    cJSON_AddStringToObject(x, "latency", p->latency[0] ? p->latency : "datasheet roofline");
    res = cJSON_Print(root);
    cJSON_Delete(root);
    return res;
}

int hs_pq_plan_read(hs_pq_plan *p, const char *path, const hs_model *m, const hs_cluster *c,
                    hs_err *err)
{
    hs_deploy d;
    cJSON *root = NULL;
    const cJSON *stages, *x;
    int rc, l = 0;
    long eta = 0, xi = 0, B = 0, sl = 0, nl = 0;
    memset(p, 0, sizeof *p);
    if (m->layers > (int)sizeof p->bits)
        return hs_errf(err, HS_ERANGE, "%s: %s has %d layers, more than an LLM-PQ plan holds (%d)",
                       path, m->name, m->layers, (int)sizeof p->bits);
    if ((rc = hs_deploy_read(&d, path, err))) return rc;
    if ((rc = hs_deploy_check(&d, m, c, path, err))) goto out;
    if (d.n != 1) {
        rc = hs_errf(err, HS_EINVAL, "%s: an LLM-PQ plan has one replica, not %d", path, d.n);
        goto out;
    }
    /* the pipeline prices its layers with qlat.c's kernels: no scale, no
     * other kernels */
    if (d.r[0].latency_scale != 0 && d.r[0].latency_scale != 1) {
        rc = hs_errf(err, HS_EINVAL, "%s: replicas[0].latency_scale: the LLM-PQ pipeline runs its own kernel "
                     "model and takes no scale", path);
        goto out;
    }
    if (d.r[0].quant_kernels[0] && strcmp(d.r[0].quant_kernels, "lptorch")) {
        rc = hs_errf(err, HS_EINVAL, "%s: replicas[0].quant_kernels: \"%s\"; the LLM-PQ pipeline runs lptorch's",
                     path, d.r[0].quant_kernels);
        goto out;
    }
    if ((rc = hs_json_load(path, &root, err))) goto out;
    x = cJSON_GetObjectItemCaseSensitive(root, "llmpq");
    if (x && ((rc = hs_json_int_opt(x, "eta", 1, 1 << 20, &eta, path, err)) ||
              (rc = hs_json_int_opt(x, "xi", 1, 1 << 20, &xi, path, err)) ||
              (rc = hs_json_int_opt(x, "B", 1, 1 << 16, &B, path, err)) ||
              (rc = hs_json_int_opt(x, "s", 1, 1 << 20, &sl, path, err)) ||
              (rc = hs_json_int_opt(x, "n", 1, 1 << 20, &nl, path, err))))
        goto out;
    p->eta = (int)eta;
    p->xi = (int)xi;
    p->B = (int)B;
    p->s = (int)sl;
    p->n = (int)nl;
    p->kv_bits = d.r[0].layout.kv_bits;
    p->ndev = d.r[0].layout.pp;
    stages = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "replicas"), 0), "stages");
    for (int j = 0; j < p->ndev; j++) {
        const hs_stage_layout *st = &d.r[0].layout.stage[j];
        const cJSON *lb = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(stages, j), "layer_bits");
        if (st->tp != 1) {
            rc = hs_errf(err, HS_EINVAL, "%s: stages[%d]: tp %d (LLM-PQ runs one GPU per stage)", path, j, st->tp);
            goto out;
        }
        if (lb && (!cJSON_IsArray(lb) || cJSON_GetArraySize(lb) != st->layers)) {
            rc = hs_errf(err, HS_EPARSE, "%s: stages[%d].layer_bits: expected %d bit-widths", path, j, st->layers);
            goto out;
        }
        p->dev[j] = st->gpus[0];
        p->first[j] = l;
        for (int i = 0; i < st->layers; i++, l++) {
            const cJSON *b = lb ? cJSON_GetArrayItem(lb, i) : NULL;
            int bits = b ? (cJSON_IsNumber(b) ? (int)b->valuedouble : -1) : st->bits;
            if (hs_bits_index(bits) < 0) {
                rc = hs_errf(err, HS_EPARSE, "%s: stages[%d].layer_bits[%d]: not 16, 8, 4 or 3", path, j, i);
                goto out;
            }
            p->bits[l] = (unsigned char)bits;
        }
    }
    p->first[p->ndev] = l;
out:
    cJSON_Delete(root);
    hs_deploy_free(&d);
    return rc;
}
