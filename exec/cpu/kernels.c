/* kernels.c - the CPU backend's layer work other than GEMMs: embedding,
 * norms, activations, residual add, rotary embedding, KV-cache writes and
 * attention over the paged cache.  Plain FP32 loops on one thread; layouts
 * as in exec.h.  Attention computes exact softmax (max-subtracted) per
 * query row over the keys it may see. */
#include "cpu/cpu.h"

#include <math.h>
#include <string.h>

int hs__cpu_embed(hs_exec *x, void *out, const void *tok, const void *pos, const int32_t *ids,
                  const int32_t *positions, int tokens, int hidden, hs_err *err)
{
    float *o = out;
    const float *t = tok, *p = pos;
    (void)x;
    (void)err;
    for (int i = 0; i < tokens; i++) {
        const float *tr = t + (size_t)ids[i] * hidden;
        float *orow = o + (size_t)i * hidden;
        if (p) {
            const float *pr = p + (size_t)positions[i] * hidden;
            for (int d = 0; d < hidden; d++) orow[d] = tr[d] + pr[d];
        } else {
            memcpy(orow, tr, (size_t)hidden * sizeof *orow);
        }
    }
    return 0;
}

int hs__cpu_norm(hs_exec *x, hs_exec_norm kind, void *out, const void *in, const void *gamma,
                 const void *beta, int tokens, int hidden, float eps, hs_err *err)
{
    float *o = out;
    const float *xi = in, *g = gamma, *b = beta;
    (void)x;
    (void)err;
    for (int t = 0; t < tokens; t++) {
        const float *r = xi + (size_t)t * hidden;
        float *w = o + (size_t)t * hidden;
        double mean = 0, var = 0;
        float inv;
        if (kind == HS_EXEC_LAYERNORM) {
            for (int d = 0; d < hidden; d++) mean += r[d];
            mean /= hidden;
        }
        for (int d = 0; d < hidden; d++) var += (r[d] - mean) * (r[d] - mean);
        inv = (float)(1.0 / sqrt(var / hidden + eps));
        for (int d = 0; d < hidden; d++) {
            float v = (float)(r[d] - mean) * inv * g[d];
            w[d] = b && kind == HS_EXEC_LAYERNORM ? v + b[d] : v;
        }
    }
    return 0;
}

static float act1(hs_exec_act kind, float v)
{
    switch (kind) {
    case HS_EXEC_SILU: return v / (1.0f + expf(-v));
    case HS_EXEC_GELU: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    default: return v > 0 ? v : 0;
    }
}

int hs__cpu_act(hs_exec *x, hs_exec_act kind, int gated, void *out, const void *in, int tokens,
                int f, hs_err *err)
{
    float *o = out;
    const float *xi = in;
    (void)x;
    (void)err;
    for (int t = 0; t < tokens; t++) {
        const float *r = xi + (size_t)t * f * (gated ? 2 : 1);
        float *w = o + (size_t)t * f;
        for (int j = 0; j < f; j++) w[j] = gated ? act1(kind, r[j]) * r[f + j] : act1(kind, r[j]);
    }
    return 0;
}

int hs__cpu_add(hs_exec *x, void *out, const void *a, const void *b, size_t n, hs_err *err)
{
    float *o = out;
    const float *p = a, *q = b;
    (void)x;
    (void)err;
    for (size_t i = 0; i < n; i++) o[i] = p[i] + q[i];
    return 0;
}

int hs__cpu_rope(hs_exec *x, void *qk, int stride, int tokens, int n_heads, int head_dim,
                 const int32_t *positions, float theta, hs_err *err)
{
    float *base = qk;
    int half = head_dim / 2;
    (void)x;
    if (head_dim % 2) return hs_errf(err, HS_EINVAL, "rope: odd head_dim %d", head_dim);
    /* One angle per (token, pair), shared by every head; in double, so
     * large positions keep their precision. */
    for (int t = 0; t < tokens; t++)
        for (int i = 0; i < half; i++) {
            double ang = positions[t] * pow(theta, -2.0 * i / head_dim);
            float c = (float)cos(ang), s = (float)sin(ang);
            for (int h = 0; h < n_heads; h++) {
                float *v = base + (size_t)t * stride + (size_t)h * head_dim;
                float x0 = v[i], x1 = v[i + half];
                v[i] = x0 * c - x1 * s;
                v[i + half] = x0 * s + x1 * c;
            }
        }
    return 0;
}

/* Offset of (block, kv head, row) in a cache of the exec.h layout. */
static size_t cache_off(int32_t block, int h, int row, int kv_heads, int head_dim)
{
    return (((size_t)block * kv_heads + h) * HS_EXEC_KV_BLOCK + row) * head_dim;
}

int hs__cpu_kv_write(hs_exec *x, void *k_cache, void *v_cache, const void *k, const void *v,
                     int stride, int tokens, int kv_heads, int head_dim, const int32_t *slots,
                     hs_err *err)
{
    float *kc = k_cache, *vc = v_cache;
    const float *ks = k, *vs = v;
    (void)x;
    (void)err;
    for (int t = 0; t < tokens; t++) {
        int32_t blk = slots[t] / HS_EXEC_KV_BLOCK, row = slots[t] % HS_EXEC_KV_BLOCK;
        for (int h = 0; h < kv_heads; h++) {
            size_t o = cache_off(blk, h, row, kv_heads, head_dim);
            memcpy(kc + o, ks + (size_t)t * stride + (size_t)h * head_dim,
                   (size_t)head_dim * sizeof *kc);
            memcpy(vc + o, vs + (size_t)t * stride + (size_t)h * head_dim,
                   (size_t)head_dim * sizeof *vc);
        }
    }
    return 0;
}

/* One query row of one head over keys 0..nkeys-1 of a sequence. */
static void attend(const hs_exec_attn *a, const float *q, const int32_t *bt, int kvh, int nkeys,
                   float *scores, float *out)
{
    const float *kc = a->k_cache, *vc = a->v_cache;
    int hd = a->head_dim;
    float mx = -INFINITY, sum = 0;
    for (int j = 0; j < nkeys; j++) {
        const float *kr = kc + cache_off(bt[j / HS_EXEC_KV_BLOCK], kvh, j % HS_EXEC_KV_BLOCK,
                                         a->kv_heads, hd);
        float s = 0;
        for (int d = 0; d < hd; d++) s += q[d] * kr[d];
        scores[j] = s * a->scale;
        if (scores[j] > mx) mx = scores[j];
    }
    memset(out, 0, (size_t)hd * sizeof *out);
    for (int j = 0; j < nkeys; j++) {
        const float *vr = vc + cache_off(bt[j / HS_EXEC_KV_BLOCK], kvh, j % HS_EXEC_KV_BLOCK,
                                         a->kv_heads, hd);
        float p = expf(scores[j] - mx);
        sum += p;
        for (int d = 0; d < hd; d++) out[d] += p * vr[d];
    }
    for (int d = 0; d < hd; d++) out[d] /= sum;
}

static int check_attn(const hs_exec_attn *a, hs_err *err)
{
    if (a->n_seqs < 1 || a->heads < 1 || a->kv_heads < 1 || a->head_dim < 1 ||
        a->heads < a->kv_heads)
        return hs_errf(err, HS_EINVAL, "attention: bad shape (%d seqs, %d heads, %d kv heads, head_dim %d)",
                       a->n_seqs, a->heads, a->kv_heads, a->head_dim);
    return 0;
}

int hs__cpu_attention_prefill(hs_exec *x, const hs_exec_attn *a, hs_err *err)
{
    hs__cpu *c = x->priv;
    const float *q = a->q;
    float *out = a->out;
    int rc, nh = a->heads, hd = a->head_dim;
    size_t most = 0;
    if ((rc = check_attn(a, err))) return rc;
    for (int s = 0; s < a->n_seqs; s++) {
        const int32_t *si = a->seq_info + 3 * s;
        if ((size_t)si[1] + si[2] > most) most = (size_t)si[1] + si[2];
    }
    if ((rc = hs__cpu_reserve(&c->scores, &c->scores_n, most ? most : 1, err))) return rc;
    for (int s = 0; s < a->n_seqs; s++) {
        const int32_t *si = a->seq_info + 3 * s, *bt = a->block_tables + (size_t)s * a->max_blocks;
        for (int i = 0; i < si[1]; i++) {
            size_t row = (size_t)si[0] + i;
            for (int h = 0; h < nh; h++)
                attend(a, q + row * a->q_stride + (size_t)h * hd, bt,
                       (int)((long)h * a->kv_heads / nh), si[2] + i + 1, c->scores,
                       out + row * nh * hd + (size_t)h * hd);
        }
    }
    return 0;
}

int hs__cpu_attention_decode(hs_exec *x, const hs_exec_attn *a, hs_err *err)
{
    hs__cpu *c = x->priv;
    const float *q = a->q;
    float *out = a->out;
    int rc, nh = a->heads, hd = a->head_dim, most = 1;
    if ((rc = check_attn(a, err))) return rc;
    for (int s = 0; s < a->n_seqs; s++)
        if (a->seq_info[s] > most) most = a->seq_info[s];
    if ((rc = hs__cpu_reserve(&c->scores, &c->scores_n, (size_t)most, err))) return rc;
    for (int s = 0; s < a->n_seqs; s++) {
        const int32_t *bt = a->block_tables + (size_t)s * a->max_blocks;
        for (int h = 0; h < nh; h++)
            attend(a, q + (size_t)s * a->q_stride + (size_t)h * hd, bt,
                   (int)((long)h * a->kv_heads / nh), a->seq_info[s], c->scores,
                   out + (size_t)s * nh * hd + (size_t)h * hd);
    }
    return 0;
}
