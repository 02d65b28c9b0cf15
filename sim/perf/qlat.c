/* qlat.c - per-layer latency by GPU, bit-width and phase; see qlat.h. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/qlat.h"
#include "perf/qlat_int.h"

void hs_qlat_factors(const hs_gpu *g, int bits, double *compute, double *mem_read)
{
    switch (bits) {
    /* bitsandbytes LLM.int8 on INT8 tensor cores (compute capability
     * 7.5+): the INT8 weights are read as fast as FP16's bytes (read 1: a
     * decode step reads half FP16's bytes), and every linear-layer call
     * pays a fixed host cost (HS_QLAT_INT8_CALL_S, qlat.h: bitsandbytes'
     * Python matmul, its outlier split and a wait on the GPU), which two
     * independent measurements put at 0.61-0.65 ms; compute 0.95 keeps the
     * paper's Fig. 5 prefill ordering (comparable to FP16 on a T4).  Below
     * 7.5 (V100, P100) bitsandbytes casts the INT8 weights to 16 bits and
     * runs an FP16 matmul (its 0.37.0 changelog; the releases before
     * assert on these GPUs, bitsandbytes #18, so LLM-PQ's V100 runs used
     * it): no factor, gemm_s times the cast and the FP16 GEMM, and the
     * same host cost per call. */
    case 8:
        if (g->ops8 > 0) { *compute = 0.95; *mem_read = 1.0; }
        else { *compute = 1.0; *mem_read = 1.0; }
        return;
    /* GPTQ's kernel (gemm_s): compute in FP32 on CUDA cores, so no compute
     * factor; the read factor 0.61 is what makes one matrix-vector row of
     * 3-bit weights (0.375 bytes at 0.8 x 0.61 of the bandwidth) 3.25x
     * faster than FP16 (2 bytes at 0.8), GPTQ's end-to-end speed-up on an
     * A100 (OPT-175B, batch 1; arXiv 2210.17323, abstract); its A6000
     * figure, 4.5x, would give 0.84.  No 4-bit figure is published for
     * this kernel: 4-bit takes the 3-bit factor. */
    case 4: *compute = 1.0; *mem_read = 0.61; return;
    case 3: *compute = 1.0; *mem_read = 0.61; return;
    default: *compute = 1.0; *mem_read = 1.0; return;
    }
}

typedef struct qctx {
    const hs_gpu *g;
    const hs_perf_cfg *pc;
    double kc, km, wb;      /* compute factor, read factor, weight bytes/elem */
} qctx;

static double op_s(const qctx *c, double flops, double bytes_w, double bytes_a, double eff,
                   double km)
{
    double tc = flops / (c->g->flops16 * eff);
    double tm = bytes_w / (c->g->mem_bw * c->pc->mem_eff * km) +
                bytes_a / (c->g->mem_bw * c->pc->mem_eff);
    return (tc > tm ? tc : tm) + c->pc->launch_us * 1e-6;
}

/* FP32 (CUDA-core, non-tensor) peak, FLOP/s: the GPU file's fp32_tflops
 * (every shipped profile gives its datasheet figure).  The GPTQ kernel
 * computes in FP32 (below). */
static double fp32_peak(const hs_gpu *g)
{
    if (g->flops32 > 0) return g->flops32;
    /* not given (a user's GPU file): a guess from the FP16 GEMM peak,
     * which is 8x FP32 on the V100, 16x on the A100 and H100, 2-4x on
     * GeForce and Ada cards, 1x without tensor cores */
    return g->flops16 / 8;
}

static double gemm_s(const qctx *c, double t, double k, double n)
{
    if (c->wb < 1) {
        /* GPTQ 3/4-bit: LLM-PQ's runtime (LPTorch's QuantLinear) always
         * calls the GPTQ vecquant kernel, whose grid has one z-slice per
         * input row: every row streams the packed weights once more (in
         * launch order, so no cache reuse once a matrix exceeds L2) and
         * dequantises and accumulates in FP32 on CUDA cores; there is no
         * switch to dequantise + cuBLAS.  So a GEMM of t rows costs t
         * matrix-vector products (one launch). */
        double row_c = 2.0 * k * n / (fp32_peak(c->g) * c->pc->gemm_eff);
        double row_m = k * n * c->wb / (c->g->mem_bw * c->pc->mem_eff * c->km) +
                       (k + n) * 4.0 / (c->g->mem_bw * c->pc->mem_eff);
        return t * (row_c > row_m ? row_c : row_m) + c->pc->launch_us * 1e-6;
    }
    if (c->wb == 1 && c->g->ops8 <= 0) {
        /* LLM.int8 without INT8 tensor cores (hs_qlat_factors): the INT8
         * weights cast to FP16 (read 1 byte, write 2 per weight), then the
         * FP16 GEMM reads them back */
        double cast = k * n * 3.0 / (c->g->mem_bw * c->pc->mem_eff) + c->pc->launch_us * 1e-6;
        return cast + op_s(c, 2.0 * t * k * n, k * n * 2.0, 2.0 * t * (k + n), c->pc->gemm_eff, 1.0);
    }
    return op_s(c, 2.0 * t * k * n, k * n * c->wb, 2.0 * t * (k + n), c->pc->gemm_eff * c->kc, c->km);
}

/* Linear layers, norms, residual adds and the activation for t tokens. */
static double dense_s(const qctx *c, const hs_model *m, double t)
{
    double h = m->hidden, q = (double)m->heads * m->head_dim;
    double kv = (double)m->kv_heads * m->head_dim, f = m->ffn;
    double s = gemm_s(c, t, h, q + 2 * kv) + gemm_s(c, t, q, h) +
               gemm_s(c, t, h, (m->ffn_gated ? 2 : 1) * f) + gemm_s(c, t, f, h);
    /* two norms, two adds, the activation: FP16 element-wise passes */
    s += op_s(c, 0, 0, t * h * 2.0 * (2 * 2 + 2 * 3) + t * f * 2.0 * (m->ffn_gated ? 3 : 2),
              1.0, 1.0) + 4 * c->pc->launch_us * 1e-6;
    return s;
}

static qctx mk(const hs_gpu *g, int bits, const hs_perf_cfg *pc)
{
    qctx c = {g, pc, 1, 1, bits / 8.0};
    hs_qlat_factors(g, bits, &c.kc, &c.km);
    return c;
}

/* ---- the calibrated FP16 layer (built in qlat_cal.c) ------------------------ */

void hs_qlat_cal_free(hs_qlat_cal *q)
{
    if (!q) return;
    for (int i = 0; q->t && i < q->n; i++) {
        free(q->t[i].dense);
        free(q->t[i].head);
    }
    free(q->t);
    free(q->prov);
    free(q);
}

const char *hs_qlat_cal_source(const hs_qlat_cal *q, double *expected_err)
{
    if (expected_err) *expected_err = q ? q->prov->expected_err : -1;
    return q ? q->prov->calib : "datasheet roofline";
}

static const qcal_type *cal_for(const hs_qlat_cal *q, const hs_gpu *g)
{
    if (!q) return NULL;
    for (int i = 0; i < q->n; i++)
        if (!strcmp(q->t[i].gpu, g->name)) return &q->t[i];
    assert(!"hs_qlat: a GPU of another cluster than the calibrated layer's");
    return NULL;
}

/* Calibrated FP16 dense ops over their roofline at t tokens (beyond the
 * table, the ratio at its last count: both are linear in t there). */
static double cal_ratio(const qcal_type *ct, const hs_qlat_cal *q, const hs_model *m,
                        const hs_gpu *g, const hs_perf_cfg *pc, double t)
{
    qctx c16 = mk(g, 16, pc);
    long i = (long)(t + 0.5);
    if (i < 1) i = 1;
    if (i > q->max_tokens) i = q->max_tokens;
    return ct->dense[i] * 1e-9 / dense_s(&c16, m, (double)i);
}

/* One layer's dense ops at `bits` for t tokens, given FP16's calibrated
 * time over its roofline at t (ratio; 1: the roofline alone). */
static double layer_s(const hs_model *m, const hs_gpu *g, int bits, double t, const hs_perf_cfg *pc,
                      double ratio)
{
    qctx c = mk(g, bits, pc);
    /* GPTQ runs its own FP32 matrix-vector kernel, not cuBLAS: no table
     * times it and FP16's calibrated ratio says nothing of it (on a GPU
     * whose FP16 is extrapolated, the P100, a one-token ratio of 3.5
     * would have made its prefill 22x FP16's), so it stays on the
     * datasheet with its published read factor */
    double d = dense_s(&c, m, t);
    if (bits >= 8) d *= ratio;
    /* LLM.int8's host cost per call is no kernel's: never scaled */
    if (bits == 8) d += hs_model_linear_calls(m) * HS_QLAT_INT8_CALL_S;
    return d;
}

double hs_qlat_dense_s(const hs_model *m, const hs_gpu *g, int bits, double t,
                       const hs_perf_cfg *pc, const hs_qlat_cal *q)
{
    const qcal_type *ct = cal_for(q, g);
    return layer_s(m, g, bits, t, pc, ct ? cal_ratio(ct, q, m, g, pc, t) : 1.0);
}

double hs_qlat_layer_s(const hs_model *m, const hs_gpu *g, int bits, double t, double fp16_s,
                       const hs_perf_cfg *pc)
{
    qctx c16 = mk(g, 16, pc);
    return layer_s(m, g, bits, t, pc, fp16_s / dense_s(&c16, m, t));
}

double hs_qlat_prefill_s(const hs_model *m, const hs_gpu *g, int bits, int v, int s,
                         int kv_bits, const hs_perf_cfg *pc, const hs_qlat_cal *cal)
{
    qctx c = mk(g, bits, pc);
    double t = (double)v * s, q = (double)m->heads * m->head_dim;
    double kv = (double)m->kv_heads * m->head_dim;
    double pairs = (double)v * s * (s + 1) / 2.0;
    /* eager attention: QK^T and PV over the causal pairs; the FP16 scores
     * are written, soft-maxed and read back (3 passes over v*heads*s^2) */
    double attn = op_s(&c, 4.0 * pairs * q, 0,
                       (double)v * m->heads * s * (double)s * 2.0 * 3 +
                           t * kv * 2 * kv_bits / 8.0,
                       pc->attn_eff, 1.0);
    return hs_qlat_dense_s(m, g, bits, t, pc, cal) + attn;
}

double hs_qlat_decode_s(const hs_model *m, const hs_gpu *g, int bits, int v, double ctx,
                        int kv_bits, const hs_perf_cfg *pc, const hs_qlat_cal *cal)
{
    qctx c = mk(g, bits, pc);
    double q = (double)m->heads * m->head_dim, kv = (double)m->kv_heads * m->head_dim;
    double attn = op_s(&c, 4.0 * v * ctx * q, 0, (double)v * ctx * kv * 2 * kv_bits / 8.0,
                       pc->attn_eff, 1.0);
    return hs_qlat_dense_s(m, g, bits, v, pc, cal) + attn;
}

double hs_qlat_embed_s(const hs_model *m, const hs_gpu *g, double tokens, const hs_perf_cfg *pc)
{
    qctx c = mk(g, 16, pc);
    return op_s(&c, 0, 0, tokens * m->hidden * 2.0 * 2, 1.0, 1.0);
}

double hs_qlat_head_s(const hs_model *m, const hs_gpu *g, int v, const hs_perf_cfg *pc,
                      const hs_qlat_cal *cal)
{
    qctx c = mk(g, 16, pc);
    const qcal_type *ct = cal_for(cal, g);
    double roof = gemm_s(&c, v, m->hidden, m->vocab) + op_s(&c, 0, 0, (double)v * m->hidden * 2.0 * 2, 1.0, 1.0);
    if (ct && v >= 1) {
        int n = cal->max_seqs;
        if (v <= n) return ct->head[v] * 1e-9;
        /* beyond the table: on along its last slope (the head is mostly a
         * fixed read of its weights, not proportional to v; a noisy table
         * never makes it fall); one row: as the roofline grows */
        if (n > 1) {
            double slope = ct->head[n] - ct->head[n - 1];
            return (ct->head[n] + (v - n) * (slope > 0 ? slope : 0)) * 1e-9;
        }
        return ct->head[1] * 1e-9 * roof / hs_qlat_head_s(m, g, 1, pc, NULL);
    }
    return roof;
}
