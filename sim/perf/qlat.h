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
 *    8    bitsandbytes LLM.int8       roofline at INT8's bytes, compute
 *                                     x0.95 (the paper's Fig. 5 orderings),
 *                                     plus HS_QLAT_INT8_CALL_S per linear
 *                                     call; without INT8 tensor cores (V100,
 *                                     P100) a cast to FP16, then FP16
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
 * 8).
 *
 * On the calibrated model (perf.model other than roofline; hs_qlat_cal)
 * the FP16 layer's dense ops and LM head are the latency model's, as a
 * run of the main engine prices them (measured table, else the GPU's
 * fit, its chip's, else the transfer), and every other width keeps its
 * kernel model as a ratio to FP16: its roofline time x calibrated FP16 /
 * roofline FP16 at the same tokens.  GPTQ's kernel is its own FP32
 * matrix-vector product, not cuBLAS, so no table or fit of FP16 GEMMs
 * says anything of it: it stays on the datasheet with its published read
 * factor.  Attention (eager, the scores written and read back) and
 * the embedding stay on the roofline: no table times LLM-PQ's eager
 * kernels. */
#ifndef HS_QLAT_H
#define HS_QLAT_H

#include "hw/hw.h"
#include "llm/model.h"
#include "perf/perf.h"

/* LLM.int8's fixed cost per linear-layer call, seconds: bitsandbytes'
 * Python matmul splits outliers and waits on the GPU on every call.  Two
 * end-to-end decode measurements, each with INT8 weights read at FP16's
 * rate, give it: BLOOM-176B on 8 A100s, 287 against 230 ms per token at
 * batch 1 (Hugging Face's BLOOM inference benchmark; (287 - 230 / 2) ms
 * over 70 layers x 4 calls): 0.61 ms; Llama-2-7B on an A10G, 164 against
 * 37 ms per token (optimum-quanto PR #62; (164 - 37 / 2) ms over 32 x 7
 * calls): 0.65 ms; their mean.  Measured on INT8 tensor-core GPUs; taken
 * for the V100's cast path too, the same Python call, with no V100 figure
 * published (profiles/README.md). */
#define HS_QLAT_INT8_CALL_S 0.63e-3

/* The calibrated FP16 layer of each GPU type of a cluster (see above). */
typedef struct hs_qlat_cal hs_qlat_cal;

/* Builds it (qlat_cal.c) for model m on every GPU type of c, tokens 1..max_tokens
 * exactly (more: the ratio at max_tokens) and LM heads of 1..max_seqs
 * sequences (more: on along the last slope).  GPUs are matched by name:
 * pass the cluster's own hs_gpu entries.  *out = NULL under perf.model
 * roofline: the kernel models alone. */
int hs_qlat_cal_build(hs_qlat_cal **out, const hs_model *m, const hs_cluster *c,
                      const hs_perf_cfg *pc, int max_tokens, int max_seqs, hs_err *err);
void hs_qlat_cal_free(hs_qlat_cal *q);
/* The token counts to tabulate for an offline batch of B prompts of s
 * tokens: its largest prefill pass, at most 65,536 (FP16's ratio to the
 * roofline is flat long before). */
static inline int hs_qlat_cal_tokens(int B, int s)
{
    long t = (long)B * s;
    return t < 1 ? 1 : t > 65536 ? 65536 : (int)t;
}
/* Where the FP16 times come from, per GPU type, as a run's trust line
 * gives it ("t4: measured table; v100-32g: transferred ..."), and the
 * expected error per layer, % (< 0: unknown); "datasheet roofline" for
 * NULL. */
const char *hs_qlat_cal_source(const hs_qlat_cal *q, double *expected_err);

/* Kernel factors of `bits` on GPU g (compute, weight read; see above). */
void hs_qlat_factors(const hs_gpu *g, int bits, double *compute, double *mem_read);

/* One decoder layer, seconds.  Prefill: v sequences of s new tokens each
 * (no cached prefix).  Decode: v sequences, one token each, attending to
 * ctx cached tokens.  cal: the calibrated FP16 layer, NULL: roofline. */
double hs_qlat_prefill_s(const hs_model *m, const hs_gpu *g, int bits, int v, int s,
                         int kv_bits, const hs_perf_cfg *pc, const hs_qlat_cal *cal);
double hs_qlat_decode_s(const hs_model *m, const hs_gpu *g, int bits, int v, double ctx,
                        int kv_bits, const hs_perf_cfg *pc, const hs_qlat_cal *cal);
/* The dense ops of one decoder layer (linear layers, norms, adds, the
 * activation) for t tokens, seconds: the kernel model of `bits`, on the
 * calibrated model scaled by FP16's calibrated / roofline time (GPTQ on
 * the datasheet). */
double hs_qlat_dense_s(const hs_model *m, const hs_gpu *g, int bits, double t,
                       const hs_perf_cfg *pc, const hs_qlat_cal *cal);
/* The same for a latency model's own FP16 layer: one layer's dense ops at
 * `bits` for t tokens when FP16's take fp16_s there (hs_qlat_dense_s on a
 * calibrated layer of those FP16 times), seconds.  The main engine prices
 * LLM-PQ's kernels with it (perf.quant_kernels). */
double hs_qlat_layer_s(const hs_model *m, const hs_gpu *g, int bits, double t, double fp16_s,
                       const hs_perf_cfg *pc);
/* Embedding lookup for `tokens` tokens, and the LM head (+ final norm) on
 * v sequences' last positions, FP16, seconds. */
double hs_qlat_embed_s(const hs_model *m, const hs_gpu *g, double tokens,
                       const hs_perf_cfg *pc);
double hs_qlat_head_s(const hs_model *m, const hs_gpu *g, int v, const hs_perf_cfg *pc,
                      const hs_qlat_cal *cal);

#endif
