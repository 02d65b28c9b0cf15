/* quant.h - LLM-PQ's memory model: per-layer precision on a pipeline stage.
 *
 * Bytes, following the paper's Sec. 4.1 (Table 2 notation, h1 = hidden,
 * h2 = FFN):
 *   embeddings + LM head (FP16, first stage of the device order):
 *       (vocab*h1 + pos*h1 + vocab*h1) * 2       (the LM head is counted even
 *       when tied, as the paper's formula does; pos = 0 without learned
 *       positions)
 *   one decoder layer at `bits`:
 *       lin * bits/8 + norms * 2,  lin = h1*(q + 2kv) + q*h1 + (2|3)*h1*h2
 *       (4*h1^2 + 2*h1*h2 for OPT/BLOOM; biases ignored as in the paper; no
 *       GPTQ group scales, so the estimate matches the paper's Fig. 7 model)
 *   KV of one layer: 2 * v * (s + n) * kv_heads*head_dim * kv_bits/8,
 *       reserved for the full length s + n (pre-allocated as in the paper)
 *   temporaries of a stage: what the authors' estimator reserves
 *       (hs_qmem_temp): a decode step of the whole batch, with the copy of
 *       one layer's past K and V, on every stage; on the first the larger
 *       of that, a prefill micro-batch and the embedding's temporaries.
 * Every function is pure; bits is one of 16, 8, 4, 3. */
#ifndef HS_QUANT_H
#define HS_QUANT_H

#include "llm/model.h"

#define HS_NBITS 4
/* The bit-widths of LLM-PQ, index order used by every per-bit array. */
extern const int hs_bits_set[HS_NBITS];   /* {16, 8, 4, 3} */
int hs_bits_index(int bits);              /* -1 when not in the set */
/* The bit-width a number read from a file names (16, 8, 4 or 3), -1 for
 * anything else; the range is checked before the cast, since casting an
 * out-of-range double is undefined. */
int hs_bits_of(double v);

/* Linear-layer weights of one decoder layer (elements). */
double hs_qmem_layer_linear(const hs_model *m);
/* One decoder layer's weights at `bits`, bytes. */
double hs_qmem_layer(const hs_model *m, int bits);
/* Embeddings + LM head (FP16), bytes: the first stage's M_emb. */
double hs_qmem_embed(const hs_model *m);
/* KV reserved by one layer for v sequences of s + n tokens, bytes. */
double hs_qmem_kv_layer(const hs_model *m, int v, int s, int n, int kv_bits);
/* Temporary memory LLM-PQ's planner reserves on a stage, bytes: its
 * ModelMemEstimator (calculate_temp_tensor_size_prefill, _next_i and
 * _embedding) as get_device_topo_available_mem_with_order applies it
 * (github.com/tonyzhao-jt/LLM-PQ).  Every stage keeps one decode step of
 * the whole global batch B at context s + n, a copy of one layer's past K
 * and V included (the runtime concatenates them each step); the first
 * stage keeps the largest of that, a prefill micro-batch of eta prompts of
 * s tokens, and the embedding's temporaries.  The estimator is written for
 * OPT and BLOOM (multi-head attention, two-matrix MLP); Q, K and V take
 * their own widths here, which equal the estimator's on those models. */
double hs_qmem_temp(const hs_model *m, int B, int eta, int s, int n, int first);
/* The main engine's weights of a stage's decoder layers with mixed widths
 * (the layout's layer_bits): n[k] layers at hs_bits_set[k], each
 * hs_model_layer_params * hs_weight_bytes_per_param(bits) / tp bytes on
 * one of tp ranks (the engine's format, with group scales, as
 * hs_model_stage_mem counts a uniform stage), summed layer by layer. */
double hs_qmem_layers_engine(const hs_model *m, const int n[HS_NBITS], int tp);
/* M_{i,b}^{s+n}: one layer's weights at bits + its KV for the global batch. */
static inline double hs_qmem_layer_total(const hs_model *m, int bits, int B, int s,
                                         int n, int kv_bits)
{
    return hs_qmem_layer(m, bits) + hs_qmem_kv_layer(m, B, s, n, kv_bits);
}

#endif
