/* cpu.h - internals of the CPU backend shared by cpu.c (memory, GEMM,
 * timing) and kernels.c (the non-GEMM layer work).  FP32 throughout. */
#ifndef HS_EXEC_CPU_H
#define HS_EXEC_CPU_H

#include "exec.h"

/* Backend state (hs_exec.priv). */
typedef struct hs__cpu {
    double t0;             /* s, CLOCK_MONOTONIC at timer_start */
    double *marks;         /* [HS_EXEC_MAX_MARKS] s, CLOCK_MONOTONIC at mark i */
    float *wbuf;           /* dequantised weight scratch */
    size_t wbuf_n;         /* floats */
    float *scores;         /* attention scores scratch */
    size_t scores_n;       /* floats */
} hs__cpu;

/* Grows *buf to at least n floats (contents lost). */
int hs__cpu_reserve(float **buf, size_t *cap, size_t n, hs_err *err);

int hs__cpu_embed(hs_exec *x, void *out, const void *tok, const void *pos, const int32_t *ids,
                  const int32_t *positions, int tokens, int hidden, hs_err *err);
int hs__cpu_norm(hs_exec *x, hs_exec_norm kind, void *out, const void *in, const void *gamma,
                 const void *beta, int tokens, int hidden, float eps, hs_err *err);
int hs__cpu_act(hs_exec *x, hs_exec_act kind, int gated, void *out, const void *in, int tokens,
                int f, hs_err *err);
int hs__cpu_add(hs_exec *x, void *out, const void *a, const void *b, size_t n, hs_err *err);
int hs__cpu_rope(hs_exec *x, void *qk, int stride, int tokens, int n_heads, int head_dim,
                 const int32_t *positions, float theta, hs_err *err);
int hs__cpu_kv_write(hs_exec *x, void *k_cache, void *v_cache, const void *k, const void *v,
                     int stride, int tokens, int kv_heads, int head_dim, const int32_t *slots,
                     hs_err *err);
int hs__cpu_attention_prefill(hs_exec *x, const hs_exec_attn *a, hs_err *err);
int hs__cpu_attention_decode(hs_exec *x, const hs_exec_attn *a, hs_err *err);

#endif
