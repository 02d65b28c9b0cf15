/* validate.c - `hetsim validate`: how far the simulator's predictions are
 * from the hardware.
 *
 * Joins the schedule a run emitted (--emit-schedule) with the iteration
 * times hetsim-exec replay measured, stores the pairs in the `validations`
 * table of the run, and reports:
 *   - the absolute percentage error per iteration (median, p90, p99), and
 *     by kind of iteration (prefill alone, with decodes, decode by batch
 *     size) with its sign, and the drift of the measured timeline;
 *   - each request's TTFT, TPOT and E2E recomputed on the measured
 *     timeline, against the predicted ones (p50 and p99 errors);
 *   - the KV blocks the executor found room for against the memory model.
 * The measured timeline keeps the schedule's composition: an iteration
 * that followed its predecessor back to back follows it on the measured
 * timeline too; one that waited for an arrival starts at
 * max(its predicted start, the measured end of its predecessor); and no
 * iteration starts before every request it prefills has arrived.
 * The executor times GPU work only, so the predicted scheduler overhead
 * (step_overhead_ns of the header) is taken out of the predicted
 * iteration time before comparing and added back on the measured timeline. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "cli/cli.h"
#include "core/str.h"
#include "core/vec.h"
#include "hw/hw.h"
#include "out/db.h"
#include "perf/perf.h"
#include "serve/schedule.h"

/* The longest measured iteration accepted, ns (one hour). */
#define HS_VALIDATE_MAX_NS 3.6e12

typedef struct vreq {
    int64_t id;
    hs_ns arrival;
    int32_t output;
    int64_t first_it, fin_it;     /* iteration indices, -1 unknown */
} vreq;

typedef struct vdata {
    hs_sched_header h;
    int have_header;
    vreq *req;
    int64_t n_req;
    size_t cap_req;
    hs_ns *start, *end;           /* predicted, per iteration */
    hs_ns *arrived;               /* latest arrival among its prefill requests */
    int *chained;                 /* started right at its predecessor's end */
    int64_t n_it;
    size_t cap_it;
    double *meas;                 /* measured ns per iteration */
    double *ovh;                  /* predicted host cost per iteration, ns */
    int32_t *n_pre, *n_dec;       /* prefill chunks and decode sequences per iteration */
    hs_batch_shape *shape;        /* --reprice: each iteration's batch, as the engine sums it */
    int want_shape;
    char device[128];
    int64_t exec_kv_blocks;       /* -1: not reported */
} vdata;

static int cmp_id(const void *a, const void *b)
{
    const vreq *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static vreq *find_req(vdata *d, int64_t id)
{
    vreq key = {.id = id};
    if (d->n_req == 0) return NULL; /* bsearch(NULL, 0) is undefined */
    return bsearch(&key, d->req, (size_t)d->n_req, sizeof *d->req, cmp_id);
}

static int read_schedule(vdata *d, const char *path, int32_t replica, hs_err *err)
{
    hs_sched_reader *r;
    hs_sched_header h;
    hs_sched_request q;
    hs_sched_iter it;
    int kind, rc;
    size_t cap_it2 = 0, cap_it3 = 0, cap_it4 = 0, cap_it5 = 0, cap_it6 = 0, cap_it7 = 0, cap_it8 = 0;
    /* first/finished ids per iteration, resolved once requests are sorted */
    int64_t *ev_id = NULL, *ev_it = NULL, n_ev = 0;
    char *ev_first = NULL;
    size_t cap_ev = 0, cap_ev2 = 0, cap_ev3 = 0;
    if ((rc = hs_sched_open(&r, path, err))) return rc;
    while ((kind = hs_sched_next(r, &h, &q, &it, err)) > 0) {
        if (kind == HS_SCHED_HEADER && h.replica == replica) {
            d->h = h;
            d->have_header = 1;
        } else if (kind == HS_SCHED_REQUEST && q.replica == replica) {
            if (hs_vec_reserve((void **)&d->req, &d->cap_req, (size_t)d->n_req + 1, sizeof *d->req,
                               256))
                goto nomem;
            d->req[d->n_req++] = (vreq){q.id, q.arrival, q.output, -1, -1};
        } else if (kind == HS_SCHED_ITER && it.replica == replica) {
            int64_t i = d->n_it;
            size_t need = (size_t)i + 1;
            if (it.it != i) {
                rc = hs_errf(err, HS_EPARSE, "%s: replica %d: iteration %lld out of order (expected %lld)",
                             path, replica, (long long)it.it, (long long)i);
                goto out;
            }
            if (hs_vec_reserve((void **)&d->start, &d->cap_it, need, sizeof *d->start, 256) ||
                hs_vec_reserve((void **)&d->end, &cap_it2, need, sizeof *d->end, 256) ||
                hs_vec_reserve((void **)&d->chained, &cap_it3, need, sizeof *d->chained, 256) ||
                hs_vec_reserve((void **)&d->arrived, &cap_it4, need, sizeof *d->arrived, 256) ||
                hs_vec_reserve((void **)&d->ovh, &cap_it5, need, sizeof *d->ovh, 256) ||
                hs_vec_reserve((void **)&d->n_pre, &cap_it6, need, sizeof *d->n_pre, 256) ||
                hs_vec_reserve((void **)&d->n_dec, &cap_it7, need, sizeof *d->n_dec, 256) ||
                (d->want_shape && hs_vec_reserve((void **)&d->shape, &cap_it8, need, sizeof *d->shape, 256)))
                goto nomem;
            if (d->want_shape) {
                /* the sums hs_iter_add_chunk and the decode step make
                 * (serve/lane.c): a schedule's context counts the new token */
                hs_batch_shape *b = &d->shape[i];
                memset(b, 0, sizeof *b);
                for (int k = 0; k < it.n_pre; k++) {
                    const hs_sched_chunk *c = &it.pre[k];
                    b->tokens += c->len;
                    b->pre_chunks++;
                    b->pre_self += (double)c->len * (c->len + 1) / 2.0;
                    b->pre_tokens += c->len;
                    b->pre_cross += (double)c->len * c->prefix;
                    b->pre_prefix += c->prefix;
                    if (c->prefix + c->len == c->target) b->samples++;
                }
                for (int k = 0; k < it.n_dec; k++) b->dec_ctx += it.dec[k].ctx;
                b->dec_seqs = it.n_dec;
                b->tokens += it.n_dec;
                b->samples += it.n_dec;
            }
            {
                /* the host cost the engine charged (hs_perf_step_ns): schedules
                 * are emitted for default-completion policies only, whose batch shape has
                 * exactly these sequences and tokens (no padding) */
                double tok = it.n_dec;
                for (int k = 0; k < it.n_pre; k++) tok += it.pre[k].len;
                d->ovh[i] = d->h.step_overhead_ns + d->h.step_seq_ns * (it.n_pre + it.n_dec) +
                            d->h.step_tok_ns * tok;
            }
            d->start[i] = it.start;
            d->end[i] = it.end;
            d->n_pre[i] = it.n_pre;
            d->n_dec[i] = it.n_dec;
            d->arrived[i] = 0;
            d->chained[i] = i > 0 && it.start == d->end[i - 1];
            /* events: 1 first token, 0 finished, 2 prefilled here */
            for (int k = 0; k < it.n_first + it.n_finished + it.n_pre; k++) {
                int ev = k < it.n_first ? 1 : k < it.n_first + it.n_finished ? 0 : 2;
                size_t ev_need = (size_t)n_ev + 1;
                if (hs_vec_reserve((void **)&ev_id, &cap_ev, ev_need, sizeof *ev_id, 256) ||
                    hs_vec_reserve((void **)&ev_it, &cap_ev2, ev_need, sizeof *ev_it, 256) ||
                    hs_vec_reserve((void **)&ev_first, &cap_ev3, ev_need, sizeof *ev_first, 256))
                    goto nomem;
                ev_id[n_ev] = ev == 1 ? it.first[k]
                            : ev == 0 ? it.finished[k - it.n_first]
                                      : it.pre[k - it.n_first - it.n_finished].id;
                ev_it[n_ev] = i;
                ev_first[n_ev++] = (char)ev;
            }
            d->n_it++;
        }
    }
    if (kind < 0) {
        rc = kind;
        goto out;
    }
    if (!d->have_header) {
        rc = hs_errf(err, HS_ENOTFOUND, "%s: no replica %d in this schedule", path, replica);
        goto out;
    }
    if (d->n_req > 0) qsort(d->req, (size_t)d->n_req, sizeof *d->req, cmp_id);
    for (int64_t k = 0; k < n_ev; k++) {
        vreq *v = find_req(d, ev_id[k]);
        if (!v) {
            rc = hs_errf(err, HS_EPARSE, "%s: iteration %lld names request %lld that never arrived",
                         path, (long long)ev_it[k], (long long)ev_id[k]);
            goto out;
        }
        if (ev_first[k] == 1) v->first_it = ev_it[k];
        else if (ev_first[k] == 0) v->fin_it = ev_it[k];
        else if (v->arrival > d->arrived[ev_it[k]]) d->arrived[ev_it[k]] = v->arrival;
    }
    rc = 0;
    goto out;
nomem:
    rc = hs_errf(err, HS_ENOMEM, "out of memory reading %s", path);
out:
    free(ev_id);
    free(ev_it);
    free(ev_first);
    hs_sched_close(r);
    return rc;
}

/* The replay CSV: "# hetsim-exec replay: device=..., ..., kv_blocks_capacity=N"
 * comment lines, the header "it,measured_ns", one row per iteration. */
static int read_measured(vdata *d, const char *path, hs_err *err)
{
    FILE *fp = fopen(path, "r");
    char line[1024];
    long lineno = 0;
    int64_t rows = 0;
    int header = 0;
    if (!fp) return hs_errf(err, HS_EIO, "%s: cannot open: %s", path, strerror(errno));
    d->meas = calloc((size_t)(d->n_it ? d->n_it : 1), sizeof *d->meas);
    if (!d->meas) {
        fclose(fp);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    d->exec_kv_blocks = -1;
    snprintf(d->device, sizeof d->device, "unknown");
    while (fgets(line, sizeof line, fp)) {
        long long it;
        double ns;
        char tail;
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#') {
            const char *p = strstr(line, "device=");
            const char *k = strstr(line, "kv_blocks_capacity=");
            if (p) {
                size_t n = strcspn(p + 7, ",");
                if (n >= sizeof d->device) n = sizeof d->device - 1;
                memcpy(d->device, p + 7, n);
                d->device[n] = '\0';
            }
            if (k) d->exec_kv_blocks = strtoll(k + 19, NULL, 10);
            continue;
        }
        if (!line[0]) continue;
        if (!header) {
            if (strcmp(line, "it,measured_ns")) {
                fclose(fp);
                return hs_errf(err, HS_EPARSE, "%s:%ld: expected the header it,measured_ns", path, lineno);
            }
            header = 1;
            continue;
        }
        if (sscanf(line, "%lld,%lf%c", &it, &ns, &tail) != 2 || !(ns > 0) || !isfinite(ns)) {
            fclose(fp);
            return hs_errf(err, HS_EPARSE, "%s:%ld: expected ITERATION,NANOSECONDS with a positive time",
                           path, lineno);
        }
        /* Bounded so that llround() and the measured timeline (a sum of
         * these) stay in int64 ns; no iteration takes an hour. */
        if (ns > HS_VALIDATE_MAX_NS) {
            fclose(fp);
            return hs_errf(err, HS_ERANGE, "%s:%ld: measured time %g ns is more than an hour (%.0f ns)",
                           path, lineno, ns, HS_VALIDATE_MAX_NS);
        }
        if (it != rows || it >= d->n_it) {
            fclose(fp);
            return hs_errf(err, HS_EPARSE, "%s:%ld: iteration %lld: expected %lld (the schedule has %lld)",
                           path, lineno, it, (long long)rows, (long long)d->n_it);
        }
        d->meas[rows++] = ns;
    }
    fclose(fp);
    if (rows != d->n_it)
        return hs_errf(err, HS_EPARSE, "%s: %lld measured iterations, the schedule has %lld", path,
                       (long long)rows, (long long)d->n_it);
    return 0;
}

static void free_data(vdata *d)
{
    free(d->req);
    free(d->start);
    free(d->ovh);
    free(d->end);
    free(d->chained);
    free(d->arrived);
    free(d->meas);
    free(d->n_pre);
    free(d->n_dec);
    free(d->shape);
}

/* The end of every iteration when each takes dur[i] (ns, GPU time) plus
 * its host cost: the measured timeline with the measured times (see the
 * top of the file), a repriced one with the repriced times. */
static int timeline_of(const vdata *d, const double *dur, hs_ns *mend, const char *measured,
                       const char *which, hs_err *err)
{
    for (int64_t i = 0; i < d->n_it; i++) {
        hs_ns st = d->start[i];
        if (i > 0) st = d->chained[i] ? mend[i - 1] : (st > mend[i - 1] ? st : mend[i - 1]);
        if (st < d->arrived[i]) st = d->arrived[i];
        /* measured times are bounded, schedule times are int64: in double,
         * so that the check itself cannot overflow */
        if ((double)st + dur[i] + d->ovh[i] > 9e18 || (double)st + dur[i] + d->ovh[i] < -9e18)
            return hs_errf(err, HS_ERANGE, "%s: iteration %lld: the %s timeline leaves int64 ns",
                           measured, (long long)i, which);
        mend[i] = st + llround(dur[i] + d->ovh[i]);
    }
    return 0;
}

static int timeline(const vdata *d, hs_ns *mend, const char *measured, hs_err *err)
{
    return timeline_of(d, d->meas, mend, measured, "measured", err);
}

int hs_cli_validate_check(const char *sched, const char *measured, int32_t replica, hs_err *err)
{
    vdata d;
    hs_ns *mend = NULL;
    int rc;
    memset(&d, 0, sizeof d);
    if ((rc = read_schedule(&d, sched, replica, err))) goto out;
    if (d.n_it == 0) {
        rc = hs_errf(err, HS_EINVAL, "%s: replica %d ran no iteration (the schedule has no iteration rows)",
                     sched, replica);
        goto out;
    }
    if ((rc = read_measured(&d, measured, err))) goto out;
    if (!(mend = malloc((size_t)d.n_it * sizeof *mend))) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    rc = timeline(&d, mend, measured, err);
out:
    free(mend);
    free_data(&d);
    return rc;
}

/* Percentile q (0..100) of v[0..n) (sorted in place). */
static double pct(double *v, size_t n, double q)
{
    if (!n) return NAN;
    gsl_sort(v, 1, n);
    return gsl_stats_quantile_from_sorted_data(v, 1, n, q / 100.0);
}

/* The headline: |error| per iteration, median / p90 / p99 (sorts ape). */
static void print_iter_error(int64_t n, double *ape)
{
    printf("iterations: %lld; absolute error per iteration: median %.2f%%, p90 %.2f%%, p99 %.2f%%\n",
           (long long)n, pct(ape, (size_t)n, 50), pct(ape, (size_t)n, 90), pct(ape, (size_t)n, 99));
}

static double rel(double meas, double pred)
{
    return meas != 0 ? (pred - meas) / meas * 100.0 : NAN;
}

/* Where the iteration error comes from: the error of each kind of
 * iteration (prefill alone, prefill with decodes, decode by batch size),
 * median absolute and median signed (pred / meas - 1), from the predicted
 * and measured ns the validations table stores; and how far the measured
 * timeline drifts from the predicted one, which is what moves TTFT when
 * iterations of both signs alternate. */
static int print_kinds(const vdata *d, const int64_t *pred, const int64_t *meas, const hs_ns *mend,
                       hs_err *err)
{
    enum { PREFILL, MIXED, DECODE };
    static const struct { const char *name; int kind, lo, hi; } band[] = {
        {"prefill only", PREFILL, 0, 0}, {"prefill + decode", MIXED, 0, 0},
        {"decode, batch 1", DECODE, 1, 1}, {"decode, batch 2-3", DECODE, 2, 3},
        {"decode, batch 4-7", DECODE, 4, 7}, {"decode, batch 8-15", DECODE, 8, 15},
        {"decode, batch 16-31", DECODE, 16, 31}, {"decode, batch 32-63", DECODE, 32, 63},
        {"decode, batch 64+", DECODE, 64, INT32_MAX}};
    double *e = malloc((size_t)d->n_it * sizeof *e), *s = malloc((size_t)d->n_it * sizeof *s);
    if (!e || !s) {
        free(e);
        free(s);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    printf("by kind of iteration: count, median absolute error, median signed error (predicted - measured)\n");
    for (size_t b = 0; b < sizeof band / sizeof band[0]; b++) {
        size_t n = 0;
        for (int64_t i = 0; i < d->n_it; i++) {
            int np = d->n_pre[i], nd = d->n_dec[i];
            int kind = np > 0 ? (nd > 0 ? MIXED : PREFILL) : DECODE;
            if (kind != band[b].kind || (kind == DECODE && (nd < band[b].lo || nd > band[b].hi))) continue;
            s[n] = rel((double)meas[i], (double)pred[i]);
            e[n] = fabs(s[n]);
            n++;
        }
        if (n) printf("  %-20s %7zu %8.2f%% %+8.2f%%\n", band[b].name, n, pct(e, n, 50), pct(s, n, 50));
    }
    if (mend) {
        for (int64_t i = 0; i < d->n_it; i++) s[i] = (double)(mend[i] - d->end[i]) / 1e6;
        double med = pct(s, (size_t)d->n_it, 50);   /* sorts s */
        printf("measured timeline minus predicted, iteration ends: median %+.3f ms, from %+.3f to %+.3f ms\n",
               med, s[0], s[d->n_it - 1]);
    }
    free(e);
    free(s);
    return 0;
}

/* TTFT, TPOT and E2E of every finished request on the predicted
 * iteration ends pend and the measured ones mend: p50 and p99 of each.
 * a and b hold n_req + 1 doubles. */
static void print_requests(const vdata *d, const hs_ns *pend, const hs_ns *mend, double *a, double *b)
{
    static const char *const names[] = {"TTFT", "TPOT", "E2E"};
    for (int k = 0; k < 3; k++) {
        size_t n = 0;
        for (int64_t j = 0; j < d->n_req; j++) {
            const vreq *v = &d->req[j];
            double pv, mv;
            if (v->first_it < 0 || v->fin_it < 0) continue;
            if (k == 0) {
                pv = (double)(pend[v->first_it] - v->arrival);
                mv = (double)(mend[v->first_it] - v->arrival);
            } else if (k == 1) {
                if (v->output <= 1) continue;
                pv = (double)(pend[v->fin_it] - pend[v->first_it]) / (v->output - 1);
                mv = (double)(mend[v->fin_it] - mend[v->first_it]) / (v->output - 1);
            } else {
                pv = (double)(pend[v->fin_it] - v->arrival);
                mv = (double)(mend[v->fin_it] - v->arrival);
            }
            a[n] = pv;
            b[n] = mv;
            n++;
        }
        if (!n) continue;
        {
            double p50 = pct(a, n, 50), p99 = pct(a, n, 99);
            double m50 = pct(b, n, 50), m99 = pct(b, n, 99);
            printf("%-5s p50 predicted %10.3f ms measured %10.3f ms (%+.2f%%); p99 predicted %10.3f ms measured %10.3f ms (%+.2f%%); %zu requests\n",
                   names[k], p50 / 1e6, m50 / 1e6, rel(m50, p50), p99 / 1e6, m99 / 1e6, rel(m99, p99), n);
        }
    }
}

static int parse_int(const char *flag, const char *v, long long lo, long long hi, long long *out)
{
    hs_err err = {0};
    if (hs_parse_int(flag, v, lo, hi, out, &err)) {
        fprintf(stderr, "hetsim: validate: %s\n", err.msg);
        return 2;
    }
    return 0;
}

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: hetsim validate --schedule FILE --measured FILE [--replica R] [--db FILE] [--run N]\n"
            "       hetsim validate --schedule FILE --measured FILE --reprice CLUSTER [--set perf.KEY=VALUE ...]\n"
            "Compares a run's emitted schedule (hetsim run --emit-schedule) with the iteration\n"
            "times hetsim-exec replay measured: stores them in the validations table of run N\n"
            "(default: the newest run in the database) and prints the error distribution.\n"
            "--reprice prices every iteration of the schedule again with a latency model (the\n"
            "schedule's model, TP and bits on GPUs 0..TP-1 of CLUSTER, perf.* from --set) and\n"
            "prints its error against the same measurement, and each request's TTFT, TPOT\n"
            "and E2E with the schedule's batches on both times; nothing is stored.  A\n"
            "measured replay so becomes a benchmark for any latency model, no GPU needed.\n");
}

/* --reprice: the schedule's iterations priced by a latency model built for
 * its replica (model, TP, bits, layers) on GPUs 0..tp-1 of the cluster;
 * the GPU time is the stage time, which is what the simulated run's
 * iterations held besides the host cost validate takes out. */
static int reprice(const vdata *d, const char *cluster, const hs_perf_cfg *cfg_in, int kernels_given,
                   double *ns, hs_err *err)
{
    /* the replica's kernels unless --set names others */
    hs_perf_cfg own = *cfg_in;
    const hs_perf_cfg *cfg = &own;
    if (!kernels_given && d->h.quant_kernels[0])
        snprintf(own.quant_kernels, sizeof own.quant_kernels, "%s", d->h.quant_kernels);
    hs_model m;
    hs_cluster *c = NULL;
    hs_layout l;
    hs_perf p;
    int rc, maxt = 1, maxs = 1;
    if ((rc = hs_model_find(&m, d->h.model, err)) || (rc = hs_cluster_find(&c, cluster, err))) goto out;
    if (d->h.pp != 1 || d->h.tp < 1 || d->h.tp > c->n_gpus || d->h.tp > HS_MAX_TP) {
        rc = hs_errf(err, HS_ERANGE, "--reprice %s: the schedule's replica (TP %d, PP %d) does not fit its %d GPUs",
                     cluster, d->h.tp, d->h.pp, c->n_gpus);
        goto out;
    }
    memset(&l, 0, sizeof l);
    l.pp = 1;
    l.kv_bits = d->h.kv_bits;
    l.stage[0].tp = d->h.tp;
    l.stage[0].layers = d->h.layers > 0 ? d->h.layers : m.layers;
    l.stage[0].bits = d->h.bits;
    for (int i = 0; i < d->h.n_layer_bits; i++) l.layer_bits[i] = d->h.layer_bits[i];
    for (int i = 0; i < d->h.tp; i++) l.stage[0].gpus[i] = i;
    for (int64_t i = 0; i < d->n_it; i++) {
        if (d->shape[i].tokens > maxt) maxt = d->shape[i].tokens;
        if (d->shape[i].samples > maxs) maxs = d->shape[i].samples;
    }
    if ((rc = hs_perf_build(&p, cfg, &m, c, &l, maxt, maxs, err))) goto out;
    /* the replica ran at its deployment's scale, host cost included (the
     * header's): its GPU times are repriced at it too */
    if (d->h.latency_scale > 0 && d->h.latency_scale != 1) hs_perf_scale(&p, d->h.latency_scale);
    for (int64_t i = 0; i < d->n_it; i++) ns[i] = hs_perf_stage_ns(&p, 0, &d->shape[i]);
    printf("repriced %s, TP %d, %d-bit on %s: latency model %s%s%s", m.name, d->h.tp, d->h.bits, c->name,
           p.model_name, p.calib[0] ? "; " : "", p.calib);
    if (d->h.latency_scale > 0 && d->h.latency_scale != 1)
        printf("; x%.4g (the deployment's latency_scale)", d->h.latency_scale);
    printf("\n");
    hs_perf_free(&p);
out:
    hs_cluster_destroy(c);
    return rc;
}

int hs_cli_validate(int argc, char **argv)
{
    const char *sched = NULL, *measured = NULL, *dbpath = "results/hetsim.db", *cluster = NULL;
    int32_t replica = 0;
    int64_t run = -1;
    hs_perf_cfg cfg;
    int kernels_given = 0;
    hs_err err = {0};
    vdata d;
    hs_db *db = NULL;
    int rc;
    int64_t *iti = NULL, *pred = NULL, *meas = NULL;
    double *ape = NULL, *a = NULL, *b = NULL, *pns = NULL;
    hs_ns *mend = NULL, *pend = NULL;
    memset(&d, 0, sizeof d);
    hs_perf_cfg_defaults(&cfg);
    /* every option takes a value: step over both */
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--schedule") && strcmp(argv[i], "--measured") && strcmp(argv[i], "--db") &&
            strcmp(argv[i], "--replica") && strcmp(argv[i], "--run") && strcmp(argv[i], "--reprice") &&
            strcmp(argv[i], "--set")) {
            char e[128];
            hs_err_escape(e, sizeof e, argv[i], strlen(argv[i]));
            fprintf(stderr, "hetsim: validate: unknown option \"%s\" (see hetsim validate --help)\n", e);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "hetsim: validate: %s needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--schedule")) sched = v;
        else if (!strcmp(argv[i], "--measured")) measured = v;
        else if (!strcmp(argv[i], "--reprice")) cluster = v;
        else if (!strcmp(argv[i], "--set")) {
            kernels_given |= !strncmp(v, "perf.quant_kernels=", 19);
            if (hs_perf_cfg_set_arg(&cfg, v, &err)) {
                fprintf(stderr, "hetsim: validate: %s\n", err.msg);
                return 2;
            }
        }
        else if (!strcmp(argv[i], "--db")) dbpath = v;
        else if (!strcmp(argv[i], "--replica") || !strcmp(argv[i], "--run")) {
            long long x;
            int bad = !strcmp(argv[i], "--replica") ? parse_int(argv[i], v, 0, 1000000000, &x)
                                                    : parse_int(argv[i], v, 1, INT64_MAX, &x);
            if (bad) return bad;
            if (!strcmp(argv[i], "--replica")) replica = (int32_t)x;
            else run = x;
        }
    }
    if (!sched || !measured) {
        fprintf(stderr, "hetsim: validate: --schedule and --measured are required\n");
        return 2;
    }
    d.want_shape = cluster != NULL;
    if ((rc = read_schedule(&d, sched, replica, &err))) goto fail;
    /* before the measured file, whose every row would then be "unexpected" */
    if (d.n_it == 0) {
        rc = hs_errf(&err, HS_EINVAL, "%s: replica %d ran no iteration (the schedule has no iteration rows)",
                     sched, replica);
        goto fail;
    }
    if ((rc = read_measured(&d, measured, &err))) goto fail;
    iti = malloc((size_t)d.n_it * sizeof *iti);
    pred = malloc((size_t)d.n_it * sizeof *pred);
    meas = malloc((size_t)d.n_it * sizeof *meas);
    ape = malloc((size_t)d.n_it * sizeof *ape);
    mend = malloc((size_t)d.n_it * sizeof *mend);
    a = malloc((size_t)(d.n_req + 1) * sizeof *a);
    b = malloc((size_t)(d.n_req + 1) * sizeof *b);
    pns = malloc((size_t)d.n_it * sizeof *pns);
    pend = malloc((size_t)d.n_it * sizeof *pend);
    if (!iti || !pred || !meas || !ape || !mend || !a || !b || !pns || !pend) {
        rc = hs_errf(&err, HS_ENOMEM, "out of memory");
        goto fail;
    }
    if (cluster) {
        if ((rc = reprice(&d, cluster, &cfg, kernels_given, pns, &err))) goto fail;
        for (int64_t i = 0; i < d.n_it; i++) {
            pred[i] = llround(pns[i]);
            meas[i] = llround(d.meas[i]);
            ape[i] = fabs(pns[i] - d.meas[i]) / d.meas[i] * 100.0;
        }
        print_iter_error(d.n_it, ape);
        if ((rc = print_kinds(&d, pred, meas, NULL, &err))) goto fail;
        /* the schedule's batches on both latencies: how the repriced times
         * move each request (the batches a run on this model would form
         * may differ) */
        if ((rc = timeline_of(&d, pns, pend, measured, "repriced", &err)) ||
            (rc = timeline(&d, mend, measured, &err)))
            goto fail;
        printf("requests on the schedule's batches, repriced against measured:\n");
        print_requests(&d, pend, mend, a, b);
        goto done;
    }
    if ((rc = timeline(&d, mend, measured, &err))) goto fail;
    for (int64_t i = 0; i < d.n_it; i++) {
        double p = (double)(d.end[i] - d.start[i]) - d.ovh[i];
        iti[i] = i;
        pred[i] = llround(p);
        meas[i] = llround(d.meas[i]);
        ape[i] = fabs(p - d.meas[i]) / d.meas[i] * 100.0;
    }
    if ((rc = hs_db_open(&db, dbpath, &err))) goto fail;
    if (run < 0 && (rc = hs_db_latest_run(db, &run, &err))) goto fail;
    if ((rc = hs_db_validations(db, run, d.device, iti, pred, meas, d.n_it, &err))) goto fail;

    printf("validation of run %lld, replica %d (%s, TP %d, %s latency model) on %s\n", (long long)run,
           replica, d.h.model, d.h.tp, d.h.perf_model, d.device);
    print_iter_error(d.n_it, ape);
    if ((rc = print_kinds(&d, pred, meas, mend, &err))) goto fail;
    print_requests(&d, d.end, mend, a, b);
    if (d.exec_kv_blocks >= 0)
        printf("KV blocks: memory model %lld, executor %lld (%+.2f%%)\n", (long long)d.h.kv_blocks,
               (long long)d.exec_kv_blocks, rel((double)d.exec_kv_blocks, (double)d.h.kv_blocks));
    printf("stored %lld rows in %s (validations, run %lld, device %s)\n", (long long)d.n_it, dbpath,
           (long long)run, d.device);
done:
    rc = 0;
fail:
    if (rc) fprintf(stderr, "hetsim: %s\n", err.msg);
    hs_db_close(db);
    free(iti);
    free(pred);
    free(meas);
    free(ape);
    free(mend);
    free(pns);
    free(pend);
    free(a);
    free(b);
    free_data(&d);
    return hs_cli_exit_code(rc);
}
