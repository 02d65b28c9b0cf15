/* chrome.c - the Chrome trace-event writer; see chrome.h.
 *
 * Events are streamed with stdio as the engine reports them (nothing is
 * kept per event), so memory stays O(1) in the run's length.  The JSON
 * object is {"displayTimeUnit":..., "traceEvents":[...], "otherData":{...}}:
 * displayTimeUnit first, because Perfetto's importer reads it only from the
 * file's first chunk; otherData last, because older importers stop at a
 * key they do not know, and after the events nothing is lost.  close
 * writes the closing brackets, after a global instant event when the limit
 * cut the iterations.
 *
 * Ids: pid = replica + 1 and tid = (replica + 1) * HS_CHROME_TID_STRIDE +
 * lane.  Perfetto treats pid 0 and tid 0 as the kernel's idle task
 * ("swapper"), and keys thread names by tid alone (Linux tids are unique
 * system-wide), so neither may be 0 and a tid names one lane of one
 * replica.  The names ("replica 0", "lane 0") keep the 0-based indices.  The first write error is kept (ferror) and
 * reported at close, since the engine's callbacks cannot fail. */
#include "out/chrome.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* More than a replica's lanes (stages x engine.prefill_lanes <= 128 x 8). */
#define HS_CHROME_TID_STRIDE 10000

struct hs_chrome {
    FILE *fp;
    char *path, *tmp;
    int64_t limit;          /* 0: none */
    int64_t iters, dropped; /* iteration events written, left out */
    hs_ns cut;              /* start of the first iteration left out */
    int first;              /* no event written yet (no comma before it) */
    hs_timeline tl;
};

/* Prints s as a JSON string body (quotes, backslashes and control
 * characters escaped). */
static void put_str(FILE *fp, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(fp, "\\%c", ch);
        else if (ch < 0x20) fprintf(fp, "\\u%04x", ch);
        else fputc(ch, fp);
    }
}

/* Starts an event: the separator, then "{" (the caller writes the rest). */
static FILE *ev(hs_chrome *c)
{
    fputs(c->first ? "\n{" : ",\n{", c->fp);
    c->first = 0;
    return c->fp;
}

/* Times are whole microseconds, truncated: a lane's iteration starts when
 * the previous one ends, and truncating both the same way keeps them
 * touching, never overlapping (fractional microseconds, read back through
 * doubles, could overlap by a nanosecond, which viewers treat as bad
 * nesting).  Iterations last milliseconds, so nothing visible is lost. */
static int64_t us(hs_ns ns)
{
    return ns >= 0 ? ns / 1000 : -((-ns + 999) / 1000);
}

static void put_us(FILE *fp, const char *key, hs_ns ns)
{
    fprintf(fp, "\"%s\":%" PRId64, key, us(ns));
}

/* "pid":..,"tid":.. of a replica's lane (see the top of the file). */
static void put_ids(FILE *fp, int32_t replica, int32_t lane)
{
    fprintf(fp, "\"pid\":%" PRId64 ",\"tid\":%" PRId64, (int64_t)replica + 1,
            ((int64_t)replica + 1) * HS_CHROME_TID_STRIDE + lane);
}

static void on_iter(void *ctx, const hs_tl_iter *it)
{
    hs_chrome *c = ctx;
    FILE *fp;
    const char *name = it->prefill_chunks == 0 ? "decode" : it->decode_seqs == 0 ? "prefill" : "mixed";
    if (c->limit > 0 && c->iters >= c->limit) {
        if (!c->dropped++) c->cut = it->start;
        return;
    }
    c->iters++;
    fp = ev(c);
    fprintf(fp, "\"ph\":\"X\",\"cat\":\"iter\",\"name\":\"%s\",", name);
    put_ids(fp, it->replica, it->lane);
    fputc(',', fp);
    put_us(fp, "ts", it->start);
    fprintf(fp, ",\"dur\":%" PRId64, us(it->end) - us(it->start));
    fprintf(fp,
            ",\"args\":{\"tokens\":%d,\"prefill_chunks\":%d,\"prefill_tokens\":%" PRId64
            ",\"prefix_tokens\":%" PRId64 ",\"decode_seqs\":%d,\"decode_ctx\":%" PRId64
            ",\"kv_used\":%" PRId64 ",\"kv_total\":%" PRId64 "}}",
            (int)it->tokens, (int)it->prefill_chunks, it->prefill_tokens, it->prefix_tokens,
            (int)it->decode_seqs, it->decode_ctx, it->kv_used, it->kv_total);
}

static void on_preempt(void *ctx, int32_t replica, int32_t lane, int64_t req, hs_ns t)
{
    hs_chrome *c = ctx;
    FILE *fp = ev(c);
    fputs("\"ph\":\"i\",\"s\":\"t\",\"cat\":\"preempt\",\"name\":\"preempt\",", fp);
    put_ids(fp, replica, lane);
    fputc(',', fp);
    put_us(fp, "ts", t);
    fprintf(fp, ",\"args\":{\"req\":%" PRId64 "}}", req);
}

/* The begin and end of one hand-over share cat, id and name (how
 * trace viewers pair async events); the span sits on the receiver. */
static void kv_event(hs_chrome *c, char ph, int64_t req, int32_t from, int32_t to, hs_ns t)
{
    FILE *fp = ev(c);
    fprintf(fp, "\"ph\":\"%c\",\"cat\":\"kv\",\"name\":\"KV from replica %d\",\"id\":%" PRId64 ",", ph,
            (int)from, req);
    put_ids(fp, to, 0);
    fputc(',', fp);
    put_us(fp, "ts", t);
}

static void on_kv_begin(void *ctx, int64_t req, int32_t from, int32_t to, double bytes, hs_ns t)
{
    hs_chrome *c = ctx;
    kv_event(c, 'b', req, from, to, t);
    fprintf(c->fp, ",\"args\":{\"req\":%" PRId64 ",\"bytes\":%.0f}}", req, bytes);
}

static void on_kv_end(void *ctx, int64_t req, int32_t from, int32_t to, hs_ns t)
{
    hs_chrome *c = ctx;
    kv_event(c, 'e', req, from, to, t);
    fputc('}', c->fp);
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int hs_chrome_open(hs_chrome **out, const char *path, int64_t limit, hs_err *err)
{
    hs_chrome *c = calloc(1, sizeof *c);
    size_t n = strlen(path) + 5;
    *out = NULL;
    if (!c || !(c->path = dup_str(path)) || !(c->tmp = malloc(n))) {
        if (c) free(c->path);
        free(c);
        return hs_errf(err, HS_ENOMEM, "%s: out of memory", path);
    }
    snprintf(c->tmp, n, "%s.tmp", path);
    if (!(c->fp = fopen(c->tmp, "w"))) {
        int rc = hs_errf(err, HS_EIO, "emit_trace: %s: cannot create: %s", c->tmp, strerror(errno));
        free(c->tmp);
        free(c->path);
        free(c);
        return rc;
    }
    c->limit = limit;
    c->first = 1;
    c->tl = (hs_timeline){c, on_iter, on_preempt, on_kv_begin, on_kv_end};
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", c->fp);
    *out = c;
    return 0;
}

void hs_chrome_replica(hs_chrome *c, int32_t replica, const char *role, const char *gpus, int32_t lanes)
{
    FILE *fp = ev(c);
    fputs("\"ph\":\"M\",\"name\":\"process_name\",", fp);
    put_ids(fp, replica, 0);
    fprintf(fp, ",\"args\":{\"name\":\"replica %d: ", (int)replica);
    put_str(fp, role);
    fputs(", ", fp);
    put_str(fp, gpus);
    fputs("\"}}", fp);
    fp = ev(c);
    fputs("\"ph\":\"M\",\"name\":\"process_sort_index\",", fp);
    put_ids(fp, replica, 0);
    fprintf(fp, ",\"args\":{\"sort_index\":%d}}", (int)replica);
    for (int32_t k = 0; k < lanes; k++) {
        fp = ev(c);
        fputs("\"ph\":\"M\",\"name\":\"thread_name\",", fp);
        put_ids(fp, replica, k);
        fprintf(fp, ",\"args\":{\"name\":\"lane %d\"}}", (int)k);
    }
}

const hs_timeline *hs_chrome_timeline(hs_chrome *c)
{
    return &c->tl;
}

int64_t hs_chrome_iters(const hs_chrome *c)
{
    return c->iters;
}

int64_t hs_chrome_dropped(const hs_chrome *c)
{
    return c->dropped;
}

int hs_chrome_close(hs_chrome *c, int discard, hs_err *err)
{
    int rc = 0, bad;
    if (!c) return 0;
    if (!discard && c->dropped) {
        /* says in the file itself, where it happens, that the iterations
         * stop there (a global instant event) */
        FILE *fp = ev(c);
        fputs("\"ph\":\"i\",\"s\":\"g\",\"cat\":\"limit\",\"name\":\"iterations cut by --emit-trace-limit\",", fp);
        put_ids(fp, 0, 0);
        fputc(',', fp);
        put_us(fp, "ts", c->cut);
        fprintf(fp, ",\"args\":{\"iterations_written\":%" PRId64 ",\"iterations_left_out\":%" PRId64 "}}",
                c->iters, c->dropped);
    }
    fputs("\n],\"otherData\":{\"producer\":\"hetsim run --emit-trace\",\"time\":\"simulated\"}}\n", c->fp);
    bad = ferror(c->fp);
    bad |= fclose(c->fp) != 0;
    if (discard) {
        remove(c->tmp);
    } else if (bad) {
        remove(c->tmp);
        rc = hs_errf(err, HS_EIO, "emit_trace: %s: write error", c->path);
    } else if (rename(c->tmp, c->path)) {
        rc = hs_errf(err, HS_EIO, "emit_trace: %s: cannot rename %s: %s", c->path, c->tmp, strerror(errno));
        remove(c->tmp);
    }
    free(c->tmp);
    free(c->path);
    free(c);
    return rc;
}
