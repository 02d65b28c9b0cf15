/* test_search.c - the decision procedures of `hetsim search` on synthetic
 * functions: bisection finds the crossing of a monotone predicate within
 * its tolerance with the logarithmic number of probes, never probes outside
 * [lo, hi], keeps "best passes, fail fails" for every probe it made, and
 * reports the two edge cases; the Pareto front keeps exactly the
 * non-dominated points; the case key is FNV-1a 64. */
#include "cli/search.h"
#include "out/sweepdb.h"

#include "check.h"

typedef struct synth {
    double cap;         /* passes iff x <= cap */
    int probes;
    double seen[128];
    int pass[128];
} synth;

static int probe(void *ctx, double x, int *pass, hs_err *err)
{
    synth *s = ctx;
    (void)err;
    *pass = x <= s->cap;
    if (s->probes < 128) {
        s->seen[s->probes] = x;
        s->pass[s->probes] = *pass;
    }
    s->probes++;
    return 0;
}

static int failing_probe(void *ctx, double x, int *pass, hs_err *err)
{
    (void)ctx, (void)x, (void)pass;
    return hs_errf(err, HS_EDB, "probe failed");
}

static void check_bisect(double cap, double lo, double hi, double tol)
{
    synth s = {cap, 0, {0}, {0}};
    hs_bisect_cfg c = {lo, hi, tol, 8, 100};
    hs_bisect_result r;
    hs_err err = {0};
    CHECK_OK(hs_search_bisect(&c, probe, &s, &r, &err), &err);
    CHECK_INT(r.status, HS_BISECT_FOUND);
    CHECK_INT(r.probes, s.probes);
    /* The answer passes, the bound above it fails, and they bracket cap
     * within the tolerance. */
    CHECK(r.best <= cap);
    CHECK(r.fail > cap);
    CHECK(r.fail - r.best <= tol * r.fail * 1.0001 + 1e-6 * r.fail);
    /* Every probe inside [lo, hi]; every passing probe <= best, every
     * failing one >= fail (the answer is consistent with all evidence). */
    for (int i = 0; i < s.probes && i < 128; i++) {
        CHECK(s.seen[i] >= lo && s.seen[i] <= hi);
        if (s.pass[i]) CHECK(s.seen[i] <= r.best);
        else CHECK(s.seen[i] >= r.fail);
    }
    /* Bisection: 2 end probes + about log2((hi-lo)/(tol*cap)) halvings. */
    double bound = 2 + ceil(log2((hi - lo) / (tol * cap))) + 2;
    CHECK(s.probes <= bound);
}

int main(void)
{
    hs_err err = {0};
    check_bisect(7.3, 0.25, 64, 0.02);
    check_bisect(0.3, 0.25, 64, 0.01);
    check_bisect(63.5, 0.25, 64, 0.001);
    check_bisect(12.0, 1, 100, 0.05);
    {
        /* Everything passes: one probe at hi; nothing passes: hi then lo. */
        synth s = {1000, 0, {0}, {0}};
        hs_bisect_cfg c = {1, 64, 0.02, 6, 0};
        hs_bisect_result r;
        CHECK_OK(hs_search_bisect(&c, probe, &s, &r, &err), &err);
        CHECK_INT(r.status, HS_BISECT_ALL_PASS);
        CHECK_NEAR(r.best, 64, 0);
        CHECK_INT(s.probes, 1);
        s = (synth){0.5, 0, {0}, {0}};
        CHECK_OK(hs_search_bisect(&c, probe, &s, &r, &err), &err);
        CHECK_INT(r.status, HS_BISECT_NONE);
        CHECK_NEAR(r.fail, 1, 0);
        CHECK_INT(s.probes, 2);
        /* Bad interval and probe errors come back. */
        c.lo = 100;
        CHECK(hs_search_bisect(&c, probe, &s, &r, &err) == HS_ERANGE);
        c.lo = 1;
        CHECK(hs_search_bisect(&c, failing_probe, &s, &r, &err) == HS_EDB);
        CHECK_STR(err.msg, "probe failed");
    }
    {
        /* Pareto front, both minimised. */
        double x[] = {1, 2, 3, 2, 4, 1, NAN, 5};
        double y[] = {9, 5, 4, 6, 1, 9, 0, 1};
        int f[8];
        int n = hs_pareto_front(x, y, 8, f);
        /* (1,9) first copy kept, its duplicate dropped; (2,6) dominated by
         * (2,5); NaN never; (5,1) dominated by (4,1). */
        int want[] = {1, 1, 1, 0, 1, 0, 0, 0};
        CHECK_INT(n, 4);
        for (int i = 0; i < 8; i++) CHECK_INT(f[i], want[i]);
    }
    {
        /* FNV-1a 64 reference values. */
        char k[17];
        hs_case_key("", k);
        CHECK_STR(k, "cbf29ce484222325");
        hs_case_key("a", k);
        CHECK_STR(k, "af63dc4c8601ec8c");
    }
    return hs_check_result();
}
