/* test_metrics.c - histogram accuracy against exact sorted percentiles, the
 * weighted-add identity, and a hand-computed metrics summary. */
#include "out/metrics.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "check.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array: x[ceil(q/100 * n) - 1]. */
static int64_t exact_pct(const int64_t *x, size_t n, double q)
{
    double r = ceil(q * (double)n / 100.0);
    size_t k = r < 1.0 ? 1 : (r > (double)n ? n : (size_t)r);
    return x[k - 1];
}

static const double qs[] = {0, 0.1, 1, 5, 10, 25, 33.3, 50, 66.7, 75, 90, 95, 99, 99.9, 99.99, 100};
#define NQ (sizeof qs / sizeof qs[0])

/* Fills n values from one of several distributions, adds them, and compares
 * every percentile, the mean, the count and the max with the exact ones. */
static void check_against_exact(gsl_rng *rng, int kind, size_t n)
{
    int64_t *x = malloc(n * sizeof *x);
    hs_hist *h = hs_hist_create();
    CHECK(x && h);
    if (!x || !h) return;
    long double sum = 0;
    for (size_t i = 0; i < n; i++) {
        double v;
        switch (kind) {
        case 0: v = gsl_ran_lognormal(rng, log(50e6), 1.0); break;  /* ~50 ms */
        case 1: v = gsl_rng_uniform(rng) * 5000.0; break;           /* spans exact + log */
        case 2: v = exp(gsl_rng_uniform(rng) * 40.0); break;        /* 1 ns .. 2e17 ns */
        default: v = (double)gsl_rng_uniform_int(rng, 8); break;    /* heavy ties */
        }
        x[i] = (int64_t)v;
        sum += x[i];
        hs_hist_add(h, x[i], 1);
    }
    qsort(x, n, sizeof *x, cmp_i64);
    CHECK_INT(hs_hist_count(h), n);
    CHECK_NEAR(hs_hist_max(h), (double)x[n - 1], 0);
    CHECK_REL(hs_hist_mean(h), (double)(sum / n), 1e-12);
    int bad = 0;
    for (size_t j = 0; j < NQ; j++) {
        double want = (double)exact_pct(x, n, qs[j]);
        double got = hs_hist_percentile(h, qs[j]);
        if (fabs(got - want) > want * 1e-3) {
            bad++;
            fprintf(stderr, "kind %d q %g: got %.6g want %.6g\n", kind, qs[j], got, want);
        }
    }
    CHECK_INT(bad, 0);
    /* The extremes are exact, not bucket midpoints. */
    CHECK_NEAR(hs_hist_percentile(h, 0), (double)x[0], 0);
    CHECK_NEAR(hs_hist_percentile(h, 100), (double)x[n - 1], 0);
    hs_hist_destroy(h);
    free(x);
}

static void test_hist_random(void)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 12345);
    for (int kind = 0; kind < 4; kind++) check_against_exact(rng, kind, 200000);
    /* Small n, where rank rounding matters most. */
    for (size_t n = 1; n <= 20; n++) check_against_exact(rng, 0, n);
    gsl_rng_free(rng);
}

/* Every representable value: the bucket midpoint is within 0.05%. */
static void test_hist_resolution(void)
{
    int bad = 0;
    int64_t vs[] = {0, 1, 1023, 1024, 2047, 2048, 2049, 4095, 4096, 123456789,
                    INT64_C(1) << 40, (INT64_C(1) << 40) + 12345, INT64_C(1) << 62,
                    INT64_MAX - 1, INT64_MAX};
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        /* Two values around v so that the clamp to [min,max] is not what
         * makes the percentile right. */
        hs_hist *h = hs_hist_create();
        hs_hist_add(h, 0, 1);
        hs_hist_add(h, vs[i], 1);
        hs_hist_add(h, INT64_MAX, 1);
        double got = hs_hist_percentile(h, 50);
        if (fabs(got - (double)vs[i]) > (double)vs[i] * 0.5e-3) {
            bad++;
            fprintf(stderr, "v %" PRId64 ": p50 %.17g\n", vs[i], got);
        }
        hs_hist_destroy(h);
    }
    CHECK_INT(bad, 0);

    hs_hist *h = hs_hist_create();
    CHECK_INT(hs_hist_count(h), 0);
    CHECK_NEAR(hs_hist_mean(h), 0, 0);
    CHECK_NEAR(hs_hist_percentile(h, 50), 0, 0);
    CHECK_NEAR(hs_hist_max(h), 0, 0);
    hs_hist_add(h, 77, 0);              /* weight 0 adds nothing */
    CHECK_INT(hs_hist_count(h), 0);
    /* Sums beyond int64 still give the right mean. */
    hs_hist_add(h, INT64_MAX, 4);
    hs_hist_add(h, INT64_MAX, 4);
    CHECK_INT(hs_hist_count(h), 8);
    CHECK_REL(hs_hist_mean(h), (double)INT64_MAX, 1e-15);
    hs_hist_destroy(h);
}

static void test_hist_weighted(void)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 7);
    hs_hist *a = hs_hist_create(), *b = hs_hist_create();
    for (int i = 0; i < 2000; i++) {
        int64_t v = (int64_t)gsl_ran_lognormal(rng, log(20e6), 0.8);
        int64_t w = 1 + (int64_t)gsl_rng_uniform_int(rng, 64);
        hs_hist_add(a, v, w);
        for (int64_t k = 0; k < w; k++) hs_hist_add(b, v, 1);
    }
    CHECK_INT(hs_hist_count(a), hs_hist_count(b));
    CHECK_NEAR(hs_hist_mean(a), hs_hist_mean(b), 0);
    CHECK_NEAR(hs_hist_max(a), hs_hist_max(b), 0);
    int diff = 0;
    for (double q = 0; q <= 100.0; q += 0.5)
        diff += hs_hist_percentile(a, q) != hs_hist_percentile(b, q);
    CHECK_INT(diff, 0);
    hs_hist_destroy(a);
    hs_hist_destroy(b);
    gsl_rng_free(rng);
}

#define MS HS_NS_PER_MS

static hs_req_record rec(int64_t id, int32_t prompt, int32_t output, hs_ns arrival,
                         hs_ns sched, hs_ns first, hs_ns finish, int32_t pre)
{
    hs_req_record r = {0};
    r.id = id;
    r.replica = 0;
    r.prompt = prompt;
    r.output = output;
    r.preemptions = pre;
    r.arrival = arrival;
    r.first_sched = sched;
    r.first_token = first;
    r.finish = finish;
    return r;
}

static double get(const hs_metric_value *v, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0) return v[i].value;
    fprintf(stderr, "summary lacks %s\n", name);
    return NAN;
}

/* Hand-made records; SLO ttft 100 ms, tpot 20 ms.
 *   r1: arr 0,   sched 10,  first 50,  finish 140, out 10 -> ttft 50, tpot 10, e2el 140, queue 10: met
 *   r2: arr 100, sched 100, first 250, finish 370, out 5  -> ttft 150 (miss), tpot 30, e2el 270, queue 0
 *   r3: arr 200, sched 220, first 280, finish 280, out 1  -> ttft 80, no tpot, e2el 80, queue 20: met
 *   r4: arr 300, dropped, 2 preemptions
 * makespan 0 .. 370 ms. */
static void test_summary(void)
{
    hs_slo slo = {100, 20, 0};
    hs_metrics *m = hs_metrics_create(&slo);
    CHECK(m != NULL);
    if (!m) return;
    hs_req_record r[4] = {
        rec(1, 100, 10, 0, 10 * MS, 50 * MS, 140 * MS, 1),
        rec(2, 200, 5, 100 * MS, 100 * MS, 250 * MS, 370 * MS, 0),
        rec(3, 50, 1, 200 * MS, 220 * MS, 280 * MS, 280 * MS, 0),
        rec(4, 5000, 0, 300 * MS, 0, 0, 0, 2),
    };
    r[3].dropped = 1;
    r[3].replica = -1;
    r[3].why = "prompt exceeds KV capacity";
    int met[4] = {1, 0, 1, 0};
    for (int i = 0; i < 4; i++) {
        CHECK_INT(hs_metrics_slo_met(m, &r[i]), met[i]);
        hs_metrics_request(m, &r[i]);
    }
    /* ITL: r1 has 9 intervals of 10 ms, r2 4 of 30 ms. */
    hs_metrics_itl(m, 10 * MS, 9);
    hs_metrics_itl(m, 30 * MS, 4);

    hs_metric_value v[64];
    int n = hs_metrics_summary(m, 3.6, v, 64);
    CHECK_INT(n, 37);
    const double d = 0.37, tol = 1e-9, rel = 1e-3;
    CHECK_NEAR(get(v, n, "completed"), 3, 0);
    CHECK_NEAR(get(v, n, "dropped"), 1, 0);
    CHECK_NEAR(get(v, n, "duration_s"), d, tol);
    CHECK_NEAR(get(v, n, "request_throughput"), 3 / d, tol);
    CHECK_NEAR(get(v, n, "input_token_throughput"), 350 / d, tol);
    CHECK_NEAR(get(v, n, "output_token_throughput"), 16 / d, tol);
    CHECK_NEAR(get(v, n, "total_token_throughput"), 366 / d, tol);
    CHECK_NEAR(get(v, n, "ttft_mean_ms"), 280.0 / 3, tol);
    CHECK_REL(get(v, n, "ttft_p50_ms"), 80, rel);
    CHECK_NEAR(get(v, n, "ttft_p90_ms"), 150, tol);    /* rank 3 of 3, the max: exact */
    CHECK_NEAR(get(v, n, "ttft_p99_ms"), 150, tol);
    CHECK_NEAR(get(v, n, "tpot_mean_ms"), 20, tol);
    CHECK_NEAR(get(v, n, "tpot_p50_ms"), 10, tol);     /* rank 1 of 2, the min: exact */
    CHECK_NEAR(get(v, n, "tpot_p95_ms"), 30, tol);
    CHECK_NEAR(get(v, n, "itl_mean_ms"), 210.0 / 13, tol);
    CHECK_NEAR(get(v, n, "itl_p50_ms"), 10, tol);      /* rank 7 of 13 */
    CHECK_NEAR(get(v, n, "itl_p90_ms"), 30, tol);      /* rank 12 of 13 */
    CHECK_NEAR(get(v, n, "e2el_mean_ms"), 490.0 / 3, tol);
    CHECK_REL(get(v, n, "e2el_p50_ms"), 140, rel);
    CHECK_NEAR(get(v, n, "e2el_p99_ms"), 270, tol);
    CHECK_NEAR(get(v, n, "queue_mean_ms"), 10, tol);
    CHECK_REL(get(v, n, "queue_p50_ms"), 10, rel);
    CHECK_NEAR(get(v, n, "queue_p90_ms"), 20, tol);
    CHECK_NEAR(get(v, n, "goodput"), 2 / d, tol);
    CHECK_NEAR(get(v, n, "slo_attainment"), 0.5, tol);
    CHECK_NEAR(get(v, n, "preemptions"), 3, 0);
    CHECK_NEAR(get(v, n, "cost_per_hour"), 3.6, 0);
    /* $3.6/h for 0.37 s = $0.00037 for 16 output tokens. */
    CHECK_REL(get(v, n, "tokens_per_dollar"), 16 / 0.00037, 1e-12);

    /* Names and their order are fixed. */
    static const char *const order[] = {
        "completed", "dropped", "duration_s", "request_throughput",
        "input_token_throughput", "output_token_throughput", "total_token_throughput",
        "ttft_mean_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p95_ms", "ttft_p99_ms",
        "tpot_mean_ms", "tpot_p50_ms", "tpot_p90_ms", "tpot_p95_ms", "tpot_p99_ms",
        "itl_mean_ms", "itl_p50_ms", "itl_p90_ms", "itl_p95_ms", "itl_p99_ms",
        "e2el_mean_ms", "e2el_p50_ms", "e2el_p90_ms", "e2el_p95_ms", "e2el_p99_ms",
        "queue_mean_ms", "queue_p50_ms", "queue_p90_ms", "queue_p95_ms", "queue_p99_ms",
        "goodput", "slo_attainment", "preemptions", "cost_per_hour", "tokens_per_dollar",
    };
    for (int i = 0; i < n && i < 37; i++) CHECK_STR(v[i].name, order[i]);

    /* A short array is filled, not overrun. */
    hs_metric_value few[3];
    CHECK_INT(hs_metrics_summary(m, 0, few, 3), 3);
    CHECK_STR(few[2].name, "duration_s");

    /* The printed table holds every section and value. */
    FILE *fp = tmpfile();
    CHECK(fp != NULL);
    if (fp) {
        hs_metrics_print(v, n, fp);
        long len = ftell(fp);
        rewind(fp);
        char *buf = calloc(1, (size_t)len + 1);
        if (buf && fread(buf, 1, (size_t)len, fp) == (size_t)len) {
            CHECK(strstr(buf, "Serving Benchmark Result") != NULL);
            CHECK(strstr(buf, "Median TTFT (ms):") != NULL);
            CHECK(strstr(buf, "P99 E2EL (ms):") != NULL);
            CHECK(strstr(buf, "Request goodput (req/s):") != NULL);
            CHECK(strstr(buf, "Output tokens per dollar:") != NULL);
            CHECK(strstr(buf, "Other") == NULL);
            if (getenv("HS_TEST_VERBOSE")) fputs(buf, stdout);
        }
        free(buf);
        fclose(fp);
    }
    hs_metrics_destroy(m);

    /* An e2el target alone: only r3 (80 ms) is within 100 ms. */
    hs_slo e2 = {0, 0, 100};
    m = hs_metrics_create(&e2);
    int met2[4] = {0, 0, 1, 0};
    for (int i = 0; i < 4; i++) CHECK_INT(hs_metrics_slo_met(m, &r[i]), met2[i]);
    hs_metrics_destroy(m);

    /* No targets: every completed request meets the SLO. */
    m = hs_metrics_create(NULL);
    for (int i = 0; i < 4; i++) CHECK_INT(hs_metrics_slo_met(m, &r[i]), !r[i].dropped);
    /* Empty metrics: all zero, no NaN or inf. */
    n = hs_metrics_summary(m, 2.0, v, 64);
    int finite = 1;
    for (int i = 0; i < n; i++) finite &= isfinite(v[i].value) && (i == 35 || v[i].value == 0);
    CHECK(finite);
    hs_metrics_destroy(m);
}

int main(void)
{
    test_hist_random();
    test_hist_resolution();
    test_hist_weighted();
    test_summary();
    hs_metrics_destroy(NULL);
    hs_hist_destroy(NULL);
    return hs_check_result();
}
