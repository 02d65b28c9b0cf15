/* metrics.c - latency histograms and the per-run summary; see metrics.h.
 *
 * Histogram layout (HDR-histogram style, log-linear):
 *   values 0..1023 have one bucket each (exact);
 *   a value v >= 1024 with e = floor(log2 v) falls in range r = e - 9
 *   (1..53), sub-bucket (v >> (e - 10)) - 1024 (0..1023).
 * So every power of two from 2^10 up is split into 1024 equal buckets: a
 * bucket [lo, lo + w) has w <= lo / 1024, and its midpoint lies within
 * w / 2 <= lo / 2048 of any value in it, a relative error below 0.05%.
 * The 54 ranges cover every non-negative int64 (2^62 <= v < 2^63 is r=53).
 *
 * Invariants of hs_hist (checked by hist_sane() in debug builds):
 *   count == sum of all bucket counts == sum of range_count[];
 *   count == 0 or min <= max, both the exact extremes added;
 *   isum + lsum == the exact weighted sum of the values (isum while it
 *   fits in int64; the rest, rarely, in long double).
 * Memory: the buckets are one calloc of 54 * 1024 int64 (432 KiB of
 * address space); the OS maps zero pages lazily, so only ranges actually
 * used cost memory, and range_count[] lets scans skip untouched ranges. */
#include "out/metrics.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SUB_BITS 10
#define SUB_N (1 << SUB_BITS)           /* buckets per range */
#define RANGES (64 - SUB_BITS)          /* 0 (linear) + 53 log ranges */
#define NBUCKETS (RANGES * SUB_N)

struct hs_hist {
    int64_t count;                  /* total weight */
    int64_t min, max;               /* exact extremes (ns); valid if count */
    int64_t isum;                   /* exact weighted sum while it fits */
    long double lsum;               /* overflow of isum (rare) */
    int64_t range_count[RANGES];    /* weight per range, to skip empties */
    int64_t *bucket;                /* NBUCKETS counts */
};

/* floor(log2 v) for v > 0; the builtin compiles to one instruction, the
 * loop keeps the file portable to compilers without it. */
static int ilog2_u64(uint64_t v)
{
#if defined(__GNUC__) || defined(__clang__)
    return 63 - __builtin_clzll(v);
#else
    int e = 0;
    while (v >>= 1) e++;
    return e;
#endif
}

static int bucket_index(int64_t v)
{
    if (v < SUB_N) return (int)v;
    int e = ilog2_u64((uint64_t)v);
    int shift = e - SUB_BITS;
    return (e - SUB_BITS + 1) * SUB_N + (int)((v >> shift) - SUB_N);
}

/* The midpoint of the integers a bucket holds: lo + (w - 1) / 2. */
static double bucket_mid(int idx)
{
    if (idx < SUB_N) return (double)idx;
    int r = idx / SUB_N, sub = idx % SUB_N, shift = r - 1;
    int64_t lo = (int64_t)(SUB_N + sub) << shift;
    int64_t w = INT64_C(1) << shift;
    return (double)lo + (double)(w - 1) / 2.0;
}

#ifndef NDEBUG
static int hist_sane(const hs_hist *h)
{
    int64_t c = 0;
    for (int r = 0; r < RANGES; r++) c += h->range_count[r];
    return c == h->count && (h->count == 0 || h->min <= h->max);
}
#endif

hs_hist *hs_hist_create(void)
{
    hs_hist *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->bucket = calloc(NBUCKETS, sizeof *h->bucket);
    if (!h->bucket) {
        free(h);
        return NULL;
    }
    return h;
}

void hs_hist_destroy(hs_hist *h)
{
    if (!h) return;
    free(h->bucket);
    free(h);
}

void hs_hist_add(hs_hist *h, int64_t v, int64_t weight)
{
    assert(v >= 0 && weight >= 0);
    /* Release builds clamp rather than corrupt the layout: a negative
     * latency is a simulator bug that the debug build's assert reports. */
    if (weight <= 0) return;
    if (v < 0) v = 0;
    int idx = bucket_index(v);
    h->bucket[idx] += weight;
    h->range_count[idx / SUB_N] += weight;
    if (h->count == 0 || v < h->min) h->min = v;
    if (h->count == 0 || v > h->max) h->max = v;
    h->count += weight;
    /* v * weight <= INT64_MAX - isum, tested without overflowing. */
    if (v != 0) {
        if (v <= (INT64_MAX - h->isum) / weight)
            h->isum += v * weight;
        else
            h->lsum += (long double)v * (long double)weight;
    }
    assert(hist_sane(h));
}

int64_t hs_hist_count(const hs_hist *h)
{
    return h->count;
}

double hs_hist_mean(const hs_hist *h)
{
    if (h->count == 0) return 0.0;
    return (double)(((long double)h->isum + h->lsum) / (long double)h->count);
}

double hs_hist_max(const hs_hist *h)
{
    return h->count ? (double)h->max : 0.0;
}

/* Nearest rank: the smallest value whose cumulative weight reaches
 * ceil(q/100 * count), at least 1; reported as its bucket's midpoint
 * clamped to [min, max].  q * count is formed before dividing by
 * 100 so that integer percentiles of integer counts are exact (90 * 1000 /
 * 100 is 900, while 0.9 * 1000 is not exactly 900 in binary). */
double hs_hist_percentile(const hs_hist *h, double q)
{
    if (h->count == 0) return 0.0;
    if (!(q > 0.0)) return (double)h->min;   /* also NaN */
    if (q >= 100.0) return (double)h->max;
    double rr = ceil(q * (double)h->count / 100.0);
    int64_t rank = rr < 1.0 ? 1 : (rr >= (double)h->count ? h->count : (int64_t)rr);
    /* The first and last ranks are the exact extremes, not a midpoint. */
    if (rank == 1) return (double)h->min;
    if (rank == h->count) return (double)h->max;
    int64_t cum = 0;
    for (int r = 0; r < RANGES; r++) {
        if (cum + h->range_count[r] < rank) {
            cum += h->range_count[r];
            continue;
        }
        for (int i = r * SUB_N; i < (r + 1) * SUB_N; i++) {
            cum += h->bucket[i];
            if (cum >= rank) {
                double mid = bucket_mid(i);
                if (mid < (double)h->min) mid = (double)h->min;
                if (mid > (double)h->max) mid = (double)h->max;
                return mid;
            }
        }
    }
    assert(0 && "rank beyond count");   /* unreachable: INV of count */
    return (double)h->max;
}

/* ---- metrics ---------------------------------------------------------- */

/* The five latency families, in summary order; one table so that the
 * summary names, their order and the printed labels cannot drift apart. */
enum { FAM_TTFT, FAM_TPOT, FAM_ITL, FAM_E2EL, FAM_QUEUE, FAM_N };

static const struct {
    const char *name;     /* summary name prefix */
    const char *label;    /* printed name */
    const char *section;  /* printed section title */
} fam[FAM_N] = {
    {"ttft", "TTFT", "Time to First Token"},
    {"tpot", "TPOT", "Time per Output Token (excl. 1st token)"},
    {"itl", "ITL", "Inter-token Latency"},
    {"e2el", "E2EL", "End-to-end Latency"},
    {"queue", "Queue delay", "Queueing Delay"},
};

static const struct {
    const char *suffix;   /* "mean" or "pNN" */
    const char *label;
    double q;             /* percentile; < 0 for the mean */
} stat_kind[] = {
    {"mean", "Mean", -1.0}, {"p50", "Median", 50.0}, {"p90", "P90", 90.0},
    {"p95", "P95", 95.0},   {"p99", "P99", 99.0},
};
#define STAT_N ((int)(sizeof stat_kind / sizeof stat_kind[0]))

struct hs_metrics {
    hs_slo slo;
    hs_hist *h[FAM_N];
    int64_t completed, dropped, slo_met;
    int64_t preemptions;        /* over all requests, dropped included */
    int64_t in_tokens;          /* prompt tokens of completed requests */
    int64_t out_tokens;         /* output tokens of completed requests */
    hs_ns first_arrival;        /* over all requests; valid if any */
    hs_ns last_finish;          /* over completed requests; valid if any */
};

hs_metrics *hs_metrics_create(const hs_slo *slo)
{
    hs_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    if (slo) m->slo = *slo;
    for (int f = 0; f < FAM_N; f++) {
        m->h[f] = hs_hist_create();
        if (!m->h[f]) {
            hs_metrics_destroy(m);
            return NULL;
        }
    }
    return m;
}

void hs_metrics_destroy(hs_metrics *m)
{
    if (!m) return;
    for (int f = 0; f < FAM_N; f++) hs_hist_destroy(m->h[f]);
    free(m);
}

/* tpot in ns as a double: an integer division would bias it down. */
static double req_tpot_ns(const hs_req_record *r)
{
    return (double)(r->finish - r->first_token) / (double)(r->output - 1);
}

int hs_metrics_slo_met(const hs_metrics *m, const hs_req_record *r)
{
    if (r->dropped) return 0;
    const hs_slo *s = &m->slo;
    if (s->ttft_ms > 0 && (double)(r->first_token - r->arrival) > s->ttft_ms * 1e6)
        return 0;
    /* tpot is undefined for a single output token, so no target applies. */
    if (s->tpot_ms > 0 && r->output > 1 && req_tpot_ns(r) > s->tpot_ms * 1e6)
        return 0;
    if (s->e2el_ms > 0 && (double)(r->finish - r->arrival) > s->e2el_ms * 1e6)
        return 0;
    return 1;
}

void hs_metrics_request(hs_metrics *m, const hs_req_record *r)
{
    if (m->completed + m->dropped == 0 || r->arrival < m->first_arrival)
        m->first_arrival = r->arrival;
    m->preemptions += r->preemptions;
    if (r->dropped) {
        m->dropped++;
        return;
    }
    assert(r->first_sched >= r->arrival && r->first_token >= r->first_sched &&
           r->finish >= r->first_token);
    if (m->completed == 0 || r->finish > m->last_finish) m->last_finish = r->finish;
    m->completed++;
    m->in_tokens += r->prompt;
    m->out_tokens += r->output;
    hs_hist_add(m->h[FAM_TTFT], r->first_token - r->arrival, 1);
    hs_hist_add(m->h[FAM_E2EL], r->finish - r->arrival, 1);
    hs_hist_add(m->h[FAM_QUEUE], r->first_sched - r->arrival, 1);
    if (r->output > 1) hs_hist_add(m->h[FAM_TPOT], llround(req_tpot_ns(r)), 1);
    m->slo_met += hs_metrics_slo_met(m, r);
}

void hs_metrics_itl(hs_metrics *m, hs_ns interval, int64_t count)
{
    hs_hist_add(m->h[FAM_ITL], interval, count);
}

/* Appends (name, value) when there is room; *n counts every entry so the
 * caller can tell truncation happened. */
static void put(hs_metric_value *out, int cap, int *n, const char *name, double v)
{
    if (*n < cap) {
        snprintf(out[*n].name, sizeof out[*n].name, "%s", name);
        out[*n].value = v;
    }
    (*n)++;
}

int hs_metrics_summary(const hs_metrics *m, double cost_per_hour,
                       hs_metric_value *out, int cap)
{
    int n = 0;
    double dur = 0.0;
    if (m->completed > 0 && m->last_finish > m->first_arrival)
        dur = hs_ns_to_s(m->last_finish - m->first_arrival);
    /* Rates over an empty makespan are reported as 0, not inf/NaN. */
    double inv = dur > 0 ? 1.0 / dur : 0.0;
    int64_t arrivals = m->completed + m->dropped;

    put(out, cap, &n, "completed", (double)m->completed);
    put(out, cap, &n, "dropped", (double)m->dropped);
    put(out, cap, &n, "duration_s", dur);
    put(out, cap, &n, "request_throughput", (double)m->completed * inv);
    put(out, cap, &n, "input_token_throughput", (double)m->in_tokens * inv);
    put(out, cap, &n, "output_token_throughput", (double)m->out_tokens * inv);
    put(out, cap, &n, "total_token_throughput",
        (double)(m->in_tokens + m->out_tokens) * inv);
    for (int f = 0; f < FAM_N; f++) {
        for (int s = 0; s < STAT_N; s++) {
            char name[40];
            snprintf(name, sizeof name, "%s_%s_ms", fam[f].name, stat_kind[s].suffix);
            double ns = stat_kind[s].q < 0 ? hs_hist_mean(m->h[f])
                                           : hs_hist_percentile(m->h[f], stat_kind[s].q);
            put(out, cap, &n, name, ns * 1e-6);
        }
    }
    put(out, cap, &n, "goodput", (double)m->slo_met * inv);
    put(out, cap, &n, "slo_attainment",
        arrivals ? (double)m->slo_met / (double)arrivals : 0.0);
    put(out, cap, &n, "preemptions", (double)m->preemptions);
    put(out, cap, &n, "cost_per_hour", cost_per_hour);
    /* Dollars spent over the makespan at cost_per_hour. */
    double dollars = cost_per_hour * dur / 3600.0;
    put(out, cap, &n, "tokens_per_dollar",
        dollars > 0 ? (double)m->out_tokens / dollars : 0.0);
    return n < cap ? n : (cap > 0 ? cap : 0);
}

/* ---- the printed table ------------------------------------------------ */

#define LINE_W 50

/* Prints "---- title ----" centred in LINE_W with fill c (vLLM's style). */
static void rule(FILE *fp, const char *title, char c)
{
    int len = title ? (int)strlen(title) + 2 : 0;
    int left = len < LINE_W ? (LINE_W - len) / 2 : 0;
    int right = len < LINE_W ? LINE_W - len - left : 0;
    for (int i = 0; i < left; i++) fputc(c, fp);
    if (title) fprintf(fp, " %s ", title);
    for (int i = 0; i < right; i++) fputc(c, fp);
    fputc('\n', fp);
}

static const hs_metric_value *find(const hs_metric_value *v, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0) return &v[i];
    return NULL;
}

/* One printed line of the fixed (non-latency) sections. */
typedef struct row {
    const char *name, *label, *fmt;
} row;

static const row rows_tput[] = {
    {"completed", "Successful requests:", "%.0f"},
    {"dropped", "Dropped requests:", "%.0f"},
    {"preemptions", "Preemptions:", "%.0f"},
    {"duration_s", "Benchmark duration (s):", "%.2f"},
    {"request_throughput", "Request throughput (req/s):", "%.2f"},
    {"input_token_throughput", "Input token throughput (tok/s):", "%.2f"},
    {"output_token_throughput", "Output token throughput (tok/s):", "%.2f"},
    {"total_token_throughput", "Total token throughput (tok/s):", "%.2f"},
    {NULL, NULL, NULL},
};
static const row rows_slo[] = {
    {"goodput", "Request goodput (req/s):", "%.2f"},
    {"slo_attainment", "SLO attainment (fraction):", "%.4f"},
    {NULL, NULL, NULL},
};
static const row rows_cost[] = {
    {"cost_per_hour", "Cost ($/h):", "%.2f"},
    {"tokens_per_dollar", "Output tokens per dollar:", "%.0f"},
    {NULL, NULL, NULL},
};

static void print_line(FILE *fp, const char *label, const char *fmt, double v)
{
    char val[64];
    snprintf(val, sizeof val, fmt, v);
    fprintf(fp, "%-40s %s\n", label, val);
}

/* Prints the rows of one section present in v, under a rule when any is. */
static void print_rows(FILE *fp, const char *title, const row *rows,
                       const hs_metric_value *v, int n, unsigned char *seen)
{
    int any = 0;
    for (const row *r = rows; r->name; r++) {
        const hs_metric_value *e = find(v, n, r->name);
        if (!e) continue;
        if (!any && title) rule(fp, title, '-');
        any = 1;
        seen[e - v] = 1;
        print_line(fp, r->label, r->fmt, e->value);
    }
}

void hs_metrics_print(const hs_metric_value *v, int n, FILE *fp)
{
    /* seen[] marks printed entries so unknown names still show, at the end,
     * rather than silently vanish from the display. */
    unsigned char *seen = calloc(n > 0 ? (size_t)n : 1, 1);
    if (!seen) return;
    rule(fp, "Serving Benchmark Result", '=');
    print_rows(fp, "Throughput", rows_tput, v, n, seen);
    for (int f = 0; f < FAM_N; f++) {
        int any = 0;
        for (int s = 0; s < STAT_N; s++) {
            char name[40], label[64];
            snprintf(name, sizeof name, "%s_%s_ms", fam[f].name, stat_kind[s].suffix);
            const hs_metric_value *e = find(v, n, name);
            if (!e) continue;
            if (!any) rule(fp, fam[f].section, '-');
            any = 1;
            seen[e - v] = 1;
            snprintf(label, sizeof label, "%s %s (ms):", stat_kind[s].label, fam[f].label);
            print_line(fp, label, "%.2f", e->value);
        }
    }
    print_rows(fp, "Service Level Objective", rows_slo, v, n, seen);
    print_rows(fp, "Cost", rows_cost, v, n, seen);
    int other = 0;
    for (int i = 0; i < n; i++) {
        if (seen[i]) continue;
        if (!other) rule(fp, "Other", '-');
        other = 1;
        char label[48];
        snprintf(label, sizeof label, "%s:", v[i].name);
        /* Counts print as integers, not 1e+06. */
        if (v[i].value == floor(v[i].value) && fabs(v[i].value) < 1e15)
            print_line(fp, label, "%.0f", v[i].value);
        else
            print_line(fp, label, "%.6g", v[i].value);
    }
    rule(fp, NULL, '=');
    free(seen);
}
