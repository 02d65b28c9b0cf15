/* hetis.c - head-level attention offload: device models, head books,
 * dispatch, re-dispatch, memory pressure (see hetis.h). */
#include "policy/hetis/hetis.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/vec.h"
#include "serve/plugin.h"

#define MD HS_HETIS_MAX_DEV

/* The policy's options: engine.hetis_* keys (hs_hetis_cfg). */
const hs_field hs_hetis_cfg_fields[] = {
    {"hetis_theta", HS_F_DOUBLE, offsetof(hs_hetis_cfg, theta), 0, 0, 0.5, 1e-6, 1e6, NULL,
     "hetis: re-dispatch when attention time exceeds (1 + theta) x the ideal"},
    {"hetis_period", HS_F_INT, offsetof(hs_hetis_cfg, period), 0, 0, 16, 1, 1 << 20, NULL,
     "hetis: decode steps of a lane between balance checks"},
    {"hetis_offload", HS_F_BOOL, offsetof(hs_hetis_cfg, offload), 0, 0, 1, 0, 1, NULL,
     "hetis: 0 keeps every head on the primary (ablation)"},
    {0},
};

void hs_hetis_cfg_defaults(hs_hetis_cfg *c)
{
    hs_conf_defaults(c, hs_hetis_cfg_fields);
}

static void hetis_pfree(hs_replica *rp);

hs_hetis *hs_hetis_of(const hs_replica *rp)
{
    return rp->pfree == hetis_pfree ? rp->pstate : NULL;
}

/* CPU time of this thread: the dispatcher's own cost, unaffected by other
 * processes sharing the machine. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Index of (lane, stage, device) in the per-lane arrays. */
static inline size_t LSD(const hs_hetis *h, int lane, int s, int g)
{
    return ((size_t)lane * (size_t)h->pp + (size_t)s) * MD + (size_t)g;
}

static inline int16_t *rx(const hs_hetis *h, int32_t r)
{
    return &h->rec_x[(size_t)r * (size_t)h->pp * MD];
}

static void hetis_free(hs_hetis *h)
{
    if (!h) return;
    free(h->n), free(h->m), free(h->resv), free(h->debt), free(h->steps), free(h->ideal);
    free(h->rec_id), free(h->rec_lane), free(h->rec_seen), free(h->rec_x), free(h->tracked);
    free(h);
}

static void hetis_pfree(hs_replica *rp)
{
    hetis_free(rp->pstate);
    rp->pstate = NULL;
    rp->pfree = NULL;
}

void hs_hetis_detach(hs_replica *rp, int32_t n_rep)
{
    for (int32_t i = 0; rp && i < n_rep; i++)
        if (hs_hetis_of(&rp[i])) hetis_pfree(&rp[i]);
}

/* Linear attention model of one device from an hs_perf stage of `layers`
 * layers whose ranks hold all `groups` groups split over tp. */
static void dev_from_perf(hs_hetis_dev *d, const hs_perf_stage *st, int layers, int groups)
{
    d->a = st->dec_seq / ((double)layers * groups);
    d->b = st->dec_ctx / ((double)layers * groups);
    d->c = st->dec_fixed / layers;
}

static int attach_one(hs_replica *rp, const hs_deploy *d, int32_t idx, const hs_model *m,
                      const hs_cluster *c, const hs_engine_cfg *ec, const hs_perf_cfg *pc,
                      const hs_hetis_cfg *hc, hs_err *err)
{
    const hs_layout *lay = &rp->layout;
    hs_hetis *h = calloc(1, sizeof *h);
    int rc = 0, max_tokens = ec->max_batched_tokens > 0 ? ec->max_batched_tokens : 8192;
    double kv_layer = hs_model_kv_bytes_token_layer(m, 1, lay->kv_bits);
    double scale = d->r[idx].latency_scale > 0 ? d->r[idx].latency_scale : 1;
    int64_t pooled = INT64_MAX;
    if (!h) return hs_errf(err, HS_ENOMEM, "out of memory");
    h->cfg = *hc;
    h->scale = scale;
    h->pp = lay->pp;
    h->n_lanes = lay->pp; /* the engine runs pp lanes per replica */
    h->groups = m->kv_heads;
    h->block_size = ec->block_size;
    h->bytes_gt_layer = kv_layer / m->kv_heads;
    h->xfer_group_bytes = (2.0 * (m->heads / m->kv_heads) + 2.0) * m->head_dim * 2.0;
    for (int s = 0; s < lay->pp; s++) {
        const hs_stage_layout *sl = &lay->stage[s];
        hs_hetis_dev *p = &h->dev[s][0];
        hs_stage_mem mem;
        double avail = INFINITY;
        h->layers[s] = sl->layers;
        h->n_dev[s] = 1;
        p->gpu = sl->gpus[0];
        p->primary = 1;
        dev_from_perf(p, &rp->perf.stage[s], sl->layers, m->kv_heads);
        hs_model_stage_mem(m, sl->layers, s == 0, s == lay->pp - 1, sl->tp, sl->bits, lay->kv_bits,
                           max_tokens, ec->max_num_seqs, &mem);
        for (int k = 0; k < sl->tp; k++) {
            double a = hs_cluster_gpu(c, sl->gpus[k])->mem_bytes * ec->gpu_mem_util - mem.weights -
                       mem.activation;
            if (a < avail) avail = a;
        }
        /* tp ranks each hold groups/tp of every token: cache in group-tokens */
        p->cap = avail > 0 ? floor(avail * sl->tp / (h->bytes_gt_layer * sl->layers)) : 0;
    }
    for (int32_t i = 0; i < d->n_attn && !rc; i++) {
        const hs_deploy_attn *a = &d->attn[i];
        hs_hetis_dev *w;
        hs_layout one;
        hs_perf pf;
        int s = a->stage;
        if (a->replica != idx) continue;
        if (s < 0 || s >= lay->pp) {
            rc = hs_errf(err, HS_ERANGE, "attention[%d].stage: %d not in 0..%d", i, s, lay->pp - 1);
            break;
        }
        if (h->n_dev[s] >= MD) {
            rc = hs_errf(err, HS_ERANGE, "replica %d stage %d: more than %d attention workers", idx, s, MD - 1);
            break;
        }
        w = &h->dev[s][h->n_dev[s]++];
        w->gpu = a->gpu;
        memset(&one, 0, sizeof one);
        one.pp = 1;
        one.kv_bits = lay->kv_bits;
        one.stage[0].tp = 1;
        one.stage[0].layers = 1;
        one.stage[0].bits = 16;
        one.stage[0].gpus[0] = a->gpu;
        memset(&pf, 0, sizeof pf);
        if ((rc = hs_perf_build(&pf, pc, m, c, &one, 64, 64, err))) {
            hs_err_prefix(err, "replica %d attention worker GPU %d: ", idx, a->gpu);
            break;
        }
        /* a scaled replica's workers run at its scale too: every
         * iteration takes f times as long, dispatch included */
        if (scale != 1) hs_perf_scale(&pf, scale);
        dev_from_perf(w, &pf.stage[0], 1, m->kv_heads);
        hs_perf_merge_calib(&rp->perf, &pf); /* the trust line names the workers' GPUs too */
        hs_perf_free(&pf);
        w->link_bw = hs_cluster_bw(c, lay->stage[s].gpus[0], a->gpu);
        w->link_lat = hs_cluster_lat(c, lay->stage[s].gpus[0], a->gpu);
        w->alpha = 2.0 * w->link_lat * 1e9 * scale;
        w->beta = w->link_bw > 0 ? h->xfer_group_bytes / w->link_bw * 1e9 * scale : INFINITY;
        rp->price_per_hour += hs_cluster_price(c, &w->gpu, 1); /* workers are the replica's */
        w->cap = floor(hs_cluster_gpu(c, a->gpu)->mem_bytes * ec->gpu_mem_util * HS_HETIS_WORKER_KV_FRAC /
                       (h->bytes_gt_layer * lay->stage[s].layers));
    }
    if (rc) {
        hetis_free(h);
        return rc;
    }
    for (int s = 0; s < h->pp; s++) {
        double tot = 0;
        for (int g = 0; g < h->n_dev[s]; g++) tot += h->dev[s][g].cap;
        int64_t b = (int64_t)floor(tot / ((double)h->groups * ec->block_size));
        if (b < pooled) pooled = b;
    }
    {
        size_t nl = (size_t)h->n_lanes * (size_t)h->pp;
        h->n = calloc(nl * MD, sizeof *h->n);
        h->m = calloc(nl * MD, sizeof *h->m);
        h->resv = calloc(nl * MD, sizeof *h->resv);
        h->debt = calloc(nl, sizeof *h->debt);
        h->ideal = calloc(nl, sizeof *h->ideal);
        h->steps = calloc((size_t)h->n_lanes, sizeof *h->steps);
        if (!h->n || !h->m || !h->resv || !h->debt || !h->ideal || !h->steps) {
            hetis_free(h);
            return hs_errf(err, HS_ENOMEM, "out of memory");
        }
    }
    if (pooled > rp->kv_blocks) rp->kv_blocks = pooled;
    rp->pstate = h;
    rp->pfree = hetis_pfree;
    return 0;
}

int hs_hetis_attach(hs_replica *rp, int32_t n_rep, const hs_deploy *d, const hs_model *m,
                    const hs_cluster *c, const hs_engine_cfg *ec, const hs_perf_cfg *pc,
                    const hs_hetis_cfg *hc, int all_replicas, hs_err *err)
{
    if (hc->theta <= 0 || !isfinite(hc->theta))
        return hs_errf(err, HS_ERANGE, "hetis.theta: %g must be > 0", hc->theta);
    if (hc->period < 1) return hs_errf(err, HS_ERANGE, "hetis.period: %d must be >= 1", hc->period);
    for (int32_t i = 0; i < n_rep; i++) {
        int any = 0, rc;
        for (int32_t k = 0; k < d->n_attn; k++) any |= d->attn[k].replica == i;
        if (!any && !all_replicas) continue;
        if (rp[i].role_kind != HS_ROLE_COLOCATED) {
            hs_hetis_detach(rp, n_rep);
            return hs_errf(err, HS_EINVAL, "replica %d: hetis needs colocated replicas, not %s", i, rp[i].role);
        }
        if ((rc = attach_one(&rp[i], d, i, m, c, ec, pc, hc, err))) {
            hs_hetis_detach(rp, n_rep);
            return rc;
        }
    }
    return 0;
}

/* ---- request books ---- */

static int rec_grow(hs_hetis *h, int32_t r)
{
    int32_t n;
    if (r < h->cap_rec) return 0;
    n = h->cap_rec ? h->cap_rec : 256;
    while (n <= r) n *= 2;
    {
        int64_t *id = realloc(h->rec_id, sizeof *id * (size_t)n);
        if (id) h->rec_id = id;
        int32_t *ln = realloc(h->rec_lane, sizeof *ln * (size_t)n);
        if (ln) h->rec_lane = ln;
        int64_t *sn = realloc(h->rec_seen, sizeof *sn * (size_t)n);
        if (sn) h->rec_seen = sn;
        int16_t *x = realloc(h->rec_x, sizeof *x * (size_t)n * (size_t)h->pp * MD);
        if (x) h->rec_x = x;
        if (!id || !ln || !sn || !x) return HS_ENOMEM;
    }
    for (int32_t i = h->cap_rec; i < n; i++) {
        h->rec_id[i] = -1;
        h->rec_seen[i] = -1;
    }
    h->cap_rec = n;
    return 0;
}

static int64_t kv_of(hs_engine *e, const hs_lane *l, int32_t r)
{
    const hs_req *q = hs_req_at(e, r);
    return q->kv0 + (l->g - q->g0);
}

/* Per-layer time of device g holding n groups and m group-tokens. */
static double dev_time(const hs_hetis_dev *d, double n, double m)
{
    double t;
    if (n <= 0) return 0;
    t = d->a * n + d->b * m + d->c;
    if (!d->primary) t += d->alpha + d->beta * n;
    return t;
}

double hs_hetis_dev_ns(const hs_hetis *h, int lane, int s, int g)
{
    size_t i = LSD(h, lane, s, g);
    /* A step reads one more token per group than is cached. */
    return dev_time(&h->dev[s][g], h->n[i], h->m[i] + h->n[i]);
}

static double stage_attn(const hs_hetis *h, int lane, int s, int *arg)
{
    double t = 0;
    int best = 0;
    for (int g = 0; g < h->n_dev[s]; g++) {
        double v = hs_hetis_dev_ns(h, lane, s, g);
        if (v > t) t = v, best = g;
    }
    if (arg) *arg = best;
    return t;
}

/* Reserved group-tokens on device g of stage s over all lanes. */
static double dev_resv(const hs_hetis *h, int s, int g)
{
    double t = 0;
    for (int l = 0; l < h->n_lanes; l++) t += h->resv[LSD(h, l, s, g)];
    return t;
}

/* Recomputes lane aggregates from the tracked members of the lane. */
static void lane_aggregate(hs_engine *e, hs_hetis *h, hs_lane *l, int lane)
{
    for (int s = 0; s < h->pp; s++)
        for (int g = 0; g < MD; g++) {
            size_t i = LSD(h, lane, s, g);
            h->n[i] = h->m[i] = 0;
        }
    for (int32_t k = 0; k < h->n_tracked; k++) {
        int32_t r = h->tracked[k];
        const int16_t *x;
        double kv;
        if (h->rec_lane[r] != lane) continue;
        x = rx(h, r);
        kv = (double)kv_of(e, l, r);
        for (int s = 0; s < h->pp; s++)
            for (int g = 0; g < h->n_dev[s]; g++) {
                size_t i = LSD(h, lane, s, g);
                h->n[i] += x[s * MD + g];
                h->m[i] += x[s * MD + g] * kv;
            }
    }
    for (int s = 0; s < h->pp; s++)
        for (int g = 0; g < h->n_dev[s]; g++) {
            size_t i = LSD(h, lane, s, g);
            double tot;
            h->resv[i] = h->m[i] + h->n[i];
            tot = dev_resv(h, s, g);
            if (tot > h->dev[s][g].peak) h->dev[s][g].peak = tot;
        }
}

static void untrack(hs_hetis *h, int32_t k)
{
    int32_t r = h->tracked[k];
    h->rec_id[r] = -1;
    h->tracked[k] = h->tracked[--h->n_tracked];
}

static int track(hs_hetis *h, int32_t r, int64_t id, int lane)
{
    if (hs_vec_reserve_i32((void **)&h->tracked, &h->cap_tracked, h->n_tracked + 1,
                           sizeof *h->tracked, 256))
        return HS_ENOMEM;
    h->tracked[h->n_tracked++] = r;
    h->rec_id[r] = id;
    h->rec_lane[r] = lane;
    memset(rx(h, r), 0, sizeof(int16_t) * (size_t)h->pp * MD);
    return 0;
}

/* Drops books of members that left the lane's decode set; marks `seen`. */
static void sweep(hs_engine *e, hs_hetis *h, hs_lane *l, int lane)
{
    h->epoch++;
    for (int32_t r = l->running.head; r >= 0; r = hs_req_at(e, r)->next)
        if (r < h->cap_rec && h->rec_id[r] == hs_req_at(e, r)->id) h->rec_seen[r] = h->epoch;
    for (int32_t k = 0; k < h->n_tracked;) {
        int32_t r = h->tracked[k];
        if (h->rec_lane[r] == lane && h->rec_seen[r] != h->epoch) untrack(h, k);
        else k++;
    }
}

/* ---- dispatch ---- */

/* Solves the placement of n items in stage s of the lane, with the lane's
 * current aggregates as the base (the items must not be in them).  Item k
 * has kv[k] cached tokens and gr[k] groups (NULL: one request's groups).
 * cap_over[g] >= 0 replaces device g's free room; headroom: tokens of
 * growth reserved per group.  Fills xs[k * MD + g] (when not NULL) and
 * *zout (the objective). */
static int solve_items(hs_hetis *h, int lane, int s, const double *kv, const double *gr, int n,
                       const double *cap_over, int headroom, int16_t *xs, int integral, double *zout,
                       hs_err *err)
{
    int G = h->n_dev[s];
    double base[MD], fixed[MD], cap[MD], *coef, *mem, *x, z;
    hs_hetis_lp p;
    int rc;
    if (!h->cfg.offload) G = 1;
    if (G == 1 && xs) {
        /* one device: everything goes there if it fits (no solver needed) */
        double room = cap_over && cap_over[0] >= 0 ? cap_over[0] : h->dev[s][0].cap - dev_resv(h, s, 0), need = 0;
        for (int k = 0; k < n; k++) need += (gr ? gr[k] : h->groups) * (kv[k] + 1 + headroom);
        if (need > room) return HS_ENOFIT;
        for (int k = 0; k < n; k++) {
            memset(&xs[k * MD], 0, sizeof *xs * MD);
            xs[k * MD] = (int16_t)(gr ? gr[k] : h->groups);
        }
        if (zout) *zout = 0;
        return 0;
    }
    coef = malloc(sizeof *coef * (size_t)n * (size_t)G);
    mem = malloc(sizeof *mem * (size_t)n);
    x = malloc(sizeof *x * (size_t)n * (size_t)G);
    if (!coef || !mem || !x) {
        free(coef), free(mem), free(x);
        return HS_ENOMEM;
    }
    for (int g = 0; g < G; g++) {
        const hs_hetis_dev *d = &h->dev[s][g];
        size_t i = LSD(h, lane, s, g);
        base[g] = hs_hetis_dev_ns(h, lane, s, g);
        fixed[g] = h->n[i] > 0 ? 0 : d->c + (d->primary ? 0 : d->alpha);
        cap[g] = cap_over && cap_over[g] >= 0 ? cap_over[g] : d->cap - dev_resv(h, s, g);
        if (cap[g] < 0) cap[g] = 0;
    }
    for (int k = 0; k < n; k++) {
        /* cache now, the step's token, and the growth headroom */
        mem[k] = kv[k] + 1 + headroom;
        for (int g = 0; g < G; g++) {
            const hs_hetis_dev *d = &h->dev[s][g];
            coef[k * G + g] = d->a + d->b * (kv[k] + 1) + (d->primary ? 0 : d->beta);
        }
    }
    memset(&p, 0, sizeof p);
    p.n_dev = G;
    p.n_req = n;
    p.groups = h->groups;
    p.base = base;
    p.fixed = fixed;
    p.cap = cap;
    p.coef = coef;
    p.mem = mem;
    p.integral = integral;
    p.req_groups = gr;
    /* Online, 1% from the optimum is plenty (no wall-clock limit: results
     * must not depend on the machine). */
    p.mip_gap = 0.01;
    rc = hs_hetis_lp_solve(&p, x, &z, err);
    if (zout) *zout = z;
    if (!rc && xs)
        for (int k = 0; k < n; k++)
            for (int g = 0; g < MD; g++)
                xs[k * MD + g] = (int16_t)(g < G ? (int)floor(x[k * G + g] + 0.5) : 0);
    free(coef), free(mem), free(x);
    return rc;
}

/* solve_items for requests rs[] of lane l. */
static int solve_stage(hs_engine *e, hs_hetis *h, hs_lane *l, int lane, int s, const int32_t *rs,
                       int n, const double *cap_over, int headroom, int16_t *xs, int integral,
                       double *zout, hs_err *err)
{
    double kv1[8], *kv = n <= 8 ? kv1 : malloc(sizeof *kv * (size_t)n);
    int rc;
    if (!kv) return HS_ENOMEM;
    for (int k = 0; k < n; k++) kv[k] = (double)kv_of(e, l, rs[k]);
    rc = solve_items(h, lane, s, kv, NULL, n, cap_over, headroom, xs, integral, zout, err);
    if (kv != kv1) free(kv);
    return rc;
}

/* Adds (sign +1) or removes (-1) request r's placement in the lane's
 * aggregates. */
static void apply(hs_engine *e, hs_hetis *h, hs_lane *l, int lane, int32_t r, int sign)
{
    const int16_t *x = rx(h, r);
    double kv = (double)kv_of(e, l, r);
    for (int s = 0; s < h->pp; s++)
        for (int g = 0; g < h->n_dev[s]; g++) {
            size_t i = LSD(h, lane, s, g);
            h->n[i] += sign * x[s * MD + g];
            h->m[i] += sign * x[s * MD + g] * kv;
            h->resv[i] += sign * x[s * MD + g] * (kv + 1);
        }
}

/* Latest-arrived tracked member of the lane with groups on (s, g), or -1. */
static int32_t victim_on(hs_engine *e, hs_hetis *h, int lane, int s, int g)
{
    int32_t best = -1;
    for (int32_t k = 0; k < h->n_tracked; k++) {
        int32_t r = h->tracked[k];
        const hs_req *q, *b;
        if (h->rec_lane[r] != lane || rx(h, r)[s * MD + g] <= 0) continue;
        q = hs_req_at(e, r);
        b = best >= 0 ? hs_req_at(e, best) : NULL;
        if (!b || q->arrival > b->arrival || (q->arrival == b->arrival && q->id > b->id)) best = r;
    }
    return best;
}

/* Moves r's stage-s groups to `to`, counting the groups and cache that
 * move (low priority: the bytes never delay a step). */
static void migrate(hs_engine *e, hs_hetis *h, hs_lane *l, int lane, int32_t r, int s, const int16_t *to)
{
    int16_t *x = rx(h, r);
    int moved = hs_hetis_moved_groups(&x[s * MD], to, MD);
    double kv = (double)kv_of(e, l, r);
    apply(e, h, l, lane, r, -1);
    memcpy(&x[s * MD], to, sizeof *to * MD);
    apply(e, h, l, lane, r, +1);
    h->st.migrations++;
    h->st.moved_groups += moved;
    h->st.moved_bytes += moved * kv * h->bytes_gt_layer * h->layers[s];
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Ideal attention time of the lane's stage: the LP relaxation over all of
 * its members from an empty stage, in the room the lane's members hold
 * plus what is free.  Members are bucketed by cached length (16 buckets of
 * equal count, each placed as one divisible item at its mean length), so
 * the check costs the same at any batch size. */
#define HS_HETIS_BUCKETS 16
static double ideal_time(hs_engine *e, hs_hetis *h, hs_lane *l, int lane, int s, hs_err *err)
{
    double *kvs = malloc(sizeof *kvs * (size_t)(h->n_tracked + 1));
    double kv[HS_HETIS_BUCKETS], gr[HS_HETIS_BUCKETS];
    double save_n[MD], save_m[MD], save_r[MD], z = 0;
    int n = 0, nb = 0, rc;
    if (!kvs) return 0;
    for (int32_t k = 0; k < h->n_tracked; k++)
        if (h->rec_lane[h->tracked[k]] == lane) kvs[n++] = (double)kv_of(e, l, h->tracked[k]);
    if (!n) {
        free(kvs);
        return 0;
    }
    qsort(kvs, (size_t)n, sizeof *kvs, cmp_dbl);
    for (int b = 0; b < HS_HETIS_BUCKETS; b++) {
        int lo = (int)((int64_t)n * b / HS_HETIS_BUCKETS), hi = (int)((int64_t)n * (b + 1) / HS_HETIS_BUCKETS);
        double sum = 0;
        if (hi <= lo) continue;
        for (int k = lo; k < hi; k++) sum += kvs[k];
        kv[nb] = sum / (hi - lo);
        gr[nb++] = (double)h->groups * (hi - lo);
    }
    free(kvs);
    for (int g = 0; g < MD; g++) {
        size_t i = LSD(h, lane, s, g);
        save_n[g] = h->n[i], save_m[g] = h->m[i], save_r[g] = h->resv[i];
        h->n[i] = h->m[i] = h->resv[i] = 0;
    }
    rc = solve_items(h, lane, s, kv, gr, nb, NULL, 0, NULL, 0, &z, err);
    for (int g = 0; g < MD; g++) {
        size_t i = LSD(h, lane, s, g);
        h->n[i] = save_n[g], h->m[i] = save_m[g], h->resv[i] = save_r[g];
    }
    return rc ? 0 : z;
}

/* Re-dispatches r alone in stage s (its cache on each device counts as
 * room); returns 0 when moved, HS_ENOFIT when nothing fits. */
static int redispatch(hs_engine *e, hs_hetis *h, hs_lane *l, int lane, int32_t r, int s, const int *deny,
                      hs_err *err)
{
    int16_t to[MD];
    double over[MD];
    int16_t *x = rx(h, r);
    double kv = (double)kv_of(e, l, r);
    int rc;
    apply(e, h, l, lane, r, -1);
    for (int g = 0; g < MD; g++) {
        over[g] = -1;
        /* A full device keeps fewer of r's groups than now, within its room. */
        if (deny && deny[g] && g < h->n_dev[s]) {
            double room = h->dev[s][g].cap - dev_resv(h, s, g);
            over[g] = fmax(0, fmin((x[s * MD + g] - 1) * (kv + 1), room));
        }
    }
    rc = solve_stage(e, h, l, lane, s, &r, 1, over, h->block_size, to, 1, NULL, err);
    if (rc == HS_ENOFIT) rc = solve_stage(e, h, l, lane, s, &r, 1, over, 0, to, 1, NULL, err);
    apply(e, h, l, lane, r, +1);
    if (rc) return rc;
    if (hs_hetis_moved_groups(&x[s * MD], to, MD) == 0) return HS_ENOFIT;
    migrate(e, h, l, lane, r, s, to);
    return 0;
}

static void fallback_preempt(hs_engine *e, hs_hetis *h, hs_lane *l, int lane, int32_t r)
{
    for (int32_t k = 0; k < h->n_tracked; k++)
        if (h->tracked[k] == r) {
            apply(e, h, l, lane, r, -1);
            untrack(h, k);
            break;
        }
    hs_lane_preempt(e, l, r);
    h->st.fallback_preempts++;
}

/* Places the members that joined since the last sync. */
#define HS_HETIS_CHUNK 1
static int dispatch_new(hs_engine *e, hs_hetis *h, hs_lane *l, int lane, hs_err *err)
{
    int32_t *rs = NULL;
    int16_t *xs = NULL;
    int n = 0, rc = 0;
    double t0 = cpu_s(), dt;
    for (int32_t r = l->running.head; r >= 0; r = hs_req_at(e, r)->next) {
        if ((rc = rec_grow(h, r))) return rc;
        if (h->rec_id[r] == hs_req_at(e, r)->id) continue;
        n++;
    }
    if (!n) return 0;
    rs = malloc(sizeof *rs * (size_t)n);
    xs = malloc(sizeof *xs * (size_t)n * MD);
    if (!rs || !xs) {
        free(rs), free(xs);
        return HS_ENOMEM;
    }
    n = 0;
    for (int32_t r = l->running.head; r >= 0; r = hs_req_at(e, r)->next)
        if (h->rec_id[r] != hs_req_at(e, r)->id) rs[n++] = r;
    for (int k = 0; k < n; k++)
        if ((rc = track(h, rs[k], hs_req_at(e, rs[k])->id, lane))) goto out;
    for (int s = 0; s < h->pp; s++) {
        int lo = 0;
        while (lo < n) {
            /* in chunks of HS_HETIS_CHUNK in arrival order, later chunks
             * seeing earlier ones in the base.  1: measured on Llama-2-13B
             * at 20 req/s, joint chunks of 4 took 2.6x the mean dispatch
             * time (p99 16 ms against 4 ms) for the same TPOT (107.3 vs
             * 107.5 ms); the solver itself places any batch jointly. */
            int cnt = n - lo < HS_HETIS_CHUNK ? n - lo : HS_HETIS_CHUNK;
            rc = solve_stage(e, h, l, lane, s, rs + lo, cnt, NULL, h->block_size, xs, 1, NULL, err);
            if (rc == HS_ENOFIT && cnt > 1) {
                cnt = 1;
                rc = solve_stage(e, h, l, lane, s, rs + lo, 1, NULL, h->block_size, xs, 1, NULL, err);
            }
            if (rc == HS_ENOFIT) /* without growth headroom */
                rc = solve_stage(e, h, l, lane, s, rs + lo, 1, NULL, 0, xs, 1, NULL, err);
            if (rc == HS_ENOFIT) {
                /* No device has room for r: it is preempted (fallback; it
                 * is the latest to arrive among those being placed). */
                int32_t r = rs[lo];
                fallback_preempt(e, h, l, lane, r);
                rs[lo] = -1;
                lo++;
                rc = 0;
                continue;
            }
            if (rc) goto out;
            for (int k = 0; k < cnt; k++) {
                int32_t r = rs[lo + k];
                double kv = (double)kv_of(e, l, r);
                memcpy(&rx(h, r)[s * MD], &xs[k * MD], sizeof(int16_t) * MD);
                for (int g = 0; g < h->n_dev[s]; g++) {
                    int v = xs[k * MD + g];
                    size_t i = LSD(h, lane, s, g);
                    h->n[i] += v;
                    h->m[i] += v * kv;
                    h->resv[i] += v * (kv + 1);
                    h->st.placed_groups += v;
                    if (!h->dev[s][g].primary && v > 0) {
                        /* prompt KV of the offloaded groups, primary -> worker */
                        double bytes = v * kv * h->bytes_gt_layer * h->layers[s];
                        const hs_hetis_dev *d = &h->dev[s][g];
                        double ns = (d->link_lat + bytes / d->link_bw) * 1e9 * h->scale;
                        h->st.offloaded_groups += v;
                        h->st.prompt_bytes += bytes;
                        if (ns > h->debt[lane * h->pp + s]) h->debt[lane * h->pp + s] = ns;
                    }
                }
            }
            lo += cnt;
        }
        /* requests preempted in an earlier stage are gone from later ones */
        {
            int w = 0;
            for (int k = 0; k < n; k++)
                if (rs[k] >= 0) rs[w++] = rs[k];
            n = w;
        }
        if (!n) break;
    }
    h->st.dispatches++;
    h->st.dispatched_reqs += n;
out:
    dt = cpu_s() - t0;
    {
        int k = 0;
        while (k < 31 && dt * 1e6 >= (double)(2 << k)) k++;
        h->st.dispatch_hist[k]++;
    }
    h->st.dispatch_wall_s += dt;
    if (dt > h->st.dispatch_wall_max_s) h->st.dispatch_wall_max_s = dt;
    free(rs), free(xs);
    return rc;
}

/* Makes room for the lane's next step on every device (memory pressure). */
static int relieve(hs_engine *e, hs_hetis *h, hs_lane *l, int lane, hs_err *err)
{
    for (int s = 0; s < h->pp; s++)
        for (int g = 0; g < h->n_dev[s]; g++) {
            int guard = 0;
            while (dev_resv(h, s, g) > h->dev[s][g].cap + 1e-6) {
                int32_t r = victim_on(e, h, lane, s, g);
                int deny[MD] = {0};
                int rc;
                if (r < 0 || ++guard > 100000) break; /* other lanes' cache: they shed at their own step */
                deny[g] = 1;
                rc = h->cfg.offload ? redispatch(e, h, l, lane, r, s, deny, err) : HS_ENOFIT;
                if (!rc && h->ideal[lane * h->pp + s] > 0 &&
                    stage_attn(h, lane, s, NULL) > (1 + h->cfg.theta) * h->ideal[lane * h->pp + s])
                    rc = HS_ENOFIT; /* migrating further would unbalance compute: stop */
                if (rc == HS_ENOFIT) fallback_preempt(e, h, l, lane, r);
                else if (rc) return rc;
            }
        }
    return 0;
}

static int rebalance(hs_engine *e, hs_hetis *h, hs_lane *l, int lane, hs_err *err)
{
    for (int s = 0; s < h->pp; s++) {
        int gstar;
        double cur = stage_attn(h, lane, s, &gstar), ideal;
        int32_t best = -1;
        double bl = -1;
        if (h->n_dev[s] < 2 || !h->cfg.offload) continue;
        ideal = ideal_time(e, h, l, lane, s, err);
        h->ideal[lane * h->pp + s] = ideal;
        h->st.checks++;
        if (ideal <= 0 || cur <= (1 + h->cfg.theta) * ideal) continue;
        h->st.imbalanced++;
        for (int32_t k = 0; k < h->n_tracked; k++) {
            int32_t r = h->tracked[k];
            double load;
            if (h->rec_lane[r] != lane) continue;
            load = rx(h, r)[s * MD + gstar] * (double)(kv_of(e, l, r) + 1);
            if (load > bl) bl = load, best = r;
        }
        if (best >= 0) {
            int deny[MD] = {0};
            int rc = redispatch(e, h, l, lane, best, s, deny, err);
            if (!rc) h->st.redispatches++;
            else if (rc != HS_ENOFIT) return rc;
        }
    }
    return 0;
}

int hs_hetis_prepare(hs_engine *e, hs_lane *l)
{
    hs_hetis *h = hs_hetis_of(&e->replicas[l->replica]);
    int lane = l->id - e->replicas[l->replica].lanes[0].id, rc;
    hs_err err = {0};
    if (!h) return 0;
    sweep(e, h, l, lane);
    lane_aggregate(e, h, l, lane);
    if (!(rc = dispatch_new(e, h, l, lane, &err)) &&
        !(l->n_dec > 0 && (++h->steps[lane] % h->cfg.period) == 0 && (rc = rebalance(e, h, l, lane, &err))))
        rc = relieve(e, h, l, lane, &err);
    if (rc) {
        hs__engine_fail(e, rc, "%s", err.msg); /* the engine names it when it stops */
        return rc;
    }
    assert(hs_hetis_sane(e, h, lane)); /* INV-HEAD, INV-HMEM */
    return 0;
}

void hs_hetis_resync(hs_engine *e, hs_lane *l)
{
    hs_hetis *h = hs_hetis_of(&e->replicas[l->replica]);
    int lane;
    if (!h) return;
    lane = l->id - e->replicas[l->replica].lanes[0].id;
    sweep(e, h, l, lane);
    lane_aggregate(e, h, l, lane);
}

double hs_hetis_stage_ns(hs_engine *e, hs_lane *l, int s)
{
    hs_replica *rp = &e->replicas[l->replica];
    hs_hetis *h = hs_hetis_of(rp);
    hs_batch_shape b = l->it.shape;
    double ns;
    int lane;
    if (!h || !l->it.decode || b.dec_seqs == 0) return hs_perf_stage_ns(&rp->perf, s, &b);
    lane = l->id - rp->lanes[0].id;
    b.dec_seqs = 0;
    b.dec_ctx = 0;
    ns = hs_perf_stage_ns(&rp->perf, s, &b) + h->layers[s] * stage_attn(h, lane, s, NULL);
    ns += h->debt[lane * h->pp + s];
    h->debt[lane * h->pp + s] = 0;
    return ns;
}

int hs_hetis_moved_groups(const int16_t *from, const int16_t *to, int n)
{
    int m = 0;
    for (int g = 0; g < n; g++)
        if (to[g] > from[g]) m += to[g] - from[g];
    return m;
}

int hs_hetis_sane(hs_engine *e, const hs_hetis *h, int lane)
{
    for (int32_t k = 0; k < h->n_tracked; k++) {
        int32_t r = h->tracked[k];
        const int16_t *x = rx(h, r);
        if (lane >= 0 && h->rec_lane[r] != lane) continue;
        if (hs_req_at(e, r)->id != h->rec_id[r] || hs_req_at(e, r)->state != HS_REQ_DECODE) return 0;
        for (int s = 0; s < h->pp; s++) {
            int sum = 0;
            for (int g = 0; g < MD; g++) {
                if (x[s * MD + g] < 0 || (g >= h->n_dev[s] && x[s * MD + g])) return 0;
                sum += x[s * MD + g];
            }
            if (sum != h->groups) return 0;
        }
    }
    for (int s = 0; s < h->pp; s++)
        for (int g = 0; g < h->n_dev[s]; g++)
            if (dev_resv(h, s, g) > h->dev[s][g].cap + 1e-6) return 0;
    return 1;
}

int hs_hetis_admit_ok(hs_engine *e, const hs_lane *l, int32_t r)
{
    const hs_hetis *h = hs_hetis_of(&e->replicas[l->replica]);
    double need, pend = 0;
    if (!h) return 1;
    need = (double)hs_req_at(e, r)->prefill_len + 1 + h->block_size;
    for (int32_t p = l->prefilling.head; p >= 0; p = hs_req_at(e, p)->next)
        pend += ((double)hs_req_at(e, p)->prefill_len + 1 + h->block_size) * h->groups;
    for (int s = 0; s < h->pp; s++) {
        double free_tot = 0, slots = 0;
        int G = h->cfg.offload ? h->n_dev[s] : 1;
        for (int g = 0; g < G; g++) {
            double f = h->dev[s][g].cap - dev_resv(h, s, g);
            if (f <= 0) continue;
            free_tot += f;
            slots += floor(f / need);
        }
        if (slots < h->groups || free_tot - pend < need * h->groups) return 0;
    }
    return 1;
}

int hs_hetis_setup(hs_replica *rp, int32_t n, const hs_policy_env *env, hs_err *err)
{
    if (!env->active && !env->deploy->n_attn) return 0;
    return hs_hetis_attach(rp, n, env->deploy, env->model, env->cluster, env->engine, env->perf,
                           env->opts, env->active, err);
}

void hs_hetis_totals(const hs_replica *rp, int32_t n_rep, hs_hetis_stats *t)
{
    memset(t, 0, sizeof *t);
    for (int32_t i = 0; i < n_rep; i++) {
        const hs_hetis_stats *s;
        if (!hs_hetis_of(&rp[i])) continue;
        s = &hs_hetis_of(&rp[i])->st;
        t->dispatches += s->dispatches;
        t->dispatched_reqs += s->dispatched_reqs;
        t->offloaded_groups += s->offloaded_groups;
        t->placed_groups += s->placed_groups;
        t->dispatch_wall_s += s->dispatch_wall_s;
        if (s->dispatch_wall_max_s > t->dispatch_wall_max_s) t->dispatch_wall_max_s = s->dispatch_wall_max_s;
        t->redispatches += s->redispatches;
        for (int k = 0; k < 32; k++) t->dispatch_hist[k] += s->dispatch_hist[k];
        t->migrations += s->migrations;
        t->moved_groups += s->moved_groups;
        t->fallback_preempts += s->fallback_preempts;
        t->moved_bytes += s->moved_bytes;
        t->prompt_bytes += s->prompt_bytes;
        t->checks += s->checks;
        t->imbalanced += s->imbalanced;
    }
}

double hs_hetis_dispatch_quantile(const hs_hetis_stats *st, double q)
{
    int64_t n = 0, acc = 0;
    for (int k = 0; k < 32; k++) n += st->dispatch_hist[k];
    if (!n) return 0;
    for (int k = 0; k < 32; k++) {
        acc += st->dispatch_hist[k];
        if (acc >= q * n) return (double)(2 << k) * 1e-6;
    }
    return st->dispatch_wall_max_s;
}

void hs_hetis_report(FILE *fp, const hs_replica *rp, int32_t n_rep)
{
    hs_hetis_stats t;
    int any = 0;
    for (int32_t i = 0; i < n_rep; i++) any |= hs_hetis_of(&rp[i]) != NULL;
    if (!any) return;
    hs_hetis_totals(rp, n_rep, &t);
    fprintf(fp,
            "hetis: %lld dispatches (%lld requests, CPU %.1f us mean, p99 < %.0f us, max %.1f us), %.1f%% of groups offloaded, "
            "%lld re-dispatches after %lld/%lld imbalanced checks, %lld migrations (%lld groups, %.2f GB), "
            "%lld fallback preemptions, %.2f GB prompt KV sent to workers\n",
            (long long)t.dispatches, (long long)t.dispatched_reqs,
            t.dispatches ? t.dispatch_wall_s / t.dispatches * 1e6 : 0, hs_hetis_dispatch_quantile(&t, 0.99) * 1e6,
            t.dispatch_wall_max_s * 1e6,
            t.placed_groups ? 100.0 * t.offloaded_groups / t.placed_groups : 0, (long long)t.redispatches,
            (long long)t.imbalanced, (long long)t.checks, (long long)t.migrations, (long long)t.moved_groups,
            t.moved_bytes / 1e9, (long long)t.fallback_preempts, t.prompt_bytes / 1e9);
    for (int32_t i = 0; i < n_rep; i++) {
        const hs_hetis *h = hs_hetis_of(&rp[i]);
        if (!h) continue;
        for (int s = 0; s < h->pp; s++)
            for (int g = 0; g < h->n_dev[s]; g++)
                fprintf(fp, "hetis: replica %d stage %d %s GPU %d: cap %.0f group-tokens, peak %.1f%%\n", i, s,
                        h->dev[s][g].primary ? "primary" : "attention", h->dev[s][g].gpu, h->dev[s][g].cap,
                        h->dev[s][g].cap > 0 ? 100.0 * h->dev[s][g].peak / h->dev[s][g].cap : 0);
    }
}

int hs_hetis_idle(hs_engine *e, const hs_lane *l)
{
    const hs_hetis *h = hs_hetis_of(&e->replicas[l->replica]);
    if (!h) return 1;
    for (int s = 0; s < h->pp; s++)
        for (int g = 0; g < h->n_dev[s]; g++)
            if (dev_resv(h, s, g) > 0) return 0;
    return 1;
}
