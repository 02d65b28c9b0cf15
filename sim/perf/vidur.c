/* vidur.c - importer for the kernel timings published by the Vidur project
 * (github.com/microsoft/vidur, MIT) into hetsim's table format; see table.h.
 *
 * Vidur's layout (all times in ms, one row per measured point, columns named
 * time_stats.<op>.{min,max,mean,median,std} plus the shape):
 *   compute/<gpu>/<org>/<model>/mlp.csv   per-op times per num_tokens and
 *                                          num_tensor_parallel_workers
 *   <gpu>_attention_*.csv                  attention kernels per batch_size,
 *                                          kv_cache_size, prefill_chunk_size
 *   network/<net>/{all_reduce,send_recv}.csv  collectives per size, num_workers
 *   device_configs/<gpu>.yml               memory the project assumed
 * We keep medians, convert to us and map names onto ours.  Vidur repeats some
 * points (e.g. num_tokens 4096 twice per TP degree); repeated keys are
 * averaged, and both layer norms of a layer feed "norm".  Only single-node
 * collectives are imported (devices_per_node == num_workers): a TP group
 * lives in one node, and our format has no node-count column. */
#include "perf/table.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf/table_int.h"

static const struct { const char *vidur; int op; } op_map[] = {
    {"emb", HS_OP_EMB},
    {"input_layernorm", HS_OP_NORM},
    {"post_attention_layernorm", HS_OP_NORM},
    {"attn_pre_proj", HS_OP_QKV},
    {"attn_rope", HS_OP_ROPE},
    {"attn_post_proj", HS_OP_ATTN_OUT},
    {"mlp_up_proj", HS_OP_MLP_UP},
    {"mlp_act", HS_OP_ACT},
    {"mlp_down_proj", HS_OP_MLP_DOWN},
    {"add", HS_OP_ADD},
};
#define N_OPMAP ((int)(sizeof op_map / sizeof op_map[0]))

static const struct { const char *vidur, *ours, *network; } gpu_map[] = {
    {"a100", "a100-80g", "a100_dgx"},
    {"a40", "a40", "a40_pairwise_nvlink"},
    {"h100", "h100-sxm-80g", "h100_dgx"},
};

int hs_vidur_gpu_name(char *buf, size_t cap, const char *vidur_gpu, hs_err *err)
{
    const char *name = vidur_gpu;
    for (size_t i = 0; i < sizeof gpu_map / sizeof gpu_map[0]; i++)
        if (!strcmp(gpu_map[i].vidur, vidur_gpu)) name = gpu_map[i].ours;
    if ((size_t)snprintf(buf, cap, "%s", name) >= cap)
        return hs_errf(err, HS_ERANGE, "GPU name \"%s\" too long", vidur_gpu);
    return 0;
}

int hs_vidur_model_name(char *buf, size_t cap, const char *model_path, hs_err *err)
{
    const char *base = strrchr(model_path, '/');
    size_t n;
    base = base ? base + 1 : model_path;
    n = strlen(base);
    if (n > 3 && !strcmp(base + n - 3, "-hf")) n -= 3;
    if (n == 0 || n >= cap) return hs_errf(err, HS_ERANGE, "model name \"%s\" empty or too long", model_path);
    for (size_t i = 0; i < n; i++) buf[i] = (char)tolower((unsigned char)base[i]);
    buf[n] = '\0';
    return 0;
}

/* Column index by name, -1 when absent. */
static int col(const char **hdr, int nh, const char *name)
{
    for (int i = 0; i < nh; i++)
        if (!strcmp(hdr[i], name)) return i;
    return -1;
}

/* Copies the header (field[] is overwritten by each record). */
static int save_header(const hs__tcsv *c, char ***out, hs_err *err)
{
    char **h = calloc((size_t)c->nf, sizeof *h);
    if (!h) return hs_errf(err, HS_ENOMEM, "out of memory");
    for (int i = 0; i < c->nf; i++)
        if (!(h[i] = strdup(c->field[i]))) {
            hs__names_free(h, i);
            return hs_errf(err, HS_ENOMEM, "out of memory");
        }
    *out = h;
    return 0;
}

static int need_col(const hs__tcsv *c, const char **hdr, int nh, const char *name, int *idx, hs_err *err)
{
    if ((*idx = col(hdr, nh, name)) < 0)
        return hs_errf(err, HS_EPARSE, "%s:1: missing column \"%s\"", c->path, name);
    return 0;
}

/* ---- duplicate merging ---------------------------------------------------- */

static int dense_cmp(const void *pa, const void *pb)
{
    const hs_dense_row *a = pa, *b = pb;
    if (a->op != b->op) return a->op < b->op ? -1 : 1;
    if (a->tp != b->tp) return a->tp < b->tp ? -1 : 1;
    if (a->tokens != b->tokens) return a->tokens < b->tokens ? -1 : 1;
    return a->line < b->line ? -1 : a->line > b->line;
}
static int attn_cmp(const void *pa, const void *pb)
{
    const hs_attn_row *a = pa, *b = pb;
    if (a->tp != b->tp) return a->tp < b->tp ? -1 : 1;
    if (a->x != b->x) return a->x < b->x ? -1 : 1;
    if (a->y != b->y) return a->y < b->y ? -1 : 1;
    return a->line < b->line ? -1 : a->line > b->line;
}
static int comm_cmp(const void *pa, const void *pb)
{
    const hs_comm_row *a = pa, *b = pb;
    if (a->gpus != b->gpus) return a->gpus < b->gpus ? -1 : 1;
    if (a->bytes != b->bytes) return a->bytes < b->bytes ? -1 : 1;
    return a->line < b->line ? -1 : a->line > b->line;
}

/* Averages runs of equal keys in place (rows sorted first; bits are all 16). */
static void merge_dups(hs_ptable *t)
{
    size_t w = 0;
    if (t->n_dense) qsort(t->dense, t->n_dense, sizeof *t->dense, dense_cmp);
    for (size_t i = 0; i < t->n_dense;) {
        size_t j = i;
        double s = 0;
        while (j < t->n_dense && t->dense[j].op == t->dense[i].op && t->dense[j].tp == t->dense[i].tp &&
               t->dense[j].tokens == t->dense[i].tokens)
            s += t->dense[j++].us;
        t->dense[w] = t->dense[i];
        t->dense[w++].us = s / (double)(j - i);
        i = j;
    }
    t->n_dense = w;
    for (int k = 0; k < 2; k++) {
        w = 0;
        if (t->n_attn[k]) qsort(t->attn[k], t->n_attn[k], sizeof *t->attn[k], attn_cmp);
        for (size_t i = 0; i < t->n_attn[k];) {
            size_t j = i;
            double s = 0;
            while (j < t->n_attn[k] && !memcmp(&t->attn[k][j], &t->attn[k][i], 3 * sizeof(int32_t)))
                s += t->attn[k][j++].us;
            t->attn[k][w] = t->attn[k][i];
            t->attn[k][w++].us = s / (double)(j - i);
            i = j;
        }
        t->n_attn[k] = w;
        w = 0;
        if (t->n_comm[k]) qsort(t->comm[k], t->n_comm[k], sizeof *t->comm[k], comm_cmp);
        for (size_t i = 0; i < t->n_comm[k];) {
            size_t j = i;
            double s = 0;
            while (j < t->n_comm[k] && t->comm[k][j].gpus == t->comm[k][i].gpus &&
                   t->comm[k][j].bytes == t->comm[k][i].bytes)
                s += t->comm[k][j++].us;
            t->comm[k][w] = t->comm[k][i];
            t->comm[k][w++].us = s / (double)(j - i);
            i = j;
        }
        t->n_comm[k] = w;
    }
}

/* ---- compute/<gpu>/<model>/mlp.csv --------------------------------------- */

typedef struct shape {
    long heads, kv_heads, hidden;
} shape;

static int read_mlp(hs_ptable *t, const char *path, shape *sh, hs_err *err)
{
    hs__tcsv c;
    char **hdr = NULL;
    int nh = 0, rc, ctok, ctp, cop[N_OPMAP], cshape[3], have = 0;
    static const char *const shape_cols[3] = {"n_head", "n_kv_head", "n_embd"};
    if ((rc = hs__tcsv_open(&c, path, err))) return rc;
    if ((rc = save_header(&c, &hdr, err))) goto out;
    nh = c.nf;
    if ((rc = need_col(&c, (const char **)hdr, nh, "num_tokens", &ctok, err)) ||
        (rc = need_col(&c, (const char **)hdr, nh, "num_tensor_parallel_workers", &ctp, err)))
        goto out;
    for (int k = 0; k < 3; k++)
        if ((rc = need_col(&c, (const char **)hdr, nh, shape_cols[k], &cshape[k], err))) goto out;
    for (int i = 0; i < N_OPMAP; i++) {
        char name[96];
        snprintf(name, sizeof name, "time_stats.%s.median", op_map[i].vidur);
        cop[i] = col((const char **)hdr, nh, name); /* absent op: no rows */
    }
    while ((rc = hs__tcsv_next(&c, err)) == 1) {
        long tok, tp, v[3];
        if (c.nf != nh) {
            rc = hs_errf(err, HS_EPARSE, "%s:%d: expected %d fields, got %d", path, c.lineno, nh, c.nf);
            goto out;
        }
        if ((rc = hs__tcsv_int(&c, ctok, "num_tokens", 1, 1L << 30, &tok, err)) ||
            (rc = hs__tcsv_int(&c, ctp, "num_tensor_parallel_workers", 1, HS_MAX_TP, &tp, err)))
            goto out;
        for (int k = 0; k < 3; k++)
            if ((rc = hs__tcsv_int(&c, cshape[k], shape_cols[k], 1, 1L << 24, &v[k], err))) goto out;
        if (!have) {
            *sh = (shape){v[0], v[1], v[2]};
            have = 1;
        } else if (v[0] != sh->heads || v[1] != sh->kv_heads || v[2] != sh->hidden) {
            rc = hs_errf(err, HS_EPARSE, "%s:%d: model shape differs from the first row", path, c.lineno);
            goto out;
        }
        for (int i = 0; i < N_OPMAP; i++) {
            double ms;
            if (cop[i] < 0 || c.field[cop[i]][0] == '\0') continue;
            if ((rc = hs__tcsv_num(&c, cop[i], hdr[cop[i]], 0, 1e9, &ms, err))) goto out;
            if (ms <= 0) continue; /* below Kineto's resolution: no information */
            if ((rc = hs_ptable_add_dense(t, op_map[i].op, (int)tp, 16, (int)tok, ms * 1e3, err))) goto out;
            t->dense[t->n_dense - 1].line = c.lineno;
        }
    }
    if (rc == 0 && !have) rc = hs_errf(err, HS_EPARSE, "%s: no data rows", path);
out:
    hs__names_free(hdr, nh);
    hs__tcsv_close(&c);
    return rc < 0 ? rc : 0;
}

/* ---- <gpu>_attention_*.csv ------------------------------------------------- */

/* Imports the file when its shape equals sh (returns 0 and imports nothing
 * otherwise); sets *used. */
static int read_attention(hs_ptable *t, const char *path, const shape *sh, int *used, hs_err *err)
{
    hs__tcsv c;
    char **hdr = NULL;
    int nh = 0, rc, cemb, cq, ckv, ctp, cb, cchunk, ckvs, cpre, cdec, cprefill, cbs = -1;
    *used = 0;
    if ((rc = hs__tcsv_open(&c, path, err))) return rc;
    if ((rc = save_header(&c, &hdr, err))) goto out;
    nh = c.nf;
    if ((rc = need_col(&c, (const char **)hdr, nh, "n_embd", &cemb, err)) ||
        (rc = need_col(&c, (const char **)hdr, nh, "n_q_head", &cq, err)) ||
        (rc = need_col(&c, (const char **)hdr, nh, "n_kv_head", &ckv, err)) ||
        (rc = need_col(&c, (const char **)hdr, nh, "num_tensor_parallel_workers", &ctp, err)) ||
        (rc = need_col(&c, (const char **)hdr, nh, "batch_size", &cb, err)) ||
        (rc = need_col(&c, (const char **)hdr, nh, "prefill_chunk_size", &cchunk, err)) ||
        (rc = need_col(&c, (const char **)hdr, nh, "kv_cache_size", &ckvs, err)) ||
        (rc = need_col(&c, (const char **)hdr, nh, "is_prefill", &cpre, err)) ||
        (rc = need_col(&c, (const char **)hdr, nh, "time_stats.attn_decode.median", &cdec, err)) ||
        (rc = need_col(&c, (const char **)hdr, nh, "time_stats.attn_prefill.median", &cprefill, err)))
        goto out;
    cbs = col((const char **)hdr, nh, "block_size");
    while ((rc = hs__tcsv_next(&c, err)) == 1) {
        long emb, q, kv, tp, b, chunk, kvs;
        int prefill;
        double ms;
        if (c.nf != nh) {
            rc = hs_errf(err, HS_EPARSE, "%s:%d: expected %d fields, got %d", path, c.lineno, nh, c.nf);
            goto out;
        }
        if ((rc = hs__tcsv_int(&c, cemb, "n_embd", 1, 1L << 24, &emb, err)) ||
            (rc = hs__tcsv_int(&c, cq, "n_q_head", 1, 1L << 20, &q, err)) ||
            (rc = hs__tcsv_int(&c, ckv, "n_kv_head", 1, 1L << 20, &kv, err)))
            goto out;
        if (emb != sh->hidden || q != sh->heads || kv != sh->kv_heads) {
            if (*used) {
                rc = hs_errf(err, HS_EPARSE, "%s:%d: model shape differs from earlier rows", path, c.lineno);
                goto out;
            }
            break; /* another model's shape */
        }
        if (!*used && cbs >= 0) {
            long bs;
            if ((rc = hs__tcsv_int(&c, cbs, "block_size", 1, 65536, &bs, err))) goto out;
            t->meta.kv_block_size = (int)bs;
        }
        *used = 1;
        if (!strcmp(c.field[cpre], "True")) prefill = 1;
        else if (!strcmp(c.field[cpre], "False")) prefill = 0;
        else {
            rc = hs_errf(err, HS_EPARSE, "%s:%d: is_prefill: \"%s\" is not True or False", path,
                         c.lineno, c.field[cpre]);
            goto out;
        }
        if ((rc = hs__tcsv_int(&c, ctp, "num_tensor_parallel_workers", 1, HS_MAX_TP, &tp, err)) ||
            (rc = hs__tcsv_int(&c, cb, "batch_size", 1, 1L << 30, &b, err)) ||
            (rc = hs__tcsv_int(&c, ckvs, "kv_cache_size", 0, 1L << 30, &kvs, err)) ||
            (rc = hs__tcsv_num(&c, prefill ? cprefill : cdec, prefill ? "attn_prefill" : "attn_decode",
                              0, 1e9, &ms, err)))
            goto out;
        if (ms <= 0) continue;
        if (prefill) {
            /* Our prefill rows are one sequence; Vidur profiles prefill with
             * batch_size 1. */
            if (b != 1) {
                rc = hs_errf(err, HS_EPARSE, "%s:%d: prefill with batch_size %ld (only 1 is supported)",
                             path, c.lineno, b);
                goto out;
            }
            if ((rc = hs__tcsv_int(&c, cchunk, "prefill_chunk_size", 1, 1L << 30, &chunk, err))) goto out;
            rc = hs_ptable_add_attn(t, HS_ATTN_PREFILL, (int)tp, (int)chunk, (int)kvs, ms * 1e3, err);
        } else {
            rc = hs_ptable_add_attn(t, HS_ATTN_DECODE, (int)tp, (int)b, (int)kvs, ms * 1e3, err);
        }
        if (rc) goto out;
        t->attn[prefill][t->n_attn[prefill] - 1].line = c.lineno;
    }
out:
    hs__names_free(hdr, nh);
    hs__tcsv_close(&c);
    return rc < 0 ? rc : 0;
}

/* ---- network/<net>/{all_reduce,send_recv}.csv --------------------------------------------------- */

static int read_network(hs_ptable *t, int kind, const char *path, hs_err *err)
{
    hs__tcsv c;
    char **hdr = NULL;
    int nh = 0, rc, cw, cdev, csize, ctime;
    const char *tcol = kind == HS_COMM_ALLREDUCE ? "time_stats.all_reduce.median" : "time_stats.send_recv.median";
    if ((rc = hs__tcsv_open(&c, path, err))) return rc;
    if ((rc = save_header(&c, &hdr, err))) goto out;
    nh = c.nf;
    if ((rc = need_col(&c, (const char **)hdr, nh, "num_workers", &cw, err)) ||
        (rc = need_col(&c, (const char **)hdr, nh, "devices_per_node", &cdev, err)) ||
        (rc = need_col(&c, (const char **)hdr, nh, "size", &csize, err)) ||
        (rc = need_col(&c, (const char **)hdr, nh, tcol, &ctime, err)))
        goto out;
    while ((rc = hs__tcsv_next(&c, err)) == 1) {
        long w, dev;
        double size, ms;
        if (c.nf != nh) {
            rc = hs_errf(err, HS_EPARSE, "%s:%d: expected %d fields, got %d", path, c.lineno, nh, c.nf);
            goto out;
        }
        if ((rc = hs__tcsv_int(&c, cw, "num_workers", 1, 4096, &w, err)) ||
            (rc = hs__tcsv_int(&c, cdev, "devices_per_node", 1, 4096, &dev, err)) ||
            (rc = hs__tcsv_num(&c, csize, "size", 0, 1e15, &size, err)) ||
            (rc = hs__tcsv_num(&c, ctime, tcol, 0, 1e9, &ms, err)))
            goto out;
        if (dev != w || w < 2 || size <= 0 || ms <= 0) continue; /* spans nodes */
        if ((rc = hs_ptable_add_comm(t, kind, (int)w, size, ms * 1e3, err))) goto out;
        t->comm[kind][t->n_comm[kind] - 1].line = c.lineno;
    }
out:
    hs__names_free(hdr, nh);
    hs__tcsv_close(&c);
    return rc < 0 ? rc : 0;
}

/* total_memory_gb from device_configs/<gpu>.yml (GiB, as Vidur uses it);
 * 0 when absent. */
static double yml_memory_gib(const char *vidur_dir, const char *gpu)
{
    char path[1100], line[256];
    double v = 0;
    FILE *f;
    snprintf(path, sizeof path, "%s/device_configs/%s.yml", vidur_dir, gpu);
    if (!(f = fopen(path, "r"))) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, " total_memory_gb: %lf", &v) == 1) break;
    fclose(f);
    return v > 0 && v < 1e6 ? v : 0;
}

int hs_vidur_import(hs_ptable **out, const char *vidur_dir, const char *gpu,
                    const char *model_path, const char *network, hs_err *err)
{
    hs_ptable *t = NULL;
    char path[1100], src[256];
    shape sh = {0, 0, 0};
    char **files = NULL;
    int rc;
    *out = NULL;
    if ((rc = hs_ptable_create(&t, err))) return rc;
    if ((rc = hs_vidur_gpu_name(t->meta.gpu, sizeof t->meta.gpu, gpu, err)) ||
        (rc = hs_vidur_model_name(t->meta.model, sizeof t->meta.model, model_path, err)))
        goto fail;
    snprintf(t->meta.backend, sizeof t->meta.backend, "vidur");
    snprintf(path, sizeof path, "%s/compute/%s/%s/mlp.csv", vidur_dir, gpu, model_path);
    if ((rc = read_mlp(t, path, &sh, err))) goto fail;
    if (snprintf(src, sizeof src, "Vidur profiles (github.com/microsoft/vidur, MIT): compute/%s/%s/mlp.csv",
                 gpu, model_path) >= (int)sizeof src)
        strcpy(src + sizeof src - 4, "..."); /* a description: shortened, not an error */

    /* Attention files sit at the top level, named <gpu>_attention_*.csv;
     * those of other shapes are left alone. */
    {
        char prefix[64];
        int n = 0;
        snprintf(prefix, sizeof prefix, "%s_attention_", gpu);
        if ((rc = hs__list_files(vidur_dir, prefix, ".csv", &files, &n, err))) goto fail;
        for (int i = 0; i < n; i++) {
            int used;
            snprintf(path, sizeof path, "%s/%s", vidur_dir, files[i]);
            if ((rc = read_attention(t, path, &sh, &used, err))) {
                hs__names_free(files, n);
                goto fail;
            }
            if (used && strlen(src) + strlen(files[i]) + 3 < sizeof src) {
                strcat(src, ", ");
                strcat(src, files[i]);
            }
        }
        hs__names_free(files, n);
    }

    if (network) {
        const char *net = network;
        int k;
        if (!*net) {
            net = NULL;
            for (size_t i = 0; i < sizeof gpu_map / sizeof gpu_map[0]; i++)
                if (!strcmp(gpu_map[i].vidur, gpu)) net = gpu_map[i].network;
        }
        snprintf(path, sizeof path, "%s/network/%s", vidur_dir, net ? net : "");
        if (net && !hs__is_dir(path)) {
            if (*network) {
                rc = hs_errf(err, HS_ENOTFOUND, "%s: no such network folder", path);
                goto fail;
            }
            net = NULL; /* the default is optional */
        }
        for (k = 0; net && k < 2; k++) {
            snprintf(path, sizeof path, "%s/network/%s/%s.csv", vidur_dir, net, k ? "send_recv" : "all_reduce");
            if (hs__is_file(path) && (rc = read_network(t, k, path, err))) goto fail;
        }
        if (net && strlen(src) + strlen(net) + 12 < sizeof src) {
            strcat(src, ", network/");
            strcat(src, net);
        }
    }
    merge_dups(t);
    if ((rc = hs_ptable_sort(t, err))) goto fail;
    memcpy(t->meta.source, src, sizeof src);
    {
        time_t now = time(NULL);
        struct tm tmv;
        gmtime_r(&now, &tmv);
        strftime(t->meta.created, sizeof t->meta.created, "%Y-%m-%d", &tmv);
    }
    /* Vidur's total_memory_gb is the memory it lets a replica use (45 on the
     * 48 GB A40), so it is our usable figure; the total stays unknown. */
    t->meta.mem_usable_bytes = (int64_t)(yml_memory_gib(vidur_dir, gpu) * 1073741824.0);
    *out = t;
    return 0;
fail:
    hs_ptable_destroy(t);
    return rc;
}

int hs_vidur_import_all(const char *vidur_dir, const char *outdir, FILE *log, hs_err *err)
{
    char path[1100], **gpus = NULL, **orgs = NULL, **models = NULL;
    int ng = 0, no = 0, nm = 0, rc = 0, count = 0;
    snprintf(path, sizeof path, "%s/compute", vidur_dir);
    if (!hs__is_dir(path)) return hs_errf(err, HS_ENOTFOUND, "%s: not a Vidur profile folder", path);
    if ((rc = hs__subdirs(path, &gpus, &ng, err))) return rc;
    for (int g = 0; !rc && g < ng; g++) {
        snprintf(path, sizeof path, "%s/compute/%s", vidur_dir, gpus[g]);
        if ((rc = hs__subdirs(path, &orgs, &no, err))) break;
        for (int o = 0; !rc && o < no; o++) {
            snprintf(path, sizeof path, "%s/compute/%s/%s", vidur_dir, gpus[g], orgs[o]);
            if ((rc = hs__subdirs(path, &models, &nm, err))) break;
            for (int m = 0; !rc && m < nm; m++) {
                char mp[512], dst[1100];
                hs_ptable *t = NULL;
                snprintf(mp, sizeof mp, "%s/%s", orgs[o], models[m]);
                snprintf(path, sizeof path, "%s/compute/%s/%s/mlp.csv", vidur_dir, gpus[g], mp);
                if (!hs__is_file(path)) continue;
                if ((rc = hs_vidur_import(&t, vidur_dir, gpus[g], mp, "", err))) break;
                snprintf(dst, sizeof dst, "%s/%s/%s", outdir, t->meta.gpu, t->meta.model);
                rc = hs_ptable_write(t, dst, err);
                if (!rc && log)
                    fprintf(log, "%s/%s -> %s: %zu dense, %zu decode, %zu prefill, %zu all-reduce, %zu send/recv rows\n",
                            gpus[g], mp, dst, t->n_dense, t->n_attn[0], t->n_attn[1], t->n_comm[0], t->n_comm[1]);
                count++;
                hs_ptable_destroy(t);
            }
            hs__names_free(models, nm);
            models = NULL;
        }
        hs__names_free(orgs, no);
        orgs = NULL;
    }
    hs__names_free(gpus, ng);
    if (!rc && count == 0) rc = hs_errf(err, HS_ENOTFOUND, "%s/compute: no mlp.csv found", vidur_dir);
    return rc;
}
