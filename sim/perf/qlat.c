/* qlat.c - per-layer latency by GPU, bit-width and phase; see qlat.h. */
#include "perf/qlat.h"

void hs_qlat_factors(const hs_gpu *g, int bits, double *compute, double *mem_read)
{
    switch (bits) {
    case 8:
        if (g->ops8 > 0) { *compute = 0.95; *mem_read = 0.55; }
        else { *compute = 0.45; *mem_read = 0.40; }
        return;
    case 4: *compute = 0.80; *mem_read = 0.60; return;
    case 3: *compute = 0.75; *mem_read = 0.50; return;
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

static double gemm_s(const qctx *c, double t, double k, double n)
{
    double fused = op_s(c, 2.0 * t * k * n, k * n * c->wb, 2.0 * t * (k + n),
                        c->pc->gemm_eff * c->kc, c->km);
    if (c->wb < 1) {
        /* GPTQ: the fused kernel re-reads the packed weights for every
         * extra row (half the cost each); past a few rows the layer is
         * dequantised to FP16 and multiplied with cuBLAS instead */
        qctx f16 = *c;
        double deq;
        f16.kc = f16.km = 1;
        f16.wb = 2;
        fused += (t - 1) * 0.5 * (k * n * c->wb / (c->g->mem_bw * c->pc->mem_eff * c->km));
        deq = op_s(c, 0, k * n * c->wb, k * n * 2.0, 1.0, c->km) +
              op_s(&f16, 2.0 * t * k * n, k * n * 2.0, 2.0 * t * (k + n), c->pc->gemm_eff * c->kc, 1);
        return fused < deq ? fused : deq;
    }
    return fused;
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

double hs_qlat_prefill_s(const hs_model *m, const hs_gpu *g, int bits, int v, int s,
                         int kv_bits, const hs_perf_cfg *pc)
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
    return dense_s(&c, m, t) + attn;
}

double hs_qlat_decode_s(const hs_model *m, const hs_gpu *g, int bits, int v, double ctx,
                        int kv_bits, const hs_perf_cfg *pc)
{
    qctx c = mk(g, bits, pc);
    double q = (double)m->heads * m->head_dim, kv = (double)m->kv_heads * m->head_dim;
    double attn = op_s(&c, 4.0 * v * ctx * q, 0, (double)v * ctx * kv * 2 * kv_bits / 8.0,
                       pc->attn_eff, 1.0);
    return dense_s(&c, m, v) + attn;
}

double hs_qlat_embed_s(const hs_model *m, const hs_gpu *g, double tokens, const hs_perf_cfg *pc)
{
    qctx c = mk(g, 16, pc);
    return op_s(&c, 0, 0, tokens * m->hidden * 2.0 * 2, 1.0, 1.0);
}

double hs_qlat_head_s(const hs_model *m, const hs_gpu *g, int v, const hs_perf_cfg *pc)
{
    qctx c = mk(g, 16, pc);
    return gemm_s(&c, v, m->hidden, m->vocab) +
           op_s(&c, 0, 0, (double)v * m->hidden * 2.0 * 2, 1.0, 1.0);
}
