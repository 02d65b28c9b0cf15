/* test_exec_kernels.c - one backend's kernels against a float64 reference
 * on fresh random inputs: GEMM (16-bit, INT8, INT4; on CUDA both the fused
 * small-batch path and dequantise+cuBLAS), causal prefill attention with
 * variable lengths and prefixes, paged decode attention over scattered
 * block tables (contexts spanning several decode partitions), KV writes,
 * RMSNorm/LayerNorm, SiLU/GELU/ReLU (gated and not), rotary embedding, the
 * embedding gather and the residual add.
 *
 * usage: test_exec_kernels cpu|cuda [seed]
 * Inputs are rounded through the backend's dtype (upload, then download)
 * before the reference sees them, so the bounds measure the kernels, not
 * the input rounding.  Bounds are on the relative L2 error of each output
 * and depend on the dtype (fp32, fp16, bf16).  Exit 77 (skipped) when the
 * backend cannot run here (no GPU, or built without CUDA). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "exec.h"

static hs_exec X;
static hs_err E;
static double TOL;             /* relative L2 bound of most outputs */
static uint64_t rng;

static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

static float *rnd(size_t n, double scale)
{
    float *p = malloc(n * sizeof *p);
    if (!p) abort();
    for (size_t i = 0; i < n; i++) p[i] = (float)((2 * urand() - 1) * scale);
    return p;
}

static void *xmalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) abort();
    return p;
}

static void *dev(size_t elems)
{
    void *d = NULL;
    CHECK_OK(X.ops->alloc(&X, &d, elems * X.info.elem_bytes, &E), &E);
    return d;
}

/* A device copy of h; h is replaced by the values the device holds. */
static void *dev_from(float *h, size_t n)
{
    void *d = dev(n);
    CHECK_OK(X.ops->upload(&X, d, h, n, &E), &E);
    CHECK_OK(X.ops->download(&X, h, d, n, &E), &E);
    return d;
}

static void *dev_ints(const int32_t *h, size_t n)
{
    void *d = NULL;
    CHECK_OK(X.ops->alloc(&X, &d, n * 4, &E), &E);
    CHECK_OK(X.ops->upload_bytes(&X, d, h, n * 4, &E), &E);
    return d;
}

static float *host(const void *d, size_t n)
{
    float *h = xmalloc(n * sizeof *h);
    CHECK_OK(X.ops->sync(&X, &E), &E);
    CHECK_OK(X.ops->download(&X, h, d, n, &E), &E);
    return h;
}

static void check_close(const char *what, const float *got, const double *ref, size_t n, double tol)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    double e = sqrt(num / (den > 0 ? den : 1));
    printf("  %-52s rel err %.3g (bound %.3g)\n", what, e, tol);
    if (!(e <= tol)) fprintf(stderr, "%s: relative error %.3g above %.3g\n", what, e, tol);
    CHECK(e <= tol);
}

/* ---- GEMM ----------------------------------------------------------- */

static void test_gemm(int m, int n, int k, int bits)
{
    float *x = rnd((size_t)m * k, 1.0), *w = rnd((size_t)n * k, 0.1), *y;
    double *wref = xmalloc((size_t)n * k * sizeof *wref), *ref = xmalloc((size_t)m * n * sizeof *ref);
    void *dx = dev_from(x, (size_t)m * k), *dy = dev((size_t)m * n);
    hs_exec_weight W;
    char what[96];
    CHECK_OK(hs_exec_weight_alloc(&X, &W, n, k, bits, &E), &E);
    if (bits == 16) {
        CHECK_OK(hs_exec_weight_set(&X, &W, w, NULL, NULL, NULL, &E), &E);
        CHECK_OK(X.ops->download(&X, w, W.data, (size_t)n * k, &E), &E);
        for (size_t i = 0; i < (size_t)n * k; i++) wref[i] = w[i];
    } else {
        int G = W.groups;
        uint8_t *q = xmalloc((size_t)n * W.ld);
        float *sc0 = xmalloc((size_t)n * G * sizeof *sc0), *zp0 = xmalloc((size_t)n * G * sizeof *zp0);
        float *sc = xmalloc((size_t)n * G * sizeof *sc), *zp = xmalloc((size_t)n * G * sizeof *zp);
        /* half an ulp of the device's element type, relative, and half its
         * smallest subnormal step (FP16 scales of a short, narrow group are
         * subnormal) */
        const double rel = X.info.dtype == HS_EXEC_FP32 ? 0x1p-24 : X.info.dtype == HS_EXEC_FP16 ? 0x1p-11 : 0x1p-8;
        const double sub = X.info.dtype == HS_EXEC_FP16 ? 0x1p-25 : 0x1p-150;
        double worst = 0;
        hs_exec_quantize(w, n, k, bits, q, sc0, zp0);
        CHECK_OK(hs_exec_weight_set(&X, &W, NULL, q, sc0, zp0, &E), &E);
        CHECK_OK(X.ops->download(&X, sc, W.scale, (size_t)n * G, &E), &E);
        CHECK_OK(X.ops->download(&X, zp, W.zero, (size_t)n * G, &E), &E);
        /* The device holds the scale and zero point rounded to its type. */
        for (size_t g = 0; g < (size_t)n * G; g++) {
            CHECK(fabs((double)sc[g] - sc0[g]) <= fmax(fabs(sc0[g]) * rel, sub) * 1.0001);
            CHECK(fabs((double)zp[g] - zp0[g]) <= fmax(fabs(zp0[g]) * rel, sub) * 1.0001);
        }
        /* Independent dequantisation of the documented layout; each weight
         * within half a step of the input, plus what the rounding of that
         * group's scale and zero point moves it (with a little slack for
         * float arithmetic). */
        for (int r = 0; r < n; r++)
            for (int i = 0; i < k; i++) {
                const uint8_t *row = q + (size_t)r * W.ld;
                int code = bits == 8 ? row[i] : (row[i / 2] >> (i % 2 ? 4 : 0)) & 15;
                size_t g = (size_t)r * G + i / HS_EXEC_QGROUP;
                double s0 = sc0[g], bound, e;
                wref[(size_t)r * k + i] = ((double)code - zp[g]) * sc[g];
                bound = 0.5 * s0 + fabs(code - (double)zp0[g]) * fabs((double)sc[g] - s0) +
                        fabs((double)zp[g] - zp0[g]) * fabs((double)sc[g]) + 1e-4 * s0;
                e = fabs(wref[(size_t)r * k + i] - w[(size_t)r * k + i]) / bound;
                if (e > worst) worst = e;
            }
        CHECK(worst <= 1.0);
        free(sc0);
        free(zp0);
        free(q);
        free(sc);
        free(zp);
    }
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int t = 0; t < k; t++) s += (double)x[(size_t)i * k + t] * wref[(size_t)j * k + t];
            ref[(size_t)i * n + j] = s;
        }
    CHECK_OK(X.ops->gemm(&X, dy, dx, &W, m, &E), &E);
    y = host(dy, (size_t)m * n);
    snprintf(what, sizeof what, "gemm m=%d n=%d k=%d bits=%d", m, n, k, bits);
    check_close(what, y, ref, (size_t)m * n, TOL);
    hs_exec_weight_free(&X, &W);
    X.ops->free(&X, dx);
    X.ops->free(&X, dy);
    free(x);
    free(w);
    free(y);
    free(wref);
    free(ref);
}

/* ---- attention ------------------------------------------------------ */

/* A cache of `pool` blocks filled with random values (rounded), and a
 * scattered block table: n sequences of nb[s] blocks from a shuffled pool. */
typedef struct cache {
    int pool, nkv, hd, max_blocks;
    float *k, *v;              /* host copies */
    void *dk, *dv;
    int32_t *bt;               /* host [n][max_blocks] */
    void *dbt;
} cache;

static void cache_make(cache *c, int n, const int *tokens, int nkv, int hd)
{
    int32_t *perm;
    int used = 0;
    size_t elems;
    memset(c, 0, sizeof *c);
    c->nkv = nkv;
    c->hd = hd;
    for (int s = 0; s < n; s++) {
        int nb = (tokens[s] + HS_EXEC_KV_BLOCK - 1) / HS_EXEC_KV_BLOCK;
        c->pool += nb;
        if (nb > c->max_blocks) c->max_blocks = nb;
    }
    c->pool += 5;   /* unused blocks in between */
    perm = xmalloc((size_t)c->pool * sizeof *perm);
    for (int i = 0; i < c->pool; i++) perm[i] = i;
    for (int i = c->pool - 1; i > 0; i--) {
        int j = (int)(urand() * (i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    c->bt = xmalloc((size_t)n * c->max_blocks * sizeof *c->bt);
    for (int s = 0; s < n; s++) {
        int nb = (tokens[s] + HS_EXEC_KV_BLOCK - 1) / HS_EXEC_KV_BLOCK;
        for (int j = 0; j < nb; j++) c->bt[(size_t)s * c->max_blocks + j] = perm[used++];
    }
    free(perm);
    elems = (size_t)c->pool * nkv * HS_EXEC_KV_BLOCK * hd;
    c->k = rnd(elems, 1.0);
    c->v = rnd(elems, 1.0);
    c->dk = dev_from(c->k, elems);
    c->dv = dev_from(c->v, elems);
    c->dbt = dev_ints(c->bt, (size_t)n * c->max_blocks);
}

static void cache_free(cache *c)
{
    X.ops->free(&X, c->dk);
    X.ops->free(&X, c->dv);
    X.ops->free(&X, c->dbt);
    free(c->k);
    free(c->v);
    free(c->bt);
}

static const float *cache_row(const cache *c, const float *base, int seq, int p, int h)
{
    int32_t blk = c->bt[(size_t)seq * c->max_blocks + p / HS_EXEC_KV_BLOCK];
    return base + (((size_t)blk * c->nkv + h) * HS_EXEC_KV_BLOCK + p % HS_EXEC_KV_BLOCK) * c->hd;
}

/* Reference: query q (hd) of sequence seq over keys 0..nkeys-1 of KV head h. */
static void ref_attend(const cache *c, int seq, int h, const float *q, int nkeys, double scale,
                       double *out)
{
    double *s = xmalloc((size_t)nkeys * sizeof *s), mx = -INFINITY, sum = 0;
    for (int j = 0; j < nkeys; j++) {
        const float *kr = cache_row(c, c->k, seq, j, h);
        double d = 0;
        for (int t = 0; t < c->hd; t++) d += (double)q[t] * kr[t];
        s[j] = d * scale;
        if (s[j] > mx) mx = s[j];
    }
    for (int t = 0; t < c->hd; t++) out[t] = 0;
    for (int j = 0; j < nkeys; j++) {
        const float *vr = cache_row(c, c->v, seq, j, h);
        double p = exp(s[j] - mx);
        sum += p;
        for (int t = 0; t < c->hd; t++) out[t] += p * vr[t];
    }
    for (int t = 0; t < c->hd; t++) out[t] /= sum;
    free(s);
}

/* The attention arguments both paged kernels take. */
static void attn_args(hs_exec_attn *a, int n, int nh, int nkv, int hd, int stride, void *dq,
                      void *dout, const cache *c, void *dinfo)
{
    memset(a, 0, sizeof *a);
    a->n_seqs = n;
    a->heads = nh;
    a->kv_heads = nkv;
    a->head_dim = hd;
    a->scale = (float)(1.0 / sqrt(hd));
    a->q = dq;
    a->q_stride = stride;
    a->out = dout;
    a->k_cache = c->dk;
    a->v_cache = c->dv;
    a->block_tables = c->dbt;
    a->max_blocks = c->max_blocks;
    a->seq_info = dinfo;
}

/* n sequences of qlen[s] new tokens after prefix[s] cached ones; with
 * `host` the lengths are also passed on the host (seq_info_host), as the
 * profiler and replay do; without, the backend must fetch them. */
static void test_prefill_seqs(int nh, int nkv, int hd, int N, const int *qlen, const int *prefix,
                              int host_info, const char *label)
{
    int tokens[8], total = 0, stride = (nh + 2 * nkv) * hd, maxq = 0;
    int32_t info[3 * 8];
    cache c;
    float *q, *out;
    double *ref;
    void *dq, *dout, *dinfo;
    hs_exec_attn a;
    char what[96];
    for (int s = 0; s < N; s++) {
        tokens[s] = prefix[s] + qlen[s];
        info[3 * s] = total;
        info[3 * s + 1] = qlen[s];
        info[3 * s + 2] = prefix[s];
        total += qlen[s];
        if (qlen[s] > maxq) maxq = qlen[s];
    }
    cache_make(&c, N, tokens, nkv, hd);
    q = rnd((size_t)total * stride, 1.0);
    dq = dev_from(q, (size_t)total * stride);
    dout = dev((size_t)total * nh * hd);
    dinfo = dev_ints(info, 3 * N);
    attn_args(&a, N, nh, nkv, hd, stride, dq, dout, &c, dinfo);
    a.max_q_len = maxq;
    if (host_info) a.seq_info_host = info;
    CHECK_OK(X.ops->attention_prefill(&X, &a, &E), &E);
    out = host(dout, (size_t)total * nh * hd);
    ref = xmalloc((size_t)total * nh * hd * sizeof *ref);
    for (int s = 0; s < N; s++)
        for (int i = 0; i < qlen[s]; i++) {
            size_t row = (size_t)info[3 * s] + i;
            for (int h = 0; h < nh; h++)
                ref_attend(&c, s, (int)((long)h * nkv / nh), q + row * stride + (size_t)h * hd,
                           prefix[s] + i + 1, a.scale, ref + (row * nh + h) * hd);
        }
    snprintf(what, sizeof what, "prefill heads=%d kv=%d hd=%d (%s)", nh, nkv, hd, label);
    check_close(what, out, ref, (size_t)total * nh * hd, TOL);
    X.ops->free(&X, dq);
    X.ops->free(&X, dout);
    X.ops->free(&X, dinfo);
    cache_free(&c);
    free(q);
    free(out);
    free(ref);
}

static void test_prefill(int nh, int nkv, int hd)
{
    static const int qlen[4] = {5, 33, 17, 1}, prefix[4] = {0, 20, 50, 7};
    test_prefill_seqs(nh, nkv, hd, 4, qlen, prefix, 1, "4 seqs, prefixes");
}

/* The lengths only on the device; and a chunk longer than one query block
 * of the CUDA path (1,024 rows) next to a short one. */
static void test_prefill_long(void)
{
    static const int qlen[2] = {3, 1100}, prefix[2] = {40, 37};
    test_prefill_seqs(4, 2, 64, 4, (const int[]){5, 33, 17, 1}, (const int[]){0, 20, 50, 7}, 0,
                      "4 seqs, lengths on the device only");
    test_prefill_seqs(2, 1, 64, 2, qlen, prefix, 1, "chunk of 1,100 after 37 cached");
}

/* Decode over n sequences with contexts ctx[]. */
static void test_decode_ctx(int nh, int nkv, int hd, int N, const int *ctx, const char *label)
{
    int stride = (nh + 2 * nkv) * hd, maxc = 0;
    int32_t info[8];
    cache c;
    float *q, *out;
    double *ref;
    void *dq, *dout, *dinfo;
    hs_exec_attn a;
    char what[96];
    for (int s = 0; s < N; s++) {
        info[s] = ctx[s];
        if (ctx[s] > maxc) maxc = ctx[s];
    }
    cache_make(&c, N, ctx, nkv, hd);
    q = rnd((size_t)N * stride, 1.0);
    dq = dev_from(q, (size_t)N * stride);
    dout = dev((size_t)N * nh * hd);
    dinfo = dev_ints(info, N);
    ref = xmalloc((size_t)N * nh * hd * sizeof *ref);
    /* without and with the host copy of the contexts (the CUDA kernel
     * sizes its partitions by their mean when it has one) */
    for (int hostp = 0; hostp < 2; hostp++) {
        attn_args(&a, N, nh, nkv, hd, stride, dq, dout, &c, dinfo);
        a.max_context = maxc;
        if (hostp) a.seq_info_host = info;
        CHECK_OK(X.ops->attention_decode(&X, &a, &E), &E);
        out = host(dout, (size_t)N * nh * hd);
        for (int s = 0; s < N; s++)
            for (int h = 0; h < nh; h++)
                ref_attend(&c, s, (int)((long)h * nkv / nh), q + (size_t)s * stride + (size_t)h * hd,
                           ctx[s], a.scale, ref + ((size_t)s * nh + h) * hd);
        snprintf(what, sizeof what, "decode heads=%d kv=%d hd=%d (%s%s)", nh, nkv, hd, label,
                 hostp ? ", host contexts" : "");
        check_close(what, out, ref, (size_t)N * nh * hd, TOL);
        free(out);
    }
    X.ops->free(&X, dq);
    X.ops->free(&X, dout);
    X.ops->free(&X, dinfo);
    cache_free(&c);
    free(q);
    free(ref);
}

static void test_decode(int nh, int nkv, int hd)
{
    static const int ctx[6] = {1, 16, 17, 600, 1100, 513};
    test_decode_ctx(nh, nkv, hd, 6, ctx, "contexts 1..1100");
}

/* One sequence: the CUDA kernel splits its context into many short
 * partitions to fill the device. */
static void test_decode_split(void)
{
    test_decode_ctx(2, 1, 128, 1, (const int[]){3000}, "one sequence of 3,000");
    test_decode_ctx(1, 1, 64, 2, (const int[]){65, 1}, "two short sequences");
    test_decode_ctx(4, 2, 128, 4, (const int[]){2900, 40, 300, 7}, "one long, three short");
}

static void test_kv_write(void)
{
    enum { T = 20, POOL = 6, NKV = 3, HD = 64 };
    int stride = (4 + 2 * NKV) * HD, bad = 0;
    size_t elems = (size_t)POOL * NKV * HS_EXEC_KV_BLOCK * HD;
    float *qkv = rnd((size_t)T * stride, 1.0), *zeros = xmalloc(elems * sizeof *zeros), *kc, *vc;
    int32_t slots[T];
    void *dqkv = dev_from(qkv, (size_t)T * stride), *dk = dev(elems), *dv = dev(elems), *ds;
    const char *base = dqkv;
    /* Distinct slots scattered over the pool. */
    for (int t = 0; t < T; t++) slots[t] = (t * 37 + 5) % (POOL * HS_EXEC_KV_BLOCK);
    ds = dev_ints(slots, T);
    CHECK_OK(X.ops->upload(&X, dk, zeros, elems, &E), &E);
    CHECK_OK(X.ops->upload(&X, dv, zeros, elems, &E), &E);
    CHECK_OK(X.ops->kv_write(&X, dk, dv, base + (size_t)4 * HD * X.info.elem_bytes,
                             base + (size_t)(4 + NKV) * HD * X.info.elem_bytes, stride, T, NKV, HD,
                             ds, &E), &E);
    kc = host(dk, elems);
    vc = host(dv, elems);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < NKV; h++)
            for (int d = 0; d < HD; d++) {
                size_t o = (((size_t)(slots[t] / 16) * NKV + h) * 16 + slots[t] % 16) * HD + d;
                if (kc[o] != qkv[(size_t)t * stride + (4 + h) * HD + d] ||
                    vc[o] != qkv[(size_t)t * stride + (4 + NKV + h) * HD + d])
                    bad++;
            }
    printf("  %-52s %d mismatches\n", "kv_write (20 tokens, scattered slots)", bad);
    CHECK_INT(bad, 0);
    X.ops->free(&X, dqkv);
    X.ops->free(&X, dk);
    X.ops->free(&X, dv);
    X.ops->free(&X, ds);
    free(qkv);
    free(zeros);
    free(kc);
    free(vc);
}

/* ---- norms, activations, rope, embedding, add ----------------------- */

static void test_norm(hs_exec_norm kind, int tokens, int hidden)
{
    size_t n = (size_t)tokens * hidden;
    float *x = rnd(n, 2.0), *g = rnd((size_t)hidden, 1.0), *b = rnd((size_t)hidden, 1.0), *y;
    double *ref = xmalloc(n * sizeof *ref);
    void *dx = dev_from(x, n), *dg = dev_from(g, (size_t)hidden), *db = dev_from(b, (size_t)hidden),
         *dy = dev(n);
    char what[96];
    for (int t = 0; t < tokens; t++) {
        const float *r = x + (size_t)t * hidden;
        double mean = 0, var = 0;
        if (kind == HS_EXEC_LAYERNORM) {
            for (int d = 0; d < hidden; d++) mean += r[d];
            mean /= hidden;
        }
        for (int d = 0; d < hidden; d++) var += (r[d] - mean) * (r[d] - mean);
        var /= hidden;
        for (int d = 0; d < hidden; d++)
            ref[(size_t)t * hidden + d] = (r[d] - mean) / sqrt(var + 1e-5) * g[d] +
                                          (kind == HS_EXEC_LAYERNORM ? b[d] : 0);
    }
    CHECK_OK(X.ops->norm(&X, kind, dy, dx, dg, db, tokens, hidden, 1e-5f, &E), &E);
    y = host(dy, n);
    snprintf(what, sizeof what, "%s tokens=%d hidden=%d",
             kind == HS_EXEC_LAYERNORM ? "layernorm" : "rmsnorm", tokens, hidden);
    check_close(what, y, ref, n, TOL);
    X.ops->free(&X, dx);
    X.ops->free(&X, dg);
    X.ops->free(&X, db);
    X.ops->free(&X, dy);
    free(x);
    free(g);
    free(b);
    free(y);
    free(ref);
}

static double ref_act(hs_exec_act kind, double v)
{
    if (kind == HS_EXEC_SILU) return v / (1 + exp(-v));
    if (kind == HS_EXEC_GELU) return 0.5 * v * (1 + erf(v / sqrt(2.0)));
    return v > 0 ? v : 0;
}

static void test_act(hs_exec_act kind, int gated)
{
    static const char *const names[] = {"silu", "gelu", "relu"};
    int tokens = 5, f = 300, w = gated ? 2 * f : f;
    float *x = rnd((size_t)tokens * w, 4.0), *y;
    double *ref = xmalloc((size_t)tokens * f * sizeof *ref);
    void *dx = dev_from(x, (size_t)tokens * w), *dy = dev((size_t)tokens * f);
    char what[96];
    for (int t = 0; t < tokens; t++)
        for (int j = 0; j < f; j++) {
            const float *r = x + (size_t)t * w;
            ref[(size_t)t * f + j] = gated ? ref_act(kind, r[j]) * r[f + j] : ref_act(kind, r[j]);
        }
    CHECK_OK(X.ops->act(&X, kind, gated, dy, dx, tokens, f, &E), &E);
    y = host(dy, (size_t)tokens * f);
    snprintf(what, sizeof what, "act %s%s", gated ? "gated " : "", names[kind]);
    check_close(what, y, ref, (size_t)tokens * f, TOL);
    X.ops->free(&X, dx);
    X.ops->free(&X, dy);
    free(x);
    free(y);
    free(ref);
}

static void test_rope(int hd)
{
    int tokens = 9, nrot = 5, nall = 7, stride = nall * hd, same = 1;
    size_t n = (size_t)tokens * stride;
    int32_t pos[9];
    float *x = rnd(n, 1.0), *y;
    double *ref = xmalloc(n * sizeof *ref);
    void *dx, *dp;
    char what[96];
    for (int t = 0; t < tokens; t++) pos[t] = t == 0 ? 0 : (int32_t)(urand() * 2000);
    dx = dev_from(x, n);
    dp = dev_ints(pos, (size_t)tokens);
    for (size_t i = 0; i < n; i++) ref[i] = x[i];
    for (int t = 0; t < tokens; t++)
        for (int h = 0; h < nrot; h++)
            for (int i = 0; i < hd / 2; i++) {
                size_t o = (size_t)t * stride + (size_t)h * hd;
                double ang = pos[t] * pow(10000.0, -2.0 * i / hd), c = cos(ang), s = sin(ang);
                ref[o + i] = x[o + i] * c - x[o + i + hd / 2] * s;
                ref[o + i + hd / 2] = x[o + i] * s + x[o + i + hd / 2] * c;
            }
    CHECK_OK(X.ops->rope(&X, dx, stride, tokens, nrot, hd, dp, 10000.0f, &E), &E);
    y = host(dx, n);
    snprintf(what, sizeof what, "rope hd=%d (positions up to 2000)", hd);
    check_close(what, y, ref, n, TOL);
    for (int t = 0; t < tokens; t++)   /* heads past n_heads are untouched */
        for (int i = nrot * hd; i < stride; i++)
            if (y[(size_t)t * stride + i] != x[(size_t)t * stride + i]) same = 0;
    CHECK(same);
    X.ops->free(&X, dx);
    X.ops->free(&X, dp);
    free(x);
    free(y);
    free(ref);
}

static void test_embed(int with_pos)
{
    enum { V = 50, H = 64, T = 9, P = 30 };
    float *tok = rnd((size_t)V * H, 1.0), *pos = rnd((size_t)P * H, 1.0), *y;
    double ref[T * H];
    int32_t ids[T], ps[T];
    void *dt = dev_from(tok, (size_t)V * H), *dp = dev_from(pos, (size_t)P * H), *dy = dev(T * H);
    void *di, *dps;
    for (int t = 0; t < T; t++) {
        ids[t] = (int32_t)(urand() * V);
        ps[t] = (int32_t)(urand() * P);
    }
    di = dev_ints(ids, T);
    dps = dev_ints(ps, T);
    for (int t = 0; t < T; t++)
        for (int d = 0; d < H; d++)
            ref[t * H + d] = (double)tok[ids[t] * H + d] + (with_pos ? pos[ps[t] * H + d] : 0);
    CHECK_OK(X.ops->embed(&X, dy, dt, with_pos ? dp : NULL, di, dps, T, H, &E), &E);
    y = host(dy, T * H);
    check_close(with_pos ? "embed + learned positions" : "embed", y, ref, T * H,
                with_pos ? TOL : 0);
    X.ops->free(&X, dt);
    X.ops->free(&X, dp);
    X.ops->free(&X, dy);
    X.ops->free(&X, di);
    X.ops->free(&X, dps);
    free(tok);
    free(pos);
    free(y);
}

static void test_add(void)
{
    size_t n = 1000;
    float *a = rnd(n, 1.0), *b = rnd(n, 1.0), *y;
    double *ref = xmalloc(n * sizeof *ref);
    void *da = dev_from(a, n), *db = dev_from(b, n), *dy = dev(n);
    for (size_t i = 0; i < n; i++) ref[i] = (double)a[i] + b[i];
    CHECK_OK(X.ops->add(&X, dy, da, db, n, &E), &E);
    y = host(dy, n);
    check_close("add", y, ref, n, TOL);
    X.ops->free(&X, da);
    X.ops->free(&X, db);
    X.ops->free(&X, dy);
    free(a);
    free(b);
    free(y);
    free(ref);
}

/* The timer measures something positive and hs_exec_measure returns a median. */
static int run_add(hs_exec *x, void *ctx, hs_err *err)
{
    void **b = ctx;
    return x->ops->add(x, b[0], b[1], b[2], (size_t)1 << 16, err);
}

static int run_add_n(hs_exec *x, void *ctx, hs_err *err)
{
    void **b = ctx;
    return x->ops->add(x, b[0], b[1], b[2], *(size_t *)b[3], err);
}

static void test_timing(void)
{
    /* On a GPU the big add must stand well clear of launch jitter in a
     * stream: 2^20 elements (6 MiB moved, ~1.5 us on an H200) once timed
     * below 2^16 there; 2^24 moves 96 MiB (~20 us). */
    size_t big = (size_t)1 << (strcmp(X.info.backend, "cpu") ? 24 : 20), small = (size_t)1 << 16;
    void *b[4] = {dev(big), dev(big), dev(big), NULL};
    hs_exec_timing t = {1, 3, 5, 100, 0, HS_EXEC_TIME_ALONE, 0};
    double us = -1, lo = -1, hi = -1;
    CHECK_OK(X.ops->fill_random(&X, b[1], big, 1, 1.0f, &E), &E);
    CHECK_OK(X.ops->fill_random(&X, b[2], big, 2, 1.0f, &E), &E);
    CHECK_OK(hs_exec_measure(&X, &t, run_add, b, &us, &E), &E);
    printf("  %-52s %.2f us\n", "median of an add of 65536 elements", us);
    CHECK(us > 0);
    /* cold and stream: positive, and in a stream 16 (CPU) or 256 (GPU)
     * times the work costs more (the difference of two bursts is not all
     * jitter) */
    t.flush_bytes = (size_t)8 << 20;
    t.mode = HS_EXEC_TIME_COLD;
    CHECK_OK(hs_exec_measure(&X, &t, run_add, b, &us, &E), &E);
    CHECK(us > 0);
    t.mode = HS_EXEC_TIME_STREAM;
    t.min_reps = 9;
    t.max_reps = 9;
    b[3] = &small;
    CHECK_OK(hs_exec_measure(&X, &t, run_add_n, b, &lo, &E), &E);
    b[3] = &big;
    CHECK_OK(hs_exec_measure(&X, &t, run_add_n, b, &hi, &E), &E);
    {
        char what[64];
        snprintf(what, sizeof what, "stream: add of 65536 / %zu elements", big);
        printf("  %-52s %.2f / %.2f us\n", what, lo, hi);
    }
    CHECK(lo > 0);
    CHECK(hi > lo);
    for (int i = 0; i < 3; i++) X.ops->free(&X, b[i]);
}

/* Marks on the stream (replay --op-times): mark 0 reads 0 and each mark
 * after an add reads later than the one before it; a mark or a count out
 * of range is refused. */
static void test_marks(void)
{
    size_t big = (size_t)1 << (strcmp(X.info.backend, "cpu") ? 24 : 20);
    void *b[3] = {dev(big), dev(big), dev(big)};
    double us[4] = {-1, -1, -1, -1};
    hs_err e = {0};
    CHECK(X.ops->mark != NULL && X.ops->marks_read != NULL);
    if (!X.ops->mark || !X.ops->marks_read) return;
    CHECK_OK(X.ops->fill_random(&X, b[1], big, 1, 1.0f, &E), &E);
    CHECK_OK(X.ops->fill_random(&X, b[2], big, 2, 1.0f, &E), &E);
    CHECK_OK(X.ops->mark(&X, 0, &E), &E);
    for (int i = 1; i <= 3; i++) {
        CHECK_OK(X.ops->add(&X, b[0], b[1], b[2], big, &E), &E);
        CHECK_OK(X.ops->mark(&X, i, &E), &E);
    }
    CHECK_OK(X.ops->marks_read(&X, 4, us, &E), &E);
    printf("  %-52s %.2f / %.2f / %.2f us\n", "marks after each of three adds", us[1], us[2], us[3]);
    CHECK(us[0] == 0);
    for (int i = 1; i <= 3; i++) CHECK(us[i] > us[i - 1]);
    CHECK(X.ops->mark(&X, HS_EXEC_MAX_MARKS, &e) == HS_ERANGE);
    CHECK(X.ops->marks_read(&X, 0, us, &e) == HS_ERANGE);
    for (int i = 0; i < 3; i++) X.ops->free(&X, b[i]);
}

/* read_bytes only reads: the buffer is unchanged, tail bytes included. */
static void test_read_bytes(void)
{
    size_t n = ((size_t)1 << 20) + 13;
    void *d = dev(n);
    uint8_t *h0 = malloc(n), *h1 = malloc(n);
    CHECK(h0 && h1);
    if (h0 && h1) {
        CHECK_OK(X.ops->fill_bytes(&X, d, n, 7, &E), &E);
        CHECK_OK(X.ops->download_bytes(&X, h0, d, n, &E), &E);
        CHECK_OK(X.ops->read_bytes(&X, d, n, &E), &E);
        CHECK_OK(X.ops->read_bytes(&X, d, 0, &E), &E);
        CHECK_OK(X.ops->download_bytes(&X, h1, d, n, &E), &E);
        CHECK(!memcmp(h0, h1, n));
    }
    free(h0);
    free(h1);
    X.ops->free(&X, d);
}

int main(int argc, char **argv)
{
    const char *backend = argc > 1 ? argv[1] : "cpu";
    int rc;
    rng = argc > 2 ? strtoull(argv[2], NULL, 10) : (uint64_t)time(NULL);
    if (!rng) rng = 1;
    printf("backend %s, seed %llu\n", backend, (unsigned long long)rng);
    rc = hs_exec_open(&X, backend, -1, &E);
    if (rc == HS_ENOTFOUND || rc == HS_EUNSUPPORTED) {
        printf("SKIP: %s\n", E.msg);
        return 77;
    }
    CHECK_OK(rc, &E);
    if (rc) return hs_check_result();
    printf("device %s (%s), dtype %s\n", X.info.device, X.info.detail,
           hs_exec_dtype_name(X.info.dtype));
    TOL = X.info.dtype == HS_EXEC_FP32 ? 2e-5 : X.info.dtype == HS_EXEC_FP16 ? 3e-3 : 2e-2;

    for (int b = 0; b < 3; b++) {
        int bits = b == 0 ? 16 : b == 1 ? 8 : 4;
        test_gemm(1, 40, 256, bits);
        test_gemm(3, 96, 200, bits);
        test_gemm(16, 33, 131, bits);   /* odd k: INT4 packing, partial group */
        test_gemm(17, 40, 256, bits);   /* CUDA: dequantise + cuBLAS from here */
        test_gemm(64, 96, 300, bits);
    }
    test_prefill(4, 2, 64);
    test_prefill(3, 3, 128);
    test_prefill(8, 1, 80);
    test_decode(4, 2, 64);
    test_decode(3, 3, 128);
    test_decode(8, 1, 80);
    test_decode_split();
    test_prefill_long();
    test_kv_write();
    test_norm(HS_EXEC_RMSNORM, 7, 256);
    test_norm(HS_EXEC_RMSNORM, 3, 1000);
    test_norm(HS_EXEC_LAYERNORM, 7, 256);
    test_norm(HS_EXEC_LAYERNORM, 3, 1000);
    for (int k = 0; k < 3; k++) {
        test_act((hs_exec_act)k, 1);
        test_act((hs_exec_act)k, 0);
    }
    test_rope(64);
    test_rope(128);
    test_embed(0);
    test_embed(1);
    test_add();
    test_timing();
    test_marks();
    test_read_bytes();
    hs_exec_close(&X);
    return hs_check_result();
}
