/* roofline.c - the per-operator roofline latency model.
 *
 * Every operator of a transformer layer costs
 *     max(FLOPs / (peak * eff_compute), bytes / (bandwidth * eff_mem)) + launch
 * on the slowest GPU of the stage (TP ranks run in lockstep), with shapes
 * sharded by TP.  TP adds ring all-reduces of the hidden states (two per
 * layer, one when attention and MLP run in parallel); PP adds a point-to-
 * point send of the hidden states between stages.  Quantised weights are
 * dequantised in the kernel: they cut the bytes, not the FLOPs.
 * Limits: no wave quantisation or tile effects, no overlap of communication
 * with compute.  Encoder layers of encoder-decoder models are timed from
 * this builder's one-layer tables by hs_perf_build (perf.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf.h"
#include "perf/table.h"
#include "perf/table_int.h"

typedef struct rf {
    double flops, bw;        /* slowest rank's FLOP/s and bytes/s */
    const hs_perf_cfg *cfg;
} rf;

static double op_s(const rf *r, double flops, double bytes, double eff)
{
    double tc = flops / (r->flops * eff), tm = bytes / (r->bw * r->cfg->mem_eff);
    return (tc > tm ? tc : tm) + r->cfg->launch_us * 1e-6;
}

/* y[T x n] = x[T x k] * W[k x n] with W at wb bytes per element. */
static double gemm_s(const rf *r, double t, double k, double n, double wb)
{
    return op_s(r, 2.0 * t * k * n, k * n * wb + 2.0 * t * (k + n), r->cfg->gemm_eff);
}

static double elementwise_s(const rf *r, double elems, double passes)
{
    return op_s(r, elems * 4.0, elems * 2.0 * passes, 1.0);
}

/* One operator (HS_OP_*, the measured tables' names) on one rank for t
 * tokens at TP tp and weight bits; seconds. */
static double op_time_s(const rf *r, int op, const hs_model *m, int tp, int bits, double t)
{
    double wb = hs_weight_bytes_per_param(bits);
    double q = (double)m->heads * m->head_dim / tp;
    double kv = (double)hs_model_kv_heads_per_rank(m, tp) * m->head_dim;
    double h = m->hidden, f = (double)m->ffn / tp;
    switch (op) {
    case HS_OP_EMB: return op_s(r, 0, t * h * 2.0 * 2, 1.0);          /* gather */
    case HS_OP_NORM: return elementwise_s(r, t * h, 2);
    case HS_OP_QKV: return gemm_s(r, t, h, q + 2 * kv, wb);
    case HS_OP_ROPE: return elementwise_s(r, t * (q + kv), 2);
    case HS_OP_ATTN_OUT: return gemm_s(r, t, q, h, wb);
    case HS_OP_MLP_UP: return gemm_s(r, t, h, (m->ffn_gated ? 2 : 1) * f, wb); /* up (+gate) */
    case HS_OP_ACT: return elementwise_s(r, t * f, m->ffn_gated ? 3 : 2); /* (x gate) */
    case HS_OP_MLP_DOWN: return gemm_s(r, t, f, h, wb);
    case HS_OP_ADD: return elementwise_s(r, t * h, 3);
    case HS_OP_LM_HEAD: return gemm_s(r, t, h, (double)m->vocab / tp, 2.0);
    default: return 0;
    }
}

double hs_roofline_op_us(int op, const hs_model *m, const hs_gpu *g, int tp, int bits,
                         double tokens, const hs_perf_cfg *cfg)
{
    rf r = {g->flops16, g->mem_bw, cfg};
    return op_time_s(&r, op, m, tp, bits, tokens) * 1e6;
}

/* Attention coefficients of one layer on one rank (see perf.h for the
 * terms); seconds, seconds per sequence, per context token, per pair. */
typedef struct attn_coef {
    double dec_fixed, dec_seq, dec_ctx;
    double pre_fixed, pre_pair, pre_ctx;  /* pre_pair: per pair against the prefix; a
                                             pair of the chunk's causal triangle costs
                                             twice that (see attn_coefs) */
    double pre_tok;                       /* per query row of the chunk */
} attn_coef;

static void attn_coefs(const rf *r, const hs_model *m, int tp, int kv_bits, attn_coef *a)
{
    double q = (double)m->heads * m->head_dim / tp;
    double kvb = hs_model_kv_bytes_token_layer(m, tp, kv_bits);
    /* Decode attention: reads every cached K and V once (memory bound
     * except at very short contexts); 4 FLOPs per head-dim per pair. */
    double per_ctx_c = 4.0 * q / (r->flops * r->cfg->attn_eff);
    double per_ctx_m = kvb / (r->bw * r->cfg->mem_eff);
    a->dec_ctx = per_ctx_c > per_ctx_m ? per_ctx_c : per_ctx_m;
    a->dec_seq = 4.0 * q / (r->bw * r->cfg->mem_eff); /* q in, out */
    a->dec_fixed = r->cfg->launch_us * 1e-6;
    /* Prefill attention (FlashAttention-style): compute bound on the
     * query-key pairs, plus reading the cached prefix of chunked prompts.
     * The chunk's causal triangle costs as much as the full square: its
     * diagonal tiles are computed whole and masked, and the kernel's work
     * is scheduled per query tile (on Vidur's A100 table the triangle runs
     * at about half the rate of the prefix rectangle).  A call ramps up to
     * attn_eff: with W pairs it runs at attn_eff W / (W + attn_knee), i.e.
     * it costs attn_knee pairs more, a fixed cost per call.  Each query row
     * costs attn_query_keys pairs more: the time per pair of a prompt falls
     * from 0.55 ns at 512 tokens to 0.28 at 4,096 on that table, a cost
     * linear in the queries that the pairs alone miss.  attn_eff 0.459,
     * attn_knee 8.40e4 and attn_query_keys 650, fitted together (least
     * squares on the log, `hetsim perf compare` prints the refit) on that
     * table, give 4.7% median error, 11.6% p90; without the per-query term
     * 8.0% / 19% (short prefixes 8% fast, long ones 12% slow); attn_eff
     * alone 11.0% / 39%; counting c(c+1)/2 pairs at 0.5, -51%.  Tile
     * padding (64 or 128 queries and keys) or per-SM wave models did worse
     * (19-27%). */
    a->pre_pair = 4.0 * q / (r->flops * r->cfg->attn_eff);
    a->pre_fixed = r->cfg->launch_us * 1e-6 + a->pre_pair * r->cfg->attn_knee;
    a->pre_tok = a->pre_pair * r->cfg->attn_query_keys;
    a->pre_ctx = kvb / (r->bw * r->cfg->mem_eff);
}

double hs_roofline_attn_us(int kind, const hs_model *m, const hs_gpu *g, int tp, int kv_bits,
                           double x, double y, const hs_perf_cfg *cfg)
{
    rf r = {g->flops16, g->mem_bw, cfg};
    attn_coef a;
    attn_coefs(&r, m, tp, kv_bits, &a);
    if (kind == HS_ATTN_DECODE) return (a.dec_fixed + a.dec_seq * x + a.dec_ctx * x * y) * 1e6;
    /* one chunk: its causal triangle's x (x + 1) / 2 pairs at twice a pair
     * (see attn_coefs; the hot path's 2 pre_self Q), x * y against the prefix */
    return (a.pre_fixed + a.pre_pair * (x * (x + 1) + x * y) + a.pre_tok * x + a.pre_ctx * y) * 1e6;
}

/* One decoder layer on one rank for t tokens (dense part, no attention
 * core), including its TP all-reduces; seconds. */
static double layer_dense_s(const rf *r, const hs_model *m, const hs_cluster *c,
                            const hs_stage_layout *st, double t)
{
    static const int ops[] = {HS_OP_QKV, HS_OP_ATTN_OUT, HS_OP_MLP_UP, HS_OP_MLP_DOWN, HS_OP_ACT};
    int tp = st->tp;
    double h = m->hidden, s = 0;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        s += op_time_s(r, ops[k], m, tp, st->bits, t);
    s += 2 * op_time_s(r, HS_OP_NORM, m, tp, st->bits, t);
    s += 2 * op_time_s(r, HS_OP_ADD, m, tp, st->bits, t);
    if (!strcmp(m->position, "rope")) s += op_time_s(r, HS_OP_ROPE, m, tp, st->bits, t);
    if (tp > 1)
        s += (m->parallel_attn ? 1 : 2) *
             hs_allreduce_s(c, st->gpus, tp, t * h * 2.0, r->cfg->link_eff);
    return s;
}

static int build(hs_perf *p, const hs_perf_cfg *cfg, const hs_model *m,
                 const hs_cluster *c, const hs_layout *l, int max_tokens,
                 int max_seqs, hs_err *err)
{
    memset(p, 0, sizeof *p);
    p->pp = l->pp;
    snprintf(p->model_name, sizeof p->model_name, "roofline");
    p->expected_err = -1;
    p->uncalibrated = 1;
    for (int s = 0; s < l->pp; s++)
        for (int i = 0; i < l->stage[s].tp; i++) {
            const char *gn = hs_cluster_gpu(c, l->stage[s].gpus[i])->name;
            size_t len = strlen(p->calib);
            if (hs__prov_has(p->calib, gn)) continue;
            snprintf(p->calib + len, sizeof p->calib - len, "%s%s: datasheet roofline, uncalibrated",
                     len ? "; " : "", gn);
        }
    p->step_overhead = cfg->step_overhead_us * 1e3;
    for (int s = 0; s < l->pp; s++) {
        const hs_stage_layout *st = &l->stage[s];
        hs_perf_stage *ps = &p->stage[s];
        rf r = {0, 0, cfg};
        int tp = st->tp, first = s == 0, last = s == l->pp - 1;
        double L = st->layers, h = m->hidden;
        for (int i = 0; i < tp; i++) {
            const hs_gpu *g = hs_cluster_gpu(c, st->gpus[i]);
            if (r.flops == 0 || g->flops16 < r.flops) r.flops = g->flops16;
            if (r.bw == 0 || g->mem_bw < r.bw) r.bw = g->mem_bw;
        }
        ps->max_tokens = max_tokens;
        ps->max_seqs = max_seqs;
        ps->dense = calloc((size_t)max_tokens + 1, sizeof *ps->dense);
        ps->head = calloc((size_t)max_seqs + 1, sizeof *ps->head);
        if (!ps->dense || !ps->head) {
            hs_perf_free(p);
            return hs_errf(err, HS_ENOMEM, "out of memory building latency tables");
        }
        for (int t = 1; t <= max_tokens; t++) {
            double sec = L * layer_dense_s(&r, m, c, st, t);
            if (first) sec += op_time_s(&r, HS_OP_EMB, m, tp, st->bits, t);
            ps->dense[t] = sec * 1e9;
        }
        for (int k = 1; k <= max_seqs && last; k++) {
            double sec = op_time_s(&r, HS_OP_LM_HEAD, m, tp, 16, k) +
                         op_time_s(&r, HS_OP_NORM, m, tp, 16, k); /* final norm */
            if (tp > 1) /* gather the vocabulary shards of the logits */
                sec += hs_allreduce_s(c, st->gpus, tp, k * (double)m->vocab / tp * 4.0,
                                      cfg->link_eff) / 2;
            ps->head[k] = sec * 1e9;
        }
        {
            attn_coef a;
            attn_coefs(&r, m, tp, l->kv_bits, &a);
            ps->dec_ctx = L * a.dec_ctx * 1e9;
            ps->dec_seq = L * a.dec_seq * 1e9;
            ps->dec_fixed = L * cfg->launch_us * 1e3;   /* = a.dec_fixed, exactly */
            /* Q = sum c(c+1)/2 ~ c^2 / 2: the triangle at twice a pair */
            ps->pre_self = 2 * L * a.pre_pair * 1e9;
            ps->pre_cross = L * a.pre_pair * 1e9;
            ps->pre_ctx = L * a.pre_ctx * 1e9;
            ps->pre_fixed = L * a.pre_fixed * 1e9;   /* launch and the ramp */
            ps->pre_tok = L * a.pre_tok * 1e9;
        }
        if (!last) {
            const hs_stage_layout *nx = &l->stage[s + 1];
            double bw = hs_cluster_bw(c, st->gpus[0], nx->gpus[0]);
            double lat = hs_cluster_lat(c, st->gpus[0], nx->gpus[0]);
            if (st->gpus[0] == nx->gpus[0]) { bw = r.bw; lat = 0; }
            ps->send_alpha = lat * 1e9;
            ps->send_token = h * 2.0 / (bw * cfg->link_eff) * 1e9;
        }
    }
    return 0;
}

const hs_perf_builder hs_perf_roofline = {
    "roofline",
    "per-operator roofline from datasheet FLOP/s and bandwidth with efficiency factors",
    build,
};
