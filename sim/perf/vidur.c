/* vidur.c - importer for the kernel timings published by the Vidur project
 * (github.com/microsoft/vidur, MIT) into hetsim's table format; see table.h.
 * This file builds one table: name mapping, the CSV readers, duplicate
 * merging, the LM head, hs__vidur_import_src (one table from files of either
 * layout) and hs_vidur_import[_ex] (the current layout).  vidur_all.c walks a
 * whole folder of either layout (hs_vidur_import_all); what the two share is
 * in vidur_int.h.
 *
 * Vidur writes one row per measured point: columns time_stats.<op>.{min,max,
 * mean,median,std} in ms plus the shape.  Two folder layouts exist.
 *
 * Current (Vidur's data/profiling folder):
 *   compute/<gpu>/<org>/<model>/mlp.csv   per-op times per num_tokens and
 *                                          num_tensor_parallel_workers
 *   <gpu>_attention_*.csv                  attention kernels per batch_size,
 *                                          kv_cache_size, prefill_chunk_size
 *   network/<net>/{all_reduce,send_recv}.csv  collectives per size (bytes),
 *                                          num_workers, devices_per_node
 *   device_configs/<gpu>.yml               memory the project assumed
 * Old single-folder (Vidur's data/profiling/<gpu>/ before compute/ and
 * network/ were split out):
 *   <gpu>/mlp.csv            every model profiled on the device in one file,
 *                            told apart only by the shape columns
 *   <gpu>/[<org>/]<model>/mlp.csv  one model; an attention.csv may sit beside
 *   <gpu>/attention.csv      attention rows of every shape; the oldest files
 *                            have no is_prefill (prefill iff
 *                            prefill_chunk_size > 0, as Vidur derived it)
 *   <gpu>/all_reduce.csv     num_workers, n_embd, num_tokens: the tensor was
 *                            num_tokens x n_embd FP16, so 2 n_embd num_tokens
 *                            bytes; no devices_per_node (the TP groups were
 *                            profiled inside one node); rows of another
 *                            collective (column collective) are skipped
 *   <gpu>/send_recv.csv      the same columns, when present
 *   <gpu>/cpu_overheads.csv  framework overheads: not imported
 * From a mixed mlp.csv one table reads only the rows of one shape (the
 * source's filter); vidur_all.c lists the shapes and names their models.
 *
 * We keep medians, convert to us and map names onto ours.  Vidur repeats some
 * points (e.g. num_tokens 4096 twice per TP degree); repeated keys are
 * averaged, and both layer norms of a layer feed "norm".  Only single-node
 * collectives are imported (devices_per_node == num_workers): a TP group
 * lives in one node, and our format has no node-count column.  Vidur never
 * timed the LM head; with HS_VIDUR_LM_HEAD (import_all) it is synthesised
 * from the same file's mlp_up rows (hs_vidur_lm_head).
 *
 * No partial state: a table is built whole in memory or not at all (*out is
 * NULL on failure). */
#include "perf/table.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf/table_int.h"
#include "perf/vidur_int.h"

static const struct { const char *vidur; int op; } op_map[] = {
    {"emb", HS_OP_EMB}, {"input_layernorm", HS_OP_NORM}, {"post_attention_layernorm", HS_OP_NORM},
    {"attn_pre_proj", HS_OP_QKV}, {"attn_rope", HS_OP_ROPE}, {"attn_post_proj", HS_OP_ATTN_OUT},
    {"mlp_up_proj", HS_OP_MLP_UP}, {"mlp_act", HS_OP_ACT}, {"mlp_down_proj", HS_OP_MLP_DOWN}, {"add", HS_OP_ADD},
};
#define N_OPMAP ((int)(sizeof op_map / sizeof op_map[0]))

static const struct { const char *vidur, *ours, *network; } gpu_map[] = {
    {"a100", "a100-80g", "a100_dgx"},
    {"a40", "a40", "a40_pairwise_nvlink"},
    {"h100", "h100-sxm-80g", "h100_dgx"},
};

/* Vidur's model ids (after the organisation) whose name in models/ the
 * generic rule below does not give. */
static const struct { const char *vidur, *ours; } model_map[] = {
    {"Llama-2-7b-hf", "llama-2-7b"}, {"Llama-2-70b-hf", "llama-2-70b"}, {"Meta-Llama-3-8B", "llama-3-8b"},
    {"Meta-Llama-3-70B", "llama-3-70b"}, {"CodeLlama-34b-Instruct-hf", "codellama-34b"}, {"Qwen-72B", "qwen-72b"},
    {"internlm-20b", "internlm-20b"}, {"phi-2", "phi-2"},
};

/* Formats into buf; HS_ERANGE naming the start of the text when it does not
 * fit (a path cut short would name another file). */
int hs__vidur_fmt(char *buf, size_t cap, hs_err *err, const char *f, ...)
{
    va_list ap;
    int w;
    va_start(ap, f);
    w = vsnprintf(buf, cap, f, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= cap) return hs_errf(err, HS_ERANGE, "%.80s...: path too long", buf);
    return 0;
}

int hs_vidur_gpu_name(char *buf, size_t cap, const char *vidur_gpu, hs_err *err)
{
    const char *name = vidur_gpu;
    for (size_t i = 0; i < sizeof gpu_map / sizeof gpu_map[0]; i++)
        if (!strcmp(gpu_map[i].vidur, vidur_gpu)) name = gpu_map[i].ours;
    if ((size_t)snprintf(buf, cap, "%s", name) >= cap)
        return hs_errf(err, HS_ERANGE, "GPU name \"%s\" too long", vidur_gpu);
    return 0;
}

/* 1 when the first n chars of s end with suf, ignoring case. */
static int ends_with_ci(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    if (n <= k) return 0;
    for (size_t i = 0; i < k; i++)
        if (tolower((unsigned char)s[n - k + i]) != suf[i]) return 0;
    return 1;
}

int hs_vidur_model_name(char *buf, size_t cap, const char *model_path, hs_err *err)
{
    /* Fine-tunes keep their base model's architecture, hence its kernel
     * times and its models/ file. */
    static const char *const tune[] = {"-instruct", "-chat"};
    const char *base = strrchr(model_path, '/');
    size_t n;
    base = base ? base + 1 : model_path;
    for (size_t i = 0; i < sizeof model_map / sizeof model_map[0]; i++)
        if (!strcmp(model_map[i].vidur, base)) {
            if ((size_t)snprintf(buf, cap, "%s", model_map[i].ours) >= cap)
                return hs_errf(err, HS_ERANGE, "model name \"%s\" too long", model_path);
            return 0;
        }
    n = strlen(base);
    if (ends_with_ci(base, n, "-hf")) n -= 3;
    for (size_t i = 0; i < sizeof tune / sizeof tune[0]; i++)
        if (ends_with_ci(base, n, tune[i])) {
            n -= strlen(tune[i]);
            break;
        }
    if (n == 0 || n >= cap) return hs_errf(err, HS_ERANGE, "model name \"%s\" empty or too long", model_path);
    for (size_t i = 0; i < n; i++) buf[i] = (char)tolower((unsigned char)base[i]);
    buf[n] = '\0';
    return 0;
}

/* ---- CSV columns ------------------------------------------------------------ */

/* Column index by name, -1 when absent. */
static int col(char **hdr, int nh, const char *name)
{
    for (int i = 0; i < nh; i++)
        if (!strcmp(hdr[i], name)) return i;
    return -1;
}

/* Opens a CSV file and copies its header (field[] is overwritten by each
 * record) into *hdr, *nh columns; csv_close undoes both. */
static int csv_open(hs__tcsv *c, const char *path, char ***hdr, int *nh, hs_err *err)
{
    int rc = hs__tcsv_open(c, path, err);
    char **h;
    if (rc) return rc;
    if (!(h = calloc((size_t)c->nf, sizeof *h))) goto nomem;
    for (int i = 0; i < c->nf; i++)
        if (!(h[i] = strdup(c->field[i]))) {
            hs__names_free(h, i);
            goto nomem;
        }
    *hdr = h;
    *nh = c->nf;
    return 0;
nomem:
    hs__tcsv_close(c);
    return hs_errf(err, HS_ENOMEM, "out of memory reading %s", path);
}

static void csv_close(hs__tcsv *c, char **hdr, int nh)
{
    hs__names_free(hdr, nh);
    hs__tcsv_close(c);
}

static int need_col(const hs__tcsv *c, char **hdr, int nh, const char *name, int *idx, hs_err *err)
{
    if ((*idx = col(hdr, nh, name)) < 0)
        return hs_errf(err, HS_EPARSE, "%s:1: missing column \"%s\"", c->path, name);
    return 0;
}

/* A record with as many fields as the header; else the first column it lacks
 * (or the count) is named. */
static int check_nf(const hs__tcsv *c, char **hdr, int nh, hs_err *err)
{
    if (c->nf < nh)
        return hs_errf(err, HS_EPARSE, "%s:%d: %s: missing (the row has %d of the header's %d fields)",
                       c->path, c->lineno, hdr[c->nf], c->nf, nh);
    if (c->nf > nh)
        return hs_errf(err, HS_EPARSE, "%s:%d: %d fields, the header has %d", c->path, c->lineno, c->nf, nh);
    return 0;
}

static int parse_bool(const hs__tcsv *c, int i, const char *name, long *v, hs_err *err)
{
    const char *s = c->field[i];
    if (!strcmp(s, "True") || !strcmp(s, "true")) *v = 1;
    else if (!strcmp(s, "False") || !strcmp(s, "false")) *v = 0;
    else return hs_errf(err, HS_EPARSE, "%s:%d: %s: \"%s\" is not True or False", c->path, c->lineno, name, s);
    return 0;
}

/* ---- model shape ------------------------------------------------------------ */

/* mlp.csv's column of each HS__VIDUR_SH_* field (vidur_int.h); the first
 * three are required. */
static const char *const shape_cols[HS__VIDUR_SH_N] = {"n_head", "n_kv_head", "n_embd", "n_expanded_embd",
                                                       "vocab_size", "use_gated_mlp"};

static int shape_find_cols(const hs__tcsv *c, char **hdr, int nh, int idx[HS__VIDUR_SH_N], hs_err *err)
{
    int rc;
    for (int k = 0; k < HS__VIDUR_SH_N; k++) {
        if (k <= HS__VIDUR_SH_HIDDEN && (rc = need_col(c, hdr, nh, shape_cols[k], &idx[k], err))) return rc;
        if (k > HS__VIDUR_SH_HIDDEN) idx[k] = col(hdr, nh, shape_cols[k]);
    }
    return 0;
}

static int shape_read(const hs__tcsv *c, const int idx[HS__VIDUR_SH_N], hs__vidur_shape *s, hs_err *err)
{
    int rc;
    for (int k = 0; k < HS__VIDUR_SH_N; k++) {
        s->v[k] = -1;
        if (idx[k] < 0) continue;
        rc = k == HS__VIDUR_SH_GATED ? parse_bool(c, idx[k], shape_cols[k], &s->v[k], err)
                                     : hs__tcsv_int(c, idx[k], shape_cols[k], 1, 1L << 24, &s->v[k], err);
        if (rc) return rc;
    }
    return 0;
}

/* Index of the first field in which a and b differ, -1 when equal. */
static int shape_diff(const hs__vidur_shape *a, const hs__vidur_shape *b)
{
    for (int k = 0; k < HS__VIDUR_SH_N; k++)
        if (a->v[k] != b->v[k]) return k;
    return -1;
}

void hs__vidur_shape_str(const hs__vidur_shape *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "n_embd %ld, n_head %ld, n_kv_head %ld, n_expanded_embd %ld, vocab_size %ld, %s",
             s->v[HS__VIDUR_SH_HIDDEN], s->v[HS__VIDUR_SH_HEADS], s->v[HS__VIDUR_SH_KV], s->v[HS__VIDUR_SH_FFN],
             s->v[HS__VIDUR_SH_VOCAB],
             s->v[HS__VIDUR_SH_GATED] < 0 ? "gating unknown" : s->v[HS__VIDUR_SH_GATED] ? "gated" : "not gated");
}

/* ---- duplicate merging ---------------------------------------------------- */

/* Keys (all bits are 16 here), then the source line for a stable order. */
static int dense_key(const void *pa, const void *pb)
{
    const hs_dense_row *a = pa, *b = pb;
    if (a->op != b->op) return a->op < b->op ? -1 : 1;
    if (a->tp != b->tp) return a->tp < b->tp ? -1 : 1;
    return a->tokens < b->tokens ? -1 : a->tokens > b->tokens;
}
static int attn_key(const void *pa, const void *pb)
{
    const hs_attn_row *a = pa, *b = pb;
    if (a->tp != b->tp) return a->tp < b->tp ? -1 : 1;
    if (a->x != b->x) return a->x < b->x ? -1 : 1;
    return a->y < b->y ? -1 : a->y > b->y;
}
static int comm_key(const void *pa, const void *pb)
{
    const hs_comm_row *a = pa, *b = pb;
    if (a->gpus != b->gpus) return a->gpus < b->gpus ? -1 : 1;
    return a->bytes < b->bytes ? -1 : a->bytes > b->bytes;
}
#define LINE_CMP(name, type, key)                                             \
    static int name(const void *a, const void *b)                             \
    {                                                                         \
        int c = key(a, b);                                                    \
        int32_t la = ((const type *)a)->line, lb = ((const type *)b)->line;   \
        return c ? c : la < lb ? -1 : la > lb;                                \
    }
LINE_CMP(dense_cmp, hs_dense_row, dense_key)
LINE_CMP(attn_cmp, hs_attn_row, attn_key)
LINE_CMP(comm_cmp, hs_comm_row, comm_key)

/* Sorts n rows of sz bytes and averages runs of equal keys into their first
 * row (the double at us_off); returns the rows left. */
static size_t merge_rows(void *rows, size_t n, size_t sz, size_t us_off, int (*cmp)(const void *, const void *),
                         int (*key)(const void *, const void *))
{
    char *v = rows;
    size_t w = 0;
    if (n) qsort(v, n, sz, cmp);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double s = 0, u;
        for (; j < n && !key(v + j * sz, v + i * sz); j++) {
            memcpy(&u, v + j * sz + us_off, sizeof u);
            s += u;
        }
        memmove(v + w * sz, v + i * sz, sz);
        u = s / (double)(j - i);
        memcpy(v + w++ * sz + us_off, &u, sizeof u);
        i = j;
    }
    return w;
}

static void merge_dups(hs_ptable *t)
{
    t->n_dense = merge_rows(t->dense, t->n_dense, sizeof *t->dense, offsetof(hs_dense_row, us), dense_cmp, dense_key);
    for (int k = 0; k < 2; k++) {
        t->n_attn[k] = merge_rows(t->attn[k], t->n_attn[k], sizeof *t->attn[k], offsetof(hs_attn_row, us), attn_cmp,
                                  attn_key);
        t->n_comm[k] = merge_rows(t->comm[k], t->n_comm[k], sizeof *t->comm[k], offsetof(hs_comm_row, us), comm_cmp,
                                  comm_key);
    }
}

/* ---- readers ---------------------------------------------------------------- */

/* One table being imported. */
typedef struct imp {
    hs_ptable *t;
    hs_vidur_stats *st;
    hs__vidur_shape sh;       /* the model's, from mlp.csv */
    long block;               /* block_size of the attention rows, 0: none read yet */
} imp;

/* mlp.csv: with filter NULL every row must have the first row's shape (one
 * model per file); else only rows of that shape are read.  Sets m->sh. */
static int read_mlp(imp *m, const char *path, const hs__vidur_shape *filter, hs_err *err)
{
    hs__tcsv c;
    char **hdr = NULL;
    int nh = 0, rc, ctok, ctp, cop[N_OPMAP], csh[HS__VIDUR_SH_N], first = 0;
    if ((rc = csv_open(&c, path, &hdr, &nh, err))) return rc;
    if ((rc = need_col(&c, hdr, nh, "num_tokens", &ctok, err)) ||
        (rc = need_col(&c, hdr, nh, "num_tensor_parallel_workers", &ctp, err)) ||
        (rc = shape_find_cols(&c, hdr, nh, csh, err)))
        goto out;
    for (int i = 0; i < N_OPMAP; i++) {
        char name[96];
        snprintf(name, sizeof name, "time_stats.%s.median", op_map[i].vidur);
        cop[i] = col(hdr, nh, name); /* absent op: no rows */
    }
    while ((rc = hs__tcsv_next(&c, err)) == 1) {
        long tok, tp;
        hs__vidur_shape v;
        int k;
        if ((rc = check_nf(&c, hdr, nh, err)) || (rc = shape_read(&c, csh, &v, err))) goto out;
        if (filter) {
            if (shape_diff(&v, filter) >= 0) continue; /* another model's row */
        } else if (first && (k = shape_diff(&v, &m->sh)) >= 0) {
            rc = hs_errf(err, HS_EPARSE, "%s:%d: %s: %ld differs from %ld on line %d (one model per file)",
                         path, c.lineno, shape_cols[k], v.v[k], m->sh.v[k], first);
            goto out;
        }
        if (!first) {
            m->sh = v;
            first = c.lineno;
        }
        if ((rc = hs__tcsv_int(&c, ctok, "num_tokens", 1, 1L << 30, &tok, err)) ||
            (rc = hs__tcsv_int(&c, ctp, "num_tensor_parallel_workers", 1, HS_MAX_TP, &tp, err)))
            goto out;
        for (int i = 0; i < N_OPMAP; i++) {
            double ms;
            if (cop[i] < 0 || c.field[cop[i]][0] == '\0') continue; /* the model has no such op */
            if ((rc = hs__tcsv_num(&c, cop[i], hdr[cop[i]], 0, 1e9, &ms, err))) goto out;
            if (ms <= 0) { /* below Kineto's resolution: no information */
                m->st->zero_ms++;
                continue;
            }
            if ((rc = hs_ptable_add_dense(m->t, op_map[i].op, (int)tp, 16, (int)tok, ms * 1e3, err))) goto out;
            m->t->dense[m->t->n_dense - 1].line = c.lineno;
        }
    }
    if (rc == 0 && !first) rc = hs_errf(err, HS_EPARSE, "%s: no data rows", path);
out:
    csv_close(&c, hdr, nh);
    return rc < 0 ? rc : 0;
}

/* Distinct shapes of a mixed mlp.csv in the order they first appear, with
 * their row counts.  *out and *rows are the caller's to free. */
int hs__vidur_mlp_shapes(const char *path, hs__vidur_shape **out, size_t **rows, size_t *n, hs_err *err)
{
    hs__tcsv c;
    char **hdr = NULL;
    int nh = 0, rc, csh[HS__VIDUR_SH_N];
    hs__vidur_shape *v = NULL;
    size_t *cnt = NULL, nv = 0, cap = 0;
    *out = NULL;
    *rows = NULL;
    *n = 0;
    if ((rc = csv_open(&c, path, &hdr, &nh, err))) return rc;
    if ((rc = shape_find_cols(&c, hdr, nh, csh, err))) goto out;
    while ((rc = hs__tcsv_next(&c, err)) == 1) {
        hs__vidur_shape s;
        size_t i;
        if ((rc = check_nf(&c, hdr, nh, err)) || (rc = shape_read(&c, csh, &s, err))) goto out;
        for (i = 0; i < nv && shape_diff(&v[i], &s) >= 0; i++) {}
        if (i == nv) {
            if (nv == cap) {
                size_t nc = cap ? 2 * cap : 8;
                hs__vidur_shape *nv2 = realloc(v, nc * sizeof *v);
                size_t *nc2;
                if (nv2) v = nv2;
                nc2 = nv2 ? realloc(cnt, nc * sizeof *cnt) : NULL;
                if (!nc2) {
                    rc = hs_errf(err, HS_ENOMEM, "out of memory reading %s", path);
                    goto out;
                }
                cnt = nc2;
                cap = nc;
            }
            v[nv] = s;
            cnt[nv++] = 0;
        }
        cnt[i]++;
    }
    if (rc == 0 && !nv) rc = hs_errf(err, HS_EPARSE, "%s: no data rows", path);
out:
    csv_close(&c, hdr, nh);
    if (rc < 0) {
        free(v);
        free(cnt);
        return rc;
    }
    *out = v;
    *rows = cnt;
    *n = nv;
    return 0;
}

/* An attention file: imports the rows whose shape (n_embd, heads, KV heads)
 * is the model's; *used says whether there were any. */
static int read_attention(imp *m, const char *path, int *used, hs_err *err)
{
    hs__tcsv c;
    char **hdr = NULL;
    int nh = 0, rc, cemb, cq, ckv, ctp, cb, cchunk, ckvs, cdec, cprefill, cpre, cbs;
    *used = 0;
    if ((rc = csv_open(&c, path, &hdr, &nh, err))) return rc;
    if ((rc = need_col(&c, hdr, nh, "n_embd", &cemb, err)) ||
        (rc = need_col(&c, hdr, nh, "n_q_head", &cq, err)) ||
        (rc = need_col(&c, hdr, nh, "n_kv_head", &ckv, err)) ||
        (rc = need_col(&c, hdr, nh, "num_tensor_parallel_workers", &ctp, err)) ||
        (rc = need_col(&c, hdr, nh, "batch_size", &cb, err)) ||
        (rc = need_col(&c, hdr, nh, "prefill_chunk_size", &cchunk, err)) ||
        (rc = need_col(&c, hdr, nh, "kv_cache_size", &ckvs, err)) ||
        (rc = need_col(&c, hdr, nh, "time_stats.attn_decode.median", &cdec, err)) ||
        (rc = need_col(&c, hdr, nh, "time_stats.attn_prefill.median", &cprefill, err)))
        goto out;
    cpre = col(hdr, nh, "is_prefill"); /* absent in the oldest files */
    cbs = col(hdr, nh, "block_size");
    while ((rc = hs__tcsv_next(&c, err)) == 1) {
        long emb, q, kv, tp, b, chunk, kvs, prefill;
        double ms;
        if ((rc = check_nf(&c, hdr, nh, err))) goto out;
        if ((rc = hs__tcsv_int(&c, cemb, "n_embd", 1, 1L << 24, &emb, err)) ||
            (rc = hs__tcsv_int(&c, cq, "n_q_head", 1, 1L << 20, &q, err)) ||
            (rc = hs__tcsv_int(&c, ckv, "n_kv_head", 1, 1L << 20, &kv, err)))
            goto out;
        if (emb != m->sh.v[HS__VIDUR_SH_HIDDEN] || q != m->sh.v[HS__VIDUR_SH_HEADS] ||
            kv != m->sh.v[HS__VIDUR_SH_KV])
            continue; /* another model's shape */
        if (cbs >= 0) {
            long bs;
            if ((rc = hs__tcsv_int(&c, cbs, "block_size", 1, 65536, &bs, err))) goto out;
            if (m->block && bs != m->block) {
                rc = hs_errf(err, HS_EPARSE, "%s:%d: block_size: %ld differs from %ld of the rows before",
                             path, c.lineno, bs, m->block);
                goto out;
            }
            m->block = bs;
            m->t->meta.kv_block_size = (int)bs;
        }
        *used = 1;
        if ((rc = hs__tcsv_int(&c, ctp, "num_tensor_parallel_workers", 1, HS_MAX_TP, &tp, err)) ||
            (rc = hs__tcsv_int(&c, cb, "batch_size", 1, 1L << 30, &b, err)) ||
            (rc = hs__tcsv_int(&c, ckvs, "kv_cache_size", 0, 1L << 30, &kvs, err)) ||
            (rc = hs__tcsv_int(&c, cchunk, "prefill_chunk_size", 0, 1L << 30, &chunk, err)))
            goto out;
        if (cpre >= 0) {
            if ((rc = parse_bool(&c, cpre, "is_prefill", &prefill, err))) goto out;
        } else {
            prefill = chunk > 0;
        }
        if ((rc = hs__tcsv_num(&c, prefill ? cprefill : cdec, hdr[prefill ? cprefill : cdec], 0, 1e9, &ms, err)))
            goto out;
        if (ms <= 0) {
            m->st->zero_ms++;
            continue;
        }
        if (prefill) {
            /* Our prefill rows are one sequence; Vidur profiles prefill with
             * batch_size 1. */
            if (b != 1) {
                rc = hs_errf(err, HS_EPARSE, "%s:%d: batch_size: prefill with %ld sequences (only 1 is supported)",
                             path, c.lineno, b);
                goto out;
            }
            if (chunk < 1) {
                rc = hs_errf(err, HS_EPARSE, "%s:%d: prefill_chunk_size: 0 in a prefill row", path, c.lineno);
                goto out;
            }
            rc = hs_ptable_add_attn(m->t, HS_ATTN_PREFILL, (int)tp, (int)chunk, (int)kvs, ms * 1e3, err);
        } else {
            rc = hs_ptable_add_attn(m->t, HS_ATTN_DECODE, (int)tp, (int)b, (int)kvs, ms * 1e3, err);
        }
        if (rc) goto out;
        m->t->attn[prefill][m->t->n_attn[prefill] - 1].line = c.lineno;
    }
out:
    csv_close(&c, hdr, nh);
    return rc < 0 ? rc : 0;
}

/* A collective file (kind HS_COMM_*): size in bytes, or n_embd and
 * num_tokens of an FP16 tensor (old layout); devices_per_node absent means
 * one node; rows of another collective are skipped. */
static int read_comm(imp *m, int kind, const char *path, hs_err *err)
{
    static const char *const name[2] = {"all_reduce", "send_recv"};
    hs__tcsv c;
    char **hdr = NULL, tcol[64];
    int nh = 0, rc, cw, ctime, csize, cemb = -1, ctok = -1, cdev, ccoll;
    snprintf(tcol, sizeof tcol, "time_stats.%s.median", name[kind]);
    if ((rc = csv_open(&c, path, &hdr, &nh, err))) return rc;
    if ((rc = need_col(&c, hdr, nh, "num_workers", &cw, err)) || (rc = need_col(&c, hdr, nh, tcol, &ctime, err)))
        goto out;
    if ((csize = col(hdr, nh, "size")) < 0 &&
        ((cemb = col(hdr, nh, "n_embd")) < 0 || (ctok = col(hdr, nh, "num_tokens")) < 0)) {
        rc = hs_errf(err, HS_EPARSE, "%s:1: missing column \"size\" (or \"n_embd\" and \"num_tokens\")", path);
        goto out;
    }
    cdev = col(hdr, nh, "devices_per_node");
    ccoll = col(hdr, nh, "collective");
    while ((rc = hs__tcsv_next(&c, err)) == 1) {
        long w, dev;
        double bytes, ms;
        if ((rc = check_nf(&c, hdr, nh, err))) goto out;
        if (ccoll >= 0 && strcmp(c.field[ccoll], name[kind])) {
            if (!m->st->other[kind]) snprintf(m->st->other_name[kind], sizeof m->st->other_name[kind], "%s", c.field[ccoll]);
            m->st->other[kind]++;
            continue;
        }
        if ((rc = hs__tcsv_int(&c, cw, "num_workers", 1, 4096, &w, err))) goto out;
        dev = w;
        if (cdev >= 0 && (rc = hs__tcsv_int(&c, cdev, "devices_per_node", 1, 4096, &dev, err))) goto out;
        if (csize >= 0) {
            if ((rc = hs__tcsv_num(&c, csize, "size", 0, 1e15, &bytes, err))) goto out;
        } else {
            long emb, tok;
            if ((rc = hs__tcsv_int(&c, cemb, "n_embd", 1, 1L << 24, &emb, err)) ||
                (rc = hs__tcsv_int(&c, ctok, "num_tokens", 0, 1L << 30, &tok, err)))
                goto out;
            bytes = 2.0 * (double)emb * (double)tok; /* FP16 */
        }
        if ((rc = hs__tcsv_num(&c, ctime, tcol, 0, 1e9, &ms, err))) goto out;
        if (dev != w) { /* the group spans nodes */
            m->st->spans_nodes[kind]++;
            continue;
        }
        if (w < 2 || bytes <= 0) {
            m->st->empty++;
            continue;
        }
        if (ms <= 0) {
            m->st->zero_ms++;
            continue;
        }
        if ((rc = hs_ptable_add_comm(m->t, kind, (int)w, bytes, ms * 1e3, err))) goto out;
        m->t->comm[kind][m->t->n_comm[kind] - 1].line = c.lineno;
    }
out:
    csv_close(&c, hdr, nh);
    return rc < 0 ? rc : 0;
}

/* total_memory_gb from device_configs/<gpu>.yml (GiB, as Vidur uses it);
 * 0 when absent. */
static double yml_memory_gib(const char *vidur_dir, const char *gpu)
{
    char path[HS__VIDUR_PATH_CAP], line[256];
    double v = 0;
    FILE *f;
    if (hs__vidur_fmt(path, sizeof path, NULL, "%s/device_configs/%s.yml", vidur_dir, gpu)) return 0;
    if (!(f = fopen(path, "r"))) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, " total_memory_gb: %lf", &v) == 1) break;
    fclose(f);
    return v > 0 && v < 1e6 ? v : 0;
}

/* ---- LM head ----------------------------------------------------------------- */

int hs_vidur_lm_head(hs_ptable *t, long vocab, long ffn, int gated, size_t *added, hs_err *err)
{
    size_t n0 = t->n_dense, add = 0;
    double ratio;
    if (vocab < 1 || ffn < 1 || (gated != 0 && gated != 1))
        return hs_errf(err, HS_EINVAL, "lm_head: vocab_size %ld, n_expanded_embd %ld, gated %d is not a model shape",
                       vocab, ffn, gated);
    for (size_t i = 0; i < n0; i++)
        if (t->dense[i].op == HS_OP_LM_HEAD && t->dense[i].bits == 16)
            return hs_errf(err, HS_EINVAL, "lm_head: the table already has lm_head rows (tp %d, tokens %d)",
                           (int)t->dense[i].tp, (int)t->dense[i].tokens);
    /* [T x h] x [h x V/tp] against [T x h] x [h x g f/tp]: the same K, so
     * FLOPs and weight bytes both scale with N. */
    ratio = (double)vocab / ((gated ? 2.0 : 1.0) * (double)ffn);
    for (size_t i = 0; i < n0; i++) {
        hs_dense_row r = t->dense[i];
        int rc;
        if (r.op != HS_OP_MLP_UP || r.bits != 16) continue;
        if ((rc = hs_ptable_add_dense(t, HS_OP_LM_HEAD, r.tp, 16, r.tokens, r.us * ratio, err))) {
            t->n_dense = n0;
            return rc;
        }
        t->dense[t->n_dense - 1].line = r.line;
        add++;
    }
    if (!add) return hs_errf(err, HS_ENOTFOUND, "lm_head: no mlp_up rows at 16 bits to scale");
    if (added) *added = add;
    return 0;
}

/* ---- one table from any layout ------------------------------------------------- */

/* Appends s to src when the result stays under cap, else "..." once. */
static void src_add(char *src, size_t cap, const char *s)
{
    size_t n = strlen(src);
    if (n >= 3 && !strcmp(src + n - 3, "...")) return;
    if (n + strlen(s) < cap) memcpy(src + n, s, strlen(s) + 1);
    else if (n + 3 < cap) memcpy(src + n, "...", 4);
}

int hs__vidur_import_src(hs_ptable **out, const hs__vidur_src *s, unsigned flags, hs_vidur_stats *st, hs_err *err)
{
    hs_ptable *t = NULL;
    hs_vidur_stats local;
    imp m;
    char path[HS__VIDUR_PATH_CAP], mlp_path[HS__VIDUR_PATH_CAP], note[128] = "";
    const char *label[2] = {NULL, NULL};
    size_t cap;
    int rc, used;
    *out = NULL;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    if ((rc = hs_ptable_create(&t, err))) return rc;
    m = (imp){.t = t, .st = st};
    if ((rc = hs_vidur_gpu_name(t->meta.gpu, sizeof t->meta.gpu, s->gpu, err))) goto fail;
    if (s->model_path) rc = hs_vidur_model_name(t->meta.model, sizeof t->meta.model, s->model_path, err);
    else rc = hs__vidur_fmt(t->meta.model, sizeof t->meta.model, err, "%s", s->model);
    if (rc) goto fail;
    snprintf(t->meta.backend, sizeof t->meta.backend, "vidur");
    if ((rc = hs__vidur_fmt(mlp_path, sizeof mlp_path, err, "%s/%s", s->root, s->mlp)) ||
        (rc = read_mlp(&m, mlp_path, s->filter, err)))
        goto fail;
    if (flags & HS_VIDUR_LM_HEAD) {
        long g = m.sh.v[HS__VIDUR_SH_GATED] ? 2 : 1;
        for (int k = HS__VIDUR_SH_FFN; k <= HS__VIDUR_SH_GATED; k++)
            if (m.sh.v[k] < 0) {
                rc = hs_errf(err, HS_EPARSE, "%s:1: missing column \"%s\" (lm_head is synthesised from it)",
                             mlp_path, shape_cols[k]);
                goto fail;
            }
        snprintf(note, sizeof note, "; lm_head synthesised from mlp_up x N ratio vocab_size/(%ld n_expanded_embd) = %ld/(%ld*%ld)",
                 g, m.sh.v[HS__VIDUR_SH_VOCAB], g, m.sh.v[HS__VIDUR_SH_FFN]);
    }
    cap = sizeof t->meta.source - strlen(note); /* the lm_head note is never cut */
    if ((size_t)snprintf(t->meta.source, cap, "Vidur profiles (github.com/microsoft/vidur, MIT)%s: %s%s", s->layout,
                         s->mlp, s->mlp_note) >= cap)
        memcpy(t->meta.source + cap - 4, "...", 4); /* a description: shortened, not an error */
    for (int i = 0; i < s->n_attn; i++) {
        if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/%s", s->root, s->attn[i])) ||
            (rc = read_attention(&m, path, &used, err)))
            goto fail;
        if (used) {
            src_add(t->meta.source, cap, ", ");
            src_add(t->meta.source, cap, s->attn[i]);
        }
    }
    for (int k = 0; k < 2; k++) {
        if (!s->net[k]) continue;
        if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/%s", s->root, s->net[k]))) goto fail;
        if (!hs__is_file(path)) continue;
        if ((rc = read_comm(&m, k, path, err))) goto fail;
        label[k] = s->net[k];
    }
    if (s->net_label) {
        src_add(t->meta.source, cap, ", ");
        src_add(t->meta.source, cap, s->net_label);
    } else {
        for (int k = 0; k < 2; k++)
            if (label[k]) {
                src_add(t->meta.source, cap, ", ");
                src_add(t->meta.source, cap, label[k]);
            }
    }
    merge_dups(t);
    if ((flags & HS_VIDUR_LM_HEAD) &&
        (rc = hs_vidur_lm_head(t, m.sh.v[HS__VIDUR_SH_VOCAB], m.sh.v[HS__VIDUR_SH_FFN], (int)m.sh.v[HS__VIDUR_SH_GATED],
                               &st->lm_head, err))) {
        hs_err_prefix(err, "%s: ", mlp_path);
        goto fail;
    }
    if ((rc = hs_ptable_sort(t, err))) goto fail;
    strcat(t->meta.source, note); /* fits: the rest stayed under cap */
    {
        time_t now = time(NULL);
        struct tm tmv;
        gmtime_r(&now, &tmv);
        strftime(t->meta.created, sizeof t->meta.created, "%Y-%m-%d", &tmv);
    }
    /* Vidur's total_memory_gb is the memory it lets a replica use (45 on the
     * 48 GB A40), so it is our usable figure; the total stays unknown. */
    t->meta.mem_usable_bytes = (int64_t)(yml_memory_gib(s->root, s->gpu) * 1073741824.0);
    *out = t;
    return 0;
fail:
    hs_ptable_destroy(t);
    return rc;
}

/* ---- collectives only ---------------------------------------------------------- */

const char *hs__vidur_known_gpu(int i, const char **network)
{
    if (i < 0 || (size_t)i >= sizeof gpu_map / sizeof gpu_map[0]) return NULL;
    if (network) *network = gpu_map[i].network;
    return gpu_map[i].vidur;
}

int hs__vidur_import_net(hs_ptable **out, const char *root, const char *gpu, const char *net,
                         hs_vidur_stats *st, hs_err *err)
{
    static const char *const file[2] = {"all_reduce.csv", "send_recv.csv"};
    hs_ptable *t = NULL;
    hs_vidur_stats local;
    char path[HS__VIDUR_PATH_CAP];
    imp m;
    int rc;
    *out = NULL;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    if ((rc = hs_ptable_create(&t, err))) return rc;
    m = (imp){.t = t, .st = st};
    if ((rc = hs_vidur_gpu_name(t->meta.gpu, sizeof t->meta.gpu, gpu, err))) goto fail;
    t->meta.model[0] = '\0';
    snprintf(t->meta.backend, sizeof t->meta.backend, "vidur");
    snprintf(t->meta.source, sizeof t->meta.source,
             "Vidur profiles (github.com/microsoft/vidur, MIT): network/%s (collectives only)", net);
    for (int k = 0; k < 2; k++) {
        if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/network/%s/%s", root, net, file[k]))) goto fail;
        if (hs__is_file(path) && (rc = read_comm(&m, k, path, err))) goto fail;
    }
    if (!t->n_comm[0] && !t->n_comm[1]) {
        hs_ptable_destroy(t);
        return 0;
    }
    merge_dups(t);
    if ((rc = hs_ptable_sort(t, err))) goto fail;
    {
        time_t now = time(NULL);
        struct tm tmv;
        gmtime_r(&now, &tmv);
        strftime(t->meta.created, sizeof t->meta.created, "%Y-%m-%d", &tmv);
    }
    t->meta.mem_usable_bytes = (int64_t)(yml_memory_gib(root, gpu) * 1073741824.0);
    *out = t;
    return 0;
fail:
    hs_ptable_destroy(t);
    return rc;
}

/* ---- the current layout ---------------------------------------------------------- */

int hs_vidur_import_ex(hs_ptable **out, const char *vidur_dir, const char *gpu, const char *model_path,
                       const char *network, unsigned flags, hs_vidur_stats *st, hs_err *err)
{
    char mlp[HS__VIDUR_PATH_CAP], path[HS__VIDUR_PATH_CAP], prefix[300], net_file[2][HS__VIDUR_PATH_CAP];
    char label[HS__VIDUR_PATH_CAP];
    char **files = NULL;
    const char *net = NULL;
    int n = 0, rc;
    hs__vidur_src s;
    *out = NULL;
    if ((rc = hs__vidur_fmt(mlp, sizeof mlp, err, "compute/%s/%s/mlp.csv", gpu, model_path)) ||
        (rc = hs__vidur_fmt(prefix, sizeof prefix, err, "%s_attention_", gpu)))
        return rc;
    if (network) {
        net = network;
        if (!*net) {
            net = NULL;
            for (size_t i = 0; i < sizeof gpu_map / sizeof gpu_map[0]; i++)
                if (!strcmp(gpu_map[i].vidur, gpu)) net = gpu_map[i].network;
        }
        if (net) {
            if ((rc = hs__vidur_fmt(path, sizeof path, err, "%s/network/%s", vidur_dir, net))) return rc;
            if (!hs__is_dir(path)) {
                if (*network) return hs_errf(err, HS_ENOTFOUND, "%s: no such network folder", path);
                net = NULL; /* the default is optional */
            }
        }
    }
    if (net && ((rc = hs__vidur_fmt(net_file[0], sizeof net_file[0], err, "network/%s/all_reduce.csv", net)) ||
                (rc = hs__vidur_fmt(net_file[1], sizeof net_file[1], err, "network/%s/send_recv.csv", net)) ||
                (rc = hs__vidur_fmt(label, sizeof label, err, "network/%s", net))))
        return rc;
    /* Attention files sit at the top level, named <gpu>_attention_*.csv;
     * those of other shapes are left alone. */
    if ((rc = hs__list_files(vidur_dir, prefix, ".csv", &files, &n, err))) return rc;
    s = (hs__vidur_src){.root = vidur_dir, .gpu = gpu, .model_path = model_path, .layout = "", .mlp = mlp,
                        .mlp_note = "", .attn = files, .n_attn = n,
                        .net = {net ? net_file[0] : NULL, net ? net_file[1] : NULL}, .net_label = net ? label : NULL};
    rc = hs__vidur_import_src(out, &s, flags, st, err);
    hs__names_free(files, n);
    return rc;
}

int hs_vidur_import(hs_ptable **out, const char *vidur_dir, const char *gpu,
                    const char *model_path, const char *network, hs_err *err)
{
    return hs_vidur_import_ex(out, vidur_dir, gpu, model_path, network, 0, NULL, err);
}
