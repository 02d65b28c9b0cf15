/* qlat.h - per-layer latency of a quantised decoder layer, per GPU type,
 * bit-width and phase (the LLM-PQ cost model's l_{i,j,b}).
 *
 * The paper fits one linear regression per (GPU, bits, phase) on profiled
 * samples (prefill features v, s, vs, vs^2; decode v, v(t+s), t+s) and
 * publishes no coefficients, so hetsim derives the same quantity from the
 * per-operator roofline (perf/roofline.c's efficiencies, hs_perf_cfg),
 * scaled by kernel factors per bit-width that encode what the paper
 * measured (Fig. 5) about its kernels:
 *
 *   bits  kernel                      compute factor   weight-read factor
 *   16    cuBLAS FP16                 1.00             1.00
 *    8    LLM.int8 (bitsandbytes),    0.45             0.40    GPU without INT8
 *         outlier decomposition                                tensor cores (V100,
 *                                                              P100): slower than
 *                                                              FP16 in both phases
 *    8    same, INT8 tensor cores     0.95             0.55    (T4, A100, A800):
 *                                                              comparable to FP16
 *    4    GPTQ weight-only            0.80             0.60
 *    3    GPTQ weight-only, 3-bit     0.75             0.50
 *
 * GPTQ's fused kernel is a matrix-vector kernel: each extra row of the
 * input costs another half read of the packed weights, and the kernel
 * switches to dequantising the layer to FP16 followed by a cuBLAS GEMM
 * when that is cheaper; so 3/4-bit layers are much faster than FP16 only
 * for one or two decode sequences, about as fast near four, and slower in
 * prefill (the paper's Fig. 5: "lower bits are not always faster", FP16
 * fastest in many cases).
 *
 * A GEMM costs max(FLOPs / (peak * gemm_eff * compute factor),
 * weight bytes / (bandwidth * mem_eff * read factor) + activation bytes /
 * (bandwidth * mem_eff)) + launch.  So INT8 on V100 is 2.2x slower than
 * FP16 in prefill and 1.25x in decode; on T4 1.05x and 0.91x; 4-bit is
 * 1.25x slower in prefill and 2.4x faster in decode.  The factors are
 * assumptions (documented here, tested for the orderings above), not fits:
 * hetsim has no measurements of these kernels yet.  Attention is FP16 on
 * every bit-width (KV stays FP16 unless kv_bits is 8). */
#ifndef HS_QLAT_H
#define HS_QLAT_H

#include "hw/hw.h"
#include "llm/model.h"
#include "perf/perf.h"

/* Kernel factors of `bits` on GPU g (see the table above). */
void hs_qlat_factors(const hs_gpu *g, int bits, double *compute, double *mem_read);

/* One decoder layer, seconds.  Prefill: v sequences of s new tokens each
 * (no cached prefix).  Decode: v sequences, one token each, attending to
 * ctx cached tokens. */
double hs_qlat_prefill_s(const hs_model *m, const hs_gpu *g, int bits, int v, int s,
                         int kv_bits, const hs_perf_cfg *pc);
double hs_qlat_decode_s(const hs_model *m, const hs_gpu *g, int bits, int v, double ctx,
                        int kv_bits, const hs_perf_cfg *pc);
/* Embedding lookup for `tokens` tokens, and the LM head (+ final norm) on
 * v sequences' last positions, FP16, seconds. */
double hs_qlat_embed_s(const hs_model *m, const hs_gpu *g, double tokens,
                       const hs_perf_cfg *pc);
double hs_qlat_head_s(const hs_model *m, const hs_gpu *g, int v, const hs_perf_cfg *pc);

#endif
