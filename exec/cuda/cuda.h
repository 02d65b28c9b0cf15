/* cuda.h - internals of the CUDA backend shared by backend.cu (device,
 * memory, cuBLAS, timing) and kernels.cu (our kernels and their launchers).
 *
 * Every CUDA runtime and cuBLAS call goes through HS_CK / HS_CKB, which turn
 * a failure into a one-line hs_err naming the call, the file and the line;
 * every launch is followed by HS_CK_LAUNCH.  Asynchronous faults surface at
 * the next synchronising call (sync, timer_stop, download), which is
 * checked the same way. */
#ifndef HS_EXEC_CUDA_H
#define HS_EXEC_CUDA_H

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "exec.h"

/* Backend state (hs_exec.priv). */
typedef struct hs__cuda {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    cudaEvent_t ev0, ev1;
    cudaEvent_t *marks;        /* [HS_EXEC_MAX_MARKS], created as used */
    int n_marks;               /* created */
    void *stage;               /* float staging buffer for upload/download */
    size_t stage_bytes;
    void *wdeq;                /* dequantised weight scratch (dtype [n][k]) */
    size_t wdeq_bytes;
    float *part;               /* split-context decode partials */
    size_t part_bytes;
    void *pf;                  /* prefill attention: gathered K/V, Q/O, scores, probabilities */
    size_t pf_bytes;
    int32_t *pf_info;          /* host copy of seq_info when the caller gave none */
    size_t pf_info_n;
    int sms;                   /* multiprocessors: sizes the decode split */
    void *blas_ws;             /* cuBLAS workspace (cublasSetWorkspace) */
} hs__cuda;

static inline hs__cuda *hs__cu(hs_exec *x)
{
    return (hs__cuda *)x->priv;
}

static inline int hs__cuda_code(cudaError_t e)
{
    return e == cudaErrorMemoryAllocation ? HS_ENOMEM : HS_EIO;
}

#define HS_CK(call)                                                                         \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess) {                                                            \
            (void)cudaGetLastError();                                                       \
            return hs_errf(err, hs__cuda_code(e_), "CUDA: %s: %s (%s:%d)", #call,           \
                           cudaGetErrorString(e_), __FILE__, __LINE__);                     \
        }                                                                                   \
    } while (0)

#define HS_CKB(call)                                                                        \
    do {                                                                                    \
        cublasStatus_t s_ = (call);                                                         \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                    \
            return hs_errf(err, s_ == CUBLAS_STATUS_ALLOC_FAILED ? HS_ENOMEM : HS_EIO,      \
                           "cuBLAS: %s: %s (%s:%d)", #call, cublasGetStatusString(s_),      \
                           __FILE__, __LINE__);                                             \
    } while (0)

#define HS_CK_LAUNCH(what)                                                                  \
    do {                                                                                    \
        cudaError_t e_ = cudaGetLastError();                                                \
        if (e_ != cudaSuccess)                                                              \
            return hs_errf(err, hs__cuda_code(e_), "CUDA: launching %s: %s (%s:%d)", what,  \
                           cudaGetErrorString(e_), __FILE__, __LINE__);                     \
    } while (0)

/* Grows a device scratch buffer to at least `bytes` (contents lost). */
int hs__cuda_reserve(hs_exec *x, void **buf, size_t *cap, size_t bytes, hs_err *err);

/* Kernels (kernels.cu); each enqueues on the backend's stream. */
int hs__cuda_from_float(hs_exec *x, void *dst, const float *src, size_t n, hs_err *err);
int hs__cuda_to_float(hs_exec *x, float *dst, const void *src, size_t n, hs_err *err);
int hs__cuda_fill_random(hs_exec *x, void *dst, size_t n, uint64_t seed, float scale, hs_err *err);
int hs__cuda_fill_bytes(hs_exec *x, void *dst, size_t bytes, uint64_t seed, hs_err *err);
int hs__cuda_read_bytes(hs_exec *x, const void *src, size_t bytes, hs_err *err);
int hs__cuda_decode_split(hs_exec *x, int head_dim, hs_exec_decode_split *s, hs_err *err);
/* Quantised weights: the fused kernel for m <= HS__CUDA_FUSED_M rows, and
 * the dequantiser (w -> dst, dtype [n][k]) used with cuBLAS beyond that. */
#define HS__CUDA_FUSED_M 16
int hs__cuda_gemm_q_fused(hs_exec *x, void *y, const void *in, const hs_exec_weight *w, int m,
                          hs_err *err);
int hs__cuda_dequantize(hs_exec *x, void *dst, const hs_exec_weight *w, hs_err *err);

int hs__cuda_embed(hs_exec *x, void *out, const void *tok, const void *pos, const int32_t *ids,
                   const int32_t *positions, int tokens, int hidden, hs_err *err);
int hs__cuda_norm(hs_exec *x, hs_exec_norm kind, void *out, const void *in, const void *gamma,
                  const void *beta, int tokens, int hidden, float eps, hs_err *err);
int hs__cuda_act(hs_exec *x, hs_exec_act kind, int gated, void *out, const void *in, int tokens,
                 int f, hs_err *err);
int hs__cuda_add(hs_exec *x, void *out, const void *a, const void *b, size_t n, hs_err *err);
int hs__cuda_rope(hs_exec *x, void *qk, int stride, int tokens, int n_heads, int head_dim,
                  const int32_t *positions, float theta, hs_err *err);
int hs__cuda_kv_write(hs_exec *x, void *k_cache, void *v_cache, const void *k, const void *v,
                      int stride, int tokens, int kv_heads, int head_dim, const int32_t *slots,
                      hs_err *err);
int hs__cuda_attention_prefill(hs_exec *x, const hs_exec_attn *a, hs_err *err);
int hs__cuda_attention_decode(hs_exec *x, const hs_exec_attn *a, hs_err *err);

#endif
