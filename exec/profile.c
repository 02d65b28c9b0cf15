/* profile.c - `hetsim-exec profile`: sweeps the work of one layer over
 * token counts, decode (batch x context) and prefill (chunk x prefix)
 * grids on one backend and writes the measured tables; see profile.h and
 * exec/README.md for the format.
 *
 * What one measurement covers:
 *   dense ops   one kernel (or, for quantised GEMMs, the dequantise step
 *               and the GEMM) on random inputs of `tokens` rows
 *   decode      writing each sequence's new K/V into the paged cache, then
 *               paged attention of one query per sequence over `context`
 *               cached tokens (the new one included)
 *   prefill     writing the chunk's K/V into the cache, then causal
 *               attention of `chunk` queries over prefix + chunk tokens
 * Block tables are scattered: sequences take blocks from a shuffled pool.
 * Grid points whose KV does not fit in the pool (sized from the usable
 * memory left after the weights and buffers) are left out and counted on
 * stderr.  Every number is a median (hs_exec_measure). */
#include "profile.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hw/hw.h"
#include "layer.h"
#include "core/time.h"

/* ---- grids --------------------------------------------------------- */

typedef struct grid {
    const int *v;
    int n;
} grid;
#define GRID(a) { a, (int)(sizeof a / sizeof a[0]) }

/* The dense ops' token counts on a GPU (165): 1, 2, 4, 8, then every 8
 * tokens to 32, every 16 to 1,024, every 32 to 2,048, every 64 to 4,096
 * and every 128 to 8,192 (Vidur's tables step by 8 to 64).  A GEMM's time
 * is a staircase in the token count (the wave of tiles that starts at 257,
 * 513, 1,025 or 2,049 tokens costs 9-20% on an H200), and a grid of powers
 * of two sits on the cheap side of each step: interpolated from the old 25
 * counts, Vidur's A100 GEMMs (eight models, 65-4,096 tokens) come out
 * 0.2-5.1% fast at the median, p90 9.5-33%; from these 165, within 0.9% at
 * the median, p90 3-8% (the first tokens of a wave; tools/bench-fidelity
 * section 7). */
static const int gpu_tok_steps[][2] = {{8, 32}, {16, 1024}, {32, 2048}, {64, 4096}, {128, 8192}};
static int gpu_tok[200];
static const int gpu_tok_q[] = {1, 8, 32, 128, 512, 2048, 4096};
static const int gpu_batch[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
static const int gpu_batch_q[] = {1, 8, 64, 256};
static const int gpu_ctx[] = {16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
static const int gpu_ctx_q[] = {128, 1024, 4096};
static const int gpu_chunk[] = {16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
static const int gpu_chunk_q[] = {16, 128, 512, 2048};
static const int gpu_prefix[] = {0, 256, 512, 1024, 2048, 4096, 8192, 16384};
static const int gpu_prefix_q[] = {0, 1024, 4096};

static const int cpu_tok[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
static const int cpu_tok_q[] = {1, 4, 16, 64, 256};
static const int cpu_batch[] = {1, 2, 4, 8, 16, 32};
static const int cpu_batch_q[] = {1, 4, 16};
static const int cpu_ctx[] = {16, 64, 256, 1024, 2048};
static const int cpu_ctx_q[] = {16, 128, 512};
static const int cpu_chunk[] = {16, 64, 256, 1024};
static const int cpu_chunk_q[] = {16, 64, 256};
static const int cpu_prefix[] = {0, 256, 1024};
static const int cpu_prefix_q[] = {0, 256};

#define HEAD_MAX_TOKENS 1024   /* lm_head rows are sampled sequences */

typedef struct grids {
    grid tok, batch, ctx, chunk, prefix;
    hs_exec_timing t;
} grids;

/* Fills gpu_tok from gpu_tok_steps; returns its length (the same every
 * call: the fill is deterministic). */
static int gpu_tok_grid(void)
{
    const int cap = (int)(sizeof gpu_tok / sizeof gpu_tok[0]);
    int n = 0;
    for (int t = 1; t <= 8; t *= 2) gpu_tok[n++] = t;
    for (size_t k = 0; k < sizeof gpu_tok_steps / sizeof gpu_tok_steps[0]; k++)
        for (int st = gpu_tok_steps[k][0], t = (gpu_tok[n - 1] / st + 1) * st; t <= gpu_tok_steps[k][1] && n < cap;
             t += st)
            gpu_tok[n++] = t;
    assert(gpu_tok[n - 1] == gpu_tok_steps[sizeof gpu_tok_steps / sizeof gpu_tok_steps[0] - 1][1]);
    return n;
}

static void pick_grids(grids *g, int gpu, int quick)
{
    static const grid gtq = GRID(gpu_tok_q), gb = GRID(gpu_batch),
                      gbq = GRID(gpu_batch_q), gc = GRID(gpu_ctx), gcq = GRID(gpu_ctx_q),
                      gk = GRID(gpu_chunk), gkq = GRID(gpu_chunk_q), gp = GRID(gpu_prefix),
                      gpq = GRID(gpu_prefix_q);
    static const grid ct = GRID(cpu_tok), ctq = GRID(cpu_tok_q), cb = GRID(cpu_batch),
                      cbq = GRID(cpu_batch_q), cc = GRID(cpu_ctx), ccq = GRID(cpu_ctx_q),
                      ck = GRID(cpu_chunk), ckq = GRID(cpu_chunk_q), cp = GRID(cpu_prefix),
                      cpq = GRID(cpu_prefix_q);
    if (gpu) {
        g->tok = quick ? gtq : (grid){gpu_tok, gpu_tok_grid()};
        g->batch = quick ? gbq : gb;
        g->ctx = quick ? gcq : gc;
        g->chunk = quick ? gkq : gk;
        g->prefix = quick ? gpq : gp;
        g->t = quick ? (hs_exec_timing){2, 5, 50, 5000, 0, HS_EXEC_TIME_ALONE, 0} : (hs_exec_timing){3, 10, 200, 20000, 0, HS_EXEC_TIME_ALONE, 0};
    } else {
        g->tok = quick ? ctq : ct;
        g->batch = quick ? cbq : cb;
        g->ctx = quick ? ccq : cc;
        g->chunk = quick ? ckq : ck;
        g->prefix = quick ? cpq : cp;
        g->t = quick ? (hs_exec_timing){1, 3, 10, 2000, 0, HS_EXEC_TIME_ALONE, 0} : (hs_exec_timing){1, 5, 50, 20000, 0, HS_EXEC_TIME_ALONE, 0};
    }
}

static int grid_max(const grid *g)
{
    int m = 0;
    for (int i = 0; i < g->n; i++)
        if (g->v[i] > m) m = g->v[i];
    return m;
}

/* ---- result rows --------------------------------------------------- */

typedef struct row {
    const char *op;            /* dense only */
    int a, b, c;               /* dense: tp, bits, tokens; decode: tp, batch, context;
                                  prefill: tp, chunk, prefix */
    double us;
    hs_gpumon_stats clk;       /* the clocks while it was timed (n 0: not monitored) */
} row;

typedef struct table {
    row *r;
    size_t n, cap;
} table;

static int rows_add(table *t, const char *op, int a, int b, int c, double us,
                    const hs_gpumon_stats *clk, hs_err *err)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        row *r = realloc(t->r, cap * sizeof *r);
        if (!r) return hs_errf(err, HS_ENOMEM, "out of memory (result rows)");
        t->r = r;
        t->cap = cap;
    }
    t->r[t->n++] = (row){op, a, b, c, us, *clk};
    return 0;
}

/* ---- the workspace of one TP degree -------------------------------- */

enum { OP_EMB, OP_NORM, OP_QKV, OP_ROPE, OP_ATTN_OUT, OP_MLP_UP, OP_ACT, OP_MLP_DOWN, OP_ADD,
       OP_LM_HEAD, N_OPS };
static const char *const op_names[N_OPS] = {"emb", "norm", "qkv", "rope", "attn_out",
                                            "mlp_up", "act", "mlp_down", "add", "lm_head"};

typedef struct ws {
    hs_exec *x;
    hs_exec_shape s;
    size_t es;                 /* bytes per element */
    double used;               /* bytes allocated on the device */
    int rows;                  /* token rows of the activation buffers */
    int32_t *ids, *pos, *slots, *info, *bt;   /* device */
    void *emb, *pos_tab, *gamma, *beta;
    void *xa, *ya, *za, *qkv, *att, *up, *act, *logits;
    hs_exec_weight head;       /* lm_head: borrows emb's buffer */
    hs_exec_weight w[4];       /* qkv, attn_out, mlp_up, mlp_down at the current bits */
    void *kc, *vc;             /* KV pool */
    int pool;                  /* blocks in the pool */
    double pool_bytes;         /* its K and V, bytes */
    int32_t *perm;             /* host: shuffled pool block ids */
} ws;

static int ws_alloc(ws *w, void **p, size_t bytes, hs_err *err)
{
    int rc = w->x->ops->alloc(w->x, p, bytes ? bytes : 1, err);
    if (!rc) w->used += (double)bytes;
    return rc;
}

static void ws_free_gemm_weights(ws *w)
{
    for (int i = 0; i < 4; i++) {
        if (w->w[i].data) {
            double b = w->w[i].bits == 16 ? (double)w->w[i].n * w->w[i].k * w->es
                                          : (double)w->w[i].n * w->w[i].ld +
                                                2.0 * w->w[i].n * w->w[i].groups * w->es;
            w->used -= b;
        }
        hs_exec_weight_free(w->x, &w->w[i]);
    }
}

static void ws_free(ws *w)
{
    hs_exec *x = w->x;
    void *bufs[] = {w->ids, w->pos, w->slots, w->info, w->bt, w->emb, w->pos_tab, w->gamma,
                    w->beta, w->xa, w->ya, w->za, w->qkv, w->att, w->up, w->act, w->logits,
                    w->kc, w->vc};
    if (!x) return;
    ws_free_gemm_weights(w);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) x->ops->free(x, bufs[i]);
    free(w->perm);
    memset(w, 0, sizeof *w);
}

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uploads n int32 values uniform in [0, bound) to dst. */
static int upload_ids(hs_exec *x, int32_t *dst, int n, int bound, uint64_t seed, hs_err *err)
{
    int32_t *h = malloc((size_t)n * sizeof *h);
    int rc;
    if (!h) return hs_errf(err, HS_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) h[i] = (int32_t)(mix64(seed + (uint64_t)i) % (uint64_t)bound);
    rc = x->ops->upload_bytes(x, dst, h, (size_t)n * sizeof *h, err);
    free(h);
    return rc;
}

/* Activation buffers and the embedding for `rows` tokens. */
static int ws_open(ws *w, hs_exec *x, const hs_exec_shape *s, int rows, hs_err *err)
{
    const hs_exec_ops *o = x->ops;
    size_t es = (size_t)x->info.elem_bytes, R = (size_t)rows;
    int head_rows = rows < HEAD_MAX_TOKENS ? rows : HEAD_MAX_TOKENS, rc;
    memset(w, 0, sizeof *w);
    w->x = x;
    w->s = *s;
    w->es = es;
    w->rows = rows;
    if ((rc = ws_alloc(w, (void **)&w->ids, R * 4, err)) ||
        (rc = ws_alloc(w, (void **)&w->pos, R * 4, err)) ||
        (rc = ws_alloc(w, (void **)&w->slots, R * 4, err)) ||
        (rc = ws_alloc(w, (void **)&w->info, 3 * R * 4, err)) ||
        (rc = ws_alloc(w, &w->emb, (size_t)s->vocab * s->hidden * es, err)) ||
        (s->learned_pos && (rc = ws_alloc(w, &w->pos_tab, (size_t)s->max_pos * s->hidden * es, err))) ||
        (rc = ws_alloc(w, &w->gamma, (size_t)s->hidden * es, err)) ||
        (rc = ws_alloc(w, &w->beta, (size_t)s->hidden * es, err)) ||
        (rc = ws_alloc(w, &w->xa, R * s->hidden * es, err)) ||
        (rc = ws_alloc(w, &w->ya, R * s->hidden * es, err)) ||
        (rc = ws_alloc(w, &w->za, R * s->hidden * es, err)) ||
        (rc = ws_alloc(w, &w->qkv, R * s->qkv_n * es, err)) ||
        (rc = ws_alloc(w, &w->att, R * s->attn_k * es, err)) ||
        (rc = ws_alloc(w, &w->up, R * s->up_n * es, err)) ||
        (rc = ws_alloc(w, &w->act, R * s->ffn * es, err)) ||
        (rc = ws_alloc(w, &w->logits, (size_t)head_rows * s->vocab * es, err)))
        goto fail;
    if ((rc = upload_ids(x, w->ids, rows, s->vocab, 11, err)) ||
        (rc = upload_ids(x, w->pos, rows, s->max_pos, 12, err)) ||
        (rc = o->fill_random(x, w->emb, (size_t)s->vocab * s->hidden, 13, 1.0f, err)) ||
        (w->pos_tab && (rc = o->fill_random(x, w->pos_tab, (size_t)s->max_pos * s->hidden, 14, 1.0f, err))) ||
        (rc = o->fill_random(x, w->gamma, (size_t)s->hidden, 15, 1.0f, err)) ||
        (rc = o->fill_random(x, w->beta, (size_t)s->hidden, 16, 1.0f, err)) ||
        (rc = o->fill_random(x, w->xa, R * s->hidden, 17, 1.0f, err)) ||
        (rc = o->fill_random(x, w->ya, R * s->hidden, 18, 1.0f, err)) ||
        (rc = o->fill_random(x, w->qkv, R * s->qkv_n, 19, 1.0f, err)) ||
        (rc = o->fill_random(x, w->att, R * s->attn_k, 20, 1.0f, err)) ||
        (rc = o->fill_random(x, w->up, R * s->up_n, 21, 1.0f, err)) ||
        (rc = o->fill_random(x, w->act, R * s->ffn, 22, 1.0f, err)))
        goto fail;
    w->head = (hs_exec_weight){.n = s->vocab, .k = s->hidden, .bits = 16, .data = w->emb};
    return 0;
fail:
    ws_free(w);
    return rc;
}

/* The four GEMM weights of a layer at `bits`. */
static int ws_gemm_weights(ws *w, int bits, hs_err *err)
{
    const hs_exec_shape *s = &w->s;
    const int nk[4][2] = {{s->qkv_n, s->hidden}, {s->hidden, s->attn_k},
                          {s->up_n, s->hidden}, {s->hidden, s->ffn}};
    int rc;
    ws_free_gemm_weights(w);
    for (int i = 0; i < 4; i++) {
        hs_exec_weight *t = &w->w[i];
        if ((rc = hs_exec_weight_alloc(w->x, t, nk[i][0], nk[i][1], bits, err)) ||
            (rc = hs_exec_weight_random(w->x, t, 100 + (uint64_t)i, 1.0f / sqrtf((float)nk[i][1]), err)))
            return rc;
        w->used += bits == 16 ? (double)t->n * t->k * w->es
                              : (double)t->n * t->ld + 2.0 * t->n * t->groups * w->es;
    }
    return 0;
}

/* The KV pool: as many blocks as the largest grid point needs, within the
 * memory left. */
/* A pool of `need` blocks, or of min_gib GiB (K and V) when that is more:
 * a step's attention reads blocks scattered over the whole cache (130 GB
 * for Llama-2-7B on an H200), the grid's largest point needs a few GB. */
static int ws_pool(ws *w, int need, double min_gib, hs_err *err)
{
    const hs_exec_shape *s = &w->s;
    double blk = (double)s->kv_heads * HS_EXEC_KV_BLOCK * s->head_dim * w->es;  /* one of K, V */
    double left = 0.7 * (w->x->info.mem_usable - w->used);
    double fit = left > 0 ? floor(left / (2 * blk)) : 0;
    double want = ceil(min_gib * 1073741824.0 / (2 * blk));
    size_t elems;
    int rc;
    if (want > need) need = want < 1 << 30 ? (int)want : 1 << 30;
    w->pool = need < fit ? need : (int)fit;
    if (w->pool < 1) w->pool = 1;
    w->pool_bytes = 2 * blk * w->pool;
    elems = (size_t)w->pool * s->kv_heads * HS_EXEC_KV_BLOCK * s->head_dim;
    if ((rc = ws_alloc(w, &w->kc, elems * w->es, err)) ||
        (rc = ws_alloc(w, &w->vc, elems * w->es, err)) ||
        (rc = ws_alloc(w, (void **)&w->bt, (size_t)w->pool * 4, err)) ||
        (rc = w->x->ops->fill_random(w->x, w->kc, elems, 30, 1.0f, err)) ||
        (rc = w->x->ops->fill_random(w->x, w->vc, elems, 31, 1.0f, err)))
        return rc;
    if (!(w->perm = malloc((size_t)w->pool * sizeof *w->perm)))
        return hs_errf(err, HS_ENOMEM, "out of memory (block pool)");
    for (int i = 0; i < w->pool; i++) w->perm[i] = i;
    for (int i = w->pool - 1; i > 0; i--) {
        int j = (int)(mix64(77 + (uint64_t)i) % (uint64_t)(i + 1));
        int32_t t = w->perm[i];
        w->perm[i] = w->perm[j];
        w->perm[j] = t;
    }
    return 0;
}

/* ---- timed work ----------------------------------------------------- */

typedef struct dense_job {
    ws *w;
    int op, tokens;
} dense_job;

static int run_dense(hs_exec *x, void *ctx, hs_err *err)
{
    const dense_job *j = ctx;
    ws *w = j->w;
    const hs_exec_shape *s = &w->s;
    const hs_exec_ops *o = x->ops;
    int T = j->tokens;
    switch (j->op) {
    case OP_EMB:
        return o->embed(x, w->xa, w->emb, w->pos_tab, w->ids, w->pos, T, s->hidden, err);
    case OP_NORM:
        return o->norm(x, s->norm, w->ya, w->xa, w->gamma, w->beta, T, s->hidden, s->norm_eps, err);
    case OP_QKV: return o->gemm(x, w->qkv, w->ya, &w->w[0], T, err);
    case OP_ROPE:
        return o->rope(x, w->qkv, s->qkv_n, T, s->heads + s->kv_heads, s->head_dim, w->pos,
                       s->rope_theta, err);
    case OP_ATTN_OUT: return o->gemm(x, w->za, w->att, &w->w[1], T, err);
    case OP_MLP_UP: return o->gemm(x, w->up, w->ya, &w->w[2], T, err);
    case OP_ACT: return o->act(x, s->act, s->gated, w->act, w->up, T, s->ffn, err);
    case OP_MLP_DOWN: return o->gemm(x, w->za, w->act, &w->w[3], T, err);
    case OP_ADD: return o->add(x, w->za, w->xa, w->ya, (size_t)T * s->hidden, err);
    default: return o->gemm(x, w->logits, w->ya, &w->head, T, err);
    }
}

typedef struct attn_job {
    ws *w;
    hs_exec_attn a;
    int tokens;                /* new K/V rows written */
    int decode;
} attn_job;

static int run_attn(hs_exec *x, void *ctx, hs_err *err)
{
    const attn_job *j = ctx;
    const ws *w = j->w;
    const hs_exec_shape *s = &w->s;
    const char *q = w->qkv;
    int rc = x->ops->kv_write(x, w->kc, w->vc, q + (size_t)s->heads * s->head_dim * w->es,
                              q + (size_t)(s->heads + s->kv_heads) * s->head_dim * w->es,
                              s->qkv_n, j->tokens, s->kv_heads, s->head_dim, w->slots, err);
    if (rc) return rc;
    return j->decode ? x->ops->attention_decode(x, &j->a, err)
                     : x->ops->attention_prefill(x, &j->a, err);
}

static void attn_base(hs_exec_attn *a, const ws *w)
{
    const hs_exec_shape *s = &w->s;
    memset(a, 0, sizeof *a);
    a->heads = s->heads;
    a->kv_heads = s->kv_heads;
    a->head_dim = s->head_dim;
    a->scale = 1.0f / sqrtf((float)s->head_dim);
    a->q = w->qkv;
    a->q_stride = s->qkv_n;
    a->out = w->att;
    a->k_cache = w->kc;
    a->v_cache = w->vc;
    a->block_tables = w->bt;
    a->seq_info = w->info;
}

/* Block tables of n sequences of nb blocks each (consecutive runs of the
 * shuffled pool), the slots of `per` new tokens per sequence at positions
 * first..first+per-1, and the device copies. */
static int upload_tables(ws *w, int n, int nb, int first, int per, const int32_t *info,
                         int n_info, hs_err *err)
{
    hs_exec *x = w->x;
    int32_t *slots = malloc((size_t)n * per * sizeof *slots);
    int rc;
    if (!slots) return hs_errf(err, HS_ENOMEM, "out of memory");
    for (int s = 0; s < n; s++)
        for (int t = 0; t < per; t++) {
            int p = first + t;
            slots[s * per + t] = w->perm[s * nb + p / HS_EXEC_KV_BLOCK] * HS_EXEC_KV_BLOCK +
                                 p % HS_EXEC_KV_BLOCK;
        }
    rc = x->ops->upload_bytes(x, w->bt, w->perm, (size_t)n * nb * sizeof *w->perm, err);
    if (!rc) rc = x->ops->upload_bytes(x, w->slots, slots, (size_t)n * per * sizeof *slots, err);
    if (!rc) rc = x->ops->upload_bytes(x, w->info, info, (size_t)n_info * sizeof *info, err);
    free(slots);
    return rc;
}

/* ---- sweeps --------------------------------------------------------- */

static int sweep_dense(ws *w, const grids *g, int bits, table *out, hs_err *err)
{
    const hs_exec_shape *s = &w->s;
    int rc;
    if ((rc = ws_gemm_weights(w, bits, err))) return rc;
    for (int op = 0; op < N_OPS; op++) {
        int gemm = op == OP_QKV || op == OP_ATTN_OUT || op == OP_MLP_UP || op == OP_MLP_DOWN;
        if (bits != 16 && !gemm) continue;
        if (op == OP_ROPE && !s->rope) continue;
        for (int i = 0; i < g->tok.n; i++) {
            dense_job j = {w, op, g->tok.v[i]};
            double us;
            if (op == OP_LM_HEAD && j.tokens > HEAD_MAX_TOKENS) continue;
            if ((rc = hs_exec_measure(w->x, &g->t, run_dense, &j, &us, err))) {
                hs_err_prefix(err, "%s, %d tokens, %d bits: ", op_names[op], j.tokens, bits);
                return rc;
            }
            if ((rc = rows_add(out, op_names[op], s->tp, bits, j.tokens, us, &w->x->mon_last, err))) return rc;
        }
    }
    ws_free_gemm_weights(w);
    return 0;
}

static int sweep_decode(ws *w, const grids *g, int max_ctx, table *out, int *skipped, hs_err *err)
{
    int32_t *info = malloc((size_t)grid_max(&g->batch) * sizeof *info);
    int rc = 0;
    if (!info) return hs_errf(err, HS_ENOMEM, "out of memory");
    for (int i = 0; i < g->batch.n && !rc; i++)
        for (int k = 0; k < g->ctx.n && !rc; k++) {
            int B = g->batch.v[i], C = g->ctx.v[k], nb = (C + HS_EXEC_KV_BLOCK - 1) / HS_EXEC_KV_BLOCK;
            attn_job j = {w, {0}, B, 1};
            double us;
            if (C > max_ctx) continue;
            if ((long)B * nb > w->pool) {
                (*skipped)++;
                continue;
            }
            for (int s = 0; s < B; s++) info[s] = C;
            if ((rc = upload_tables(w, B, nb, C - 1, 1, info, B, err))) break;
            attn_base(&j.a, w);
            j.a.n_seqs = B;
            j.a.max_blocks = nb;
            j.a.max_context = C;
            j.a.seq_info_host = info;
            if ((rc = hs_exec_measure(w->x, &g->t, run_attn, &j, &us, err))) {
                hs_err_prefix(err, "decode attention, batch %d, context %d: ", B, C);
                break;
            }
            rc = rows_add(out, NULL, w->s.tp, B, C, us, &w->x->mon_last, err);
        }
    free(info);
    return rc;
}

static int sweep_prefill(ws *w, const grids *g, int max_ctx, table *out, int *skipped, hs_err *err)
{
    int rc;
    for (int i = 0; i < g->chunk.n; i++)
        for (int k = 0; k < g->prefix.n; k++) {
            int c = g->chunk.v[i], p = g->prefix.v[k];
            int nb = (p + c + HS_EXEC_KV_BLOCK - 1) / HS_EXEC_KV_BLOCK;
            int32_t info[3] = {0, c, p};
            attn_job j = {w, {0}, c, 0};
            double us;
            if (p + c > max_ctx) continue;
            if (nb > w->pool) {
                (*skipped)++;
                continue;
            }
            if ((rc = upload_tables(w, 1, nb, p, c, info, 3, err))) return rc;
            attn_base(&j.a, w);
            j.a.n_seqs = 1;
            j.a.max_blocks = nb;
            j.a.max_q_len = c;
            j.a.seq_info_host = info;
            if ((rc = hs_exec_measure(w->x, &g->t, run_attn, &j, &us, err))) {
                hs_err_prefix(err, "prefill attention, chunk %d, prefix %d: ", c, p);
                return rc;
            }
            if ((rc = rows_add(out, NULL, w->s.tp, c, p, us, &w->x->mon_last, err))) return rc;
        }
    return 0;
}

/* Blocks the largest decode / prefill grid point needs. */
static int pool_need(const grids *g, int max_ctx)
{
    long need = 1;
    for (int i = 0; i < g->batch.n; i++)
        for (int k = 0; k < g->ctx.n; k++)
            if (g->ctx.v[k] <= max_ctx) {
                long b = (long)g->batch.v[i] * ((g->ctx.v[k] + HS_EXEC_KV_BLOCK - 1) / HS_EXEC_KV_BLOCK);
                if (b > need) need = b;
            }
    for (int i = 0; i < g->chunk.n; i++)
        for (int k = 0; k < g->prefix.n; k++)
            if (g->chunk.v[i] + g->prefix.v[k] <= max_ctx) {
                long b = (g->chunk.v[i] + g->prefix.v[k] + HS_EXEC_KV_BLOCK - 1) / HS_EXEC_KV_BLOCK;
                if (b > need) need = b;
            }
    return need > 1 << 30 ? 1 << 30 : (int)need;
}

/* ---- output --------------------------------------------------------- */

static void sanitize(const char *in, char *buf, size_t cap)
{
    size_t n = 0;
    int dash = 0;
    for (const char *p = in; *p && n + 1 < cap; p++) {
        if (*p == '(') {             /* drop (R), (TM) */
            const char *e = strchr(p, ')');
            if (e && e - p <= 3) {
                p = e;
                continue;
            }
        }
        if (isalnum((unsigned char)*p)) {
            if (dash && n) buf[n++] = '-';
            if (n + 1 < cap) buf[n++] = (char)tolower((unsigned char)*p);
            dash = 0;
        } else {
            dash = 1;
        }
    }
    buf[n] = '\0';
}

/* Device-name tokens that identify a hetsim GPU profile. */
static const struct gpu_rule {
    const char *tok[2];        /* all must be tokens of the device name */
    const char *unless;        /* token that rules the match out */
    double min_gib, max_gib;   /* device memory range */
    const char *name;
} gpu_rules[] = {
    {{"H100", NULL}, "PCIE", 0, 1e9, "h100-sxm-80g"},
    {{"H200", NULL}, NULL, 0, 1e9, "h200"},
    {{"A100", NULL}, NULL, 60, 1e9, "a100-80g"},
    {{"A100", NULL}, NULL, 0, 60, "a100-40g"},
    {{"A800", NULL}, NULL, 0, 1e9, "a800-80g"},
    {{"L40S", NULL}, NULL, 0, 1e9, "l40s"},
    {{"L40", NULL}, NULL, 0, 1e9, "l40"},
    {{"L4", NULL}, NULL, 0, 1e9, "l4"},
    {{"A40", NULL}, NULL, 0, 1e9, "a40"},
    {{"RTX", "A6000"}, NULL, 0, 1e9, "rtx-a6000"},
    {{"T4", NULL}, NULL, 0, 1e9, "t4"},
    {{"V100", NULL}, NULL, 24, 1e9, "v100-32g"},
    {{"P100", NULL}, NULL, 0, 14, "p100-12g"},
    {{"RTX", "3090"}, NULL, 0, 1e9, "rtx-3090"},
};

static int has_token(const char *name, const char *tok)
{
    size_t n = strlen(tok);
    for (const char *p = name; *p; p++) {
        if (p != name && isalnum((unsigned char)p[-1])) continue;
        if (!strncasecmp(p, tok, n) && !isalnum((unsigned char)p[n])) return 1;
    }
    return 0;
}

void hs_exec_device_dirname(const hs_exec_info *info, char *buf, size_t cap)
{
    char s[160];
    if (!strcmp(info->backend, "cpu")) {
        sanitize(info->device, s, sizeof s);
        snprintf(buf, cap, "cpu-%s", s[0] ? s : "unknown");
        return;
    }
    for (size_t i = 0; i < sizeof gpu_rules / sizeof gpu_rules[0]; i++) {
        const struct gpu_rule *r = &gpu_rules[i];
        double gib = info->mem_total / 1073741824.0;
        hs_gpu g;
        if (!has_token(info->device, r->tok[0]) || (r->tok[1] && !has_token(info->device, r->tok[1])) ||
            (r->unless && has_token(info->device, r->unless)) || gib < r->min_gib || gib >= r->max_gib)
            continue;
        if (hs_gpu_find(&g, r->name, NULL) == 0) {
            snprintf(buf, cap, "%s", r->name);
            return;
        }
    }
    sanitize(info->device, s, sizeof s);
    snprintf(buf, cap, "%s", s[0] ? s : "gpu");
}

static int mkdir_p(const char *dir, hs_err *err)
{
    char p[1024];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof p) return hs_errf(err, HS_EINVAL, "--out: bad directory \"%s\"", dir);
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++)
        if (p[i] == '/' || p[i] == '\0') {
            char c = p[i];
            p[i] = '\0';
            if (mkdir(p, 0777) && errno != EEXIST)
                return hs_errf(err, HS_EIO, "--out %s: cannot create %s: %s", dir, p, strerror(errno));
            p[i] = c;
        }
    return 0;
}

/* Creates dir and checks that a file can be written there. */
static int check_dir(const char *dir, hs_err *err)
{
    char probe[1100];
    FILE *fp;
    struct stat st;
    int rc = mkdir_p(dir, err);
    if (rc) return rc;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode))
        return hs_errf(err, HS_EIO, "--out %s: not a directory", dir);
    snprintf(probe, sizeof probe, "%s/.hetsim-exec-probe", dir);
    if (!(fp = fopen(probe, "w")))
        return hs_errf(err, HS_EIO, "--out %s: not writable: %s", dir, strerror(errno));
    fclose(fp);
    remove(probe);
    return 0;
}

/* clocks.csv only when a clock monitor ran (hetsim-exec profile --clocks) */
static const char *const file_names[5] = {"dense.csv", "attn_decode.csv", "attn_prefill.csv",
                                          "meta.json", "clocks.csv"};

static void json_str(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(fp, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(fp, "\\u%04x", *s);
        else fputc(*s, fp);
    }
    fputc('"', fp);
}

typedef struct meta {
    const char *gpu, *model, *backend, *dtype;
    double mem_total, mem_usable;
    long long kv_blocks;
    const char *timing;
    double rest;               /* hs_exec_timing.rest of every row */
    double kv_pool_bytes;      /* the largest pool the attention rows ran over */
    hs_exec_decode_split split; /* sms 0: the backend does not say */
    const char *clock_monitor; /* what clocks.csv was read with; NULL: no clocks.csv */
} meta;

/* One line per row of the three tables: the SM clock, power and clock-event
 * reasons over the row's timed runs, keyed as the tables are. */
static void write_clocks(FILE *fp, const table *tab)
{
    static const char *const attn[3] = {NULL, "attn_decode", "attn_prefill"};
    fprintf(fp, "op,tp,x,y,samples,sm_mhz_mean,sm_mhz_min,sm_mhz_max,power_w_mean,power_w_max,reasons\n");
    for (int f = 0; f < 3; f++)
        for (size_t i = 0; i < tab[f].n; i++) {
            const row *r = &tab[f].r[i];
            char why[160];
            hs_gpumon_stats_reasons(&r->clk, why, sizeof why);
            fprintf(fp, "%s,%d,%d,%d,%d,%.1f,%.0f,%.0f,%.1f,%.1f,%s\n", r->op ? r->op : attn[f], r->a,
                    r->b, r->c, r->clk.n, r->clk.sm_mhz_mean, r->clk.sm_mhz_min, r->clk.sm_mhz_max,
                    r->clk.power_w_mean, r->clk.power_w_max, why);
        }
}

/* One line per group of rows on stderr: what clock the large GEMMs, the
 * other dense ops and the attention rows ran at, and how often the board's
 * power or temperature held the clock down. */
static void clocks_summary(const table *tab)
{
    enum { G_BIG, G_SMALL, G_OTHER, G_DEC, G_PRE, NG };
    static const char *const names[NG] = {"GEMMs >= 512 tokens", "GEMMs < 512 tokens", "other dense ops",
                                          "decode attention", "prefill attention"};
    const unsigned long long held = HS_GPUMON_SW_POWER_CAP | HS_GPUMON_HW_SLOWDOWN | HS_GPUMON_SW_THERMAL |
                                    HS_GPUMON_HW_THERMAL | HS_GPUMON_HW_POWER_BRAKE;
    double sum[NG] = {0}, mn[NG] = {0}, pw[NG] = {0};
    int n[NG] = {0}, npw[NG] = {0}, capped[NG] = {0}, nr[NG] = {0};
    for (int f = 0; f < 3; f++)
        for (size_t i = 0; i < tab[f].n; i++) {
            const row *r = &tab[f].r[i];
            int gemm = r->op && (!strcmp(r->op, "qkv") || !strcmp(r->op, "attn_out") ||
                                 !strcmp(r->op, "mlp_up") || !strcmp(r->op, "mlp_down"));
            int k = f == 1 ? G_DEC : f == 2 ? G_PRE : !gemm ? G_OTHER : r->c >= 512 ? G_BIG : G_SMALL;
            if (r->clk.n <= 0) continue;
            if (!n[k] || r->clk.sm_mhz_min < mn[k]) mn[k] = r->clk.sm_mhz_min;
            sum[k] += r->clk.sm_mhz_mean;
            n[k]++;
            if (r->clk.power_w_mean >= 0) {
                pw[k] += r->clk.power_w_mean;
                npw[k]++;
            }
            if (r->clk.reasons_n) nr[k]++;
            if (r->clk.reasons & held) capped[k]++;
        }
    for (int k = 0; k < NG; k++) {
        char p[32] = "";
        if (!n[k]) continue;
        if (npw[k]) snprintf(p, sizeof p, ", %.0f W", pw[k] / npw[k]);
        if (nr[k])
            fprintf(stderr, "hetsim-exec: clocks: %-19s SM %.0f MHz mean (min %.0f)%s, held down by power "
                            "or heat in %d of %d rows\n",
                    names[k], sum[k] / n[k], mn[k], p, capped[k], nr[k]);
        else
            fprintf(stderr, "hetsim-exec: clocks: %-19s SM %.0f MHz mean (min %.0f)%s, clock-event "
                            "reasons unread\n",
                    names[k], sum[k] / n[k], mn[k], p);
    }
}

static int write_file(const char *dir, int which, const table *tab, const meta *m, hs_err *err)
{
    const table *t = which < 3 ? &tab[which] : NULL;
    char path[1100];
    FILE *fp;
    int bad;
    snprintf(path, sizeof path, "%s/%s.tmp", dir, file_names[which]);
    if (!(fp = fopen(path, "w")))
        return hs_errf(err, HS_EIO, "%s: cannot write: %s", path, strerror(errno));
    if (which == 0) fprintf(fp, "op,tp,bits,tokens,time_us\n");
    else if (which == 1) fprintf(fp, "tp,batch,context,time_us\n");
    else if (which == 2) fprintf(fp, "tp,chunk,prefix,time_us\n");
    if (which < 3) {
        for (size_t i = 0; i < t->n; i++) {
            const row *r = &t->r[i];
            if (r->op) fprintf(fp, "%s,", r->op);
            fprintf(fp, "%d,%d,%d,%.4f\n", r->a, r->b, r->c, r->us);
        }
    } else if (which == 4) {
        write_clocks(fp, tab);
    } else {
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        fprintf(fp, "{\n  \"gpu\": ");
        json_str(fp, m->gpu);
        fprintf(fp, ",\n  \"model\": ");
        json_str(fp, m->model);
        fprintf(fp, ",\n  \"backend\": \"%s\",\n  \"dtype\": \"%s\",\n", m->backend, m->dtype);
        fprintf(fp, "  \"source\": \"hetsim-exec profile\",\n  \"created\": \"%s\",\n", when);
        fprintf(fp, "  \"mem_total_bytes\": %.0f,\n  \"mem_usable_bytes\": %.0f,\n",
                m->mem_total, m->mem_usable);
        fprintf(fp, "  \"kv_block_size\": %d,\n  \"kv_blocks\": %lld,\n", HS_EXEC_KV_BLOCK,
                m->kv_blocks);
        if (m->split.sms > 0)
            fprintf(fp, "  \"decode_sms\": %d,\n  \"decode_resident\": %d,\n  \"decode_part_max\": %d,\n"
                        "  \"decode_part_min\": %d,\n  \"decode_part_align\": %d,\n  \"decode_fill\": %d,\n",
                    m->split.sms, m->split.resident, m->split.part_max, m->split.part_min,
                    m->split.part_align, m->split.fill);
        if (m->clock_monitor) {
            fprintf(fp, "  \"clock_monitor\": ");
            json_str(fp, m->clock_monitor);
            fprintf(fp, ",\n");
        }
        fprintf(fp, "  \"kv_pool_bytes\": %.0f,\n  \"timing\": \"%s\",\n  \"rest\": %.15g\n}\n",
                m->kv_pool_bytes, m->timing, m->rest);
    }
    bad = ferror(fp);
    if (fclose(fp) || bad) {
        remove(path);
        return hs_errf(err, HS_EIO, "%s: write failed", path);
    }
    return 0;
}

/* KV blocks that fit on one rank after the whole model's weights and the
 * activation peak, by the simulator's memory model (FP16 weights and KV,
 * the engine's default pass of max(2048, max_seq_len) tokens and 256
 * sequences). */
static long long kv_blocks(const hs_model *m, int tp, double usable)
{
    hs_stage_mem mem;
    int max_tokens = m->max_seq_len > 2048 ? m->max_seq_len : 2048;
    double avail;
    hs_model_stage_mem(m, m->layers, 1, 1, tp, 16, 16, max_tokens, 256, &mem);
    avail = usable - mem.weights - mem.activation;
    if (avail <= 0 || mem.kv_per_token <= 0) return 0;
    return (long long)floor(avail / (mem.kv_per_token * HS_EXEC_KV_BLOCK));
}

int hs_exec_profile(hs_exec *x, const hs_model *m, const hs_exec_profile_opts *o,
                    char *dir_out, size_t cap, hs_err *err)
{
    char dev[160], dir[1024];
    grids g;
    table tab[3] = {{0}};
    hs_exec_shape shapes[HS_EXEC_MAX_TPS];
    int rc = 0, max_ctx = m->max_seq_len, max_tok, rows_needed, n_files;
    double pool_bytes = 0;
    meta mt;

    /* Check everything before measuring anything. */
    if (o->n_tp < 1) return hs_errf(err, HS_EINVAL, "--tp: no TP degree given");
    for (int i = 0; i < o->n_tp; i++)
        if ((rc = hs_exec_shape_make(&shapes[i], m, o->tp[i], err))) return rc;
    hs_exec_device_dirname(&x->info, dev, sizeof dev);
    if (o->out) snprintf(dir, sizeof dir, "%s", o->out);
    else if ((size_t)snprintf(dir, sizeof dir, "%s/profiles/%s/%s", hs_data_root(), dev, m->name) >= sizeof dir)
        return hs_errf(err, HS_ERANGE, "output path too long");
    /* a chunk past the context has no row to time (sweep_prefill skips
     * it) yet would size the workspace */
    for (int i = 0; i < o->n_chunks; i++)
        if (o->chunks[i] > max_ctx)
            return hs_errf(err, HS_EINVAL, "--chunks %d: over %s's context of %d tokens", o->chunks[i],
                           m->name, max_ctx);
    if ((rc = check_dir(dir, err))) return rc;
    snprintf(dir_out, cap, "%s", dir);

    pick_grids(&g, strcmp(x->info.backend, "cpu") != 0, o->quick);
    if (o->n_tokens > 0) g.tok = (grid){o->tokens, o->n_tokens};
    if (o->n_chunks > 0) g.chunk = (grid){o->chunks, o->n_chunks};
    /* On the CPU backend (tables for tests, not for any GPU) the fill is a
     * slow scalar loop: 8 MiB clears the per-core caches, not the LLC.  A
     * stream read of 128 MiB is 2.5 H100/H200 L2s, at half the jitter of
     * 256 MiB in the difference it is taken from. */
    g.t.mode = o->timing;
    /* A GPU rests as long as each row ran: 50% busy keeps an H200 under
     * its power cap.  The CPU backend's tables are for tests. */
    g.t.rest = o->rest >= 0 ? o->rest : strcmp(x->info.backend, "cpu") ? 1.0 : 0.0;
    if (o->timing == HS_EXEC_TIME_COLD)
        g.t.flush_bytes = strcmp(x->info.backend, "cpu") ? HS_EXEC_FLUSH_BYTES : HS_EXEC_FLUSH_BYTES / 32;
    else if (o->timing == HS_EXEC_TIME_STREAM)
        g.t.flush_bytes = strcmp(x->info.backend, "cpu") ? HS_EXEC_FLUSH_BYTES / 2 : HS_EXEC_FLUSH_BYTES / 32;
    max_tok = grid_max(&g.tok);
    rows_needed = max_tok;
    if (grid_max(&g.batch) > rows_needed) rows_needed = grid_max(&g.batch);
    if (grid_max(&g.chunk) > rows_needed) rows_needed = grid_max(&g.chunk);

    for (int i = 0; i < o->n_tp && !rc; i++) {
        ws w;
        int skipped = 0;
        double t0 = hs_wall_s();
        if ((rc = ws_open(&w, x, &shapes[i], rows_needed, err))) break;
        for (int b = 0; b < o->n_bits && !rc; b++) rc = sweep_dense(&w, &g, o->bits[b], &tab[0], err);
        if (!rc && o->progress)
            fprintf(stderr, "hetsim-exec: %s tp %d: dense ops done (%.1f s)\n", m->name,
                    shapes[i].tp, hs_wall_s() - t0);
        if (!rc) rc = ws_pool(&w, pool_need(&g, max_ctx), o->kv_pool_gib, err);
        if (!rc && w.pool_bytes > pool_bytes) pool_bytes = w.pool_bytes;
        if (!rc) rc = sweep_decode(&w, &g, max_ctx, &tab[1], &skipped, err);
        if (!rc) rc = sweep_prefill(&w, &g, max_ctx, &tab[2], &skipped, err);
        if (!rc && o->progress)
            fprintf(stderr, "hetsim-exec: %s tp %d: attention done (%.1f s, %d KV blocks pooled%s)\n",
                    m->name, shapes[i].tp, hs_wall_s() - t0, w.pool,
                    skipped ? ", some grid points did not fit and were left out" : "");
        ws_free(&w);
        if (rc) hs_err_prefix(err, "tp %d: ", shapes[i].tp);
    }

    mt = (meta){dev, m->name, x->info.backend, hs_exec_dtype_name(x->info.dtype),
                x->info.mem_total, x->info.mem_usable,
                kv_blocks(m, o->tp[0], x->info.mem_usable), hs_exec_timing_name(o->timing), g.t.rest, pool_bytes,
                {0}, x->mon ? hs_gpumon_describe(x->mon) : NULL};
    if (!rc && x->ops->decode_split) {
        /* optional: without it the simulator interpolates the decode grid */
        hs_err e = {0};
        if (x->ops->decode_split(x, m->head_dim, &mt.split, &e)) {
            fprintf(stderr, "hetsim-exec: profile: warning: the decode kernel's split is not recorded: %s\n", e.msg);
            memset(&mt.split, 0, sizeof mt.split);
        }
    }
    n_files = x->mon ? 5 : 4;
    for (int f = 0; f < n_files && !rc; f++) rc = write_file(dir, f, tab, &mt, err);
    if (!rc && x->mon && o->progress) clocks_summary(tab);
    if (!rc && !x->mon) {
        /* an earlier profile's clocks.csv would describe other rows */
        char old[1100];
        snprintf(old, sizeof old, "%s/%s", dir, file_names[4]);
        remove(old);
    }
    for (int f = 0; f < n_files; f++) {
        char tmp[1100], fin[1100];
        snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, file_names[f]);
        snprintf(fin, sizeof fin, "%s/%s", dir, file_names[f]);
        if (rc) remove(tmp);
        else if (rename(tmp, fin)) {
            rc = hs_errf(err, HS_EIO, "%s: cannot rename: %s", fin, strerror(errno));
            remove(tmp);
        }
    }
    for (int f = 0; f < 3; f++) free(tab[f].r);
    return rc;
}
