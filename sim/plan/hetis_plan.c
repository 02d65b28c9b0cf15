/* hetis_plan.c - Hetis's Parallelizer (§4.1, Fig. 4) and the two baselines
 * of its evaluation on the same cluster.
 *
 * "hetis": the hierarchical search.
 *   1. Instances: every GPU type is divided evenly over n instances (n
 *      divides every type's count); an instance that cannot hold the
 *      weights plus one full context per lane is dropped.
 *   2. Pipeline: each GPU type of an instance is one unified stage; layers
 *      go to stages in proportion to their FP16 compute (perfect scaling,
 *      no communication), capped by each stage's memory.
 *   3. Prune: GPUs are considered one at a time from the lowest-end type
 *      (by FP16 FLOP/s) up; a GPU is removed from the dense path when
 *      (C without it - C with it) / C with it <= epsilon (0.05): it adds
 *      less than 5% to the dense speed.  The highest-end type is kept.
 *   4. TP x PP inside each unified stage: every tp dividing the stage's GPU
 *      count and the heads, the rest as pipeline sub-stages; the cheapest
 *      combination is kept.
 *   5. Roles: kept GPUs are Primary workers; pruned ones become Attention
 *      workers, each given to the instance's stage with the least cache per
 *      layer at that point.
 *   C, the dense cost (HexGen-style C_comp + C_comm), is measured on the
 *   roofline latency model: the module latency of the paper's Fig. 13
 *   (stages x slowest stage, plus the activations sent between stages) for
 *   a representative load R: one 2048-token prefill pass plus 32 decode
 *   passes of 64 sequences (dense modules only: attention is balanced
 *   separately by the dispatcher).  n is chosen to maximise n / C.
 *
 * "hetis-splitwise": Splitwise-style disaggregation: prefill replicas on
 * the highest-end type (smallest TP that fits, as many as fit), decode
 * replicas on the other types, one pipeline stage per type with layers in
 * proportion to memory; when the decode side cannot hold the model,
 * highest-end GPUs move to it one TP group at a time.
 *
 * "hetis-hexgen": HexGen-style asymmetric TP/PP: every GPU serves; n
 * instances, one pipeline stage per type with layers in proportion to
 * decode speed (memory bandwidth x GPUs), TP x PP inside each type chosen
 * by the same cost; n maximises n / C.  (A simple stand-in for HexGen's
 * genetic search, named for what it is.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf.h"
#include "plan/plan.h"

#define HP_EPSILON 0.05
#define HP_MAX_GRP 16

typedef struct hp_grp {
    int type;               /* cluster type index */
    int n;                  /* GPUs */
    int gpus[HS_MAX_TP];
} hp_grp;

static double layer_bytes(const hs_plan_req *q)
{
    return hs_model_layer_params(q->model) * q->bits / 8.0;
}

/* Types ordered from the highest-end (FP16 FLOP/s, then memory) down. */
static void type_order(const hs_cluster *c, int *ord)
{
    for (int i = 0; i < c->n_types; i++) ord[i] = i;
    for (int i = 1; i < c->n_types; i++)
        for (int j = i; j > 0; j--) {
            const hs_gpu *a = &c->types[ord[j - 1]], *b = &c->types[ord[j]];
            if (b->flops16 > a->flops16 || (b->flops16 == a->flops16 && b->mem_bytes > a->mem_bytes)) {
                int t = ord[j];
                ord[j] = ord[j - 1];
                ord[j - 1] = t;
            } else
                break;
        }
}

static int count_type(const hs_cluster *c, int t)
{
    int n = 0;
    for (int g = 0; g < c->n_gpus; g++) n += c->gpu_type[g] == t;
    return n;
}

/* GPUs of type t, in id order, taking the k-th slice of n slices. */
static int slice_type(const hs_cluster *c, int t, int k, int n, int *out)
{
    int cnt = count_type(c, t), per = cnt / n, i = 0, m = 0;
    for (int g = 0; g < c->n_gpus; g++)
        if (c->gpu_type[g] == t) {
            if (i >= k * per && i < (k + 1) * per) {
                if (m == HS_MAX_TP) return -1;   /* a slice holds at most one TP group */
                out[m++] = g;
            }
            i++;
        }
    return m;
}

/* Dense cost C of a layout, ns (see the file comment). */
static int layout_cost(const hs_plan_req *q, const hs_layout *l, double *cost, hs_err *err)
{
    hs_perf_cfg pc;
    hs_perf p;
    hs_batch_shape pre, dec;
    double c = 0;
    int rc;
    hs_perf_cfg_defaults(&pc);
    memset(&p, 0, sizeof p);
    if ((rc = hs_perf_build(&p, &pc, q->model, q->cluster, l, 2048, 64, err))) return rc;
    memset(&pre, 0, sizeof pre);
    pre.tokens = 2048;
    pre.samples = 2;
    pre.pre_chunks = 2;
    pre.pre_self = 2.0 * 1024 * 1025 / 2;
    pre.pre_tokens = 2048;
    memset(&dec, 0, sizeof dec);
    dec.tokens = 64;
    dec.samples = 64;
    for (int pass = 0; pass < 2; pass++) {
        const hs_batch_shape *b = pass ? &dec : &pre;
        double mx = 0, send = 0;
        for (int s = 0; s < l->pp; s++) {
            double t = hs_perf_stage_ns(&p, s, b);
            if (t > mx) mx = t;
            if (s + 1 < l->pp) send += hs_perf_send_ns(&p, s, b->tokens);
        }
        c += (pass ? 32.0 : 1.0) * (l->pp * mx + send);
    }
    hs_perf_free(&p);
    *cost = c;
    return 0;
}

/* 1 when every stage holds its weights and each lane one full context. */
static int layout_fits(const hs_plan_req *q, const hs_layout *l)
{
    hs_err e = {0};
    int64_t b = hs_layout_kv_blocks(q->model, q->cluster, l, q->engine, q->max_tokens, &e);
    return b >= 0 && b / l->pp * q->engine->block_size >= q->max_model_len;
}

/* Layers per group in proportion to w[], each within what its memory can
 * hold (90% of usable memory for weights) and >= its sub-stage need.
 * Returns 0 when impossible. */
static int split_layers(const hs_plan_req *q, const hp_grp *g, int ng, const double *w, int *layers)
{
    int L = q->model->layers, left = L, mx[HP_MAX_GRP];
    double wsum = 0;
    for (int i = 0; i < ng; i++) {
        const hs_gpu *gp = &q->cluster->types[g[i].type];
        double usable = gp->mem_bytes * q->engine->gpu_mem_util * 0.9 * g[i].n;
        mx[i] = (int)floor(usable / layer_bytes(q));
        if (mx[i] < 1) return 0;
        wsum += w[i];
        layers[i] = 0;
    }
    /* largest remainder in proportion, then clamp and spill */
    for (int i = 0; i < ng; i++) {
        layers[i] = (int)floor(L * w[i] / wsum);
        if (layers[i] < 1) layers[i] = 1;
        if (layers[i] > mx[i]) layers[i] = mx[i];
        left -= layers[i];
    }
    while (left != 0) {
        int best = -1;
        double bv = 0;
        for (int i = 0; i < ng; i++) {
            double want = L * w[i] / wsum - layers[i];
            if (left > 0 && layers[i] < mx[i] && (best < 0 || want > bv)) best = i, bv = want;
            if (left < 0 && layers[i] > 1 && (best < 0 || want < bv)) best = i, bv = want;
        }
        if (best < 0) return 0;
        layers[best] += left > 0 ? 1 : -1;
        left += left > 0 ? -1 : 1;
    }
    return 1;
}

/* Step 4: the cheapest TP x PP inside each group for a given layer split. */
static int best_layout(const hs_plan_req *q, const hp_grp *g, int ng, const int *layers, hs_layout *best,
                       double *best_cost, hs_err *err)
{
    int choice[HP_MAX_GRP] = {0}, opts[HP_MAX_GRP][HS_MAX_TP + 1], nopt[HP_MAX_GRP];
    int found = 0;
    for (int i = 0; i < ng; i++) {
        nopt[i] = 0;
        for (int tp = 1; tp <= g[i].n && tp <= HS_MAX_TP; tp++)
            if (g[i].n % tp == 0 && q->model->heads % tp == 0 && layers[i] >= g[i].n / tp)
                opts[i][nopt[i]++] = tp;
        if (!nopt[i]) return HS_ENOFIT;
    }
    for (;;) {
        hs_layout l;
        double c;
        int s = 0;
        memset(&l, 0, sizeof l);
        l.kv_bits = q->engine->kv_bits;
        for (int i = 0; i < ng; i++) {
            int tp = opts[i][choice[i]], pp = g[i].n / tp;
            for (int k = 0; k < pp && s < HS_MAX_PP; k++, s++) {
                l.stage[s].tp = tp;
                l.stage[s].bits = q->bits;
                l.stage[s].layers = layers[i] / pp + (k < layers[i] % pp);
                for (int r = 0; r < tp; r++) l.stage[s].gpus[r] = g[i].gpus[k * tp + r];
            }
        }
        l.pp = s;
        if (layout_fits(q, &l) && !layout_cost(q, &l, &c, err) && (!found || c < *best_cost)) {
            *best = l;
            *best_cost = c;
            found = 1;
        }
        {
            int i = 0;
            while (i < ng && ++choice[i] == nopt[i]) choice[i++] = 0;
            if (i == ng) break;
        }
    }
    return found ? 0 : HS_ENOFIT;
}

/* What a group's share of the layers follows: its GPUs' FLOP/s (Hetis),
 * memory bandwidth (HexGen-style) or memory (Splitwise-style). */
enum { HP_BY_FLOPS, HP_BY_BW, HP_BY_MEM };

/* Steps 2 + 4 for one instance made of groups g, layers split in
 * proportion to the groups' GPUs x the per-type metric `by`. */
static int instance_layout(const hs_plan_req *q, const hp_grp *g, int ng, int by, hs_layout *l,
                           double *cost, hs_err *err)
{
    int layers[HP_MAX_GRP];
    hp_grp gg[HP_MAX_GRP];
    double ww[HP_MAX_GRP];
    int n = 0;
    for (int i = 0; i < ng; i++) {
        const hs_gpu *t = &q->cluster->types[g[i].type];
        if (g[i].n <= 0) continue;
        gg[n] = g[i];
        ww[n++] = g[i].n * (by == HP_BY_FLOPS ? t->flops16 : by == HP_BY_BW ? t->mem_bw : t->mem_bytes);
    }
    if (!n || !split_layers(q, gg, n, ww, layers)) return HS_ENOFIT;
    return best_layout(q, gg, n, layers, l, cost, err);
}

static void init_out(const hs_plan_req *q, hs_deploy *out, const char *name)
{
    memset(out, 0, sizeof *out);
    snprintf(out->model, sizeof out->model, "%s", q->model->name);
    snprintf(out->cluster, sizeof out->cluster, "%s", q->cluster->name);
    snprintf(out->planner, sizeof out->planner, "%s", name);
}

static int add_replica(hs_deploy *out, const hs_layout *l, const char *role, hs_err *err)
{
    hs_deploy_replica r;
    memset(&r, 0, sizeof r);
    snprintf(r.role, sizeof r.role, "%s", role);
    r.weight = 1;
    r.layout = *l;
    return hs_deploy_add(out, &r, err);
}

static int gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Groups of instance k of n: one per type, highest-end first. */
static int instance_groups(const hs_cluster *c, const int *ord, int k, int n, hp_grp *g)
{
    int ng = 0;
    for (int i = 0; i < c->n_types; i++) {
        g[ng].type = ord[i];
        g[ng].n = slice_type(c, ord[i], k, n, g[ng].gpus);
        if (g[ng].n < 0) return -1;   /* more GPUs of a type than one TP group: more instances */
        if (g[ng].n > 0) ng++;
    }
    return ng;
}

static int types_gcd(const hs_cluster *c)
{
    int d = 0;
    for (int t = 0; t < c->n_types; t++) d = gcd(d, count_type(c, t));
    return d;
}

/* ---- hetis ---- */

/* Per-type groups live in arrays of HP_MAX_GRP. */
static int check_types(const hs_cluster *c, hs_err *err)
{
    if (c->n_types > HP_MAX_GRP)
        return hs_errf(err, HS_ERANGE, "cluster %s: %d GPU types (the hetis planners take at most %d)", c->name,
                       c->n_types, HP_MAX_GRP);
    return 0;
}

static int plan_hetis(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    const hs_cluster *c = q->cluster;
    int ord[64], best_n = 0, dmax = types_gcd(c);
    double best_score = 0;
    hp_grp best_g[HP_MAX_GRP];
    int best_ng = 0, rc;
    if ((rc = check_types(c, err))) return rc;
    type_order(c, ord);
    for (int n = 1; n <= dmax; n++) {
        hp_grp g[HP_MAX_GRP];
        double cost;
        hs_layout l;
        int ng;
        if (dmax % n) continue;
        ng = instance_groups(c, ord, 0, n, g);
        if (ng < 0) continue;
        if (instance_layout(q, g, ng, HP_BY_FLOPS, &l, &cost, err)) continue; /* step 1 filter */
        /* step 3: prune from the lowest-end type up, one GPU at a time */
        for (int i = ng - 1; i >= 1; i--) {
            while (g[i].n > 0) {
                hp_grp trial[HP_MAX_GRP];
                double c2;
                hs_layout l2;
                memcpy(trial, g, sizeof trial);
                trial[i].n--;
                if (instance_layout(q, trial, ng, HP_BY_FLOPS, &l2, &c2, err)) break;
                if ((c2 - cost) / cost > HP_EPSILON) break;
                g[i].n--;
                cost = c2;
            }
        }
        if (!best_n || n / cost > best_score) {
            best_score = n / cost;
            best_n = n;
            memcpy(best_g, g, sizeof best_g);
            best_ng = ng;
        }
    }
    if (!best_n)
        return hs_errf(err, HS_ENOFIT, "hetis: %s fits no instance split of cluster %s (weights plus one %d-token context)",
                       q->model->name, c->name, q->max_model_len);
    init_out(q, out, "hetis");
    /* Every instance repeats instance 0's shape on its own slice. */
    for (int k = 0; k < best_n; k++) {
        hp_grp g[HP_MAX_GRP];
        double cost, room[HS_MAX_PP];
        hs_layout l;
        int ng = instance_groups(c, ord, k, best_n, g), np = 0;
        int workers[HS_MAX_TP * HP_MAX_GRP];
        for (int i = 0; i < ng && i < best_ng; i++) {
            int keep = best_g[i].n;
            for (int j = keep; j < g[i].n; j++) workers[np++] = g[i].gpus[j];
            g[i].n = keep;
        }
        if ((rc = instance_layout(q, g, ng, HP_BY_FLOPS, &l, &cost, err))) {
            hs_deploy_free(out);
            return hs_errf(err, rc, "hetis: instance %d of %d does not fit", k, best_n);
        }
        if ((rc = add_replica(out, &l, "colocated", err))) {
            hs_deploy_free(out);
            return rc;
        }
        /* step 5: workers to the stage with the least cache per layer */
        for (int s = 0; s < l.pp; s++) {
            room[s] = 0;
            for (int r = 0; r < l.stage[s].tp; r++)
                room[s] += hs_cluster_gpu(c, l.stage[s].gpus[r])->mem_bytes;
            room[s] -= l.stage[s].layers * layer_bytes(q);
        }
        for (int j = 0; j < np; j++) {
            hs_deploy_attn a;
            int bs = 0;
            for (int s = 1; s < l.pp; s++)
                if (room[s] / l.stage[s].layers < room[bs] / l.stage[bs].layers) bs = s;
            a.replica = out->n - 1;
            a.stage = bs;
            a.gpu = workers[j];
            room[bs] += hs_cluster_gpu(c, workers[j])->mem_bytes;
            if ((rc = hs_deploy_add_attn(out, &a, err))) {
                hs_deploy_free(out);
                return rc;
            }
        }
    }
    return 0;
}

/* ---- HexGen-style ---- */

static int plan_hexgen(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    const hs_cluster *c = q->cluster;
    int ord[64], dmax = types_gcd(c), best_n = 0, rc;
    double best_score = 0;
    if ((rc = check_types(c, err))) return rc;
    type_order(c, ord);
    for (int n = 1; n <= dmax; n++) {
        hp_grp g[HP_MAX_GRP];
        double cost;
        hs_layout l;
        int ng;
        if (dmax % n) continue;
        ng = instance_groups(c, ord, 0, n, g);
        if (ng < 0) continue;
        if (instance_layout(q, g, ng, HP_BY_BW, &l, &cost, err)) continue;
        if (!best_n || n / cost > best_score) best_score = n / cost, best_n = n;
    }
    if (!best_n)
        return hs_errf(err, HS_ENOFIT, "hetis-hexgen: %s fits no instance split of cluster %s", q->model->name,
                       c->name);
    init_out(q, out, "hetis-hexgen");
    for (int k = 0; k < best_n; k++) {
        hp_grp g[HP_MAX_GRP];
        double cost;
        hs_layout l;
        int ng = instance_groups(c, ord, k, best_n, g);
        if ((rc = instance_layout(q, g, ng, HP_BY_BW, &l, &cost, err)) || (rc = add_replica(out, &l, "colocated", err))) {
            hs_deploy_free(out);
            return rc == HS_ENOFIT ? hs_errf(err, rc, "hetis-hexgen: instance %d does not fit", k) : rc;
        }
    }
    return 0;
}

/* ---- Splitwise-style ---- */

static int plan_splitwise(const hs_plan_req *q, hs_deploy *out, hs_err *err)
{
    const hs_cluster *c = q->cluster;
    int ord[64], top, n_top, tp_p = 0, rc;
    int top_gpus[HS_MAX_TP * 8];
    if ((rc = check_types(c, err))) return rc;
    if (c->n_types < 2) return hs_errf(err, HS_EINVAL, "hetis-splitwise: cluster %s has one GPU type", c->name);
    type_order(c, ord);
    top = ord[0];
    n_top = 0;
    for (int g = 0; g < c->n_gpus && n_top < (int)(sizeof top_gpus / sizeof *top_gpus); g++)
        if (c->gpu_type[g] == top) top_gpus[n_top++] = g;
    for (int tp = 1; tp <= n_top && tp <= HS_MAX_TP; tp++) {
        hs_layout l;
        if (n_top % tp || q->model->heads % tp) continue;
        memset(&l, 0, sizeof l);
        l.pp = 1;
        l.kv_bits = q->engine->kv_bits;
        l.stage[0].tp = tp;
        l.stage[0].layers = q->model->layers;
        l.stage[0].bits = q->bits;
        for (int r = 0; r < tp; r++) l.stage[0].gpus[r] = top_gpus[r];
        if (layout_fits(q, &l)) {
            tp_p = tp;
            break;
        }
    }
    if (!tp_p)
        return hs_errf(err, HS_ENOFIT, "hetis-splitwise: %s fits no TP group of the %s GPUs", q->model->name,
                       c->types[top].name);
    /* borrow = highest-end GPUs given to the decode side */
    for (int borrow = 0; borrow + tp_p <= n_top; borrow += tp_p) {
        int rest[64], nr = 0, dmax = 0;
        for (int i = 1; i < c->n_types; i++) rest[nr++] = ord[i];
        for (int i = 0; i < nr; i++) dmax = gcd(dmax, count_type(c, rest[i]));
        if (borrow) dmax = gcd(dmax, borrow);
        for (int n = dmax; n >= 1; n--) {
            hp_grp g[HP_MAX_GRP];
            double cost;
            hs_layout dl[16];
            int ok = 1, ng;
            if (dmax % n || n > 16) continue;
            for (int k = 0; k < n && ok; k++) {
                ng = 0;
                if (borrow && borrow / n > HS_MAX_TP) {
                    ok = 0;
                    break;
                }
                if (borrow) {
                    g[ng].type = top;
                    g[ng].n = borrow / n;
                    for (int r = 0; r < g[ng].n; r++) g[ng].gpus[r] = top_gpus[n_top - borrow + k * (borrow / n) + r];
                    ng++;
                }
                for (int i = 0; i < nr && ok; i++) {
                    g[ng].type = rest[i];
                    g[ng].n = slice_type(c, rest[i], k, n, g[ng].gpus);
                    if (g[ng].n < 0) ok = 0;
                    ng++;
                }
                if (!ok) break;
                ok = !instance_layout(q, g, ng, HP_BY_MEM, &dl[k], &cost, err);
            }
            if (!ok) continue;
            init_out(q, out, "hetis-splitwise");
            for (int p = 0; p + tp_p <= n_top - borrow; p += tp_p) {
                hs_layout l;
                memset(&l, 0, sizeof l);
                l.pp = 1;
                l.kv_bits = q->engine->kv_bits;
                l.stage[0].tp = tp_p;
                l.stage[0].layers = q->model->layers;
                l.stage[0].bits = q->bits;
                for (int r = 0; r < tp_p; r++) l.stage[0].gpus[r] = top_gpus[p + r];
                if ((rc = add_replica(out, &l, "prefill", err))) goto fail;
            }
            for (int k = 0; k < n; k++)
                if ((rc = add_replica(out, &dl[k], "decode", err))) goto fail;
            if (out->n == n) { /* nothing left to prefill */
                hs_deploy_free(out);
                break;
            }
            return 0;
        fail:
            hs_deploy_free(out);
            return rc;
        }
    }
    return hs_errf(err, HS_ENOFIT, "hetis-splitwise: %s fits no prefill/decode split of cluster %s", q->model->name,
                   c->name);
}

const hs_planner_ops hs_planner_hetis = {
    .name = "hetis",
    .help = "Hetis: instances, one stage per GPU type, prune low-end GPUs (eps 0.05) to attention workers, TP x PP per stage",
    .plan = plan_hetis,
};

const hs_planner_ops hs_planner_hetis_splitwise = {
    .name = "hetis-splitwise",
    .help = "Splitwise-style baseline of Hetis: prefill on the top GPU type, decode pipelines on the others",
    .plan = plan_splitwise,
};

const hs_planner_ops hs_planner_hetis_hexgen = {
    .name = "hetis-hexgen",
    .help = "HexGen-style baseline of Hetis: all GPUs, one stage per type, layers by decode speed, TP x PP per stage",
    .plan = plan_hexgen,
};
