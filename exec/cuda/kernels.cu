/* kernels.cu - the CUDA backend's own kernels and their launchers.
 *
 * Element type T is __half or __nv_bfloat16 (the backend's dtype); all
 * arithmetic is in float.  The kernels are deliberately plain:
 *   elementwise   grid-stride loops
 *   norm          one block per row, two passes (mean, then variance)
 *   quantised     one warp per output column reading 16-byte chunks of the
 *   GEMM (m<=16)  INT8/INT4 row, up to 8 token rows per warp
 *   prefill attn  block = 16 queries of one head of one sequence (4 warps x
 *                 4 rows); K/V tiles of 32 keys staged in shared memory,
 *                 lane j scores key j, online softmax (flash-attention
 *                 recurrence) in registers, causal mask per row
 *   decode attn   block = one head of one sequence and one 512-token
 *                 partition of its context (4 warps, one key per warp per
 *                 step, online softmax); a second kernel merges partitions
 *                 when the context is longer (vLLM paged attention v2)
 * Layouts are those of exec.h. */
#include "cuda/cuda.h"

#include <math.h>

#define FULL 0xffffffffu

/* ---- helpers -------------------------------------------------------- */

template <typename T> __device__ __forceinline__ float tof(T v);
template <> __device__ __forceinline__ float tof<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float tof<__nv_bfloat16>(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}
template <typename T> __device__ __forceinline__ T fromf(float v);
template <> __device__ __forceinline__ __half fromf<__half>(float v) { return __float2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 fromf<__nv_bfloat16>(float v)
{
    return __float2bfloat16(v);
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); sh holds
 * 32 floats.  Every thread gets the result. */
__device__ float block_sum(float v, float *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        float t = lane < nw ? sh[lane] : 0.0f;
        t = warp_sum(t);
        if (lane == 0) sh[0] = t;
    }
    __syncthreads();
    v = sh[0];
    __syncthreads();
    return v;
}

__device__ __forceinline__ uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

__device__ __forceinline__ size_t cache_off(int blk, int h, int row, int kv_heads, int hd)
{
    return (((size_t)blk * kv_heads + h) * HS_EXEC_KV_BLOCK + row) * hd;
}

static unsigned grid_for(size_t n, unsigned block)
{
    size_t g = (n + block - 1) / block;
    return (unsigned)(g < 1 ? 1 : g > 65535u * 8 ? 65535u * 8 : g);
}

#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* Launches kern<T> for the backend's dtype. */
#define LAUNCH(x, kern, grid, block, smem, ...)                                                \
    do {                                                                                     \
        if ((x)->info.dtype == HS_EXEC_BF16)                                                 \
            kern<__nv_bfloat16><<<(grid), (block), (smem), hs__cu(x)->stream>>>(__VA_ARGS__); \
        else                                                                                 \
            kern<__half><<<(grid), (block), (smem), hs__cu(x)->stream>>>(__VA_ARGS__);        \
    } while (0)

/* ---- conversion and random fills ------------------------------------ */

template <typename T>
__global__ void k_from_float(void *dst, const float *src, size_t n)
{
    T *d = (T *)dst;
    GRID_STRIDE(i, n) d[i] = fromf<T>(src[i]);
}

template <typename T>
__global__ void k_to_float(float *dst, const void *src, size_t n)
{
    const T *s = (const T *)src;
    GRID_STRIDE(i, n) dst[i] = tof<T>(s[i]);
}

template <typename T>
__global__ void k_fill_random(void *dst, size_t n, uint64_t seed, float scale)
{
    T *d = (T *)dst;
    GRID_STRIDE(i, n)
    {
        double u = (double)(mix64(seed ^ (i * 0xd1b54a32d192ed03ULL)) >> 11) * 0x1p-53;
        d[i] = fromf<T>((float)((2 * u - 1) * scale));
    }
}

__global__ void k_fill_bytes(uint8_t *d, size_t bytes, uint64_t seed)
{
    GRID_STRIDE(w, (bytes + 7) / 8)
    {
        uint64_t r = mix64(seed ^ (w * 8 * 0xd1b54a32d192ed03ULL));
        for (size_t j = 0; j < 8 && w * 8 + j < bytes; j++) d[w * 8 + j] = (uint8_t)(r >> (8 * j));
    }
}

int hs__cuda_from_float(hs_exec *x, void *dst, const float *src, size_t n, hs_err *err)
{
    LAUNCH(x, k_from_float, grid_for(n, 256), 256, 0, dst, src, n);
    HS_CK_LAUNCH("from_float");
    return 0;
}

int hs__cuda_to_float(hs_exec *x, float *dst, const void *src, size_t n, hs_err *err)
{
    LAUNCH(x, k_to_float, grid_for(n, 256), 256, 0, dst, src, n);
    HS_CK_LAUNCH("to_float");
    return 0;
}

/* The seed is mixed once on the host so the CPU and CUDA fills agree. */
static uint64_t host_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int hs__cuda_fill_random(hs_exec *x, void *dst, size_t n, uint64_t seed, float scale, hs_err *err)
{
    if (!n) return 0;
    LAUNCH(x, k_fill_random, grid_for(n, 256), 256, 0, dst, n, host_mix64(seed), scale);
    HS_CK_LAUNCH("fill_random");
    return 0;
}

int hs__cuda_fill_bytes(hs_exec *x, void *dst, size_t bytes, uint64_t seed, hs_err *err)
{
    if (!bytes) return 0;
    k_fill_bytes<<<grid_for((bytes + 7) / 8, 256), 256, 0, hs__cu(x)->stream>>>(
        (uint8_t *)dst, bytes, host_mix64(seed));
    HS_CK_LAUNCH("fill_bytes");
    return 0;
}

/* ---- quantised weights ---------------------------------------------- */

template <int BITS>
__device__ __forceinline__ int qcode(const uint8_t *row, int i)
{
    return BITS == 8 ? row[i] : (row[i >> 1] >> (4 * (i & 1))) & 15;
}

template <typename T, int BITS>
__global__ void k_dequant(void *out, const uint8_t *q, const void *scale, const void *zero, int n,
                          int k, size_t ld, int groups)
{
    T *o = (T *)out;
    const T *sc = (const T *)scale, *zp = (const T *)zero;
    GRID_STRIDE(i, (size_t)n * k)
    {
        size_t r = i / k;
        int c = (int)(i % k);
        size_t g = r * groups + c / HS_EXEC_QGROUP;
        o[i] = fromf<T>(((float)qcode<BITS>(q + r * ld, c) - tof<T>(zp[g])) * tof<T>(sc[g]));
    }
}

/* One warp per output column, blockDim 128 (4 columns), up to 8 rows of x
 * per block (blockIdx.y).  Each lane reads one 16-byte chunk of the row
 * per step: 16 INT8 or 32 INT4 weights, all in one quantisation group
 * (rows are padded to 16 bytes and 128 is a multiple of 32). */
#define QF_ROWS 8
template <typename T, int BITS>
__global__ void __launch_bounds__(128) k_gemm_q(void *y, const void *xin, const uint8_t *q,
                                                const void *scale, const void *zero, int m, int n,
                                                int k, size_t ld, int groups)
{
    constexpr int PER = BITS == 8 ? 16 : 32;   /* weights per 16-byte chunk */
    const T *xs = (const T *)xin, *sc = (const T *)scale, *zp = (const T *)zero;
    T *ys = (T *)y;
    int lane = threadIdx.x & 31, col = blockIdx.x * 4 + (threadIdx.x >> 5);
    int m0 = blockIdx.y * QF_ROWS, mr = min(QF_ROWS, m - m0);
    float acc[QF_ROWS];
    if (col >= n || mr <= 0) return;
#pragma unroll
    for (int r = 0; r < QF_ROWS; r++) acc[r] = 0.0f;
    const uint8_t *row = q + (size_t)col * ld;
    for (int base = lane * PER; base < k; base += 32 * PER) {
        uint4 chunk = *(const uint4 *)(row + (size_t)base * BITS / 8);
        const uint8_t *b = (const uint8_t *)&chunk;
        int g = base / HS_EXEC_QGROUP, lim = min(PER, k - base);
        float s = tof<T>(sc[(size_t)col * groups + g]), z = tof<T>(zp[(size_t)col * groups + g]);
        float w[PER];
#pragma unroll
        for (int e = 0; e < PER; e++) w[e] = ((float)qcode<BITS>(b, e) - z) * s;
#pragma unroll
        for (int r = 0; r < QF_ROWS; r++) {
            if (r < mr) {
                const T *xr = xs + (size_t)(m0 + r) * k + base;
                float a = 0.0f;
#pragma unroll
                for (int e = 0; e < PER; e++)
                    if (e < lim) a += w[e] * tof<T>(xr[e]);
                acc[r] += a;
            }
        }
    }
#pragma unroll
    for (int r = 0; r < QF_ROWS; r++) acc[r] = warp_sum(acc[r]);
    if (lane == 0)
        for (int r = 0; r < mr; r++) ys[(size_t)(m0 + r) * n + col] = fromf<T>(acc[r]);
}

template <typename T>
static void launch_gemm_q(hs_exec *x, void *y, const void *in, const hs_exec_weight *w, int m)
{
    dim3 grid((unsigned)((w->n + 3) / 4), (unsigned)((m + QF_ROWS - 1) / QF_ROWS));
    const uint8_t *q = (const uint8_t *)w->data;
    cudaStream_t st = hs__cu(x)->stream;
    if (w->bits == 8)
        k_gemm_q<T, 8><<<grid, 128, 0, st>>>(y, in, q, w->scale, w->zero, m, w->n, w->k, w->ld,
                                             w->groups);
    else
        k_gemm_q<T, 4><<<grid, 128, 0, st>>>(y, in, q, w->scale, w->zero, m, w->n, w->k, w->ld,
                                             w->groups);
}

template <typename T>
static void launch_dequant(hs_exec *x, void *dst, const hs_exec_weight *w)
{
    size_t n = (size_t)w->n * w->k;
    const uint8_t *q = (const uint8_t *)w->data;
    cudaStream_t st = hs__cu(x)->stream;
    if (w->bits == 8)
        k_dequant<T, 8><<<grid_for(n, 256), 256, 0, st>>>(dst, q, w->scale, w->zero, w->n, w->k,
                                                          w->ld, w->groups);
    else
        k_dequant<T, 4><<<grid_for(n, 256), 256, 0, st>>>(dst, q, w->scale, w->zero, w->n, w->k,
                                                          w->ld, w->groups);
}

int hs__cuda_gemm_q_fused(hs_exec *x, void *y, const void *in, const hs_exec_weight *w, int m,
                          hs_err *err)
{
    if (x->info.dtype == HS_EXEC_BF16) launch_gemm_q<__nv_bfloat16>(x, y, in, w, m);
    else launch_gemm_q<__half>(x, y, in, w, m);
    HS_CK_LAUNCH("gemm_q");
    return 0;
}

int hs__cuda_dequantize(hs_exec *x, void *dst, const hs_exec_weight *w, hs_err *err)
{
    if (x->info.dtype == HS_EXEC_BF16) launch_dequant<__nv_bfloat16>(x, dst, w);
    else launch_dequant<__half>(x, dst, w);
    HS_CK_LAUNCH("dequantize");
    return 0;
}

/* ---- embedding, norms, activations, add, rope, KV writes ------------ */

template <typename T>
__global__ void k_embed(void *out, const void *tok, const void *pos, const int32_t *ids,
                        const int32_t *positions, int hidden)
{
    const T *tt = (const T *)tok, *pt = (const T *)pos;
    T *o = (T *)out + (size_t)blockIdx.x * hidden;
    const T *tr = tt + (size_t)ids[blockIdx.x] * hidden;
    const T *pr = pt ? pt + (size_t)positions[blockIdx.x] * hidden : NULL;
    for (int d = threadIdx.x; d < hidden; d += blockDim.x)
        o[d] = pr ? fromf<T>(tof<T>(tr[d]) + tof<T>(pr[d])) : tr[d];
}

int hs__cuda_embed(hs_exec *x, void *out, const void *tok, const void *pos, const int32_t *ids,
                   const int32_t *positions, int tokens, int hidden, hs_err *err)
{
    if (tokens < 1) return 0;
    LAUNCH(x, k_embed, (unsigned)tokens, 256, 0, out, tok, pos, ids, positions, hidden);
    HS_CK_LAUNCH("embed");
    return 0;
}

template <typename T>
__global__ void __launch_bounds__(256) k_norm(int layer, void *out, const void *in,
                                              const void *gamma, const void *beta, int hidden,
                                              float eps)
{
    __shared__ float sh[32];
    const T *r = (const T *)in + (size_t)blockIdx.x * hidden, *g = (const T *)gamma,
            *b = (const T *)beta;
    T *o = (T *)out + (size_t)blockIdx.x * hidden;
    float mean = 0.0f, var = 0.0f, inv;
    if (layer) {
        float s = 0.0f;
        for (int d = threadIdx.x; d < hidden; d += blockDim.x) s += tof<T>(r[d]);
        mean = block_sum(s, sh) / hidden;
    }
    for (int d = threadIdx.x; d < hidden; d += blockDim.x) {
        float v = tof<T>(r[d]) - mean;
        var += v * v;
    }
    inv = rsqrtf(block_sum(var, sh) / hidden + eps);
    for (int d = threadIdx.x; d < hidden; d += blockDim.x) {
        float v = (tof<T>(r[d]) - mean) * inv * tof<T>(g[d]);
        o[d] = fromf<T>(layer && b ? v + tof<T>(b[d]) : v);
    }
}

int hs__cuda_norm(hs_exec *x, hs_exec_norm kind, void *out, const void *in, const void *gamma,
                  const void *beta, int tokens, int hidden, float eps, hs_err *err)
{
    if (tokens < 1) return 0;
    LAUNCH(x, k_norm, (unsigned)tokens, 256, 0, kind == HS_EXEC_LAYERNORM, out, in, gamma, beta,
           hidden, eps);
    HS_CK_LAUNCH("norm");
    return 0;
}

__device__ __forceinline__ float act1(int kind, float v)
{
    if (kind == HS_EXEC_SILU) return v / (1.0f + expf(-v));
    if (kind == HS_EXEC_GELU) return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    return v > 0.0f ? v : 0.0f;
}

template <typename T>
__global__ void k_act(int kind, int gated, void *out, const void *in, int tokens, int f)
{
    const T *xi = (const T *)in;
    T *o = (T *)out;
    GRID_STRIDE(i, (size_t)tokens * f)
    {
        size_t t = i / f, j = i % f;
        if (gated) {
            const T *r = xi + t * 2 * f;
            o[i] = fromf<T>(act1(kind, tof<T>(r[j])) * tof<T>(r[f + j]));
        } else {
            o[i] = fromf<T>(act1(kind, tof<T>(xi[i])));
        }
    }
}

int hs__cuda_act(hs_exec *x, hs_exec_act kind, int gated, void *out, const void *in, int tokens,
                 int f, hs_err *err)
{
    size_t n = (size_t)tokens * f;
    if (!n) return 0;
    LAUNCH(x, k_act, grid_for(n, 256), 256, 0, (int)kind, gated, out, in, tokens, f);
    HS_CK_LAUNCH("act");
    return 0;
}

template <typename T>
__global__ void k_add(void *out, const void *a, const void *b, size_t n)
{
    const T *p = (const T *)a, *q = (const T *)b;
    T *o = (T *)out;
    GRID_STRIDE(i, n) o[i] = fromf<T>(tof<T>(p[i]) + tof<T>(q[i]));
}

int hs__cuda_add(hs_exec *x, void *out, const void *a, const void *b, size_t n, hs_err *err)
{
    if (!n) return 0;
    LAUNCH(x, k_add, grid_for(n, 256), 256, 0, out, a, b, n);
    HS_CK_LAUNCH("add");
    return 0;
}

/* grid (tokens, n_heads); threads over the head_dim/2 rotation pairs. */
template <typename T>
__global__ void k_rope(void *qk, int stride, int head_dim, const int32_t *positions, float theta)
{
    T *v = (T *)qk + (size_t)blockIdx.x * stride + (size_t)blockIdx.y * head_dim;
    int half = head_dim / 2;
    float p = (float)positions[blockIdx.x];
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        float freq = powf(theta, -2.0f * (float)i / (float)head_dim), s, c;
        sincosf(p * freq, &s, &c);
        float x0 = tof<T>(v[i]), x1 = tof<T>(v[i + half]);
        v[i] = fromf<T>(x0 * c - x1 * s);
        v[i + half] = fromf<T>(x0 * s + x1 * c);
    }
}

int hs__cuda_rope(hs_exec *x, void *qk, int stride, int tokens, int n_heads, int head_dim,
                  const int32_t *positions, float theta, hs_err *err)
{
    if (head_dim % 2) return hs_errf(err, HS_EINVAL, "rope: odd head_dim %d", head_dim);
    if (tokens < 1 || n_heads < 1) return 0;
    if (n_heads > 65535) return hs_errf(err, HS_EINVAL, "rope: %d heads", n_heads);
    LAUNCH(x, k_rope, dim3((unsigned)tokens, (unsigned)n_heads), 64, 0, qk, stride, head_dim,
           positions, theta);
    HS_CK_LAUNCH("rope");
    return 0;
}

/* grid (tokens, kv_heads). */
template <typename T>
__global__ void k_kv_write(void *kc, void *vc, const void *k, const void *v, int stride,
                           int kv_heads, int head_dim, const int32_t *slots)
{
    int t = blockIdx.x, h = blockIdx.y, slot = slots[t];
    size_t o = cache_off(slot / HS_EXEC_KV_BLOCK, h, slot % HS_EXEC_KV_BLOCK, kv_heads, head_dim);
    const T *ks = (const T *)k + (size_t)t * stride + (size_t)h * head_dim;
    const T *vs = (const T *)v + (size_t)t * stride + (size_t)h * head_dim;
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
        ((T *)kc)[o + d] = ks[d];
        ((T *)vc)[o + d] = vs[d];
    }
}

int hs__cuda_kv_write(hs_exec *x, void *k_cache, void *v_cache, const void *k, const void *v,
                      int stride, int tokens, int kv_heads, int head_dim, const int32_t *slots,
                      hs_err *err)
{
    if (tokens < 1) return 0;
    if (kv_heads > 65535) return hs_errf(err, HS_EINVAL, "kv_write: %d kv heads", kv_heads);
    LAUNCH(x, k_kv_write, dim3((unsigned)tokens, (unsigned)kv_heads), 128, 0, k_cache, v_cache, k,
           v, stride, kv_heads, head_dim, slots);
    HS_CK_LAUNCH("kv_write");
    return 0;
}

/* ---- prefill attention ---------------------------------------------- */

#define PF_BQ 16    /* queries per block */
#define PF_RPW 4    /* query rows per warp (4 warps) */
#define PF_BK 32    /* keys per tile: one per lane */

/* grid (ceil(max_q_len / 16), heads, n_seqs), 128 threads.  NV = values
 * of the head held per lane (head_dim <= 32 NV). */
template <typename T, int NV>
__global__ void __launch_bounds__(128) k_attn_prefill(hs_exec_attn a)
{
    extern __shared__ float4 smem4[];
    const int hd = a.head_dim, ld = hd + 2;   /* +2: odd word stride, no bank conflicts */
    T *ks = (T *)smem4, *vs = ks + PF_BK * ld, *qs = vs + PF_BK * ld;
    const int s = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * PF_BQ;
    const int32_t *si = a.seq_info + 3 * s;
    const int qstart = si[0], qlen = si[1], prefix = si[2];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    if (q0 >= qlen) return;
    const int kvh = (int)((long)h * a.kv_heads / a.heads);
    const int32_t *bt = a.block_tables + (size_t)s * a.max_blocks;
    const T *q = (const T *)a.q, *kc = (const T *)a.k_cache, *vc = (const T *)a.v_cache;
    const int kend = prefix + min(q0 + PF_BQ, qlen);   /* keys [0, kend) */
    float m[PF_RPW], l[PF_RPW], acc[PF_RPW][NV];

    for (int i = tid; i < PF_BQ * hd; i += blockDim.x) {
        int r = i / hd, d = i % hd, qi = q0 + r;
        qs[r * hd + d] = qi < qlen ? q[(size_t)(qstart + qi) * a.q_stride + (size_t)h * hd + d]
                                   : fromf<T>(0.0f);
    }
#pragma unroll
    for (int r = 0; r < PF_RPW; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int v = 0; v < NV; v++) acc[r][v] = 0.0f;
    }
    for (int kt = 0; kt < kend; kt += PF_BK) {
        __syncthreads();   /* the previous tile is consumed (and q is loaded) */
        for (int i = tid; i < PF_BK * hd; i += blockDim.x) {
            int j = i / hd, d = i % hd, p = kt + j;
            T kv = fromf<T>(0.0f), vv = fromf<T>(0.0f);
            if (p < kend) {
                size_t o = cache_off(bt[p / HS_EXEC_KV_BLOCK], kvh, p % HS_EXEC_KV_BLOCK,
                                     a.kv_heads, hd) + d;
                kv = kc[o];
                vv = vc[o];
            }
            ks[j * ld + d] = kv;
            vs[j * ld + d] = vv;
        }
        __syncthreads();
#pragma unroll
        for (int r = 0; r < PF_RPW; r++) {
            const int row = warp * PF_RPW + r, qi = q0 + row, p = kt + lane;
            float sc = -INFINITY;
            if (qi >= qlen) break;   /* warp-uniform */
            if (p <= prefix + qi) {
                const T *kr = ks + lane * ld, *qr = qs + row * hd;
                float dot = 0.0f;
                for (int d = 0; d < hd; d++) dot += tof<T>(qr[d]) * tof<T>(kr[d]);
                sc = dot * a.scale;
            }
            const float mnew = fmaxf(m[r], warp_max(sc));
            const float corr = m[r] == -INFINITY ? 0.0f : expf(m[r] - mnew);
            const float pj = sc == -INFINITY ? 0.0f : expf(sc - mnew);
            l[r] = l[r] * corr + warp_sum(pj);
#pragma unroll
            for (int v = 0; v < NV; v++) acc[r][v] *= corr;
#pragma unroll 4
            for (int j = 0; j < PF_BK; j++) {
                const float pb = __shfl_sync(FULL, pj, j);
                const T *vr = vs + j * ld;
                if (pb == 0.0f) continue;   /* uniform across the warp */
#pragma unroll
                for (int v = 0; v < NV; v++) {
                    int d = lane + 32 * v;
                    if (d < hd) acc[r][v] += pb * tof<T>(vr[d]);
                }
            }
            m[r] = mnew;
        }
    }
    T *out = (T *)a.out;
#pragma unroll
    for (int r = 0; r < PF_RPW; r++) {
        const int qi = q0 + warp * PF_RPW + r;
        if (qi >= qlen) break;
#pragma unroll
        for (int v = 0; v < NV; v++) {
            int d = lane + 32 * v;
            if (d < hd)
                out[(size_t)(qstart + qi) * a.heads * hd + (size_t)h * hd + d] =
                    fromf<T>(acc[r][v] / l[r]);
        }
    }
}

template <typename T, int NV>
static void launch_prefill(hs_exec *x, const hs_exec_attn *a)
{
    dim3 grid((unsigned)((a->max_q_len + PF_BQ - 1) / PF_BQ), (unsigned)a->heads,
              (unsigned)a->n_seqs);
    size_t smem = (size_t)(2 * PF_BK * (a->head_dim + 2) + PF_BQ * a->head_dim) * sizeof(T);
    k_attn_prefill<T, NV><<<grid, 128, smem, hs__cu(x)->stream>>>(*a);
}

/* ---- decode attention ----------------------------------------------- */

#define DC_WARPS 4
#define DC_PART 512   /* context tokens per block */

/* grid (heads, n_seqs, max partitions), 128 threads. */
template <typename T, int NV>
__global__ void __launch_bounds__(128) k_attn_decode(hs_exec_attn a, float *pm, float *pl,
                                                     float *pacc, int max_parts)
{
    __shared__ float sm[DC_WARPS], sl[DC_WARPS];
    __shared__ float sacc[DC_WARPS][HS_EXEC_MAX_HEAD_DIM];
    const int h = blockIdx.x, s = blockIdx.y, part = blockIdx.z;
    const int ctx = a.seq_info[s], k0 = part * DC_PART;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, hd = a.head_dim;
    if (k0 >= ctx) return;
    const int k1 = min(ctx, k0 + DC_PART), nparts = (ctx + DC_PART - 1) / DC_PART;
    const int kvh = (int)((long)h * a.kv_heads / a.heads);
    const int32_t *bt = a.block_tables + (size_t)s * a.max_blocks;
    const T *q = (const T *)a.q + (size_t)s * a.q_stride + (size_t)h * hd;
    const T *kc = (const T *)a.k_cache, *vc = (const T *)a.v_cache;
    float qv[NV], acc[NV], m = -INFINITY, l = 0.0f;
#pragma unroll
    for (int v = 0; v < NV; v++) {
        int d = lane + 32 * v;
        qv[v] = d < hd ? tof<T>(q[d]) : 0.0f;
        acc[v] = 0.0f;
    }
    for (int p = k0 + warp; p < k1; p += DC_WARPS) {
        size_t o = cache_off(bt[p / HS_EXEC_KV_BLOCK], kvh, p % HS_EXEC_KV_BLOCK, a.kv_heads, hd);
        float dot = 0.0f;
#pragma unroll
        for (int v = 0; v < NV; v++) {
            int d = lane + 32 * v;
            if (d < hd) dot += qv[v] * tof<T>(kc[o + d]);
        }
        const float sc = warp_sum(dot) * a.scale;
        const float mnew = fmaxf(m, sc);
        const float corr = m == -INFINITY ? 0.0f : expf(m - mnew), pp = expf(sc - mnew);
        l = l * corr + pp;
#pragma unroll
        for (int v = 0; v < NV; v++) {
            int d = lane + 32 * v;
            acc[v] = acc[v] * corr + (d < hd ? pp * tof<T>(vc[o + d]) : 0.0f);
        }
        m = mnew;
    }
    if (lane == 0) {
        sm[warp] = m;
        sl[warp] = l;
    }
#pragma unroll
    for (int v = 0; v < NV; v++) {
        int d = lane + 32 * v;
        if (d < hd) sacc[warp][d] = acc[v];
    }
    __syncthreads();
    float M = -INFINITY, L = 0.0f;
    for (int w = 0; w < DC_WARPS; w++) M = fmaxf(M, sm[w]);
    for (int w = 0; w < DC_WARPS; w++)
        if (sm[w] != -INFINITY) L += sl[w] * expf(sm[w] - M);
    const size_t base = ((size_t)s * a.heads + h) * max_parts + part;
    for (int d = tid; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int w = 0; w < DC_WARPS; w++)
            if (sm[w] != -INFINITY) o += sacc[w][d] * expf(sm[w] - M);
        if (nparts == 1) ((T *)a.out)[(size_t)s * a.heads * hd + (size_t)h * hd + d] = fromf<T>(o / L);
        else pacc[base * hd + d] = o;
    }
    if (nparts > 1 && tid == 0) {
        pm[base] = M;
        pl[base] = L;
    }
}

/* grid (heads, n_seqs): merges the partitions of sequences longer than one. */
template <typename T>
__global__ void k_attn_decode_merge(hs_exec_attn a, const float *pm, const float *pl,
                                    const float *pacc, int max_parts)
{
    const int h = blockIdx.x, s = blockIdx.y, hd = a.head_dim, ctx = a.seq_info[s];
    const int nparts = (ctx + DC_PART - 1) / DC_PART;
    if (nparts <= 1) return;
    const size_t base = ((size_t)s * a.heads + h) * max_parts;
    float M = -INFINITY, L = 0.0f;
    for (int z = 0; z < nparts; z++) M = fmaxf(M, pm[base + z]);
    for (int z = 0; z < nparts; z++) L += pl[base + z] * expf(pm[base + z] - M);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int z = 0; z < nparts; z++) o += pacc[(base + z) * hd + d] * expf(pm[base + z] - M);
        ((T *)a.out)[(size_t)s * a.heads * hd + (size_t)h * hd + d] = fromf<T>(o / L);
    }
}

template <typename T, int NV>
static void launch_decode(hs_exec *x, const hs_exec_attn *a, float *pm, float *pl, float *pacc,
                          int parts)
{
    dim3 grid((unsigned)a->heads, (unsigned)a->n_seqs, (unsigned)parts);
    k_attn_decode<T, NV><<<grid, 128, 0, hs__cu(x)->stream>>>(*a, pm, pl, pacc, parts);
}

/* Instantiates fn<T, NV> for the dtype and the smallest NV in {1, 2, 4, 8}
 * with 32 NV >= head_dim (lanes past head_dim stay idle). */
#define DISPATCH_NV(x, a, fn, ...)                                                     \
    do {                                                                               \
        int hd_ = (a)->head_dim;                                                       \
        if ((x)->info.dtype == HS_EXEC_BF16) {                                         \
            if (hd_ <= 32) fn<__nv_bfloat16, 1>(__VA_ARGS__);                          \
            else if (hd_ <= 64) fn<__nv_bfloat16, 2>(__VA_ARGS__);                     \
            else if (hd_ <= 128) fn<__nv_bfloat16, 4>(__VA_ARGS__);                    \
            else fn<__nv_bfloat16, 8>(__VA_ARGS__);                                    \
        } else {                                                                       \
            if (hd_ <= 32) fn<__half, 1>(__VA_ARGS__);                                 \
            else if (hd_ <= 64) fn<__half, 2>(__VA_ARGS__);                            \
            else if (hd_ <= 128) fn<__half, 4>(__VA_ARGS__);                           \
            else fn<__half, 8>(__VA_ARGS__);                                           \
        }                                                                              \
    } while (0)

static int check_attn(const hs_exec_attn *a, hs_err *err)
{
    if (a->n_seqs < 1 || a->heads < 1 || a->kv_heads < 1 || a->head_dim < 1 ||
        a->heads < a->kv_heads || a->head_dim > HS_EXEC_MAX_HEAD_DIM || a->n_seqs > 65535 ||
        a->heads > 65535)
        return hs_errf(err, HS_EINVAL,
                       "attention: unsupported shape (%d seqs, %d heads, %d kv heads, head_dim %d)",
                       a->n_seqs, a->heads, a->kv_heads, a->head_dim);
    return 0;
}

int hs__cuda_attention_prefill(hs_exec *x, const hs_exec_attn *a, hs_err *err)
{
    int rc = check_attn(a, err);
    if (rc) return rc;
    if (a->max_q_len < 1) return 0;
    DISPATCH_NV(x, a, launch_prefill, x, a);
    HS_CK_LAUNCH("attention_prefill");
    return 0;
}

int hs__cuda_attention_decode(hs_exec *x, const hs_exec_attn *a, hs_err *err)
{
    hs__cuda *c = hs__cu(x);
    int rc = check_attn(a, err), parts;
    float *pm = NULL, *pl = NULL, *pacc = NULL;
    if (rc) return rc;
    if (a->max_context < 1) return 0;
    parts = (a->max_context + DC_PART - 1) / DC_PART;
    if (parts > 65535) return hs_errf(err, HS_EINVAL, "attention_decode: context %d", a->max_context);
    if (parts > 1) {
        size_t slots = (size_t)a->n_seqs * a->heads * parts;
        if ((rc = hs__cuda_reserve(x, (void **)&c->part, &c->part_bytes,
                                   slots * (2 + (size_t)a->head_dim) * sizeof(float), err)))
            return rc;
        pm = c->part;
        pl = pm + slots;
        pacc = pl + slots;
    }
    DISPATCH_NV(x, a, launch_decode, x, a, pm, pl, pacc, parts);
    HS_CK_LAUNCH("attention_decode");
    if (parts > 1) {
        if (x->info.dtype == HS_EXEC_BF16)
            k_attn_decode_merge<__nv_bfloat16><<<dim3((unsigned)a->heads, (unsigned)a->n_seqs), 128, 0,
                                                 c->stream>>>(*a, pm, pl, pacc, parts);
        else
            k_attn_decode_merge<__half><<<dim3((unsigned)a->heads, (unsigned)a->n_seqs), 128, 0,
                                          c->stream>>>(*a, pm, pl, pacc, parts);
        HS_CK_LAUNCH("attention_decode_merge");
    }
    return 0;
}
