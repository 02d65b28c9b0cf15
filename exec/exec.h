/* exec.h - the executor's backend interface.
 *
 * A backend runs the work of one transformer layer on one device: GEMMs
 * (FP16/BF16/FP32 weights, or weight-only INT8/INT4 with per-group scales),
 * prefill and paged-decode attention, norms, activations, rotary embedding,
 * the embedding gather and the residual add; and it times that work.  It
 * is a table of function pointers (hs_exec_ops), one per backend:
 *
 *   cuda  exec/cuda/ (.cu)  cuBLAS GEMMs, our own kernels, CUDA events
 *   cpu   exec/cpu/ (.c)    OpenBLAS sgemm, plain C loops, clock_gettime
 *
 * Everything here is plain C; sim/ and the host code never see a CUDA
 * header (STYLE.md convention 13).
 *
 * Memory.  Buffers are device pointers from ops->alloc (host memory on the
 * CPU backend).  Activations and float weights use the backend's element
 * type, hs_exec.info.dtype (fp16/bf16 on CUDA, fp32 on CPU); upload and
 * download convert from and to float.  Integer arrays (token ids,
 * positions, block tables, slots) are int32 and moved with upload_bytes.
 *
 * Layouts (row-major; every backend and the tests use exactly these):
 *   activations  x[tokens][features]
 *   weights      W[n][k] (out features x in features), y = x W^T
 *   quantised    data uint8 [n][ld] (ld = hs_exec_qrow_bytes(k, bits): INT8
 *                one byte per weight; INT4 two per byte, even k in the low
 *                nibble; rows padded to 16 bytes), scale and zero in dtype
 *                [n][groups] with groups = ceil(k / HS_EXEC_QGROUP);
 *                w[n][k] = (q - zero[n][k/128]) * scale[n][k/128]
 *   qkv          [tokens][(heads + 2*kv_heads) * head_dim]: Q heads, then K
 *                heads, then V heads (per TP rank)
 *   KV cache     k_cache, v_cache [blocks][kv_heads][HS_EXEC_KV_BLOCK][head_dim];
 *                token p of a sequence lives in block table[p / 16], row p % 16
 *   attention    out[tokens][heads * head_dim]; query head h reads KV head
 *                h * kv_heads / heads (GQA/MQA)
 *
 * Errors: every function returns 0 or a negative HS_E* code with one line
 * in err (core/err.h).  Device failures name the call that failed. */
#ifndef HS_EXEC_H
#define HS_EXEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "core/err.h"
#include "gpumon.h"

#define HS_EXEC_KV_BLOCK 16      /* tokens per KV block */
#define HS_EXEC_QGROUP 128       /* weights per quantisation group (along k) */
#define HS_EXEC_MAX_HEAD_DIM 256 /* largest head_dim the attention kernels take */

typedef enum hs_exec_dtype { HS_EXEC_FP32, HS_EXEC_FP16, HS_EXEC_BF16 } hs_exec_dtype;
typedef enum hs_exec_norm { HS_EXEC_RMSNORM, HS_EXEC_LAYERNORM } hs_exec_norm;
typedef enum hs_exec_act { HS_EXEC_SILU, HS_EXEC_GELU, HS_EXEC_RELU } hs_exec_act;

/* What a backend instance runs on (filled by init). */
typedef struct hs_exec_info {
    char backend[8];          /* "cuda" or "cpu" */
    char device[256];         /* device name, or the CPU's model name */
    char detail[160];         /* compute capability, SMs, library versions */
    hs_exec_dtype dtype;      /* element type of activations and float weights */
    int elem_bytes;           /* bytes per element of dtype */
    double mem_total;         /* bytes */
    double mem_usable;        /* bytes: free device memory at init (cudaMemGetInfo),
                                 or MemAvailable on the CPU */
    char pci_bus_id[32];      /* "0000:17:00.0" (cudaDeviceGetPCIBusId); "" on the CPU */
} hs_exec_info;

typedef struct hs_exec hs_exec;

/* A weight matrix W[n][k] at 16 (dtype), 8 or 4 bits, owned by the caller;
 * hs_exec_weight_alloc/free manage its buffers. */
typedef struct hs_exec_weight {
    int n, k;                 /* out features, in features */
    int bits;                 /* 16 (dtype), 8 or 4 */
    int groups;               /* ceil(k / HS_EXEC_QGROUP), quantised only */
    size_t ld;                /* bytes per row of data, quantised only */
    void *data;               /* dtype [n][k] or uint8 [n][ld] */
    void *scale, *zero;       /* dtype [n][groups]; NULL at 16 bits */
} hs_exec_weight;

/* Attention over the paged KV cache for a batch of sequences.
 * Prefill: sequence s has q_len new tokens (packed queries from row
 * q_start) after `prefix` cached ones; query i sees keys 0..prefix+i
 * (causal).  Decode: sequence s has one query (row s) and `context` cached
 * tokens including its own; it sees all of them.  The new tokens' K and V
 * must already be in the cache (ops->kv_write). */
typedef struct hs_exec_attn {
    int n_seqs;
    int heads, kv_heads, head_dim;   /* per rank */
    float scale;                     /* softmax scale, 1/sqrt(head_dim) */
    const void *q;                   /* dtype, row r at q + r*q_stride */
    int q_stride;                    /* elements between query rows */
    void *out;                       /* dtype [rows][heads*head_dim] */
    const void *k_cache, *v_cache;   /* dtype, layout above */
    const int32_t *block_tables;     /* device [n_seqs][max_blocks] */
    int max_blocks;                  /* blocks per block-table row */
    /* device int32: prefill [n_seqs][3] = {q_start, q_len, prefix};
     * decode [n_seqs] = context */
    const int32_t *seq_info;
    /* optional: a host copy of seq_info, for a backend that plans per
     * sequence (the CUDA prefill sizes its cuBLAS calls by each chunk, the
     * CUDA decode its partitions by the contexts' sum) and would otherwise
     * wait for a device-to-host copy (prefill) or plan by max_context
     * (decode) */
    const int32_t *seq_info_host;
    int max_q_len;                   /* prefill: largest q_len (grid size) */
    int max_context;                 /* decode: largest context (grid size) */
} hs_exec_attn;

/* How a backend's decode-attention kernel splits a batch into thread
 * blocks (hs_dec_wave in the simulator's perf.h): one block per (sequence,
 * query head, partition of at most part_max keys); when heads x sequences
 * are under fill blocks per multiprocessor, partitions shrink (not under
 * part_min, a multiple of part_align) to reach that.  resident: blocks that
 * run at once on one of the sms multiprocessors. */
typedef struct hs_exec_decode_split {
    int sms, resident, part_max, part_min, part_align, fill;
} hs_exec_decode_split;

/* A backend.  Every hook is required unless marked optional. */
typedef struct hs_exec_ops {
    const char *name;
    /* 1 when the backend can run here (a device is present). */
    int (*available)(void);
    /* Opens device `device` with element type `dtype` (-1: the backend's
     * default).  Fails with HS_ENOTFOUND and a one-line message when there
     * is no device, HS_EUNSUPPORTED when the dtype is not available. */
    int (*init)(hs_exec *x, int device, int dtype, hs_err *err);
    void (*destroy)(hs_exec *x);

    int (*alloc)(hs_exec *x, void **p, size_t bytes, hs_err *err);
    void (*free)(hs_exec *x, void *p);           /* free(NULL) is a no-op */
    int (*upload)(hs_exec *x, void *dst, const float *src, size_t n, hs_err *err);
    int (*download)(hs_exec *x, float *dst, const void *src, size_t n, hs_err *err);
    int (*upload_bytes)(hs_exec *x, void *dst, const void *src, size_t bytes, hs_err *err);
    int (*download_bytes)(hs_exec *x, void *dst, const void *src, size_t bytes, hs_err *err);
    /* n elements of dtype, uniform in [-scale, scale], from `seed`. */
    int (*fill_random)(hs_exec *x, void *dst, size_t n, uint64_t seed, float scale, hs_err *err);
    int (*fill_bytes)(hs_exec *x, void *dst, size_t bytes, uint64_t seed, hs_err *err);
    /* Reads `bytes` of src and keeps nothing: pushes other data out of the
     * caches without leaving dirty lines to write back (stream timing). */
    int (*read_bytes)(hs_exec *x, const void *src, size_t bytes, hs_err *err);
    int (*copy)(hs_exec *x, void *dst, const void *src, size_t bytes, hs_err *err);

    /* y[m][w->n] = x[m][w->k] W^T. */
    int (*gemm)(hs_exec *x, void *y, const void *in, const hs_exec_weight *w, int m, hs_err *err);
    /* out[t] = tok[ids[t]] (+ pos[positions[t]] when pos is not NULL), rows of `hidden`. */
    int (*embed)(hs_exec *x, void *out, const void *tok, const void *pos,
                 const int32_t *ids, const int32_t *positions, int tokens, int hidden, hs_err *err);
    /* out = norm(in) * gamma (+ beta for layernorm), per row of `hidden`. */
    int (*norm)(hs_exec *x, hs_exec_norm kind, void *out, const void *in, const void *gamma,
                const void *beta, int tokens, int hidden, float eps, hs_err *err);
    /* gated: out[t][j] = act(in[t][j]) * in[t][f + j], in is [tokens][2f];
     * else out[t][j] = act(in[t][j]), in is [tokens][f]. */
    int (*act)(hs_exec *x, hs_exec_act kind, int gated, void *out, const void *in, int tokens,
               int f, hs_err *err);
    /* out = a + b, n elements (out may alias a or b). */
    int (*add)(hs_exec *x, void *out, const void *a, const void *b, size_t n, hs_err *err);
    /* Rotary embedding (NeoX half split, base theta) in place on the first
     * n_heads heads of each row: (x[i], x[i + d/2]) rotated by
     * positions[t] * theta^(-2i/d). */
    int (*rope)(hs_exec *x, void *qk, int stride, int tokens, int n_heads, int head_dim,
                const int32_t *positions, float theta, hs_err *err);
    /* Stores K and V of `tokens` rows (k + t*stride, v + t*stride) in the
     * cache at slots[t] (block * 16 + row). */
    int (*kv_write)(hs_exec *x, void *k_cache, void *v_cache, const void *k, const void *v,
                    int stride, int tokens, int kv_heads, int head_dim, const int32_t *slots,
                    hs_err *err);
    int (*attention_prefill)(hs_exec *x, const hs_exec_attn *a, hs_err *err);
    int (*attention_decode)(hs_exec *x, const hs_exec_attn *a, hs_err *err);

    /* Waits for all queued work. */
    int (*sync)(hs_exec *x, hs_err *err);
    /* Brackets work to be timed; stop waits for it and returns microseconds. */
    int (*timer_start)(hs_exec *x, hs_err *err);
    int (*timer_stop)(hs_exec *x, double *us, hs_err *err);
    /* Optional: the decode kernel's split for heads of head_dim (profile
     * writes it to meta.json, for the simulator to time the kernel's waves). */
    int (*decode_split)(hs_exec *x, int head_dim, hs_exec_decode_split *s, hs_err *err);
    /* Marks on the stream, for timing a run of ops without waiting between
     * them: mark(i) records mark i (0 <= i < HS_EXEC_MAX_MARKS) once the
     * work queued before it is done; marks_read waits for mark n - 1 and
     * writes us[i], microseconds from mark 0 to mark i, for i < n. */
    int (*mark)(hs_exec *x, int i, hs_err *err);
    int (*marks_read)(hs_exec *x, int n, double *us, hs_err *err);
} hs_exec_ops;

#define HS_EXEC_MAX_MARKS 4096

struct hs_exec {
    const hs_exec_ops *ops;
    hs_exec_info info;
    void *priv;                /* backend state */
    double bytes_alloc;        /* device bytes allocated through weights and replay
                                  buffers since creation (fingerprint memory) */
    void *flush;               /* hs_exec_measure's cache-flush buffer */
    size_t flush_cap;
    hs_gpumon *mon;            /* optional, the caller's: clocks while hs_exec_measure times */
    hs_gpumon_stats mon_last;  /* what mon saw over the last measurement's timed runs */
};

/* Registry: "cpu" always, "cuda" when built with the toolkit (HS_HAVE_CUDA).
 * Returns NULL for an unknown name. */
const hs_exec_ops *hs_exec_find(const char *name);
/* 1 when `name` is a backend this build knows, even if not compiled. */
int hs_exec_known(const char *name);
/* cuda when compiled and a device is present, else cpu. */
const hs_exec_ops *hs_exec_default(void);

/* Opens a backend by name ("cuda", "cpu" or NULL for the default).  x is
 * zeroed first; on failure nothing is left open. */
int hs_exec_open(hs_exec *x, const char *name, int dtype, hs_err *err);
void hs_exec_close(hs_exec *x);

const char *hs_exec_dtype_name(hs_exec_dtype d);

/* Bytes per row of a quantised weight: ceil(k*bits/8) rounded up to 16. */
size_t hs_exec_qrow_bytes(int k, int bits);

/* Allocates w's buffers on x (not filled).  bits is 16, 8 or 4. */
int hs_exec_weight_alloc(hs_exec *x, hs_exec_weight *w, int n, int k, int bits, hs_err *err);
/* Random weights: 16 bits uniform in [-scale, scale]; quantised: random
 * codes with scales uniform in [-scale/2^(bits-1), ...] and zero points
 * near the middle of the code range, so |w| stays about `scale`. */
int hs_exec_weight_random(hs_exec *x, hs_exec_weight *w, uint64_t seed, float scale, hs_err *err);
void hs_exec_weight_free(hs_exec *x, hs_exec_weight *w);

/* Host-side quantisation of float weights W[n][k] into the layout above
 * (asymmetric min/max per group of 128): q is uint8 [n][ld], scale and zero
 * float [n][groups].  Buffers are the caller's. */
void hs_exec_quantize(const float *w, int n, int k, int bits, uint8_t *q, float *scale,
                      float *zero);
/* Uploads host quantised data (or float weights when w->bits == 16: data_f). */
int hs_exec_weight_set(hs_exec *x, hs_exec_weight *w, const float *data_f, const uint8_t *q,
                       const float *scale, const float *zero, hs_err *err);

/* Measures fn(ctx) on x: `warmup` untimed runs, then repeats (at least
 * min_reps, at most max_reps, about target_us in all), each timed with the
 * backend timer; writes the median in microseconds.  Three ways to time
 * (hs_exec_timing_mode), measured against replayed steps on an H200
 * (profiles/README.md):
 *
 * ALONE: each run by itself.  A kernel of a few microseconds carries its
 * launch latency (2-5 us), which a stream of kernels hides, and its inputs
 * stay in L2 from the previous run.  (Back to back on the same buffers
 * removes the launch but keeps weights of up to ~60 MB in L2: a decode step
 * 7% fast.)
 * COLD: each run queued behind a write of flush_bytes: no L2 hits and the
 * launch hidden, but the write leaves the L2 full of dirty lines that the
 * op's reads must first write back, which no step's kernel pays.
 * STREAM: what one more op costs in a stream of kernels: a burst of k
 * (read of flush_bytes, op) pairs minus a burst of k reads alone, over k.
 * The read evicts the op's data as a step's other layers do, without dirty
 * lines; the op's launch and start-up overlap the read ahead of it as they
 * overlap the previous kernel in a step. */
#define HS_EXEC_FLUSH_BYTES ((size_t)256 << 20)   /* several times any GPU's L2 */
typedef enum { HS_EXEC_TIME_ALONE, HS_EXEC_TIME_COLD, HS_EXEC_TIME_STREAM } hs_exec_timing_mode;
typedef struct hs_exec_timing {
    int warmup, min_reps, max_reps;
    double target_us;
    size_t flush_bytes;        /* COLD and STREAM: bytes written / read before each run */
    hs_exec_timing_mode mode;
    /* After the measurement, the host idles `rest` times its wall time.  A
     * sweep of large GEMMs back to back holds a GPU at its power cap (an
     * H200's 700 W: a median 1,575 MHz of 1,980), where a serving step that
     * follows idle time runs at full clock; resting lets each row start
     * from the same budget.  0: no rest. */
    double rest;
} hs_exec_timing;
/* "alone", "cold", "stream" -> mode; -1 for anything else */
int hs_exec_timing_parse(const char *s);
const char *hs_exec_timing_name(hs_exec_timing_mode m);
int hs_exec_measure(hs_exec *x, const hs_exec_timing *t,
                    int (*fn)(hs_exec *x, void *ctx, hs_err *err), void *ctx, double *us,
                    hs_err *err);

/* Backends (defined in cpu/ and cuda/). */
extern const hs_exec_ops hs_exec_cpu_ops;
#ifdef HS_HAVE_CUDA
extern const hs_exec_ops hs_exec_cuda_ops;
#endif

#ifdef __cplusplus
}
#endif
#endif
