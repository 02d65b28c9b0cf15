/* iserve_place.c - iServe's deployment controller: intents, ranking of the
 * configuration map, first-feasible placement with per-layer memory blocks,
 * hybrid packing / least-loaded GPU choice, and the load monitor.
 *
 * Invariant (ISV-MEM): a placement never charges a GPU more than the free
 * bytes it was given; hs_isv_place asserts it and test_iserve checks it on
 * random cluster states. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "plan/iserve.h"

const char *const hs_isv_intent_names[HS_ISV_NINTENT] = {
    "min-latency", "min-cost", "min-memory", "min-gpu-hours", "latency-slo", "cost-budget"};
const char *const hs_isv_place_names[HS_ISV_NPLACE] = {"hybrid", "pack", "least-loaded", "first"};

int hs_isv_intent_parse(const char *s)
{
    for (int i = 0; i < HS_ISV_NINTENT; i++)
        if (!strcmp(s, hs_isv_intent_names[i])) return i;
    return -1;
}

int hs_isv_place_parse(const char *s)
{
    for (int i = 0; i < HS_ISV_NPLACE; i++)
        if (!strcmp(s, hs_isv_place_names[i])) return i;
    return -1;
}

void hs_isv_score_of(const hs_isv_est *e, const hs_isv_cfg *c, int output, hs_isv_score *s)
{
    s->latency_s = hs_isv_est_latency_s(e, c, output);
    s->mem_gib = hs_isv_est_mem_gib(e, c);
    s->cost = s->mem_gib * s->latency_s;
    s->gpu_hours = c->tp * c->pp * s->latency_s / 3600.0;
}

typedef struct rank_item {
    hs_isv_cfg cfg;
    int group;       /* 0: meets the target */
    double key;
    int gpus, idx;
} rank_item;

static int rank_cmp(const void *a, const void *b)
{
    const rank_item *x = a, *y = b;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    if (x->gpus != y->gpus) return x->gpus < y->gpus ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

int hs_isv_rank(const hs_isv_est *e, const hs_isv_intent *in, hs_isv_cfg *cfgs, int n,
                int *meet_out)
{
    rank_item *it = malloc(sizeof *it * (size_t)(n ? n : 1));
    int k = 0, meet = 0;
    if (!it) return -1;
    for (int i = 0; i < n; i++) {
        hs_isv_score s;
        rank_item r;
        if (!hs_isv_est_has(e, &cfgs[i])) continue;
        hs_isv_score_of(e, &cfgs[i], in->output, &s);
        r.cfg = cfgs[i];
        r.group = 0;
        r.gpus = cfgs[i].tp * cfgs[i].pp;
        r.idx = i;
        switch (in->kind) {
        case HS_ISV_MIN_LATENCY: r.key = s.latency_s; break;
        case HS_ISV_MIN_COST: r.key = s.cost; break;
        case HS_ISV_MIN_MEMORY: r.key = s.mem_gib; break;
        case HS_ISV_MIN_GPUHOURS: r.key = s.gpu_hours; break;
        case HS_ISV_LATENCY_SLO:
            r.group = !(s.latency_s <= in->target);
            r.key = r.group ? s.latency_s : s.cost;
            break;
        default: /* HS_ISV_COST_BUDGET */
            r.group = !(s.cost <= in->target);
            r.key = r.group ? s.cost : s.latency_s;
            break;
        }
        meet += r.group == 0;
        it[k++] = r;
    }
    qsort(it, (size_t)k, sizeof *it, rank_cmp);
    for (int i = 0; i < k; i++) cfgs[i] = it[i].cfg;
    free(it);
    if (meet_out) *meet_out = meet;
    return k;
}

/* GPU candidate order of a policy. */
typedef struct cand {
    int id;
    double load, used;
} cand;

static int cmp_least(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->load != y->load) return x->load < y->load ? -1 : 1;
    if (x->used != y->used) return x->used < y->used ? -1 : 1;
    return x->id - y->id;
}

static int cmp_pack(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->load != y->load) return x->load > y->load ? -1 : 1;
    if (x->used != y->used) return x->used > y->used ? -1 : 1;
    return x->id - y->id;
}

/* Places on candidates ids[0..n) in that order; 0 or HS_ENOFIT. */
static int place_on(const hs_model *m, const hs_isv_cfg *c, double block,
                    const hs_isv_gpus *g, const int *ids, int n, hs_isv_placement *out)
{
    const hs_isv_variant *v = hs_isv_var(c->var);
    int t = c->tp, p = c->pp, L = m->layers, take[64], cap[8], lay[8];
    int elig[256], ne = 0, ng, gcap[256], sel[8], total = 0, x;
    for (int i = 0; i < n; i++)
        if (g->free_b[ids[i]] >= block) elig[ne++] = ids[i];
    ng = ne / t;
    if (ng < p) return HS_ENOFIT;
    /* Candidate TP groups: t consecutive eligible GPUs in policy order; a
     * group holds as many layer blocks as its fullest member allows. */
    for (int q = 0; q < ng; q++) {
        double mf = g->free_b[elig[q * t]];
        for (int i = 1; i < t; i++)
            if (g->free_b[elig[q * t + i]] < mf) mf = g->free_b[elig[q * t + i]];
        gcap[q] = mf / block >= L ? L : (int)(mf / block);
    }
    /* The first p groups in policy order; while they cannot hold L layers,
     * the smallest chosen group gives way to the next bigger candidate. */
    for (int j = 0; j < p; j++) sel[j] = j, total += gcap[j];
    for (int q = p; q < ng && total < L; q++) {
        int w = 0;
        for (int j = 1; j < p; j++)
            if (gcap[sel[j]] < gcap[sel[w]]) w = j;
        if (gcap[q] <= gcap[sel[w]]) continue;
        total += gcap[q] - gcap[sel[w]];
        for (int j = w; j + 1 < p; j++) sel[j] = sel[j + 1]; /* keep policy order */
        sel[p - 1] = q;
    }
    if (total < L) return HS_ENOFIT;
    for (int j = 0; j < p; j++) {
        cap[j] = gcap[sel[j]];
        for (int i = 0; i < t; i++) take[j * t + i] = elig[sel[j] * t + i];
    }
    /* Water-fill: the smallest level x with sum min(cap, x) >= L. */
    for (x = 1; x <= L; x++) {
        int s = 0;
        for (int j = 0; j < p; j++) s += cap[j] < x ? cap[j] : x;
        if (s >= L) break;
    }
    {
        int s = 0, r;
        for (int j = 0; j < p; j++) s += lay[j] = cap[j] < x - 1 ? cap[j] : x - 1;
        r = L - s;
        for (int j = 0; j < p && r > 0; j++)
            if (cap[j] >= x) lay[j]++, r--;
        assert(r == 0);
    }
    memset(out, 0, sizeof *out);
    out->cfg = *c;
    out->block_b = block;
    out->layout.pp = p;
    out->layout.kv_bits = v->kv_bits;
    out->n_gpus = t * p;
    for (int j = 0; j < p; j++) {
        hs_stage_layout *st = &out->layout.stage[j];
        st->tp = t;
        st->bits = v->bits;
        st->layers = lay[j];
        assert(lay[j] >= 1);
        for (int i = 0; i < t; i++) {
            st->gpus[i] = take[j * t + i];
            out->gpus[j * t + i] = take[j * t + i];
            out->charge_b[j * t + i] = lay[j] * block;
            assert(out->charge_b[j * t + i] <= g->free_b[take[j * t + i]]); /* ISV-MEM */
        }
    }
    return 0;
}

int hs_isv_place(const hs_model *m, const hs_isv_est *e, const hs_isv_cfg *c,
                 const hs_isv_gpus *g, int policy, double tau, hs_isv_placement *out,
                 hs_err *err)
{
    cand cs[256];
    int ids[256], n = 0, rc;
    double block;
    if (g->n > 256 || c->tp * c->pp > 64)
        return hs_errf(err, HS_ERANGE, "iserve: at most 256 GPUs and 64 per configuration");
    if (!hs_isv_est_has(e, c))
        return hs_errf(err, HS_EINVAL, "iserve: the configuration map has no estimate for this configuration");
    block = hs_isv_est_mem_gib(e, c) * 1073741824.0 / ((double)c->tp * m->layers);
    for (int i = 0; i < g->n; i++) {
        cs[i].id = i;
        cs[i].load = g->load ? g->load[i] : 0;
        cs[i].used = g->used_b ? g->used_b[i] : 0;
    }
    if (policy == HS_ISV_PLACE_FIRST) {
        for (int i = 0; i < g->n; i++) ids[i] = i;
        rc = place_on(m, c, block, g, ids, g->n, out);
    } else if (policy == HS_ISV_PLACE_LEAST) {
        qsort(cs, (size_t)g->n, sizeof *cs, cmp_least);
        for (int i = 0; i < g->n; i++) ids[i] = cs[i].id;
        rc = place_on(m, c, block, g, ids, g->n, out);
    } else if (policy == HS_ISV_PLACE_PACK) {
        qsort(cs, (size_t)g->n, sizeof *cs, cmp_pack);
        for (int i = 0; i < g->n; i++) ids[i] = cs[i].id;
        rc = place_on(m, c, block, g, ids, g->n, out);
    } else {
        /* Hybrid: pack onto GPUs below tau; else least-loaded over all. */
        qsort(cs, (size_t)g->n, sizeof *cs, cmp_pack);
        for (int i = 0; i < g->n; i++)
            if (cs[i].load < tau) ids[n++] = cs[i].id;
        rc = place_on(m, c, block, g, ids, n, out);
        if (rc) {
            qsort(cs, (size_t)g->n, sizeof *cs, cmp_least);
            for (int i = 0; i < g->n; i++) ids[i] = cs[i].id;
            rc = place_on(m, c, block, g, ids, g->n, out);
        }
    }
    if (rc) return hs_errf(err, HS_ENOFIT, "iserve: no room for the configuration");
    return 0;
}

