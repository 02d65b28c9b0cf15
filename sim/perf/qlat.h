/* qlat.h - per-layer latency of a quantised decoder layer, per GPU type,
 * bit-width and phase (the LLM-PQ cost model's l_{i,j,b}).
 *
 * The paper fits one linear regression per (GPU, bits, phase) on profiled
 * samples (prefill features v, s, vs, vs^2; decode v, v(t+s), t+s) and
 * publishes no coefficients, so hetsim derives the same quantity from the
 * per-operator roofline (perf/roofline.c's efficiencies, hs_perf_cfg) with
 * a model of the kernel LLM-PQ's runtime (LPTorch) runs per width
 * (sources: profiles/README.md, "Quantised kernels of the LLM-PQ model"):
 *
 *   bits  kernel                      model
 *   16    cuBLAS FP16                 roofline
 *    8    bitsandbytes LLM.int8       roofline, weight read x0.40 (decode
 *                                     1.25x FP16: published BLOOM-176B
 *                                     timings); compute x0.45 without INT8
 *                                     tensor cores (V100, P100), x0.95 with
 *                                     (the paper's Fig. 5 orderings)
 *    4/3  GPTQ vecquant kernel        one matrix-vector product per input
 *                                     row: packed weights read at x0.61 of
 *                                     mem_eff (GPTQ's 3.25x A100 speed-up),
 *                                     FP32 CUDA-core arithmetic; t rows
 *                                     cost t times one row
 *
 * So 3/4-bit layers are faster than FP16 only for one or two decode rows
 * and far slower in prefill (the paper's Fig. 5: "lower bits are not
 * always faster"; its Uniform rows 6.5-18x slower than PipeEdge).
 * Attention is FP16 on every bit-width (KV stays FP16 unless kv_bits is
 * 8). */
#ifndef HS_QLAT_H
#define HS_QLAT_H

#include "hw/hw.h"
#include "llm/model.h"
#include "perf/perf.h"

/* Kernel factors of `bits` on GPU g (compute, weight read; see above). */
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
