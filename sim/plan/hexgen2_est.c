/* hexgen2_est.c - the HexGen-2 planner's estimator: what one group of GPUs
 * does as one replica, in closed form (hexgen2.h, "Estimator" and
 * "Layouts"), and how long a request's KV takes between two groups.
 *
 *   stage_time    one stage's time for a batch shape under the run's
 *                 latency model: the roofline tables' formula
 *                 (perf/roofline.c build(), stage_roofline), else the
 *                 model's own tables composed per layer (unit_tables,
 *                 stage_units); test HG2-4 for both;
 *   build_layout  a group's stages under a TP cap: TP inside a (node, type)
 *                 class, layers by speed within each stage's memory cap;
 *   time_layout   a layout's rate, latency and decode batch as the engine
 *                 runs it (host cost per lane iteration, prefill batches,
 *                 the decode-side admission's batch; HG2-6);
 *   eval_group    the best layout over the TP caps, cached per (role, caps,
 *                 GPU set) in the context's open-addressing table;
 *   kv_time       the KV hand-over of one request, flows as the engine
 *                 starts them; pair_time memoises it per pair of groups;
 *   nic_time      a group's cross-node KV bytes over its GPUs' NICs;
 *   pair_res      the network resources one hand-over keeps busy, for
 *                 hexgen2_place.c's contention.
 *
 * Invariants (asserted where relied on):
 *   - a group's GPUs are distinct, in [0, n_gpus) and at most n_gpus
 *     (scratch holds them); the cache key is them sorted by (node, type, id);
 *   - a layout that fits (ok) has 1 <= pp <= HS_MAX_PP stages whose TPs are
 *     caps from x->tps summing to the group's size and whose layers, each
 *     >= 1 and within the stage's memory cap, sum to the model's layers;
 *   - every time is finite and >= 0, every rate and latency of a group that
 *     fits finite and > 0; links between distinct GPUs have a finite
 *     bandwidth > 0 and a finite latency >= 0 (hw.h);
 *   - kv_time's groups share no GPU, so each GPU is touched at most once
 *     per direction (touched[] holds 2 n_gpus), and kvbuf is zero again on
 *     return.
 * Deterministic: the sort is total (ends on the id) and no order depends on
 * addresses or hashes. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/vec.h"
#include "perf/perf.h"
#include "plan/hexgen2_int.h"

/* ---------------------------------------------------------------- stage times */

/* The roofline's per-rank view of a stage: slowest FLOP/s and bandwidth. */
static void stage_gpu(const hs_hg2_ctx *x, const int *gpus, int tp, hs_gpu *g)
{
    assert(tp >= 1 && tp <= HS_MAX_TP);
    *g = *hs_cluster_gpu(x->c, gpus[0]);
    for (int i = 1; i < tp; i++) {
        const hs_gpu *h = hs_cluster_gpu(x->c, gpus[i]);
        if (h->flops16 < g->flops16) g->flops16 = h->flops16;
        if (h->mem_bw < g->mem_bw) g->mem_bw = h->mem_bw;
    }
}

/* Mirrors roofline.c's build() for one stage and shape, seconds. */
static double stage_roofline(const hs_hg2_ctx *x, const int *gpus, int tp, int layers,
                             int bits, int kv_bits, int first, int last,
                             const hs_batch_shape *b)
{
    const hs_model *m = x->m;
    const hs_perf_cfg *cfg = &x->pc;
    hs_gpu g;
    double L = layers, s = 0, t = b->tokens, h = m->hidden;
    double q = (double)m->heads * m->head_dim / tp;
    double kvb = hs_model_kv_bytes_token_layer(m, tp, kv_bits);
    stage_gpu(x, gpus, tp, &g);
    if (b->tokens > 0) {
        static const int ops[] = {HS_OP_QKV, HS_OP_ATTN_OUT, HS_OP_MLP_UP, HS_OP_MLP_DOWN, HS_OP_ACT};
        double us = 0, layer;
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
            us += hs_roofline_op_us(ops[k], m, &g, tp, bits, t, cfg);
        us += 2 * hs_roofline_op_us(HS_OP_NORM, m, &g, tp, bits, t, cfg);
        us += 2 * hs_roofline_op_us(HS_OP_ADD, m, &g, tp, bits, t, cfg);
        if (!strcmp(m->position, "rope")) us += hs_roofline_op_us(HS_OP_ROPE, m, &g, tp, bits, t, cfg);
        layer = us * 1e-6;
        /* all-reduces, each with the engine's host launch (perf.c engine_terms) */
        if (tp > 1)
            layer += (m->parallel_attn ? 1 : 2) * (hs_allreduce_s(x->c, gpus, tp, t * h * 2.0, cfg->link_eff) +
                                                   x->ovh.collective_launch_us * 1e-6);
        s += L * layer;
        if (first) s += hs_roofline_op_us(HS_OP_EMB, m, &g, tp, bits, t, cfg) * 1e-6;
    }
    if (last && b->samples > 0) {
        double k = b->samples;
        s += (hs_roofline_op_us(HS_OP_LM_HEAD, m, &g, tp, 16, k, cfg) +
              hs_roofline_op_us(HS_OP_NORM, m, &g, tp, 16, k, cfg)) * 1e-6;
        if (tp > 1)
            s += hs_allreduce_s(x->c, gpus, tp, k * (double)m->vocab / tp * 4.0, cfg->link_eff) / 2 +
                 x->ovh.collective_launch_us * 1e-6;
    }
    if (b->dec_seqs) {
        double per_c = 4.0 * q / (g.flops16 * cfg->attn_eff), per_m = kvb / (g.mem_bw * cfg->mem_eff);
        s += L * (per_c > per_m ? per_c : per_m) * (double)b->dec_ctx +
             L * (4.0 * q / (g.mem_bw * cfg->mem_eff)) * b->dec_seqs + L * cfg->launch_us * 1e-6;
    }
    if (b->pre_chunks) {
        double pair = L * 4.0 * q / (g.flops16 * cfg->attn_eff);
        /* the launch and the call's ramp (roofline.c attn_coefs) */
        s += pair * (2 * b->pre_self + b->pre_cross + cfg->attn_knee + cfg->attn_query_keys * (double)b->pre_tokens) +
             L * kvb / (g.mem_bw * cfg->mem_eff) * (double)b->pre_prefix + L * cfg->launch_us * 1e-6;
    }
    assert(isfinite(s) && s >= 0); /* FLOP/s, bandwidths and efficiencies > 0 */
    /* the engine's dispatch floor (perf.c engine_terms): the slowest host */
    {
        double floor_s = L * hs_ovh_stage_layer_us(&x->ovh, m, x->c, gpus, tp) * 1e-6;
        if (s < floor_s) s = floor_s;
    }
    return s;
}

/* ---------------------------------------------------------------- the run's latency model
 *
 * With perf.model roofline the closed form above is the engine's model
 * (HG2-4).  Any other model (measured tables, the fitted transfer model,
 * the calibration: perf.model auto, the default) is what hs_perf_build
 * tabulates, and the estimator must time stages with it: on het1-5 the
 * closed-form roofline put the estimate 15-23% above runs with auto.  The
 * tables are linear in a stage's layers (perf/measured.c: operators,
 * collectives and attention per layer times L, the embedding on the first
 * stage, the LM head and logits on the last; roofline.c alike), and a
 * stage holds one GPU type inside one node (build_layout), so one build
 * per (node, GPU type, TP) serves every stage: a two-stage layout on those
 * GPUs, no layer (the embedding) then one layer (and the head), the trick
 * of perf.c's encoder terms.  Builds take milliseconds, so they are kept
 * for the process in a small cache keyed by a fingerprint of everything
 * they depend on (unit_key), like perf/measured.c's table cache; not
 * thread-safe (the planner is not).  A build that fails (it cannot for a
 * run that builds its replicas) leaves the closed form. */

typedef struct unit_entry {
    uint64_t key;               /* fingerprint of the build's inputs (unit_key) */
    int ok;                     /* 0: the build failed, the closed form serves */
    hs_perf p;                  /* stage 0: the embedding; stage 1: one layer + head */
} unit_entry;

/* At most this many unit tables are kept (about 70 KB each); a full cache
 * starts over. */
#define HS__HG2_UNITS 512
static struct {
    unit_entry *e;
    size_t n, cap;
} units;

static uint64_t fnv_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * UINT64_C(1099511628211);
    return h;
}

/* One 64-bit word into h (a multiply-xorshift step: unit_key runs on every
 * stage time, a byte loop over a TP-8 stage's links showed in profiles). */
static uint64_t mix64(uint64_t h, uint64_t v)
{
    h = (h ^ v) * UINT64_C(0x9E3779B97F4A7C15);
    return h ^ (h >> 29);
}

static uint64_t mix_double(uint64_t h, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    return mix64(h, v);
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
    return fnv_bytes(h, s, strlen(s) + 1);
}

/* The fingerprint of what every unit table of a context depends on: the
 * model, the perf.* settings, the pass and sequence limits, the bits. */
static uint64_t lat_fingerprint(const hs_hg2_ctx *x)
{
    const hs_perf_cfg *pc = &x->pc;
    uint64_t h = UINT64_C(1469598103934665603);
    double v[8] = {pc->gemm_eff, pc->attn_eff, pc->mem_eff, pc->link_eff, pc->launch_us, pc->step_overhead_us,
                   pc->attn_knee, pc->attn_query_keys};
    int iv[4] = {x->max_tokens, x->ec.max_num_seqs, x->ec.kv_bits, x->bits};
    h = fnv_str(h, x->m->name);
    h = fnv_bytes(h, &x->m->layers, sizeof x->m->layers);
    h = fnv_bytes(h, &x->m->hidden, sizeof x->m->hidden);
    h = fnv_str(h, pc->model);
    h = fnv_str(h, pc->engine);
    h = fnv_str(h, pc->tables);
    h = fnv_str(h, pc->fit_from);
    h = fnv_bytes(h, v, sizeof v);
    h = fnv_bytes(h, iv, sizeof iv);
    return h ? h : 1;
}

/* A unit table's key: the context's fingerprint, the stage's GPU type (name
 * and figures) and TP, and the links among its ranks (collectives without
 * a measured curve take them from the topology).  Nothing else of the
 * cluster enters a stage's tables, so settings share them. */
static uint64_t unit_key(const hs_hg2_ctx *x, const int *gpus, int tp)
{
    const hs_gpu *g = hs_cluster_gpu(x->c, gpus[0]);
    uint64_t h = mix64(x->lat_fp, (uint64_t)tp);
    h = mix64(h, fnv_str(0, g->name));
    h = mix_double(mix_double(mix_double(h, g->flops16), g->mem_bw), g->mem_bytes);
    for (int i = 0; i < tp; i++)
        for (int j = 0; j < tp; j++)
            if (i != j)
                h = mix_double(mix_double(h, hs_cluster_bw(x->c, gpus[i], gpus[j])),
                               hs_cluster_lat(x->c, gpus[i], gpus[j]));
    return h;
}

/* The unit tables of a stage on gpus[0..tp) (one type, one node), built
 * when first asked; NULL when the build failed or memory ran out (the
 * closed form then serves). */
static const hs_perf *unit_tables(const hs_hg2_ctx *x, const int *gpus, int tp)
{
    hs_hg2_ctx *mx = (hs_hg2_ctx *)x; /* lat_fp: a lazily taken cache key */
    uint64_t key;
    unit_entry *u;
    hs_layout l;
    hs_err err = {0};
    if (!mx->lat_fp) mx->lat_fp = lat_fingerprint(x);
    key = unit_key(x, gpus, tp);
    for (size_t i = 0; i < units.n; i++)
        if (units.e[i].key == key) return units.e[i].ok ? &units.e[i].p : NULL;
    if (units.n == HS__HG2_UNITS) {
        for (size_t i = 0; i < units.n; i++)
            if (units.e[i].ok) hs_perf_free(&units.e[i].p);
        units.n = 0;
    }
    if (hs_vec_reserve((void **)&units.e, &units.cap, units.n + 1, sizeof *units.e, 16)) return NULL;
    u = &units.e[units.n++];
    memset(u, 0, sizeof *u);
    u->key = key;
    memset(&l, 0, sizeof l);
    l.pp = 2;
    l.kv_bits = x->ec.kv_bits;
    l.stage[0].tp = tp;
    l.stage[0].bits = x->bits;
    memcpy(l.stage[0].gpus, gpus, (size_t)tp * sizeof *gpus);
    l.stage[1] = l.stage[0];
    l.stage[1].layers = 1;
    u->ok = !hs_perf_build(&u->p, &x->pc, x->m, x->c, &l, x->max_tokens, x->ec.max_num_seqs, &err);
    return u->ok ? &u->p : NULL;
}

/* A stage of `layers` layers from the unit tables u, s: hs_perf_stage_ns's
 * arithmetic on first x embedding + layers x one layer (+ head when last). */
static double stage_units(const hs_perf *u, int layers, int first, int last, const hs_batch_shape *b)
{
    const hs_perf_stage *e0 = &u->stage[0], *e1 = &u->stage[1];
    double L = layers, ns, dense_max = L * e1->dense[e1->max_tokens] + (first ? e0->dense[e0->max_tokens] : 0);
    int t = b->tokens < e1->max_tokens ? b->tokens : e1->max_tokens;
    int k = b->samples < e1->max_seqs ? b->samples : e1->max_seqs;
    ns = L * e1->dense[t] + (first ? e0->dense[t] : 0) + (last ? e1->head[k] : 0);
    if (b->tokens > e1->max_tokens) ns += dense_max * (double)(b->tokens - e1->max_tokens) / e1->max_tokens;
    if (b->dec_seqs) ns += L * (e1->dec_fixed + e1->dec_seq * b->dec_seqs + e1->dec_ctx * (double)b->dec_ctx);
    if (b->pre_chunks)
        ns += L * (e1->pre_fixed + e1->pre_self * b->pre_self + e1->pre_cross * b->pre_cross +
                   e1->pre_ctx * (double)b->pre_prefix + e1->pre_tok * (double)b->pre_tokens);
    if (ns < L * e1->dispatch_ns) ns = L * e1->dispatch_ns; /* one layer's floor, L times */
    assert(isfinite(ns) && ns >= 0);
    return ns * 1e-9;
}

/* One stage's time for the shape under the run's latency model, s. */
static double stage_time(const hs_hg2_ctx *x, const int *gpus, int tp, int layers,
                         int bits, int kv_bits, int first, int last,
                         const hs_batch_shape *b)
{
    const hs_perf *u;
    if (strcmp(x->pc.model, "roofline") && bits == x->bits && kv_bits == x->ec.kv_bits &&
        (u = unit_tables(x, gpus, tp)))
        return stage_units(u, layers, first, last, b);
    return stage_roofline(x, gpus, tp, layers, bits, kv_bits, first, last, b);
}

double hs_hg2_stage_s(const hs_hg2_ctx *x, const hs_layout *l, int s, const hs_batch_shape *b)
{
    const hs_stage_layout *st = &l->stage[s];
    assert(s >= 0 && s < l->pp && l->pp <= HS_MAX_PP);
    return stage_time(x, st->gpus, st->tp, st->layers, st->bits, l->kv_bits, s == 0,
                      s == l->pp - 1, b);
}

/* Activation send to the next stage, s (roofline's send_alpha/send_token). */
static double send_time(const hs_hg2_ctx *x, int from, int to, double tokens)
{
    double bw, lat;
    if (from == to) return 0;
    bw = hs_cluster_bw(x->c, from, to);
    lat = hs_cluster_lat(x->c, from, to);
    assert(isfinite(bw) && bw > 0 && isfinite(lat) && lat >= 0); /* hw.h: off-diagonal links exist */
    return lat + tokens * x->m->hidden * 2.0 / (bw * x->pc.link_eff);
}

/* Usable bytes left for KV on the stage's tightest rank; < 0 when the
 * weights and activations do not fit. */
static double stage_avail(const hs_hg2_ctx *x, const int *gpus, int tp, int layers,
                          int first, int last, double *kv_tok)
{
    hs_stage_mem mem;
    double avail = INFINITY;
    hs_model_stage_mem(x->m, layers, first, last, tp, x->bits, x->ec.kv_bits, x->max_tokens,
                       x->ec.max_num_seqs, &mem);
    for (int k = 0; k < tp; k++) {
        double a = hs_cluster_gpu(x->c, gpus[k])->mem_bytes * x->ec.gpu_mem_util - mem.weights - mem.activation;
        if (a < avail) avail = a;
    }
    *kv_tok = mem.kv_per_token;
    return avail;
}

/* Blocks a stage holds (hs_layout_kv_blocks' rule); -1 when it does not fit. */
static int64_t stage_blocks(const hs_hg2_ctx *x, const int *gpus, int tp, int layers,
                            int first, int last)
{
    double kvt, a = stage_avail(x, gpus, tp, layers, first, last, &kvt);
    if (a <= 0) return -1;
    assert(kvt > 0 && x->ec.block_size > 0);
    return (int64_t)floor(a / (kvt * x->ec.block_size));
}

/* INV-FIT of the runtime: every lane (one per stage) holds one context. */
static int stage_fits(const hs_hg2_ctx *x, const int *gpus, int tp, int layers, int first,
                      int last, int pp)
{
    int64_t b = stage_blocks(x, gpus, tp, layers, first, last);
    return b >= 0 && b / pp * x->ec.block_size >= x->mml;
}

/* ---------------------------------------------------------------- layouts */

static const hs_cluster *cmp_gpu_c;
static int cmp_gpu(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    const hs_cluster *c = cmp_gpu_c;
    if (c->gpu_node[i] != c->gpu_node[j]) return c->gpu_node[i] - c->gpu_node[j];
    if (c->gpu_type[i] != c->gpu_type[j]) return c->gpu_type[i] - c->gpu_type[j];
    return i - j;
}

static void sort_gpus(const hs_cluster *c, int *g, int n)
{
    int sorted = 1;
    /* the order is total (ties end on the id), so any sort gives the same
     * result; a group listed by id, as placements list them, is usually in
     * order already (GPUs numbered node by node) and short ones are
     * insertion-sorted: this runs for every group of every placement */
    cmp_gpu_c = c;
    for (int i = 1; i < n && sorted; i++) sorted = cmp_gpu(&g[i - 1], &g[i]) < 0;
    if (sorted) return;
    if (n > 32) {
        /* qsort with a file-scope cluster: the planner is single-threaded */
        qsort(g, (size_t)n, sizeof *g, cmp_gpu);
        return;
    }
    for (int i = 1; i < n; i++) {
        int v = g[i], j = i;
        while (j > 0 && cmp_gpu(&g[j - 1], &v) > 0) {
            g[j] = g[j - 1];
            j--;
        }
        g[j] = v;
    }
}

#ifndef NDEBUG
/* Sanity of a cache key (for assert): n GPU ids in [0, n_gpus), strictly
 * increasing in sort_gpus' order (hence distinct).  Call after sort_gpus. */
static int key_sane(const hs_hg2_ctx *x, const int *g, int n)
{
    if (n > x->c->n_gpus) return 0;
    for (int i = 0; i < n; i++) {
        if (g[i] < 0 || g[i] >= x->c->n_gpus) return 0;
        if (i && cmp_gpu(&g[i - 1], &g[i]) >= 0) return 0;
    }
    return 1;
}

/* Sanity of a layout (for assert): 1 <= pp <= HS_MAX_PP stages, each TP a
 * cap of x->tps, the TPs summing to n GPUs (n < 0: not checked), each
 * stage >= 1 layer and at most lmax[s] (lmax NULL: not checked), the
 * layers summing to the model's. */
static int layout_sane(const hs_hg2_ctx *x, int n, int pp, const int *tp, const int *layers,
                       const int *lmax)
{
    int gpus = 0, sum = 0;
    if (pp < 1 || pp > HS_MAX_PP) return 0;
    for (int s = 0; s < pp; s++) {
        int cap = 0;
        for (int k = 0; k < x->n_tps; k++) cap |= tp[s] == x->tps[k];
        if (!cap || layers[s] < 1 || (lmax && layers[s] > lmax[s])) return 0;
        gpus += tp[s];
        sum += layers[s];
    }
    return (n < 0 || gpus == n) && sum == x->m->layers;
}

/* Sanity of a group that fits (for assert): its layout, a finite rate and
 * latency > 0 and a finite decode batch >= 0. */
static int group_sane(const hs_hg2_ctx *x, const hs_hg2_group *g, int n)
{
    return g->ok && layout_sane(x, n, g->pp, g->tp, g->layers, NULL) && isfinite(g->rate) && g->rate > 0 &&
           isfinite(g->lat_s) && g->lat_s > 0 && isfinite(g->batch) && g->batch >= 0;
}
#endif

/* Builds the stages of gpus (sorted) under TP cap t; fills tp[], layers[]
 * and returns pp, or 0 when the model does not fit. */
static int build_layout(const hs_hg2_ctx *x, const int *g, int n, int role, int t, int pp_only,
                        int *tp, int *layers)
{
    const hs_cluster *c = x->c;
    int pp = 0, i = 0, off, L = x->m->layers;
    int lmax[HS_MAX_PP];
    double w[HS_MAX_PP];
    while (i < n) {
        int j = i;
        while (j < n && c->gpu_node[g[j]] == c->gpu_node[g[i]] && c->gpu_type[g[j]] == c->gpu_type[g[i]]) j++;
        for (int left = j - i; left > 0;) {
            int s = 1;
            for (int k = 0; k < x->n_tps; k++)
                if (x->tps[k] <= t && x->tps[k] <= left) s = x->tps[k];
            if (pp >= HS_MAX_PP) return 0;
            tp[pp++] = s;
            left -= s;
        }
        i = j;
    }
    if (pp > L || (pp_only && pp != pp_only)) return 0;
    /* memory cap per stage (binary search on layers), then speed shares */
    off = 0;
    for (int s = 0; s < pp; s++) {
        int lo = 0, hi = L - (pp - 1);
        hs_gpu gg;
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (stage_fits(x, g + off, tp[s], mid, s == 0, s == pp - 1, pp)) lo = mid;
            else hi = mid - 1;
        }
        if (lo < 1) return 0;
        lmax[s] = lo;
        stage_gpu(x, g + off, tp[s], &gg);
        w[s] = tp[s] * (role == HS_HG2_DECODE ? gg.mem_bw : gg.flops16);
        layers[s] = 1;
        off += tp[s];
    }
    for (int k = pp; k < L; k++) {
        int best = -1;
        double bv = INFINITY;
        for (int s = 0; s < pp; s++) {
            double v;
            if (layers[s] >= lmax[s]) continue;
            v = (layers[s] + 1) / w[s];
            if (v < bv) {
                bv = v;
                best = s;
            }
        }
        if (best < 0) return 0;
        layers[best]++;
    }
    assert(layout_sane(x, n, pp, tp, layers, lmax)); /* HG2-1: every layer once, within memory */
    return pp;
}

/* One pass of batch shape b through the pp stages of a built layout, as the
 * engine times it (engine.c try_start): the host cost `ovh` first, on the
 * driver, which is stage 0's rank, then each stage's kernels, then the send
 * of `tokens` activations to the next stage.  *pass gets the whole pass
 * (ovh, stages and sends, s); *busy the longest time one stage is held by
 * the pass (stage 0 holds the host cost as well; sends hold no stage). */
static void pipeline_times(const hs_hg2_ctx *x, const int *g, int pp, const int *tp,
                           const int *layers, const hs_batch_shape *b, double tokens, double ovh,
                           double *pass, double *busy)
{
    double su = ovh, m = 0;
    int off = 0;
    for (int s = 0; s < pp; s++) {
        double v = stage_time(x, g + off, tp[s], layers[s], x->bits, x->ec.kv_bits, s == 0, s == pp - 1, b);
        double held = v + (s == 0 ? ovh : 0);
        su += v;
        if (s + 1 < pp) su += send_time(x, g[off], g[off + tp[s]], tokens);
        if (held > m) m = held;
        off += tp[s];
    }
    *pass = su;
    *busy = m;
}

/* Seconds between two iterations of one lane when n lanes each run the
 * pass over the pipeline: a lane waits for its own pass, and every stage
 * serves the n lanes' passes one at a time (FIFO reservations), so the
 * cycle is the longer of the pass and n times the busiest stage. */
static double lane_cycle(double pass, double busy, int n)
{
    return fmax(pass, n * busy);
}

/* Host cost of an iteration (hs_perf_step_ns with the engine profile's
 * coefficients of), s. */
static double host_s(const hs_hg2_ctx *x, const double of[3], double seqs, double tokens)
{
    return x->pc.step_overhead_us * 1e-6 + (of[0] + of[1] * seqs + of[2] * tokens) * 1e-9;
}

/* The prefill batch shape of n whole prompts of si tokens. */
static void prefill_shape(hs_batch_shape *b, int n, double si)
{
    memset(b, 0, sizeof *b);
    b->tokens = (int32_t)(n * si);
    b->samples = n;
    b->pre_chunks = n;
    b->pre_self = n * si * (si + 1) / 2;
    b->pre_tokens = (int64_t)(n * si);
}

/* Fills rate / lat / batch of a built layout (build_layout's pp, tp and
 * layers): all finite, rate and lat > 0.  What the engine does with it:
 *   - prefill: each of the pp x engine.prefill_lanes lanes admits whole
 *     prompts first come first served up to max_batched_tokens,
 *     max_num_seqs and its KV blocks (hs_lane_admit_fcfs), so a saturated
 *     group runs batches of b prompts (8 of 512 tokens in a 4,096-token
 *     pass); rate = b x lanes / cycle.  lat is one prompt's pass, which
 *     picks the latency-optimal layout;
 *   - decode: each of the pp lanes holds kv_blocks / pp blocks, of which
 *     the decode-side admission (serve/handover.c) commits, per request, the
 *     blocks of its context when it writes its last token, s_in + s_out - 1
 *     tokens (reserve=1), keeping the watermark free, and at most
 *     max_num_seqs requests; attention reads s_in + s_out / 2 tokens a
 *     member on average; a request takes s_out - 1 decode steps (its first
 *     token came from the prefill);
 *   - both: the engine's host cost per iteration (perf.engine) is paid on
 *     stage 0 before its kernels, once per lane's iteration (lane_cycle). */
static void time_layout(const hs_hg2_ctx *x, const int *g, int pp, const int *tp,
                        const int *layers, int role, hs_hg2_group *out)
{
    double pass = 0, busy = 0, ovh, pre_rate, lat, of[3] = {0, 0, 0};
    int tpmax = 1, bs = x->ec.block_size;
    double si = x->o.s_in, so = x->o.s_out;
    int64_t blocks = INT64_MAX, lane_blocks, wm, per_req;
    int32_t max_pass = x->ec.max_batched_tokens > 0 ? x->ec.max_batched_tokens : x->max_tokens;
    int pre_lanes = pp * (x->ec.prefill_lanes > 0 ? x->ec.prefill_lanes : 1), nb;
    hs_batch_shape b;
    int off = 0;
    for (int s = 0; s < pp; s++) tpmax = tp[s] > tpmax ? tp[s] : tpmax;
    if (x->ovh.n) hs_ovh_coef(&x->ovh, tpmax, pp, &of[0], &of[1], &of[2]);
    for (int s = 0; s < pp; s++) {
        int64_t bl = stage_blocks(x, g + off, tp[s], layers[s], s == 0, s == pp - 1);
        if (bl < blocks) blocks = bl;
        off += tp[s];
    }
    /* build_layout kept every stage within stage_fits: each lane holds a context */
    assert(blocks >= 1 && blocks < INT64_MAX);
    /* one prompt alone: the latency the paper's prefill layout minimises */
    prefill_shape(&b, 1, si);
    pipeline_times(x, g, pp, tp, layers, &b, si, host_s(x, of, 1, si), &lat, &busy);
    /* a saturated prefill group: full batches on every lane */
    lane_blocks = blocks / pre_lanes;
    wm = (int64_t)floor(x->ec.watermark * (double)lane_blocks);
    per_req = (int64_t)ceil(si / bs);
    nb = (int)fmin(fmin(floor(max_pass / si), x->ec.max_num_seqs), floor((double)(lane_blocks - wm) / per_req));
    if (nb < 1) nb = 1;
    prefill_shape(&b, nb, si);
    ovh = host_s(x, of, nb, nb * si);
    pipeline_times(x, g, pp, tp, layers, &b, nb * si, ovh, &pass, &busy);
    pre_rate = nb * pre_lanes / lane_cycle(pass, busy, pre_lanes);
    assert(isfinite(lat) && lat > 0 && isfinite(pre_rate) && pre_rate > 0);
    out->lat_s = lat;
    out->rate = pre_rate;
    out->batch = 0;
    if (role == HS_HG2_PREFILL) return;
    /* decode: the batch each lane's committed KV holds */
    {
        double ctx = si + so / 2, round, tok_s, bl, steps = so > 1 ? so - 1 : 1;
        lane_blocks = blocks / pp;
        wm = (int64_t)floor(x->ec.watermark * (double)lane_blocks);
        per_req = (int64_t)ceil((si + x->o.kv_reserve * (so - 1)) / bs);
        if (per_req < 1) per_req = 1;
        bl = fmin(x->ec.max_num_seqs, floor((double)(lane_blocks - wm) / per_req));
        if (bl < 1) bl = 1;
        memset(&b, 0, sizeof b);
        b.tokens = (int32_t)bl;
        b.samples = (int32_t)bl;
        b.dec_seqs = (int32_t)bl;
        b.dec_ctx = (int64_t)(bl * ctx);
        ovh = host_s(x, of, bl, bl);
        pipeline_times(x, g, pp, tp, layers, &b, bl, ovh, &pass, &busy);
        round = lane_cycle(pass, busy, pp);
        tok_s = pp * bl / round;
        out->batch = pp * bl;
        if (role == HS_HG2_DECODE) {
            out->rate = tok_s / steps;
            out->lat_s = round;
        } else {
            out->rate = 1.0 / (1.0 / pre_rate + steps / tok_s);
        }
        assert(isfinite(round) && round > 0 && isfinite(out->rate) && out->rate > 0);
    }
}

/* ---------------------------------------------------------------- group cache */

static uint64_t key_hash(int role, int t_only, int pp_only, const int *g, int n)
{
    uint64_t h = UINT64_C(1469598103934665603);
    h = (h ^ (uint64_t)(role + 7 * t_only + 131 * pp_only)) * UINT64_C(1099511628211);
    for (int i = 0; i < n; i++) h = (h ^ (uint64_t)g[i]) * UINT64_C(1099511628211);
    h ^= (uint64_t)n;
    /* FNV's low bits, which pick the slot, depend only on the keys' low
     * bits: mixed (murmur3's finaliser) the probe chains stay short */
    h = (h ^ (h >> 33)) * UINT64_C(0xff51afd7ed558ccd);
    h = (h ^ (h >> 33)) * UINT64_C(0xc4ceb9fe1a85ec53);
    return h ^ (h >> 33);
}

static int cache_grow(hs_hg2_ctx *x)
{
    long nc = x->tab_cap * 2;
    struct hs__hg2_slot *nt = malloc((size_t)nc * sizeof *nt);
    if (!nt) return -1;
    memset(nt, 0xff, (size_t)nc * sizeof *nt);
    for (long i = 0; i < x->n_ent; i++) {
        long p = (long)(x->ent[i]->h & (uint64_t)(nc - 1));
        while (nt[p].i >= 0) p = (p + 1) & (nc - 1);
        nt[p].i = (int32_t)i;
        nt[p].h = (uint32_t)(x->ent[i]->h >> 32);
    }
    free(x->tab);
    x->tab = nt;
    x->tab_cap = nc;
    return 0;
}

const hs_hg2_group *hs_hg2_eval_group(hs_hg2_ctx *x, const int *gpus, int n, int role,
                                      int t_only, int pp_only)
{
    static const hs_hg2_group none = {.id = -1};
    int *g = x->scratch;
    uint64_t h;
    long p;
    hs__hg2_centry *e;
    if (n <= 0) return &none;
    assert(n <= x->c->n_gpus); /* scratch holds n_gpus */
    memcpy(g, gpus, (size_t)n * sizeof *g);
    sort_gpus(x->c, g, n);
    assert(key_sane(x, g, n)); /* a group's GPUs are distinct */
    assert(x->tab_cap > 0 && (x->tab_cap & (x->tab_cap - 1)) == 0 && x->n_ent * 2 <= x->tab_cap);
    h = key_hash(role, t_only, pp_only, g, n);
    for (p = (long)(h & (uint64_t)(x->tab_cap - 1)); x->tab[p].i >= 0; p = (p + 1) & (x->tab_cap - 1)) {
        if (x->tab[p].h != (uint32_t)(h >> 32)) continue;
        e = x->ent[x->tab[p].i];
        if (e->h == h && e->role == role && e->t_only == t_only && e->pp_only == pp_only && e->n == n &&
            !memcmp(e->key, g, (size_t)n * sizeof *g))
            return &e->g;
    }
    /* miss: evaluate every TP cap, keep the best for the role */
    x->st.group_evals++;
    e = calloc(1, sizeof *e);
    if (!e) {
        x->oom = 1;
        return &none;
    }
    e->h = h;
    e->role = role;
    e->t_only = t_only;
    e->pp_only = pp_only;
    e->n = n;
    e->key = malloc((size_t)n * sizeof *e->key);
    e->g.tp = malloc((size_t)(2 * HS_MAX_PP + n) * sizeof *e->g.tp);
    if (!e->key || !e->g.tp) {
        free(e->key);
        free(e->g.tp);
        free(e);
        x->oom = 1;
        return &none;
    }
    memcpy(e->key, g, (size_t)n * sizeof *g);
    e->g.layers = e->g.tp + HS_MAX_PP;
    e->g.gpus = e->g.tp + 2 * HS_MAX_PP;
    memcpy(e->g.gpus, g, (size_t)n * sizeof *g);
    for (int k = 0; k < x->n_tps; k++) {
        int tp[HS_MAX_PP], layers[HS_MAX_PP], pp;
        hs_hg2_group cand;
        if (t_only && x->tps[k] != t_only) continue;
        pp = build_layout(x, g, n, role, x->tps[k], pp_only, tp, layers);
        if (!pp) continue;
        memset(&cand, 0, sizeof cand);
        time_layout(x, g, pp, tp, layers, role, &cand);
        if (!e->g.ok || (role == HS_HG2_PREFILL && !x->o.prefill_tput ? cand.lat_s < e->g.lat_s : cand.rate > e->g.rate)) {
            e->g.ok = 1;
            e->g.pp = pp;
            e->g.rate = cand.rate;
            e->g.lat_s = cand.lat_s;
            e->g.batch = cand.batch;
            memcpy(e->g.tp, tp, (size_t)pp * sizeof *tp);
            memcpy(e->g.layers, layers, (size_t)pp * sizeof *layers);
        }
    }
    /* insert */
    if ((x->n_ent + 1) * 2 > x->tab_cap && cache_grow(x)) goto fail;
    if (hs_vec_reserve((void **)&x->ent, &x->cap_ent, (size_t)x->n_ent + 1, sizeof *x->ent, 256))
        goto fail;
    for (p = (long)(h & (uint64_t)(x->tab_cap - 1)); x->tab[p].i >= 0; p = (p + 1) & (x->tab_cap - 1))
        ;
    x->tab[p].i = (int32_t)x->n_ent;
    x->tab[p].h = (uint32_t)(h >> 32);
    e->g.id = x->n_ent;
    x->ent[x->n_ent++] = e;
    assert(x->n_ent * 2 <= x->tab_cap && x->n_ent < INT32_MAX);
    assert(!e->g.ok || group_sane(x, &e->g, n));
    return &e->g;
fail:
    /* out of memory growing the cache: the group reads as "does not fit",
     * and the planner reports HS_ENOMEM (hs_hg2_check_oom) */
    x->oom = 1;
    free(e->key);
    free(e->g.tp);
    free(e);
    return &none;
}

void hs_hg2_group_layout(const hs_hg2_ctx *x, const hs_hg2_group *g, hs_layout *l)
{
    int off = 0;
    memset(l, 0, sizeof *l);
    l->pp = g->pp;
    l->kv_bits = x->ec.kv_bits;
    for (int s = 0; s < g->pp; s++) {
        l->stage[s].tp = g->tp[s];
        l->stage[s].layers = g->layers[s];
        l->stage[s].bits = x->bits;
        memcpy(l->stage[s].gpus, g->gpus + off, (size_t)g->tp[s] * sizeof(int));
        off += g->tp[s];
    }
}

/* ---------------------------------------------------------------- KV transfer */

/* Walks the flows of one request's KV hand-over from group a to group b,
 * as handover.c's start_transfer starts them: each GPU holding layer l
 * sends to the GPU(s) holding layer l, max(tp) flows per overlapping stage
 * pair, `bytes` each.  Stops at fn's first nonzero return and returns it. */
static int each_flow(const hs_hg2_ctx *x, const hs_hg2_group *a, const hs_hg2_group *b,
                     int (*fn)(void *ctx, int src, int dst, double bytes), void *ctx)
{
    int ao = 0, la = 0, rc;
    for (int s = 0; s < a->pp; s++) {
        int bo = 0, lb = 0;
        for (int d = 0; d < b->pp; d++) {
            int lo = la > lb ? la : lb;
            int hi = la + a->layers[s] < lb + b->layers[d] ? la + a->layers[s] : lb + b->layers[d];
            if (hi > lo) {
                int nf = a->tp[s] > b->tp[d] ? a->tp[s] : b->tp[d];
                double bytes = (double)(hi - lo) * x->o.s_in * x->kvbtl / nf;
                for (int i = 0; i < nf; i++)
                    if ((rc = fn(ctx, a->gpus[ao + i % a->tp[s]], b->gpus[bo + i % b->tp[d]], bytes))) return rc;
            }
            bo += b->tp[d];
            lb += b->layers[d];
        }
        ao += a->tp[s];
        la += a->layers[s];
    }
    assert(la == x->m->layers);
    return 0;
}

/* Contract beyond hexgen2.h: both groups fit (ok) and share no GPU (the
 * planner pairs a prefill and a decode group of one placement); kvbuf is
 * zero on entry and again on return. */
/* kv_time's accumulation: each flow's serialised time on its sending and
 * receiving GPU, and the largest link latency. */
typedef struct kv_acc {
    hs_hg2_ctx *x;
    double *out, *in, lat;
    int nt;
} kv_acc;

static int kv_flow(void *ctx, int src, int dst, double bytes)
{
    kv_acc *k = ctx;
    hs_hg2_ctx *x = k->x;
    double t = src == dst ? 0 : bytes / hs_cluster_bw(x->c, src, dst);
    /* the groups share no GPU: t > 0, so each GPU is touched at most once
     * a direction, nt <= |a| + |b| <= n_gpus, and both pushes fit
     * touched[2 n_gpus] */
    assert(k->nt + 2 <= 2 * x->c->n_gpus);
    if (k->out[src] == 0) x->touched[k->nt++] = src;
    if (k->in[dst] == 0) x->touched[k->nt++] = x->c->n_gpus + dst;
    k->out[src] += t;
    k->in[dst] += t;
    if (src != dst && hs_cluster_lat(x->c, src, dst) > k->lat) k->lat = hs_cluster_lat(x->c, src, dst);
    return 0;
}

double hs_hg2_kv_time(hs_hg2_ctx *x, const hs_hg2_group *a, const hs_hg2_group *b)
{
    /* Per sending GPU and per receiving GPU: serialised bytes / pair
     * bandwidth (a NIC or link shared by the flows of one request), plus
     * the largest latency. */
    kv_acc k = {x, x->kvbuf, x->kvbuf + x->c->n_gpus, 0, 0};
    double worst = 0;
    assert(group_sane(x, a, -1) && group_sane(x, b, -1));
    each_flow(x, a, b, kv_flow, &k);
    for (int i = 0; i < k.nt; i++) {
        if (x->kvbuf[x->touched[i]] > worst) worst = x->kvbuf[x->touched[i]];
        x->kvbuf[x->touched[i]] = 0;
    }
    assert(isfinite(k.lat + worst) && k.lat + worst >= 0);
    return k.lat + worst;
}

double hs__hg2_pair_time(hs_hg2_ctx *x, const hs_hg2_group *a, const hs_hg2_group *b)
{
    uint64_t key = (((uint64_t)a->id << 32) | (uint64_t)b->id) + 1, h;
    long p;
    if (a->id < 0 || b->id < 0) return hs_hg2_kv_time(x, a, b);
    assert(a->id < INT32_MAX && b->id < INT32_MAX); /* the key holds both ids */
    assert((x->p_cap & (x->p_cap - 1)) == 0 && x->p_n * 2 <= x->p_cap);
    if ((x->p_n + 1) * 2 > x->p_cap) {
        long nc = x->p_cap ? x->p_cap * 2 : 4096;
        uint64_t *nk = calloc((size_t)nc, sizeof *nk);
        double *nv = malloc((size_t)nc * sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return hs_hg2_kv_time(x, a, b);
        }
        for (long i = 0; i < x->p_cap; i++) {
            if (!x->pkey[i]) continue;
            h = x->pkey[i] * UINT64_C(0x9E3779B97F4A7C15);
            for (p = (long)(h >> 20) & (nc - 1); nk[p]; p = (p + 1) & (nc - 1))
                ;
            nk[p] = x->pkey[i];
            nv[p] = x->pval[i];
        }
        free(x->pkey);
        free(x->pval);
        x->pkey = nk;
        x->pval = nv;
        x->p_cap = nc;
    }
    h = key * UINT64_C(0x9E3779B97F4A7C15);
    for (p = (long)(h >> 20) & (x->p_cap - 1); x->pkey[p]; p = (p + 1) & (x->p_cap - 1))
        if (x->pkey[p] == key) return x->pval[p];
    x->pkey[p] = key;
    x->pval[p] = hs_hg2_kv_time(x, a, b);
    x->p_n++;
    return x->pval[p];
}

double hs__hg2_nic_time(const hs_hg2_ctx *x, const hs_hg2_group *g, int ingress)
{
    const hs_cluster *c = x->c;
    double worst = 0;
    int off = 0;
    assert(group_sane(x, g, -1));
    for (int s = 0; s < g->pp; s++) {
        double bytes = g->layers[s] * x->o.s_in * x->kvbtl / g->tp[s];
        for (int k = 0; k < g->tp[s]; k++) {
            int a = g->gpus[off + k];
            double nic = x->nicbw[ingress ? c->n_gpus + a : a];
            if (nic > 0 && bytes / nic > worst) worst = bytes / nic;
        }
        off += g->tp[s];
    }
    assert(isfinite(worst) && worst >= 0);
    return worst;
}

static int cmp_res(const void *a, const void *b)
{
    long i = ((const hs__hg2_res *)a)->id, j = ((const hs__hg2_res *)b)->id;
    return (i > j) - (i < j);
}

/* pair_res's collection: the resources each flow occupies. */
typedef struct res_acc {
    const hs_hg2_ctx *x;
    double lat;
    hs__hg2_res *out;
    int m, cap;
} res_acc;

static int res_flow(void *ctx, int src, int dst, double bytes)
{
    res_acc *k = ctx;
    const hs_cluster *c = k->x->c;
    long n = c->n_gpus;
    double bw = hs_cluster_bw(c, src, dst), l = hs_cluster_lat(c, src, dst);
    hs__hg2_res r[3];
    int nr = 0;
    assert(src != dst && isfinite(bw) && bw > 0); /* disjoint groups, hw.h links */
    r[nr++] = (hs__hg2_res){2 * n + src * n + dst, bytes / bw, bytes / bw};
    if (c->gpu_node[src] != c->gpu_node[dst]) {
        double eg = k->x->nicbw[src], in = k->x->nicbw[n + dst];
        r[nr++] = (hs__hg2_res){src, bytes / eg, bw >= eg ? bytes / eg : 0};
        r[nr++] = (hs__hg2_res){n + dst, bytes / in, bw >= in ? bytes / in : 0};
    }
    if (l > k->lat) k->lat = l;
    for (int j = 0; j < nr; j++) {
        if (k->m == k->cap) return -1;
        k->out[k->m++] = r[j];
    }
    return 0;
}

int hs__hg2_pair_res(const hs_hg2_ctx *x, const hs_hg2_group *a, const hs_hg2_group *b,
                     hs__hg2_res *out, int cap, double *lat)
{
    res_acc acc = {x, 0, out, 0, cap};
    int m, k = 0;
    *lat = 0;
    assert(group_sane(x, a, -1) && group_sane(x, b, -1));
    if (each_flow(x, a, b, res_flow, &acc)) return -1;
    m = acc.m;
    *lat = acc.lat;
    /* one entry per resource: a resource serves its flows' bytes in turn */
    qsort(out, (size_t)m, sizeof *out, cmp_res);
    for (int i = 0; i < m; i++) {
        if (k && out[k - 1].id == out[i].id) {
            out[k - 1].t += out[i].t;
            out[k - 1].tb += out[i].tb;
        } else {
            out[k++] = out[i];
        }
    }
    for (int i = 0; i < k; i++) assert(isfinite(out[i].t) && out[i].tb >= 0 && out[i].tb <= out[i].t);
    return k;
}
