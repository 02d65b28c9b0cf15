/* model.h - LLM architectures and the memory model.
 *
 * A model comes from models/<name>.json (format in models/README.md).  The
 * memory model gives, per GPU of a parallel layout, the bytes of weights
 * (per precision), KV cache per token (GQA aware: KV heads are split over TP
 * ranks, replicated when there are fewer KV heads than ranks) and the peak
 * activation memory of a forward pass. */
#ifndef HS_MODEL_H
#define HS_MODEL_H

#include <stdint.h>

#include "core/err.h"

typedef struct hs_model {
    char name[48];
    char display[64];
    char source[200];
    char arch[20];          /* "decoder" or "encoder-decoder" */
    int layers;             /* decoder layers */
    int encoder_layers;
    int hidden;
    int heads, kv_heads, head_dim;
    int ffn;
    int ffn_gated;
    char activation[8];
    char norm[12];
    char position[12];
    int parallel_attn;
    int qkv_fused;          /* the reference implementation runs Q, K and V as
                               one linear layer (BLOOM, Falcon); 0: three */
    int vocab;
    int max_seq_len;
    int tied_embeddings;
    int bias;
    double params_b;        /* published, billions */
} hs_model;

int hs_model_load(hs_model *m, const char *path, hs_err *err);
/* By name (models/<name>.json) or path. */
int hs_model_find(hs_model *m, const char *name, hs_err *err);

/* Linear layers (GEMM calls) of one decoder layer as its reference
 * implementation (Hugging Face transformers) runs them: Q, K, V (one when
 * qkv_fused), the attention output, and two or three MLP matrices.  What a
 * per-call cost (bitsandbytes' LLM.int8) multiplies. */
int hs_model_linear_calls(const hs_model *m);

/* Parameter counts (elements). */
double hs_model_layer_params(const hs_model *m);    /* one decoder layer */
double hs_model_enc_layer_params(const hs_model *m);/* one encoder layer */
double hs_model_embed_params(const hs_model *m);    /* input embedding (+ learned positions) */
double hs_model_head_params(const hs_model *m);     /* LM head, 0 when tied */
double hs_model_params(const hs_model *m);          /* whole model */

/* Encoder-decoder models, relative to one encoder layer's weights (1 and 0
 * for decoder-only models).  dec_ratio: a decoder layer's dense work, which
 * adds the cross-attention Q and O projections (2 h q weights per token);
 * the layer's GEMMs are close to linear in weight bytes, memory bound
 * (decode) or compute bound.  cross_kv_ratio: the cross-attention K/V
 * projection of one prompt token for one decoder layer (2 h kv weights),
 * computed once per query when its encoder output reaches the layer. */
double hs_model_dec_ratio(const hs_model *m);
/* Most tokens one query holds in the KV cache by default (the runtime's
 * max_model_len when not set): the context window of a decoder-only model;
 * for an encoder-decoder model a prompt of up to max_seq_len tokens (its
 * cross-attention KV) plus as many generated ones. */
int hs_model_max_context(const hs_model *m);
double hs_model_cross_kv_ratio(const hs_model *m);

/* Bytes per weight element at `bits` (16, 8, 4, 3): quantised formats carry
 * one FP16 scale and zero per group of 128 weights (GPTQ/AWQ layout). */
double hs_weight_bytes_per_param(int bits);

/* KV heads held by one of `tp` ranks (ceil, at least 1). */
int hs_model_kv_heads_per_rank(const hs_model *m, int tp);

/* KV bytes per token per layer on one rank, at kv_bits (16 or 8). */
double hs_model_kv_bytes_token_layer(const hs_model *m, int tp, int kv_bits);

/* Operators an eager engine (vLLM without CUDA graphs) issues from the host
 * for one decoder layer on one of tp ranks, counted from vLLM's model code:
 * a norm 1 (RMSNorm fuses the residual add) or 2 (LayerNorm and a separate
 * residual add), two per layer (one with parallel attention); QKV 1; RoPE 1
 * (ALiBi, learned and relative positions: 0); attention 2 (KV cache write,
 * attention); output projection 1; MLP 3 (two GEMMs and the activation);
 * with tp > 1 an all-reduce per row-parallel output (one with parallel
 * attention) and, with biases, the bias added after it.  Llama-2-70B at
 * TP 8: 12; BLOOM-176B: 15. */
int hs_model_layer_ops(const hs_model *m, int tp);

/* Memory of one pipeline stage on one TP rank. */
typedef struct hs_stage_mem {
    double weights;      /* bytes */
    double activation;   /* bytes, peak temporary memory of a forward pass */
    double kv_per_token; /* bytes per cached token (all layers of the stage) */
} hs_stage_mem;

/* first/last: the stage holds the embedding / LM head.  max_tokens: tokens
 * in the largest forward pass (max batched tokens); max_seqs: sequences
 * sampled at once (logits).  An encoder-decoder model's encoder layers all
 * sit on the first stage here; hs_model_stage_mem_enc places them. */
void hs_model_stage_mem(const hs_model *m, int layers, int first, int last,
                        int tp, int bits, int kv_bits, int max_tokens,
                        int max_seqs, hs_stage_mem *out);
/* The same with `enc_layers` encoder layers on the stage.  A stage holding
 * encoder layers and no decoder layer keeps no KV cache; what it holds per
 * prompt token until the hand-over is the encoder output (hidden x FP16),
 * reported as kv_per_token. */
void hs_model_stage_mem_enc(const hs_model *m, int layers, int enc_layers, int first,
                            int last, int tp, int bits, int kv_bits, int max_tokens,
                            int max_seqs, hs_stage_mem *out);

#endif
