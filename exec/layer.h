/* layer.h - the per-rank shapes of one transformer layer under tensor
 * parallelism, built from the same model JSON the simulator reads.
 *
 * Megatron-style sharding: Q heads split over the ranks (tp must divide
 * heads), KV heads split and replicated when there are fewer than ranks
 * (ceil(kv_heads / tp), as in hs_model_kv_heads_per_rank), MLP columns and
 * the vocabulary split with ceil.  The GEMMs of one rank:
 *   qkv       [tokens][hidden] x [qkv_n][hidden]^T, qkv_n = (heads + 2 kv_heads) head_dim
 *   attn_out  [tokens][attn_k] x [hidden][attn_k]^T, attn_k = heads * head_dim
 *   mlp_up    [tokens][hidden] x [up_n][hidden]^T,   up_n = ffn (x2 gate+up when gated)
 *   mlp_down  [tokens][ffn] x [hidden][ffn]^T
 *   lm_head   [samples][hidden] x [vocab][hidden]^T (always 16-bit) */
#ifndef HS_EXEC_LAYER_H
#define HS_EXEC_LAYER_H

#include "exec.h"
#include "llm/model.h"

typedef struct hs_exec_shape {
    int tp;
    int hidden;                      /* elements */
    int heads, kv_heads, head_dim;   /* per rank */
    int qkv_n, attn_k;               /* elements */
    int ffn, up_n;                   /* per rank, elements */
    int vocab;                       /* rows of the embedding / LM head per rank */
    int gated;                       /* gate and up fused in mlp_up */
    hs_exec_act act;
    hs_exec_norm norm;
    int rope;                        /* rotary embedding on Q and K */
    int learned_pos;                 /* absolute position table added in emb */
    int max_pos;                     /* rows of that table (max_seq_len) */
    float norm_eps, rope_theta;
} hs_exec_shape;

/* Fills s for model m at tensor-parallel degree tp.  Errors (HS_EINVAL):
 * tp < 1, tp not dividing heads, head_dim above HS_EXEC_MAX_HEAD_DIM or odd
 * with rotary embedding. */
int hs_exec_shape_make(hs_exec_shape *s, const hs_model *m, int tp, hs_err *err);

#endif
