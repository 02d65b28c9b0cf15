/* exec.c - backend registry, weights and timing shared by every backend;
 * see exec.h.
 *
 * Invariants: an hs_exec is either fully open (ops and priv set by a
 * successful init) or zeroed; a weight's buffers are all allocated or all
 * NULL. */
#include "exec.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/time.h"

static const hs_exec_ops *const backends[] = {
#ifdef HS_HAVE_CUDA
    &hs_exec_cuda_ops,
#endif
    &hs_exec_cpu_ops,
    NULL,
};

const hs_exec_ops *hs_exec_find(const char *name)
{
    for (int i = 0; backends[i]; i++)
        if (!strcmp(backends[i]->name, name)) return backends[i];
    return NULL;
}

int hs_exec_known(const char *name)
{
    return !strcmp(name, "cpu") || !strcmp(name, "cuda");
}

const hs_exec_ops *hs_exec_default(void)
{
    for (int i = 0; backends[i]; i++)
        if (backends[i]->available()) return backends[i];
    return &hs_exec_cpu_ops;
}

int hs_exec_open(hs_exec *x, const char *name, int dtype, hs_err *err)
{
    const hs_exec_ops *ops;
    int rc;
    memset(x, 0, sizeof *x);
    if (!name) ops = hs_exec_default();
    else if (!(ops = hs_exec_find(name))) {
        if (hs_exec_known(name))
            return hs_errf(err, HS_EUNSUPPORTED,
                           "--backend %s: this hetsim-exec was built without the CUDA toolkit",
                           name);
        return hs_errf(err, HS_EINVAL, "--backend %s: unknown backend (cpu or cuda)", name);
    }
    x->ops = ops;
    if ((rc = ops->init(x, 0, dtype, err))) {
        memset(x, 0, sizeof *x);
        return rc;
    }
    return 0;
}

void hs_exec_close(hs_exec *x)
{
    if (x && x->ops && x->flush) x->ops->free(x, x->flush);
    if (x && x->ops) x->ops->destroy(x);
    if (x) memset(x, 0, sizeof *x);
}

const char *hs_exec_dtype_name(hs_exec_dtype d)
{
    switch (d) {
    case HS_EXEC_FP16: return "fp16";
    case HS_EXEC_BF16: return "bf16";
    default: return "fp32";
    }
}

size_t hs_exec_qrow_bytes(int k, int bits)
{
    size_t b = ((size_t)k * (size_t)bits + 7) / 8;
    return (b + 15) / 16 * 16;
}

int hs_exec_weight_alloc(hs_exec *x, hs_exec_weight *w, int n, int k, int bits, hs_err *err)
{
    const hs_exec_ops *o = x->ops;
    size_t es = (size_t)x->info.elem_bytes;
    int rc;
    memset(w, 0, sizeof *w);
    if (n < 1 || k < 1) return hs_errf(err, HS_EINVAL, "weight %dx%d: empty", n, k);
    if (bits != 16 && bits != 8 && bits != 4)
        return hs_errf(err, HS_EINVAL, "weight bits %d: not 16, 8 or 4", bits);
    w->n = n;
    w->k = k;
    w->bits = bits;
    x->bytes_alloc += bits == 16 ? (double)n * k * es
                                 : (double)n * hs_exec_qrow_bytes(k, bits) +
                                       2.0 * n * ((k + HS_EXEC_QGROUP - 1) / HS_EXEC_QGROUP) * es;
    if (bits == 16) return o->alloc(x, &w->data, (size_t)n * k * es, err);
    w->groups = (k + HS_EXEC_QGROUP - 1) / HS_EXEC_QGROUP;
    w->ld = hs_exec_qrow_bytes(k, bits);
    if ((rc = o->alloc(x, &w->data, (size_t)n * w->ld, err)) ||
        (rc = o->alloc(x, &w->scale, (size_t)n * w->groups * es, err)) ||
        (rc = o->alloc(x, &w->zero, (size_t)n * w->groups * es, err))) {
        hs_exec_weight_free(x, w);
        return rc;
    }
    return 0;
}

void hs_exec_weight_free(hs_exec *x, hs_exec_weight *w)
{
    if (!w) return;
    if (x && x->ops) {
        x->ops->free(x, w->data);
        x->ops->free(x, w->scale);
        x->ops->free(x, w->zero);
    }
    memset(w, 0, sizeof *w);
}

int hs_exec_weight_random(hs_exec *x, hs_exec_weight *w, uint64_t seed, float scale, hs_err *err)
{
    const hs_exec_ops *o = x->ops;
    size_t ng = (size_t)w->n * w->groups;
    float mid, *z;
    int rc;
    if (w->bits == 16) return o->fill_random(x, w->data, (size_t)w->n * w->k, seed, scale, err);
    mid = (float)(1 << (w->bits - 1));
    if ((rc = o->fill_bytes(x, w->data, (size_t)w->n * w->ld, seed, err)) ||
        (rc = o->fill_random(x, w->scale, ng, seed + 1, scale / mid, err)))
        return rc;
    /* Zero points in the middle of the code range, so the weights are
     * centred on 0. */
    if (!(z = malloc(ng * sizeof *z))) return hs_errf(err, HS_ENOMEM, "out of memory (zero points)");
    for (size_t i = 0; i < ng; i++) z[i] = mid;
    rc = o->upload(x, w->zero, z, ng, err);
    free(z);
    return rc;
}

void hs_exec_quantize(const float *w, int n, int k, int bits, uint8_t *q, float *scale,
                      float *zero)
{
    int groups = (k + HS_EXEC_QGROUP - 1) / HS_EXEC_QGROUP;
    size_t ld = hs_exec_qrow_bytes(k, bits);
    float qmax = (float)((1 << bits) - 1);
    memset(q, 0, (size_t)n * ld);
    for (int r = 0; r < n; r++)
        for (int g = 0; g < groups; g++) {
            int k0 = g * HS_EXEC_QGROUP, k1 = k0 + HS_EXEC_QGROUP < k ? k0 + HS_EXEC_QGROUP : k;
            float lo = w[(size_t)r * k + k0], hi = lo, s, z;
            for (int i = k0; i < k1; i++) {
                float v = w[(size_t)r * k + i];
                if (v < lo) lo = v;
                if (v > hi) hi = v;
            }
            s = hi > lo ? (hi - lo) / qmax : 1.0f;
            z = -lo / s;
            scale[(size_t)r * groups + g] = s;
            zero[(size_t)r * groups + g] = z;
            for (int i = k0; i < k1; i++) {
                float c = roundf(w[(size_t)r * k + i] / s + z);
                unsigned v = c < 0 ? 0u : c > qmax ? (unsigned)qmax : (unsigned)c;
                uint8_t *row = q + (size_t)r * ld;
                if (bits == 8) row[i] = (uint8_t)v;
                else row[i / 2] |= (uint8_t)(i % 2 ? v << 4 : v);
            }
        }
}

int hs_exec_weight_set(hs_exec *x, hs_exec_weight *w, const float *data_f, const uint8_t *q,
                       const float *scale, const float *zero, hs_err *err)
{
    const hs_exec_ops *o = x->ops;
    size_t ng = (size_t)w->n * w->groups;
    int rc;
    if (w->bits == 16) return o->upload(x, w->data, data_f, (size_t)w->n * w->k, err);
    if ((rc = o->upload_bytes(x, w->data, q, (size_t)w->n * w->ld, err)) ||
        (rc = o->upload(x, w->scale, scale, ng, err)) ||
        (rc = o->upload(x, w->zero, zero, ng, err)))
        return rc;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int hs_exec_timing_parse(const char *s)
{
    static const char *const names[] = {"alone", "cold", "stream"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

const char *hs_exec_timing_name(hs_exec_timing_mode m)
{
    return m == HS_EXEC_TIME_COLD ? "cold" : m == HS_EXEC_TIME_STREAM ? "stream" : "alone";
}

/* One STREAM sample: k (read, op) pairs minus k reads, over k, each burst
 * under one timer.  The two bursts run next to each other so a drifting
 * clock cancels; the op needs no host synchronisation of its own. */
static int stream_sample(hs_exec *x, const hs_exec_timing *t,
                         int (*fn)(hs_exec *x, void *ctx, hs_err *err), void *ctx, int k,
                         double *us, double *total, hs_err *err)
{
    const hs_exec_ops *o = x->ops;
    double with, without;
    int rc;
    if ((rc = o->timer_start(x, err))) return rc;
    for (int i = 0; i < k; i++)
        if ((rc = o->read_bytes(x, x->flush, t->flush_bytes, err)) || (rc = fn(x, ctx, err))) return rc;
    if ((rc = o->timer_stop(x, &with, err)) || (rc = o->timer_start(x, err))) return rc;
    for (int i = 0; i < k; i++)
        if ((rc = o->read_bytes(x, x->flush, t->flush_bytes, err))) return rc;
    if ((rc = o->timer_stop(x, &without, err))) return rc;
    *us = (with - without) / k;
    if (total) *total = with + without;
    return 0;
}

/* Idles the host for s seconds (the GPU has nothing queued: every timer
 * stop waits for its work). */
static void idle_s(double s)
{
    struct timespec ts;
    if (!(s > 0)) return;
    if (s > 60) s = 60;   /* a bound, whatever the measurement took */
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

int hs_exec_measure(hs_exec *x, const hs_exec_timing *t,
                    int (*fn)(hs_exec *x, void *ctx, hs_err *err), void *ctx, double *us,
                    hs_err *err)
{
    double t0 = hs_wall_s();
    const hs_exec_ops *o = x->ops;
    double first = 0, *s;
    int rc, reps, k = 1;
    uint64_t seed = 0;
    size_t flush = t->mode == HS_EXEC_TIME_ALONE ? 0 : t->flush_bytes;
    if (flush > x->flush_cap) {
        if (x->flush) o->free(x, x->flush);
        x->flush = NULL;
        x->flush_cap = 0;
        if ((rc = o->alloc(x, &x->flush, flush, err))) return rc;
        x->flush_cap = flush;
        /* written once, so that STREAM reads initialised memory */
        if ((rc = o->fill_bytes(x, x->flush, flush, 1, err))) return rc;
    }
#define FLUSH() (t->mode == HS_EXEC_TIME_COLD && flush ? o->fill_bytes(x, x->flush, flush, ++seed, err) : 0)
    /* Warm-up; the last one is timed to choose the number of repeats. */
    for (int i = 0; i < (t->warmup > 1 ? t->warmup : 1); i++) {
        if ((rc = FLUSH()) || (rc = o->timer_start(x, err)) || (rc = fn(x, ctx, err)) ||
            (rc = o->timer_stop(x, &first, err)))
            return rc;
    }
    if (t->mode == HS_EXEC_TIME_STREAM && flush) {
        /* Enough pairs per burst that a short op is not lost in the reads'
         * jitter; the repeats then cover target_us of bursts. */
        k = first > 0 ? (int)ceil(100.0 / first) : 16;
        if (k > 16) k = 16;
        if (k < 1) k = 1;
        if ((rc = stream_sample(x, t, fn, ctx, k, us, &first, err))) return rc;   /* first: a sample's time */
    }
    memset(&x->mon_last, 0, sizeof x->mon_last);
    reps = first > 0 ? (int)ceil(t->target_us / first) : t->max_reps;
    if (reps < t->min_reps) reps = t->min_reps;
    if (reps > t->max_reps) reps = t->max_reps;
    if (reps < 1) reps = 1;
    if (!(s = malloc((size_t)reps * sizeof *s)))
        return hs_errf(err, HS_ENOMEM, "out of memory (timing samples)");
    if (x->mon) hs_gpumon_begin(x->mon);
    for (int i = 0; i < reps; i++) {
        if (t->mode == HS_EXEC_TIME_STREAM && flush)
            rc = stream_sample(x, t, fn, ctx, k, &s[i], NULL, err);
        else if (!(rc = FLUSH()) && !(rc = o->timer_start(x, err)) && !(rc = fn(x, ctx, err)))
            rc = o->timer_stop(x, &s[i], err);
        if (rc) {
            if (x->mon) hs_gpumon_end(x->mon, &x->mon_last);
            free(s);
            return rc;
        }
    }
    if (x->mon) hs_gpumon_end(x->mon, &x->mon_last);
#undef FLUSH
    qsort(s, (size_t)reps, sizeof *s, cmp_double);
    *us = reps % 2 ? s[reps / 2] : 0.5 * (s[reps / 2 - 1] + s[reps / 2]);
    free(s);
    if (t->rest > 0) idle_s(t->rest * (hs_wall_s() - t0));
    /* A difference of two bursts can come out at or below zero for an op
     * far shorter than the reads' jitter; a table time must be positive. */
    if (t->mode == HS_EXEC_TIME_STREAM && *us < 0.01) *us = 0.01;
    return 0;
}
