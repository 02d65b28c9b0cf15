/* schedule.c - the schedule file: writer (plain fprintf, it runs once per
 * emitted iteration) and reader (cJSON per line); see schedule.h. */
#include "serve/schedule.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/vec.h"
#include "serve/deploy.h"

/* ---- writer ---- */

struct hs_sched_writer {
    FILE *fp;
    char *path;
    int32_t *ids;        /* emitted replica ids */
    int64_t *count;      /* iterations written per emitted replica */
    int n;
};

int hs_sched_writer_open(hs_sched_writer **out, const char *path, const int32_t *replicas,
                         int n_replicas, hs_err *err)
{
    hs_sched_writer *w = calloc(1, sizeof *w);
    static const int32_t zero = 0;
    *out = NULL;
    if (!replicas || n_replicas <= 0) {
        replicas = &zero;
        n_replicas = 1;
    }
    if (!w) return hs_errf(err, HS_ENOMEM, "out of memory");
    w->n = n_replicas;
    w->ids = malloc((size_t)n_replicas * sizeof *w->ids);
    w->count = calloc((size_t)n_replicas, sizeof *w->count);
    w->path = strdup(path);
    if (!w->ids || !w->count || !w->path) {
        hs_sched_writer_close(w, 1, NULL);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    memcpy(w->ids, replicas, (size_t)n_replicas * sizeof *w->ids);
    w->fp = fopen(path, "w");
    if (!w->fp) {
        int e = errno;
        hs_sched_writer_close(w, 0, NULL);
        return hs_errf(err, HS_EIO, "%s: cannot write: %s", path, strerror(e));
    }
    *out = w;
    return 0;
}

int hs_sched_writer_close(hs_sched_writer *w, int discard, hs_err *err)
{
    int rc = 0;
    if (!w) return 0;
    if (w->fp) {
        int bad = ferror(w->fp);
        if (fclose(w->fp) != 0 || bad)
            rc = hs_errf(err, HS_EIO, "%s: write failed", w->path);
        if (discard || rc) unlink(w->path);
    }
    free(w->ids);
    free(w->count);
    free(w->path);
    free(w);
    return rc;
}

static int slot(const hs_sched_writer *w, int32_t replica)
{
    for (int i = 0; i < w->n; i++)
        if (w->ids[i] == replica) return i;
    return -1;
}

int hs_sched_wants(const hs_sched_writer *w, int32_t replica)
{
    return w && slot(w, replica) >= 0;
}

/* Names come from user files: escape them as JSON strings. */
static void jstr(FILE *fp, const char *key, const char *v)
{
    fprintf(fp, ",\"%s\":\"", key);
    for (; *v; v++) {
        unsigned char c = (unsigned char)*v;
        if (c == '"' || c == '\\') fprintf(fp, "\\%c", c);
        else if (c < 0x20) fprintf(fp, "\\u%04x", c);
        else fputc(c, fp);
    }
    fputc('"', fp);
}

void hs_sched_write_header(hs_sched_writer *w, const hs_sched_header *h)
{
    fprintf(w->fp, "{\"type\":\"header\",\"version\":1,\"replica\":%d", h->replica);
    jstr(w->fp, "model", h->model);
    jstr(w->fp, "gpu", h->gpu);
    jstr(w->fp, "perf_model", h->perf_model);
    fprintf(w->fp,
            ",\"tp\":%d,\"pp\":%d,\"bits\":%d,\"kv_bits\":%d,\"layers\":%d,"
            "\"block_size\":%d,\"kv_blocks\":%lld,\"step_overhead_ns\":%.17g,"
            "\"step_seq_ns\":%.17g,\"step_tok_ns\":%.17g",
            h->tp, h->pp, h->bits, h->kv_bits, h->layers, h->block_size, (long long)h->kv_blocks,
            h->step_overhead_ns, h->step_seq_ns, h->step_tok_ns);
    if (h->latency_scale > 0 && h->latency_scale != 1) fprintf(w->fp, ",\"latency_scale\":%.17g", h->latency_scale);
    if (h->quant_kernels[0] && strcmp(h->quant_kernels, "model")) jstr(w->fp, "quant_kernels", h->quant_kernels);
    if (h->n_layer_bits > 0) {
        fputs(",\"layer_bits\":[", w->fp);
        for (int32_t i = 0; i < h->n_layer_bits; i++) fprintf(w->fp, "%s%d", i ? "," : "", h->layer_bits[i]);
        fputc(']', w->fp);
    }
    fputs("}\n", w->fp);
}

void hs_sched_write_request(hs_sched_writer *w, const hs_sched_request *q)
{
    fprintf(w->fp,
            "{\"type\":\"request\",\"replica\":%d,\"id\":%lld,\"arrival_ns\":%lld,"
            "\"prompt\":%d,\"output\":%d}\n",
            q->replica, (long long)q->id, (long long)q->arrival, q->prompt, q->output);
}

static void ids(FILE *fp, const char *key, const int64_t *v, int32_t n)
{
    fprintf(fp, ",\"%s\":[", key);
    for (int32_t i = 0; i < n; i++) fprintf(fp, "%s%lld", i ? "," : "", (long long)v[i]);
    fputc(']', fp);
}

void hs_sched_write_iter(hs_sched_writer *w, hs_sched_iter *it)
{
    FILE *fp = w->fp;
    int s = slot(w, it->replica);
    it->it = s >= 0 ? w->count[s]++ : -1;
    fprintf(fp, "{\"type\":\"iter\",\"replica\":%d,\"it\":%lld,\"start_ns\":%lld,\"end_ns\":%lld",
            it->replica, (long long)it->it, (long long)it->start, (long long)it->end);
    ids(fp, "preempted", it->preempted, it->n_preempted);
    fputs(",\"prefill\":[", fp);
    for (int32_t i = 0; i < it->n_pre; i++)
        fprintf(fp, "%s[%lld,%d,%d,%d]", i ? "," : "", (long long)it->pre[i].id, it->pre[i].len,
                it->pre[i].prefix, it->pre[i].target);
    fputs("],\"decode\":[", fp);
    for (int32_t i = 0; i < it->n_dec; i++)
        fprintf(fp, "%s[%lld,%d]", i ? "," : "", (long long)it->dec[i].id, it->dec[i].ctx);
    fputc(']', fp);
    ids(fp, "first", it->first, it->n_first);
    ids(fp, "finished", it->finished, it->n_finished);
    fprintf(fp, ",\"kv_blocks_used\":%lld}\n", (long long)it->kv_blocks_used);
}

/* ---- reader ---- */

struct hs_sched_reader {
    FILE *fp;
    char *path;
    char *line;
    size_t cap;
    long lineno;
    /* buffers behind hs_sched_iter's arrays */
    hs_sched_chunk *pre;
    hs_sched_dec *dec;
    int64_t *preempted, *first, *finished;
    size_t cap_pre, cap_dec, cap_pm, cap_first, cap_fin;
};

int hs_sched_open(hs_sched_reader **out, const char *path, hs_err *err)
{
    hs_sched_reader *r = calloc(1, sizeof *r);
    *out = NULL;
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    r->fp = fopen(path, "r");
    if (!r->fp) {
        int e = errno;
        hs_sched_close(r);
        return hs_errf(err, HS_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    *out = r;
    return 0;
}

void hs_sched_close(hs_sched_reader *r)
{
    if (!r) return;
    if (r->fp) fclose(r->fp);
    free(r->path);
    free(r->line);
    free(r->pre);
    free(r->dec);
    free(r->preempted);
    free(r->first);
    free(r->finished);
    free(r);
}

#define BAD(...) hs_errf(err, HS_EPARSE, __VA_ARGS__)

static int num(const cJSON *o, const char *key, double lo, double hi, double *v,
               const hs_sched_reader *r, hs_err *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(it))
        return BAD("%s:%ld: %s: expected a number", r->path, r->lineno, key);
    if (!(it->valuedouble >= lo && it->valuedouble <= hi))
        return BAD("%s:%ld: %s: %g is outside [%g, %g]", r->path, r->lineno, key,
                   it->valuedouble, lo, hi);
    *v = it->valuedouble;
    return 0;
}

static int str(const cJSON *o, const char *key, char *buf, size_t cap,
               const hs_sched_reader *r, hs_err *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(it) || strlen(it->valuestring) >= cap)
        return BAD("%s:%ld: %s: expected a string of at most %zu characters", r->path,
                   r->lineno, key, cap - 1);
    strcpy(buf, it->valuestring);
    return 0;
}

/* Reads an array of integers or of k-tuples of integers into out (k ints per
 * entry, stored as int64). */
static int tuples(const cJSON *o, const char *key, int k, int64_t **out, size_t *cap,
                  int32_t *n, const hs_sched_reader *r, hs_err *err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key), *e;
    int32_t i = 0;
    /* Prefill tuples may omit their 4th entry (the target): -1 marks it. */
    int opt_last = !strcmp(key, "prefill");
    if (!cJSON_IsArray(a)) return BAD("%s:%ld: %s: expected an array", r->path, r->lineno, key);
    *n = cJSON_GetArraySize(a);
    if (hs_vec_reserve((void **)out, cap, (size_t)*n * (size_t)k, sizeof **out, 16))
        return hs_errf(err, HS_ENOMEM, "out of memory");
    cJSON_ArrayForEach(e, a) {
        const cJSON *x = e;
        for (int j = 0; j < k; j++) {
            if (k > 1) {
                int len = cJSON_IsArray(e) ? cJSON_GetArraySize(e) : -1;
                if (len != k && !(opt_last && len == k - 1))
                    return BAD("%s:%ld: %s[%d]: expected %d numbers", r->path, r->lineno, key, i, k);
                if (j >= len) {
                    (*out)[i * k + j] = -1;
                    continue;
                }
                x = cJSON_GetArrayItem(e, j);
            }
            /* ids may be large; token counts (every column after the id) fit int32 */
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 ||
                x->valuedouble > (j == 0 ? 9e15 : 1073741824.0))
                return BAD("%s:%ld: %s[%d]: expected a non-negative integer%s", r->path, r->lineno,
                           key, i, j ? " of at most 2^30 tokens" : "");
            (*out)[i * k + j] = (int64_t)x->valuedouble;
        }
        i++;
    }
    return 0;
}

static int read_iter(hs_sched_reader *r, const cJSON *o, hs_sched_iter *it, hs_err *err)
{
    double v = 0;
    int rc;
    int64_t *tmp = NULL;
    size_t cap = 0;
    int32_t n = 0;
    memset(it, 0, sizeof *it);
    if ((rc = num(o, "replica", 0, 1e9, &v, r, err))) return rc;
    it->replica = (int32_t)v;
    if ((rc = num(o, "it", 0, 9e15, &v, r, err))) return rc;
    it->it = (int64_t)v;
    if ((rc = num(o, "start_ns", 0, 9e18, &v, r, err))) return rc;
    it->start = (hs_ns)v;
    if ((rc = num(o, "end_ns", 0, 9e18, &v, r, err))) return rc;
    it->end = (hs_ns)v;
    if (it->end < it->start) return BAD("%s:%ld: end_ns before start_ns", r->path, r->lineno);
    if ((rc = num(o, "kv_blocks_used", 0, 9e15, &v, r, err))) return rc;
    it->kv_blocks_used = (int64_t)v;
    if ((rc = tuples(o, "prefill", 4, &tmp, &cap, &n, r, err))) goto out;
    if (hs_vec_reserve((void **)&r->pre, &r->cap_pre, (size_t)n, sizeof *r->pre, 16)) goto nomem;
    for (int32_t i = 0; i < n; i++) {
        r->pre[i].id = tmp[4 * i];
        r->pre[i].len = (int32_t)tmp[4 * i + 1];
        r->pre[i].prefix = (int32_t)tmp[4 * i + 2];
        r->pre[i].target = tmp[4 * i + 3] < 0 ? r->pre[i].prefix + r->pre[i].len
                                              : (int32_t)tmp[4 * i + 3];
        if (r->pre[i].len < 1) {
            rc = BAD("%s:%ld: prefill[%d]: empty chunk", r->path, r->lineno, i);
            goto out;
        }
        if (r->pre[i].target < r->pre[i].prefix + r->pre[i].len) {
            rc = BAD("%s:%ld: prefill[%d]: target %d is below prefix + chunk", r->path, r->lineno,
                     i, r->pre[i].target);
            goto out;
        }
    }
    it->n_pre = n;
    it->pre = r->pre;
    if ((rc = tuples(o, "decode", 2, &tmp, &cap, &n, r, err))) goto out;
    if (hs_vec_reserve((void **)&r->dec, &r->cap_dec, (size_t)n, sizeof *r->dec, 16)) goto nomem;
    for (int32_t i = 0; i < n; i++) {
        r->dec[i].id = tmp[2 * i];
        r->dec[i].ctx = (int32_t)tmp[2 * i + 1];
        if (r->dec[i].ctx < 1) {
            rc = BAD("%s:%ld: decode[%d]: context < 1", r->path, r->lineno, i);
            goto out;
        }
    }
    it->n_dec = n;
    it->dec = r->dec;
    if ((rc = tuples(o, "preempted", 1, &r->preempted, &r->cap_pm, &it->n_preempted, r, err)) ||
        (rc = tuples(o, "first", 1, &r->first, &r->cap_first, &it->n_first, r, err)) ||
        (rc = tuples(o, "finished", 1, &r->finished, &r->cap_fin, &it->n_finished, r, err)))
        goto out;
    it->preempted = r->preempted;
    it->first = r->first;
    it->finished = r->finished;
    if (!it->n_pre && !it->n_dec) rc = BAD("%s:%ld: iteration with no work", r->path, r->lineno);
out:
    free(tmp);
    return rc;
nomem:
    free(tmp);
    return hs_errf(err, HS_ENOMEM, "out of memory");
}

int hs_sched_next(hs_sched_reader *r, hs_sched_header *h, hs_sched_request *q,
                  hs_sched_iter *it, hs_err *err)
{
    for (;;) {
        ssize_t n = getline(&r->line, &r->cap, r->fp);
        cJSON *o;
        char type[16];
        double v = 0;
        int rc = 0, kind = 0;
        if (n < 0) {
            if (ferror(r->fp)) return hs_errf(err, HS_EIO, "%s: read error", r->path);
            return 0;
        }
        r->lineno++;
        if (n <= 1) continue;
        /* one object per line: text after it is an error, not ignored */
        o = cJSON_ParseWithOpts(r->line, NULL, 1);
        if (!o || !cJSON_IsObject(o)) {
            cJSON_Delete(o);
            return BAD("%s:%ld: not a JSON object", r->path, r->lineno);
        }
        if ((rc = str(o, "type", type, sizeof type, r, err))) goto done;
        if (!strcmp(type, "header")) {
            memset(h, 0, sizeof *h);
            kind = HS_SCHED_HEADER;
            if ((rc = num(o, "version", 1, 1, &v, r, err)) ||
                (rc = str(o, "model", h->model, sizeof h->model, r, err)) ||
                (rc = str(o, "gpu", h->gpu, sizeof h->gpu, r, err)) ||
                (rc = str(o, "perf_model", h->perf_model, sizeof h->perf_model, r, err)))
                goto done;
#define HI(key, lo, hi)                                             \
    if ((rc = num(o, #key, lo, hi, &v, r, err))) goto done;         \
    h->key = (int32_t)v;
            HI(replica, 0, 1e9) HI(tp, 1, 64) HI(pp, 1, 1024) HI(bits, 3, 16) HI(kv_bits, 8, 16)
            HI(layers, 1, 100000) HI(block_size, 1, 4096)
#undef HI
            if ((rc = num(o, "kv_blocks", 0, 9e15, &v, r, err))) goto done;
            h->kv_blocks = (int64_t)v;
            if ((rc = num(o, "step_overhead_ns", 0, 1e12, &h->step_overhead_ns, r, err))) goto done;
            /* schedules written before engine profiles have neither */
            if (cJSON_GetObjectItemCaseSensitive(o, "step_seq_ns") &&
                (rc = num(o, "step_seq_ns", 0, 1e12, &h->step_seq_ns, r, err)))
                goto done;
            if (cJSON_GetObjectItemCaseSensitive(o, "step_tok_ns") &&
                (rc = num(o, "step_tok_ns", 0, 1e12, &h->step_tok_ns, r, err)))
                goto done;
            if (cJSON_GetObjectItemCaseSensitive(o, "latency_scale") &&
                (rc = num(o, "latency_scale", HS_LATENCY_SCALE_MIN, HS_LATENCY_SCALE_MAX, &h->latency_scale, r, err)))
                goto done;
            if (cJSON_GetObjectItemCaseSensitive(o, "quant_kernels") &&
                ((rc = str(o, "quant_kernels", h->quant_kernels, sizeof h->quant_kernels, r, err)) ||
                 (rc = hs_perf_check_kernels(h->quant_kernels, "quant_kernels", err)))) {
                if (rc != HS_EPARSE) hs_err_prefix(err, "%s:%ld: ", r->path, r->lineno);
                goto done;
            }
            {
                const cJSON *lb = cJSON_GetObjectItemCaseSensitive(o, "layer_bits"), *b;
                if (lb) {
                    if (!cJSON_IsArray(lb) || cJSON_GetArraySize(lb) != h->layers || h->layers > HS_MAX_LAYERS) {
                        rc = BAD("%s:%ld: layer_bits: expected %d widths, one per layer", r->path, r->lineno,
                                 h->layers);
                        goto done;
                    }
                    cJSON_ArrayForEach(b, lb) {
                        int w = cJSON_IsNumber(b) ? hs_bits_of(b->valuedouble) : -1;
                        if (w < 0) {
                            rc = BAD("%s:%ld: layer_bits[%d]: expected 16, 8, 4 or 3", r->path, r->lineno,
                                     h->n_layer_bits);
                            goto done;
                        }
                        h->layer_bits[h->n_layer_bits++] = (unsigned char)w;
                    }
                }
            }
        } else if (!strcmp(type, "request")) {
            memset(q, 0, sizeof *q);
            kind = HS_SCHED_REQUEST;
            if ((rc = num(o, "replica", 0, 1e9, &v, r, err))) goto done;
            q->replica = (int32_t)v;
            if ((rc = num(o, "id", 0, 9e15, &v, r, err))) goto done;
            q->id = (int64_t)v;
            if ((rc = num(o, "arrival_ns", 0, 9e18, &v, r, err))) goto done;
            q->arrival = (hs_ns)v;
            if ((rc = num(o, "prompt", 1, 1e8, &v, r, err))) goto done;
            q->prompt = (int32_t)v;
            if ((rc = num(o, "output", 1, 1e8, &v, r, err))) goto done;
            q->output = (int32_t)v;
        } else if (!strcmp(type, "iter")) {
            kind = HS_SCHED_ITER;
            rc = read_iter(r, o, it, err);
        } else {
            rc = BAD("%s:%ld: type: unknown record \"%s\"", r->path, r->lineno, type);
        }
    done:
        cJSON_Delete(o);
        return rc ? rc : kind;
    }
}
