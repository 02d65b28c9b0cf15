/* table.c - measured latency tables: rows, reader, writer, interpolation and
 * the linear coefficient fits of the hot path; see table.h.
 *
 * Invariants: after hs_ptable_sort (the reader applies it, the writer
 * requires it) every row set is ordered by its key with no key twice, so a
 * lookup is one contiguous run and files come out byte-identical for equal
 * tables.  Every stored time is finite and > 0 (relative-error
 * fits divide by it). */
#include "perf/table.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <gsl/gsl_errno.h>

#include "core/conf.h"
#include "core/vec.h"
#include "perf/table_int.h"

static const char *const op_names[HS_OP_COUNT] = {
    "emb", "norm", "qkv", "rope", "attn_out", "mlp_up", "act", "mlp_down", "add", "lm_head",
};

const char *hs_op_name(int op)
{
    return op >= 0 && op < HS_OP_COUNT ? op_names[op] : "?";
}

int hs_op_find(const char *name)
{
    for (int i = 0; i < HS_OP_COUNT; i++)
        if (!strcmp(op_names[i], name)) return i;
    return -1;
}

/* ---- rows ---------------------------------------------------------------- */

static const hs_field meta_fields[] = {
    HS_FIELD_STR(hs_ptable_meta, gpu, 1, NULL, "GPU profile name (profiles/gpus)"),
    HS_FIELD_STR(hs_ptable_meta, model, 1, NULL, "model name (models/)"),
    HS_FIELD_STR(hs_ptable_meta, backend, 1, NULL, "cuda, cpu or vidur"),
    HS_FIELD_STR(hs_ptable_meta, dtype, 0, "fp16", "activation dtype"),
    HS_FIELD_STR(hs_ptable_meta, source, 0, "", "where the numbers come from"),
    HS_FIELD_STR(hs_ptable_meta, created, 0, "", "ISO date"),
    HS_FIELD_NUM(hs_ptable_meta, mem_total_bytes, HS_F_I64, 0, 0, 0, 1e15, "device memory, bytes"),
    HS_FIELD_NUM(hs_ptable_meta, mem_usable_bytes, HS_F_I64, 0, 0, 0, 1e15, "usable memory, bytes"),
    HS_FIELD_NUM(hs_ptable_meta, kv_block_size, HS_F_INT, 0, 16, 1, 65536, "tokens per KV block"),
    HS_FIELD_NUM(hs_ptable_meta, kv_blocks, HS_F_I64, 0, 0, 0, 1e12, "KV blocks that fit"),
    HS_FIELD_STR(hs_ptable_meta, timing, 0, "", "how hetsim-exec timed each op: alone, cold or stream"),
    HS_FIELD_NUM(hs_ptable_meta, rest, HS_F_DOUBLE, 0, 0, 0, 10, "idle time after each row, times the row's own, so that a sweep stays under the power cap (0: none or not said)"),
    HS_FIELD_NUM(hs_ptable_meta, kv_pool_bytes, HS_F_I64, 0, 0, 0, 1e15, "K and V pool the attention rows ran over, bytes (0: not said)"),
    HS_FIELD_NUM(hs_ptable_meta, decode_sms, HS_F_INT, 0, 0, 0, 100000, "multiprocessors the decode-attention kernel ran on (0: its split not said)"),
    HS_FIELD_NUM(hs_ptable_meta, decode_resident, HS_F_INT, 0, 0, 0, 1024, "decode-attention blocks resident per multiprocessor"),
    HS_FIELD_NUM(hs_ptable_meta, decode_part_max, HS_F_INT, 0, 0, 0, 1 << 24, "decode attention: most context keys per block"),
    HS_FIELD_NUM(hs_ptable_meta, decode_part_min, HS_F_INT, 0, 0, 0, 1 << 24, "decode attention: fewest keys per block when it splits to fill the device"),
    HS_FIELD_NUM(hs_ptable_meta, decode_part_align, HS_F_INT, 0, 1, 1, 1 << 24, "decode attention: partitions are a multiple of this many keys"),
    HS_FIELD_NUM(hs_ptable_meta, decode_fill, HS_F_INT, 0, 0, 0, 1024, "decode attention: blocks per multiprocessor the split aims at"),
    HS_FIELD_STR(hs_ptable_meta, clock_monitor, 0, "", "what read the GPU's clocks while the rows were timed (clocks.csv beside)"),
    {0},
};

int hs_ptable_create(hs_ptable **out, hs_err *err)
{
    hs_ptable *t = calloc(1, sizeof *t);
    *out = NULL;
    if (!t) return hs_errf(err, HS_ENOMEM, "out of memory creating a latency table");
    hs_conf_defaults(&t->meta, meta_fields);
    snprintf(t->meta.backend, sizeof t->meta.backend, "cuda");
    *out = t;
    return 0;
}

void hs_ptable_destroy(hs_ptable *t)
{
    if (!t) return;
    free(t->dense);
    for (int k = 0; k < 2; k++) {
        free(t->attn[k]);
        free(t->comm[k]);
    }
    free(t);
}

/* The error of an add_* that could not grow its rows. */
static int nomem(hs_err *err)
{
    return hs_errf(err, HS_ENOMEM, "out of memory growing a latency table");
}

static int valid_bits(int b) { return b == 16 || b == 8 || b == 4 || b == 3; }

static int check_us(double us, hs_err *err)
{
    if (!isfinite(us) || us <= 0)
        return hs_errf(err, HS_ERANGE, "time_us %g must be finite and > 0", us);
    return 0;
}

int hs_ptable_add_dense(hs_ptable *t, int op, int tp, int bits, int tokens,
                        double us, hs_err *err)
{
    int rc;
    if (op < 0 || op >= HS_OP_COUNT) return hs_errf(err, HS_ERANGE, "op %d unknown", op);
    if (tp < 1 || tp > HS_MAX_TP) return hs_errf(err, HS_ERANGE, "tp %d outside 1..%d", tp, HS_MAX_TP);
    if (!valid_bits(bits)) return hs_errf(err, HS_ERANGE, "bits %d not one of 16, 8, 4, 3", bits);
    if (tokens < 1) return hs_errf(err, HS_ERANGE, "tokens %d < 1", tokens);
    if ((rc = check_us(us, err))) return rc;
    if (hs_vec_reserve((void **)&t->dense, &t->cap_dense, t->n_dense + 1, sizeof *t->dense, 64))
        return nomem(err);
    t->dense[t->n_dense++] = (hs_dense_row){op, tp, bits, tokens, us, 0};
    return 0;
}

int hs_ptable_add_attn(hs_ptable *t, int kind, int tp, int x, int y,
                       double us, hs_err *err)
{
    int rc;
    if (kind != HS_ATTN_DECODE && kind != HS_ATTN_PREFILL)
        return hs_errf(err, HS_EINVAL, "attention kind %d unknown", kind);
    if (tp < 1 || tp > HS_MAX_TP) return hs_errf(err, HS_ERANGE, "tp %d outside 1..%d", tp, HS_MAX_TP);
    if (x < 1) return hs_errf(err, HS_ERANGE, "%s %d < 1", kind ? "chunk" : "batch", x);
    if (y < 0) return hs_errf(err, HS_ERANGE, "%s %d < 0", kind ? "prefix" : "context", y);
    if ((rc = check_us(us, err))) return rc;
    if (hs_vec_reserve((void **)&t->attn[kind], &t->cap_attn[kind], t->n_attn[kind] + 1,
                       sizeof *t->attn[kind], 64))
        return nomem(err);
    t->attn[kind][t->n_attn[kind]++] = (hs_attn_row){tp, x, y, us, 0};
    return 0;
}

int hs_ptable_add_comm(hs_ptable *t, int kind, int gpus, double bytes,
                       double us, hs_err *err)
{
    int rc;
    if (kind != HS_COMM_ALLREDUCE && kind != HS_COMM_SENDRECV)
        return hs_errf(err, HS_EINVAL, "communication kind %d unknown", kind);
    if (gpus < 2 || gpus > 4096) return hs_errf(err, HS_ERANGE, "gpus %d outside 2..4096", gpus);
    if (!isfinite(bytes) || bytes <= 0) return hs_errf(err, HS_ERANGE, "bytes %g must be > 0", bytes);
    if ((rc = check_us(us, err))) return rc;
    if (hs_vec_reserve((void **)&t->comm[kind], &t->cap_comm[kind], t->n_comm[kind] + 1,
                       sizeof *t->comm[kind], 64))
        return nomem(err);
    t->comm[kind][t->n_comm[kind]++] = (hs_comm_row){gpus, bytes, us, 0};
    return 0;
}

/* Total orders on the keys, ending on the source line so that duplicate
 * reports are deterministic. */
#define CMP(a, b) do { if ((a) != (b)) return (a) < (b) ? -1 : 1; } while (0)
static int dense_key(const void *pa, const void *pb)
{
    const hs_dense_row *a = pa, *b = pb;
    CMP(a->op, b->op); CMP(a->tp, b->tp); CMP(b->bits, a->bits); CMP(a->tokens, b->tokens);
    return 0;
}
static int dense_cmp(const void *pa, const void *pb)
{
    int c = dense_key(pa, pb);
    if (c) return c;
    CMP(((const hs_dense_row *)pa)->line, ((const hs_dense_row *)pb)->line);
    return 0;
}
static int attn_key(const void *pa, const void *pb)
{
    const hs_attn_row *a = pa, *b = pb;
    CMP(a->tp, b->tp); CMP(a->x, b->x); CMP(a->y, b->y);
    return 0;
}
static int attn_cmp(const void *pa, const void *pb)
{
    int c = attn_key(pa, pb);
    if (c) return c;
    CMP(((const hs_attn_row *)pa)->line, ((const hs_attn_row *)pb)->line);
    return 0;
}
static int comm_key(const void *pa, const void *pb)
{
    const hs_comm_row *a = pa, *b = pb;
    CMP(a->gpus, b->gpus); CMP(a->bytes, b->bytes);
    return 0;
}
static int comm_cmp(const void *pa, const void *pb)
{
    int c = comm_key(pa, pb);
    if (c) return c;
    CMP(((const hs_comm_row *)pa)->line, ((const hs_comm_row *)pb)->line);
    return 0;
}
#undef CMP

static const char *const attn_file[2] = {"attn_decode.csv", "attn_prefill.csv"};
static const char *const comm_file[2] = {"allreduce.csv", "sendrecv.csv"};

static int dup_error(const hs_ptable *t, const char *file, int l1, int l2,
                     const char *what, hs_err *err)
{
    const char *sep = t->dir[0] ? "/" : "";
    if (l1 && l2)
        return hs_errf(err, HS_EPARSE, "%s%s%s:%d: duplicate of line %d (%s)",
                       t->dir, sep, file, l2, l1, what);
    return hs_errf(err, HS_EPARSE, "%s%s%s: duplicate row (%s)", t->dir, sep, file, what);
}

int hs_ptable_sort(hs_ptable *t, hs_err *err)
{
    char what[128];
    if (t->n_dense) qsort(t->dense, t->n_dense, sizeof *t->dense, dense_cmp);
    for (size_t i = 1; i < t->n_dense; i++)
        if (!dense_key(&t->dense[i - 1], &t->dense[i])) {
            const hs_dense_row *r = &t->dense[i];
            snprintf(what, sizeof what, "op %s, tp %d, bits %d, tokens %d",
                     hs_op_name(r->op), r->tp, r->bits, r->tokens);
            return dup_error(t, "dense.csv", t->dense[i - 1].line, r->line, what, err);
        }
    for (int k = 0; k < 2; k++) {
        if (t->n_attn[k]) qsort(t->attn[k], t->n_attn[k], sizeof *t->attn[k], attn_cmp);
        for (size_t i = 1; i < t->n_attn[k]; i++)
            if (!attn_key(&t->attn[k][i - 1], &t->attn[k][i])) {
                const hs_attn_row *r = &t->attn[k][i];
                snprintf(what, sizeof what, "tp %d, %s %d, %s %d", r->tp,
                         k ? "chunk" : "batch", r->x, k ? "prefix" : "context", r->y);
                return dup_error(t, attn_file[k], t->attn[k][i - 1].line, r->line, what, err);
            }
        if (t->n_comm[k]) qsort(t->comm[k], t->n_comm[k], sizeof *t->comm[k], comm_cmp);
        for (size_t i = 1; i < t->n_comm[k]; i++)
            if (!comm_key(&t->comm[k][i - 1], &t->comm[k][i])) {
                const hs_comm_row *r = &t->comm[k][i];
                snprintf(what, sizeof what, "gpus %d, bytes %.17g", r->gpus, r->bytes);
                return dup_error(t, comm_file[k], t->comm[k][i - 1].line, r->line, what, err);
            }
    }
    return 0;
}

/* ---- reader --------------------------------------------------------------- */

static int check_header(const hs__tcsv *c, const char *const *cols, int n, hs_err *err)
{
    char want[128] = "";
    int ok = c->nf == n;
    for (int i = 0; i < n; i++) {
        if (ok && strcmp(c->field[i], cols[i])) ok = 0;
        strncat(want, cols[i], sizeof want - strlen(want) - 1);
        if (i + 1 < n) strncat(want, ",", sizeof want - strlen(want) - 1);
    }
    if (!ok) return hs_errf(err, HS_EPARSE, "%s:%d: header must be \"%s\"", c->path, c->lineno, want);
    return 0;
}

static int field_count(const hs__tcsv *c, int n, hs_err *err)
{
    if (c->nf != n)
        return hs_errf(err, HS_EPARSE, "%s:%d: expected %d fields, got %d", c->path,
                       c->lineno, n, c->nf);
    return 0;
}

static int read_dense(hs_ptable *t, const char *path, hs_err *err)
{
    static const char *const cols[] = {"op", "tp", "bits", "tokens", "time_us"};
    hs__tcsv c;
    int rc;
    if ((rc = hs__tcsv_open(&c, path, err))) return rc;
    if ((rc = check_header(&c, cols, 5, err))) goto out;
    while ((rc = hs__tcsv_next(&c, err)) == 1) {
        long tp, bits, tok;
        double us;
        int op = hs_op_find(c.field[0]);
        if ((rc = field_count(&c, 5, err))) goto out;
        if (op < 0) {
            rc = hs_errf(err, HS_EPARSE, "%s:%d: op: unknown operator \"%s\"", path, c.lineno, c.field[0]);
            goto out;
        }
        if ((rc = hs__tcsv_int(&c, 1, "tp", 1, HS_MAX_TP, &tp, err)) ||
            (rc = hs__tcsv_int(&c, 2, "bits", 3, 16, &bits, err)) ||
            (rc = hs__tcsv_int(&c, 3, "tokens", 1, 1L << 30, &tok, err)) ||
            (rc = hs__tcsv_num(&c, 4, "time_us", 0, 1e12, &us, err)))
            goto out;
        if (!valid_bits((int)bits)) {
            rc = hs_errf(err, HS_ERANGE, "%s:%d: bits: %ld is not one of 16, 8, 4, 3", path, c.lineno, bits);
            goto out;
        }
        if (us <= 0) {
            rc = hs_errf(err, HS_ERANGE, "%s:%d: time_us: %g must be > 0", path, c.lineno, us);
            goto out;
        }
        if ((rc = hs_ptable_add_dense(t, op, (int)tp, (int)bits, (int)tok, us, err))) goto out;
        t->dense[t->n_dense - 1].line = c.lineno;
    }
out:
    hs__tcsv_close(&c);
    return rc < 0 ? rc : 0;
}

static int read_attn(hs_ptable *t, int kind, const char *path, hs_err *err)
{
    static const char *const dec[] = {"tp", "batch", "context", "time_us"};
    static const char *const pre[] = {"tp", "chunk", "prefix", "time_us"};
    const char *const *cols = kind ? pre : dec;
    hs__tcsv c;
    int rc;
    if ((rc = hs__tcsv_open(&c, path, err))) return rc;
    if ((rc = check_header(&c, cols, 4, err))) goto out;
    while ((rc = hs__tcsv_next(&c, err)) == 1) {
        long tp, x, y;
        double us;
        if ((rc = field_count(&c, 4, err)) ||
            (rc = hs__tcsv_int(&c, 0, "tp", 1, HS_MAX_TP, &tp, err)) ||
            (rc = hs__tcsv_int(&c, 1, cols[1], 1, 1L << 30, &x, err)) ||
            (rc = hs__tcsv_int(&c, 2, cols[2], 0, 1L << 30, &y, err)) ||
            (rc = hs__tcsv_num(&c, 3, "time_us", 0, 1e12, &us, err)))
            goto out;
        if (us <= 0) {
            rc = hs_errf(err, HS_ERANGE, "%s:%d: time_us: %g must be > 0", path, c.lineno, us);
            goto out;
        }
        if ((rc = hs_ptable_add_attn(t, kind, (int)tp, (int)x, (int)y, us, err))) goto out;
        t->attn[kind][t->n_attn[kind] - 1].line = c.lineno;
    }
out:
    hs__tcsv_close(&c);
    return rc < 0 ? rc : 0;
}

static int read_comm(hs_ptable *t, int kind, const char *path, hs_err *err)
{
    static const char *const ar[] = {"gpus", "bytes", "time_us"};
    static const char *const sr[] = {"bytes", "time_us"};
    int nc = kind == HS_COMM_ALLREDUCE ? 3 : 2, b = nc - 2;
    hs__tcsv c;
    int rc;
    if ((rc = hs__tcsv_open(&c, path, err))) return rc;
    if ((rc = check_header(&c, kind == HS_COMM_ALLREDUCE ? ar : sr, nc, err))) goto out;
    while ((rc = hs__tcsv_next(&c, err)) == 1) {
        long gpus = 2;
        double bytes, us;
        if ((rc = field_count(&c, nc, err)) ||
            (b && (rc = hs__tcsv_int(&c, 0, "gpus", 2, 4096, &gpus, err))) ||
            (rc = hs__tcsv_num(&c, b, "bytes", 0, 1e15, &bytes, err)) ||
            (rc = hs__tcsv_num(&c, b + 1, "time_us", 0, 1e12, &us, err)))
            goto out;
        if (bytes <= 0 || us <= 0) {
            rc = hs_errf(err, HS_ERANGE, "%s:%d: %s must be > 0", path, c.lineno,
                         bytes <= 0 ? "bytes" : "time_us");
            goto out;
        }
        if ((rc = hs_ptable_add_comm(t, kind, (int)gpus, bytes, us, err))) goto out;
        t->comm[kind][t->n_comm[kind] - 1].line = c.lineno;
    }
out:
    hs__tcsv_close(&c);
    return rc < 0 ? rc : 0;
}

static int read_meta(hs_ptable *t, const char *path, hs_err *err)
{
    cJSON *j;
    int rc = hs_json_load(path, &j, err);
    if (rc) return rc;
    rc = hs_conf_fill(&t->meta, meta_fields, j, path, err);
    cJSON_Delete(j);
    if (rc) return rc;
    if (strcmp(t->meta.backend, "cuda") && strcmp(t->meta.backend, "cpu") &&
        strcmp(t->meta.backend, "vidur"))
        return hs_errf(err, HS_EPARSE, "%s: backend: \"%s\" is not cuda, cpu or vidur",
                       path, t->meta.backend);
    if (t->meta.timing[0] && strcmp(t->meta.timing, "alone") && strcmp(t->meta.timing, "cold") &&
        strcmp(t->meta.timing, "stream"))
        return hs_errf(err, HS_EPARSE, "%s: timing: \"%s\" is not alone, cold or stream", path,
                       t->meta.timing);
    return 0;
}

int hs_ptable_read(hs_ptable **out, const char *dir, hs_err *err)
{
    hs_ptable *t;
    char path[1100];
    int rc;
    *out = NULL;
    if (strlen(dir) >= sizeof t->dir) return hs_errf(err, HS_ERANGE, "%s: path too long", dir);
    if ((rc = hs_ptable_create(&t, err))) return rc;
    snprintf(t->dir, sizeof t->dir, "%s", dir);
    snprintf(path, sizeof path, "%s/meta.json", dir);
    if ((rc = read_meta(t, path, err))) goto fail;
    snprintf(path, sizeof path, "%s/dense.csv", dir);
    /* a collectives-only table (empty model) may have no kernels */
    if ((t->meta.model[0] || hs__is_file(path)) && (rc = read_dense(t, path, err))) goto fail;
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, attn_file[k]);
        if (hs__is_file(path) && (rc = read_attn(t, k, path, err))) goto fail;
        snprintf(path, sizeof path, "%s/%s", dir, comm_file[k]);
        if (hs__is_file(path) && (rc = read_comm(t, k, path, err))) goto fail;
    }
    if ((rc = hs_ptable_sort(t, err))) goto fail;
    *out = t;
    return 0;
fail:
    hs_ptable_destroy(t);
    return rc;
}

/* ---- writer --------------------------------------------------------------- */

/* Ten significant digits: enough for microsecond medians (Vidur's are ms with
 * three decimals) while keeping files readable; the round trip is exact to
 * 1e-10 relative. */
static int write_file(const hs_ptable *t, const char *dir, int which, hs_err *err)
{
    char path[1100];
    const char *name = which == 0 ? "dense.csv" : which <= 2 ? attn_file[which - 1] : comm_file[which - 3];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!(f = fopen(path, "w"))) return hs_errf(err, HS_EIO, "%s: cannot create: %s", path, strerror(errno));
    if (which == 0) {
        fputs("op,tp,bits,tokens,time_us\n", f);
        for (size_t i = 0; i < t->n_dense; i++) {
            const hs_dense_row *r = &t->dense[i];
            fprintf(f, "%s,%d,%d,%d,%.10g\n", hs_op_name(r->op), r->tp, r->bits, r->tokens, r->us);
        }
    } else if (which <= 2) {
        int k = which - 1;
        fputs(k ? "tp,chunk,prefix,time_us\n" : "tp,batch,context,time_us\n", f);
        for (size_t i = 0; i < t->n_attn[k]; i++) {
            const hs_attn_row *r = &t->attn[k][i];
            fprintf(f, "%d,%d,%d,%.10g\n", r->tp, r->x, r->y, r->us);
        }
    } else {
        int k = which - 3;
        fputs(k == HS_COMM_ALLREDUCE ? "gpus,bytes,time_us\n" : "bytes,time_us\n", f);
        for (size_t i = 0; i < t->n_comm[k]; i++) {
            const hs_comm_row *r = &t->comm[k][i];
            if (k == HS_COMM_ALLREDUCE) fprintf(f, "%d,", r->gpus);
            fprintf(f, "%.17g,%.10g\n", r->bytes, r->us);
        }
    }
    if (ferror(f) | fclose(f)) return hs_errf(err, HS_EIO, "%s: write error", path);
    return 0;
}

static int write_meta(const hs_ptable *t, const char *dir, hs_err *err)
{
    char path[1100];
    const hs_ptable_meta *m = &t->meta;
    cJSON *j = cJSON_CreateObject();
    int rc, bad;
    snprintf(path, sizeof path, "%s/meta.json", dir);
    if (!j) return hs_errf(err, HS_ENOMEM, "out of memory writing %s", path);
    bad = !cJSON_AddStringToObject(j, "gpu", m->gpu) ||
          !cJSON_AddStringToObject(j, "model", m->model) ||
          !cJSON_AddStringToObject(j, "backend", m->backend) ||
          !cJSON_AddStringToObject(j, "dtype", m->dtype) ||
          !cJSON_AddStringToObject(j, "source", m->source) ||
          !cJSON_AddStringToObject(j, "created", m->created) ||
          !cJSON_AddNumberToObject(j, "mem_total_bytes", (double)m->mem_total_bytes) ||
          !cJSON_AddNumberToObject(j, "mem_usable_bytes", (double)m->mem_usable_bytes) ||
          !cJSON_AddNumberToObject(j, "kv_block_size", m->kv_block_size) ||
          !cJSON_AddNumberToObject(j, "kv_blocks", (double)m->kv_blocks) ||
          (m->timing[0] && !cJSON_AddStringToObject(j, "timing", m->timing)) ||
          (m->rest > 0 && !cJSON_AddNumberToObject(j, "rest", m->rest)) ||
          (m->kv_pool_bytes > 0 && !cJSON_AddNumberToObject(j, "kv_pool_bytes", (double)m->kv_pool_bytes)) ||
          (m->clock_monitor[0] && !cJSON_AddStringToObject(j, "clock_monitor", m->clock_monitor)) ||
          (m->decode_sms > 0 && (!cJSON_AddNumberToObject(j, "decode_sms", m->decode_sms) ||
                                 !cJSON_AddNumberToObject(j, "decode_resident", m->decode_resident) ||
                                 !cJSON_AddNumberToObject(j, "decode_part_max", m->decode_part_max) ||
                                 !cJSON_AddNumberToObject(j, "decode_part_min", m->decode_part_min) ||
                                 !cJSON_AddNumberToObject(j, "decode_part_align", m->decode_part_align) ||
                                 !cJSON_AddNumberToObject(j, "decode_fill", m->decode_fill)));
    rc = hs_json_save(bad ? NULL : j, path, err);
    cJSON_Delete(j);
    return rc;
}

int hs_ptable_write(const hs_ptable *t, const char *dir, hs_err *err)
{
    int rc;
    for (size_t i = 1; i < t->n_dense; i++)
        if (dense_key(&t->dense[i - 1], &t->dense[i]) >= 0)
            return hs_errf(err, HS_EINVAL, "%s: table not sorted (call hs_ptable_sort)", dir);
    if ((rc = hs__mkdirs(dir, err))) return rc;
    if ((rc = write_meta(t, dir, err))) return rc;
    if ((t->meta.model[0] || t->n_dense) && (rc = write_file(t, dir, 0, err))) return rc;
    for (int k = 0; k < 2; k++) {
        if (t->n_attn[k] && (rc = write_file(t, dir, 1 + k, err))) return rc;
        if (t->n_comm[k] && (rc = write_file(t, dir, 3 + k, err))) return rc;
    }
    return 0;
}

/* ---- lookups -------------------------------------------------------------- */

/* First row of (op, tp, bits) and the count of its rows (sorted by tokens). */
static size_t dense_run(const hs_ptable *t, int op, int tp, int bits, size_t *first)
{
    size_t i = 0, n = 0;
    while (i < t->n_dense && !(t->dense[i].op == op && t->dense[i].tp == tp && t->dense[i].bits == bits)) i++;
    *first = i;
    while (i + n < t->n_dense && t->dense[i + n].op == op && t->dense[i + n].tp == tp &&
           t->dense[i + n].bits == bits)
        n++;
    return n;
}

int hs_ptable_has_op(const hs_ptable *t, int op, int tp, int bits)
{
    size_t f;
    return dense_run(t, op, tp, bits, &f) > 0;
}

int hs_ptable_op_bits(const hs_ptable *t, int op, int tp, int bits)
{
    int gemm = op == HS_OP_QKV || op == HS_OP_ATTN_OUT || op == HS_OP_MLP_UP || op == HS_OP_MLP_DOWN;
    if (op == HS_OP_LM_HEAD || op == HS_OP_EMB) bits = 16;
    if (hs_ptable_has_op(t, op, tp, bits)) return bits;
    if (!gemm && bits != 16 && hs_ptable_has_op(t, op, tp, 16)) return 16;
    return 0;
}

const hs_dense_row *hs_ptable_dense_at(const hs_ptable *t, int op, int tp, int bits, int tokens)
{
    size_t first, n;
    int b = hs_ptable_op_bits(t, op, tp, bits);
    if (!b) return NULL;
    n = dense_run(t, op, tp, b, &first);
    for (size_t i = first; i < first + n; i++)
        if (t->dense[i].tokens == tokens) return &t->dense[i];
    return NULL;
}

int hs_ptable_has_attn(const hs_ptable *t, int kind, int tp)
{
    for (size_t i = 0; i < t->n_attn[kind]; i++)
        if (t->attn[kind][i].tp == tp) return 1;
    return 0;
}

int hs_ptable_check(const hs_ptable *t, const hs_ptable_need *need, hs_err *err)
{
    char msg[HS_ERR_MSG_MAX] = "";
    int missing = 0;
    const char *dir = t->dir[0] ? t->dir : "(table)";
    for (int op = 0; op < HS_OP_COUNT; op++) {
        if (!(need->ops & (1u << op)) || hs_ptable_has_op(t, op, need->tp, need->bits)) continue;
        size_t len = strlen(msg);
        snprintf(msg + len, sizeof msg - len, "%s%s", missing++ ? ", " : "", hs_op_name(op));
    }
    if (missing) {
        size_t len = strlen(msg);
        snprintf(msg + len, sizeof msg - len, " at tp %d, bits %d in dense.csv", need->tp, need->bits);
    }
    for (int k = 0; k < 2; k++) {
        if (!(k ? need->prefill : need->decode) || hs_ptable_has_attn(t, k, need->tp)) continue;
        size_t len = strlen(msg);
        snprintf(msg + len, sizeof msg - len, "%sno %s rows at tp %d", missing++ ? "; " : "",
                 attn_file[k], need->tp);
    }
    if (missing) return hs_errf(err, HS_ENOTFOUND, "%s: missing %s", dir, msg);
    return 0;
}

/* ---- curves --------------------------------------------------------------- */

int hs_curve_init(hs_curve *c, const double *x, const double *y, int n, hs_err *err)
{
    memset(c, 0, sizeof *c);
    if (n < 1) return hs_errf(err, HS_EINVAL, "interpolation needs at least one point");
    for (int i = 1; i < n; i++)
        if (!(x[i] > x[i - 1]))
            return hs_errf(err, HS_EINVAL, "interpolation points not increasing at %g", x[i]);
    c->x = malloc((size_t)n * sizeof *c->x);
    c->y = malloc((size_t)n * sizeof *c->y);
    if (!c->x || !c->y) goto nomem;
    memcpy(c->x, x, (size_t)n * sizeof *x);
    memcpy(c->y, y, (size_t)n * sizeof *y);
    c->n = n;
    if (n >= 2) {
        c->interp = gsl_interp_alloc(n >= 3 ? gsl_interp_steffen : gsl_interp_linear, (size_t)n);
        if (!c->interp || gsl_interp_init(c->interp, c->x, c->y, (size_t)n) != GSL_SUCCESS) goto nomem;
    }
    return 0;
nomem:
    hs_curve_free(c);
    return hs_errf(err, HS_ENOMEM, "out of memory building an interpolant");
}

double hs_curve_eval(const hs_curve *c, double x)
{
    if (x <= c->x[0]) return c->y[0];
    if (x >= c->x[c->n - 1]) return c->y[c->n - 1] * (x / c->x[c->n - 1]);
    /* In range, so GSL's domain error (and its abort handler) cannot fire;
     * no accelerator, so the curve stays const and shareable. */
    return gsl_interp_eval(c->interp, c->x, c->y, x, NULL);
}

void hs_curve_free(hs_curve *c)
{
    if (!c) return;
    if (c->interp) gsl_interp_free(c->interp);
    free(c->x);
    free(c->y);
    memset(c, 0, sizeof *c);
}

int hs_ptable_op_curve(const hs_ptable *t, int op, int tp, int bits, hs_curve *out, hs_err *err)
{
    size_t first, n = dense_run(t, op, tp, bits, &first);
    double *x, *y;
    int rc;
    memset(out, 0, sizeof *out);
    if (!n)
        return hs_errf(err, HS_ENOTFOUND, "%s/dense.csv: no rows for op %s at tp %d, bits %d",
                       t->dir[0] ? t->dir : "(table)", hs_op_name(op), tp, bits);
    x = malloc(n * sizeof *x);
    y = malloc(n * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        x[i] = t->dense[first + i].tokens;
        y[i] = t->dense[first + i].us;
    }
    rc = hs_curve_init(out, x, y, (int)n, err);
    free(x);
    free(y);
    return rc;
}

/* Half-width (points) of the running median of hs_curve_smooth: a 7-point
 * window outvotes up to three bad points in a row, and on Vidur's tables
 * (8 KiB steps at the small end) it stays inside the flat latency region. */
#define HS_SMOOTH_HALF 3
/* A point is an outlier when it is more than this factor above or below
 * the median around it ("more than twice its neighbours"); on Vidur's A100
 * table that is 7 isolated points of 2-2.8x.  Its wider scatter below
 * 1 MiB (the 2-GPU times jump between ~20 and ~60 us) and runs of bad
 * points are left to the isotonic step. */
#define HS_SMOOTH_OUT 2.0

static int dbl_cmp(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* The lower median of v[0..n) (sorts v): of the values that minimise the
 * absolute deviation, the smallest, so pooled blocks never round upwards. */
static double lower_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, dbl_cmp);
    return v[(n - 1) / 2];
}

int hs_curve_smooth(const double *x, double *y, int n, hs_err *err)
{
    double *m, win[2 * HS_SMOOTH_HALF + 1];
    int *start, nb = 0;
    if (n < 1) return hs_errf(err, HS_EINVAL, "smoothing needs at least one point");
    if (!(x[0] > 0)) return hs_errf(err, HS_EINVAL, "smoothing points must be positive, got %g", x[0]);
    for (int i = 1; i < n; i++)
        if (!(x[i] > x[i - 1]))
            return hs_errf(err, HS_EINVAL, "smoothing points not increasing at %g", x[i]);
    m = malloc((size_t)n * sizeof *m);
    start = malloc((size_t)n * sizeof *start);
    if (!m || !start) {
        free(m);
        free(start);
        return hs_errf(err, HS_ENOMEM, "out of memory smoothing a curve");
    }
    /* 1. Outliers: a point more than HS_SMOOTH_OUT times off the median of
     * a window centred on it (as wide as both sides allow) takes that
     * median; other points keep their measured value.  The median of a
     * centred window of non-decreasing values is its centre, so clean data
     * (however sparse) is never touched.  Replacing only outliers, rather
     * than every point by its running median, keeps a spike on a sparse
     * slope from shifting its clean neighbours by one rank.  Centred
     * windows leave the ends alone: the first point is checked below, the
     * last point is bounded in step 2. */
    for (int i = 0; i < n; i++) {
        int h = i < n - 1 - i ? i : n - 1 - i;
        double med;
        if (h > HS_SMOOTH_HALF) h = HS_SMOOTH_HALF;
        memcpy(win, y + i - h, (size_t)(2 * h + 1) * sizeof *win);
        med = lower_median(win, 2 * h + 1);
        m[i] = y[i] > HS_SMOOTH_OUT * med || y[i] * HS_SMOOTH_OUT < med ? med : y[i];
    }
    /* The first point has no window around it either: one far above the
     * points after it is a spike (step 3's means would spread it over the
     * floor), one below them is the latency floor and stays. */
    if (n >= 2) {
        int w = n < 2 * HS_SMOOTH_HALF + 1 ? n : 2 * HS_SMOOTH_HALF + 1;
        double med;
        memcpy(win, y, (size_t)w * sizeof *win);
        med = lower_median(win, w);
        if (y[0] > HS_SMOOTH_OUT * med) m[0] = med;
    }
    /* 2. The last point has no window around it, yet it scales every size
     * above the table (hs_curve_eval grows it in proportion to x).  Past its
     * neighbour it may grow in proportion to x, as an alpha-beta cost
     * (alpha >= 0) at most does, and up to HS_SMOOTH_OUT times more for
     * a protocol switch; beyond that it is an outlier and takes the
     * proportional extension. */
    if (n >= 2) {
        double ext = m[n - 2] * (x[n - 1] / x[n - 2]);
        if (m[n - 1] > HS_SMOOTH_OUT * ext) m[n - 1] = ext;
    }
    /* 3. Isotonic regression (pool adjacent violators, each pool taking
     * its mean): time never falls as bytes grow.  Means rather than medians
     * because the simulator adds up many collectives (96 all-reduces in one
     * decode step of a 48-layer model), so what must be right over a range
     * of sizes is the expected time: a run of points longer than the
     * outlier window (Vidur's 4-GPU table holds ~25 consecutive points at
     * 3x their surroundings between 90 and 300 KiB, a protocol regime, not
     * noise) is averaged with its neighbours instead of being outvoted,
     * which would price those sizes at a third of what was measured.
     * Pools are index ranges [start[b], start[b + 1]); y receives each
     * pool's mean. */
    for (int i = 0; i < n; i++) {
        start[nb] = i;
        y[i] = m[i];
        nb++;
        while (nb > 1 && y[start[nb - 2]] > y[start[nb - 1]]) {
            int s = start[nb - 2];
            double v = 0;
            for (int j = s; j <= i; j++) v += m[j];
            v /= i + 1 - s;
            nb--;
            for (int j = s; j <= i; j++) y[j] = v;
        }
    }
    free(m);
    free(start);
    return 0;
}

int hs_ptable_allreduce_curve(const hs_ptable *t, int gpus, hs_curve *out, hs_err *err)
{
    const hs_comm_row *r = t->comm[HS_COMM_ALLREDUCE];
    size_t n = 0, first = 0;
    double *x, *y;
    int rc;
    memset(out, 0, sizeof *out);
    while (first < t->n_comm[0] && r[first].gpus != gpus) first++;
    while (first + n < t->n_comm[0] && r[first + n].gpus == gpus) n++;
    if (!n)
        return hs_errf(err, HS_ENOTFOUND, "%s/allreduce.csv: no rows for %d GPUs",
                       t->dir[0] ? t->dir : "(table)", gpus);
    x = malloc(n * sizeof *x);
    y = malloc(n * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        x[i] = r[first + i].bytes;
        y[i] = r[first + i].us;
    }
    /* Collective timings carry spikes (Vidur's 2-GPU table: a median of
     * three runs per size, values jumping between ~15 and ~60 us below
     * 1 MiB); an interpolant through them would hand the simulator a
     * different all-reduce cost for neighbouring batch sizes. */
    rc = hs_curve_smooth(x, y, (int)n, err);
    if (!rc) rc = hs_curve_init(out, x, y, (int)n, err);
    free(x);
    free(y);
    return rc;
}

/* ---- attention fits (the regression itself is regress.c) ----------------- */

/* Fits the hot-path attention terms over the rows in relative error, each
 * row weighted by its time when `by_time`: decode 1, B, B * context (k 3);
 * prefill 1, Q, X, P (k 4) and N = c (k 5), per chunk as in perf.h. */
static int attn_fit(int kind, const hs_attn_row *r, size_t n, int k, int by_time, double *coef,
                    hs_fitstat *st, hs_err *err)
{
    double *X, *y;
    int rc;
    if (!n) return hs_errf(err, HS_EINVAL, "attention fit: no rows");
    X = malloc(n * (size_t)k * sizeof *X);
    y = malloc(n * sizeof *y);
    if (!X || !y) {
        free(X);
        free(y);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        double *x = X + i * (size_t)k, c = r[i].x, p = r[i].y;
        x[0] = 1;
        if (kind == HS_ATTN_DECODE) {
            x[1] = c;
            x[2] = c * p;
        } else {
            x[1] = c * (c + 1) / 2;
            x[2] = c * p;
            x[3] = p;
            if (k > HS_ATTN_TOK) x[HS_ATTN_TOK] = c;
        }
        y[i] = r[i].us;
    }
    rc = hs_linfit_relw(X, y, by_time ? y : NULL, (int)n, k, coef, st, err);
    free(X);
    free(y);
    return rc;
}

int hs_attn_coef_rows(int kind, const hs_attn_row *r, size_t n, double coef[4],
                      hs_fitstat *st, hs_err *err)
{
    coef[3] = 0;
    return attn_fit(kind, r, n, kind == HS_ATTN_DECODE ? 3 : 4, 0, coef, st, err);
}

int hs_attn_coef5_rows(int kind, const hs_attn_row *r, size_t n, double coef[HS_ATTN_NCOEF],
                       hs_fitstat *st, hs_err *err)
{
    for (int j = 0; j < HS_ATTN_NCOEF; j++) coef[j] = 0;
    /* Decode keeps the fit of hs_attn_coef_rows: each row there is a whole
     * batch, as a pass is, so rows count alike.  Prefill rows are single
     * chunks from 64 to 4,096 tokens (15 us to 2.3 ms), two thirds of them
     * under 1,024 tokens, while a pass's time is mostly its large chunks:
     * weighting each row's relative error by its time (sum (pred - y)^2 / y)
     * makes the fit answer for the error of a sum of chunks.  On Vidur's A100
     * table (against the unweighted five-term fit) this takes the median
     * error of chunks of 1,024-2,047 / 2,048+ tokens from 3.3% / 1.9% to
     * 2.0% / 1.5%, keeps chunks under 256 tokens near 9.5%, and the median
     * signed error of every band within about 1%. */
    return attn_fit(kind, r, n, kind == HS_ATTN_DECODE ? 3 : HS_ATTN_NCOEF, kind != HS_ATTN_DECODE,
                    coef, st, err);
}

/* The rows of one tp, a contiguous run since rows are sorted by tp first. */
static int attn_rows_at(const hs_ptable *t, int kind, int tp, const hs_attn_row **rows, size_t *n,
                        hs_err *err)
{
    const hs_attn_row *r = t->attn[kind];
    size_t first = 0;
    *n = 0;
    while (first < t->n_attn[kind] && r[first].tp != tp) first++;
    while (first + *n < t->n_attn[kind] && r[first + *n].tp == tp) (*n)++;
    *rows = r + first;
    if (!*n)
        return hs_errf(err, HS_ENOTFOUND, "%s/%s: no rows at tp %d",
                       t->dir[0] ? t->dir : "(table)", attn_file[kind], tp);
    return 0;
}


/* Sorted distinct values of v[0..n) into v; returns how many. */
static int distinct(double *v, int n)
{
    int k = 0;
    qsort(v, (size_t)n, sizeof *v, dbl_cmp);
    for (int i = 0; i < n; i++)
        if (!k || v[i] != v[k - 1]) v[k++] = v[i];
    return k;
}

int hs_ptable_decode_grid(const hs_ptable *t, int tp, int *nb, int *nc, double **buf, hs_err *err)
{
    const hs_attn_row *r;
    size_t n;
    double *bs, *cs, *g;
    int kb, kc, rc;
    *buf = NULL;
    *nb = *nc = 0;
    if (!hs_ptable_has_attn(t, HS_ATTN_DECODE, tp)) return 0;
    if ((rc = attn_rows_at(t, HS_ATTN_DECODE, tp, &r, &n, err))) return rc;
    if (!(bs = malloc(2 * n * sizeof *bs))) return hs_errf(err, HS_ENOMEM, "out of memory");
    cs = bs + n;
    for (size_t i = 0; i < n; i++) {
        bs[i] = r[i].x;
        cs[i] = r[i].y;
    }
    kb = distinct(bs, (int)n);
    kc = distinct(cs, (int)n);
    if (kc < 2 || (size_t)kb * kc != n) { /* not a full grid (or duplicate rows) */
        free(bs);
        return 0;
    }
    if (!(g = malloc(((size_t)kb + kc + (size_t)kb * kc) * sizeof *g))) {
        free(bs);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    memcpy(g, bs, (size_t)kb * sizeof *g);
    memcpy(g + kb, cs, (size_t)kc * sizeof *g);
    for (size_t i = 0; i < (size_t)kb * kc; i++) g[kb + kc + i] = -1;
    for (size_t i = 0; i < n; i++) {
        double *pb = bsearch(&(double){r[i].x}, g, (size_t)kb, sizeof *g, dbl_cmp);
        double *pc = bsearch(&(double){r[i].y}, g + kb, (size_t)kc, sizeof *g, dbl_cmp);
        g[kb + kc + (size_t)(pb - g) * kc + (size_t)(pc - (g + kb))] = r[i].us;
    }
    free(bs);
    for (size_t i = 0; i < (size_t)kb * kc; i++)
        if (g[kb + kc + i] < 0) { /* a pair measured twice left another out */
            free(g);
            return 0;
        }
    *nb = kb;
    *nc = kc;
    *buf = g;
    return 0;
}

static int attn_xy_cmp(const void *a, const void *b)
{
    const hs_attn_row *p = a, *q = b;
    if (p->x != q->x) return p->x < q->x ? -1 : 1;
    return p->y < q->y ? -1 : p->y > q->y;
}

int hs_ptable_prefill_grid(const hs_ptable *t, int tp, hs_pre_grid *g, hs_err *err)
{
    const hs_attn_row *r;
    hs_attn_row *s;
    size_t n, nx = 0;
    int rc;
    char *buf;
    memset(g, 0, sizeof *g);
    if (!hs_ptable_has_attn(t, HS_ATTN_PREFILL, tp)) return 0;
    if ((rc = attn_rows_at(t, HS_ATTN_PREFILL, tp, &r, &n, err))) return rc;
    if (!(s = malloc(n * sizeof *s))) return hs_errf(err, HS_ENOMEM, "out of memory");
    memcpy(s, r, n * sizeof *s);
    qsort(s, n, sizeof *s, attn_xy_cmp);
    for (size_t i = 0; i < n; i++) {
        if (i && s[i].x == s[i - 1].x && s[i].y == s[i - 1].y) { /* measured twice */
            free(s);
            return 0;
        }
        nx += !i || s[i].x != s[i - 1].x;
    }
    if (nx < 2) {
        free(s);
        return 0;
    }
    /* doubles first (x, y, ns), then the offsets */
    if (!(buf = malloc((nx + 2 * n) * sizeof(double) + (nx + 1) * sizeof(int)))) {
        free(s);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    g->x = (double *)buf;
    g->y = g->x + nx;
    g->ns = g->y + n;
    g->off = (int *)(g->ns + n);
    g->nx = 0;
    for (size_t i = 0; i < n; i++) {
        if (!i || s[i].x != s[i - 1].x) {
            g->x[g->nx] = s[i].x;
            g->off[g->nx++] = (int)i;
        }
        g->y[i] = s[i].y;
        g->ns[i] = s[i].us;
    }
    g->off[g->nx] = (int)n;
    free(s);
    return 0;
}

int hs_ptable_decode_wave(const hs_ptable *t, int tp, int heads, hs_dec_wave *w,
                          hs_fitstat *st, hs_err *err)
{
    const hs_ptable_meta *m = &t->meta;
    int nb, nc, rc, n;
    double *g, *X = NULL, *y = NULL, *pred = NULL, coef[4];
    memset(w, 0, sizeof *w);
    if (m->decode_sms <= 0 || m->decode_resident <= 0 || m->decode_part_max <= 0 || heads < 1) return 0;
    if ((rc = hs_ptable_decode_grid(t, tp, &nb, &nc, &g, err)) || !g) return rc;
    n = nb * nc;
    if (n <= 4) { /* four coefficients need more rows than that */
        free(g);
        return 0;
    }
    if (!(X = calloc((size_t)n * 4, sizeof *X)) || !(y = malloc((size_t)n * sizeof *y)) ||
        !(pred = malloc((size_t)n * sizeof *pred))) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    w->heads = heads;
    w->sms = m->decode_sms;
    w->resident = m->decode_resident;
    w->part_max = m->decode_part_max;
    w->part_min = m->decode_part_min;
    w->part_align = m->decode_part_align;
    w->fill = m->decode_fill;
    /* a start where a block's keys cost as its fixed part at 16 keys */
    w->c0 = 5;
    w->a = 4;
    w->b = 0.25;
    w->cm = 5;
    for (int it = 0; it < 32; it++) {
        int same = it > 0;
        for (int i = 0; i < nb; i++)
            for (int j = 0; j < nc; j++) {
                double k[4], *row = X + (size_t)(i * nc + j) * 4;
                hs_dec_wave_time(w, (int64_t)g[i], g[nb + j], k);
                for (int c = 0; c < 4; c++) {
                    same &= row[c] == k[c];
                    row[c] = k[c];
                }
                y[i * nc + j] = g[nb + nc + i * nc + j];
            }
        if (same) break;   /* the counts the coefficients were fitted on */
        if ((rc = hs_linfit_rel(X, y, n, 4, coef, NULL, err))) goto out;
        w->c0 = coef[0];
        w->a = coef[1];
        w->b = coef[2];
        w->cm = coef[3];
    }
    /* (counts still moving after 32 rounds keep the last round's fit) */
    if (!isfinite(w->c0) || !isfinite(w->a) || !isfinite(w->b) || !isfinite(w->cm) || w->a + w->b <= 0) {
        memset(w, 0, sizeof *w);   /* a degenerate grid: the engine interpolates it */
        goto out;
    }
    if (st) {
        for (int i = 0; i < n; i++)
            pred[i] = hs_dec_wave_time(w, (int64_t)g[i / nc], g[nb + i % nc], NULL);
        hs_fitstat_compute(st, pred, y, n);
    }
out:
    if (rc) memset(w, 0, sizeof *w);
    free(g);
    free(X);
    free(y);
    free(pred);
    return rc;
}

int hs_ptable_attn_coef(const hs_ptable *t, int kind, int tp, double coef[4],
                        hs_fitstat *st, hs_err *err)
{
    const hs_attn_row *r;
    size_t n;
    int rc = attn_rows_at(t, kind, tp, &r, &n, err);
    return rc ? rc : hs_attn_coef_rows(kind, r, n, coef, st, err);
}

int hs_ptable_attn_coef5(const hs_ptable *t, int kind, int tp, double coef[HS_ATTN_NCOEF],
                         hs_fitstat *st, hs_err *err)
{
    const hs_attn_row *r;
    size_t n;
    int rc = attn_rows_at(t, kind, tp, &r, &n, err);
    return rc ? rc : hs_attn_coef5_rows(kind, r, n, coef, st, err);
}

int hs_ptable_sendrecv_coef(const hs_ptable *t, double coef[2], hs_fitstat *st, hs_err *err)
{
    size_t n = t->n_comm[HS_COMM_SENDRECV];
    double *X, *y;
    int rc;
    if (!n)
        return hs_errf(err, HS_ENOTFOUND, "%s/sendrecv.csv: no rows", t->dir[0] ? t->dir : "(table)");
    X = malloc(n * 2 * sizeof *X);
    y = malloc(n * sizeof *y);
    if (!X || !y) {
        free(X);
        free(y);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        X[i * 2] = 1;
        X[i * 2 + 1] = t->comm[HS_COMM_SENDRECV][i].bytes;
        y[i] = t->comm[HS_COMM_SENDRECV][i].us;
    }
    rc = hs_linfit_rel(X, y, (int)n, 2, coef, st, err);
    free(X);
    free(y);
    return rc;
}
