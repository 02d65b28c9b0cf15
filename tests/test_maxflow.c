/* test_maxflow.c - push-relabel against hand-computed flows and against
 * Edmonds-Karp on random graphs; flow feasibility, conservation and the
 * max-flow = min-cut certificate on every solve; a timing print. */
#include <float.h>
#include <time.h>

#include <gsl/gsl_rng.h>

#include "check.h"
#include "plan/maxflow.h"

enum { ALG_PR, ALG_EK };

static int solve(hs_flow_graph *g, int alg, int s, int t, double *v, hs_err *err)
{
    return alg == ALG_PR ? hs_flow_push_relabel(g, s, t, v, err)
                         : hs_flow_edmonds_karp(g, s, t, v, err);
}

static double max_cap(const hs_flow_graph *g)
{
    double m = 0.0;
    for (int e = 0; e < hs_flow_edges(g); e++)
        if (hs_flow_edge_cap(g, e) > m) m = hs_flow_edge_cap(g, e);
    return m;
}

/* Checks the solved flow: 0 <= f <= cap on every edge, conservation within
 * tol at every node but s and t, net inflow at t == value, and value ==
 * capacity of the minimum cut (side[s] = 1, side[t] = 0).  Returns the
 * number of violated properties (each also counted as a failed CHECK). */
static int verify(const hs_flow_graph *g, int s, int t, double value, const char *what)
{
    int n = hs_flow_nodes(g), m = hs_flow_edges(g), bad = 0, bad_cap = 0, bad_cons = 0;
    double *bal = calloc((size_t)n, sizeof *bal);
    unsigned char *side = malloc((size_t)n);
    double tol = 1e-9 * (max_cap(g) > 1.0 ? max_cap(g) : 1.0), cut = 0.0;
    hs_err err = {0};
    CHECK(bal && side);
    for (int e = 0; e < m; e++) {
        double f = hs_flow_edge_flow(g, e);
        int a = hs_flow_edge_from(g, e), b = hs_flow_edge_to(g, e);
        if (!(f >= 0.0 && f <= hs_flow_edge_cap(g, e))) bad_cap++;
        if (a == b && f != 0.0) bad_cap++;
        bal[b] += f;
        bal[a] -= f;
    }
    for (int v = 0; v < n; v++)
        if (v != s && v != t && fabs(bal[v]) > tol) bad_cons++;
    CHECK_INT(bad_cap, 0);
    CHECK_INT(bad_cons, 0);
    CHECK_NEAR(bal[t], value, tol);
    CHECK_OK(hs_flow_min_cut(g, s, side, &err), &err);
    CHECK_INT(side[s], 1);
    CHECK_INT(side[t], 0);
    for (int e = 0; e < m; e++)
        if (side[hs_flow_edge_from(g, e)] && !side[hs_flow_edge_to(g, e)]) cut += hs_flow_edge_cap(g, e);
    CHECK_NEAR(cut, value, tol + 1e-9 * cut);
    bad = bad_cap + bad_cons + (fabs(bal[t] - value) > tol) + (side[s] != 1) + (side[t] != 0) +
          (fabs(cut - value) > tol + 1e-9 * cut);
    if (bad) fprintf(stderr, "  (in %s)\n", what);
    free(bal);
    free(side);
    return bad;
}

static hs_flow_graph *make(int n)
{
    hs_flow_graph *g = NULL;
    hs_err err = {0};
    CHECK_OK(hs_flow_create(&g, n, &err), &err);
    if (!g) exit(2);
    return g;
}

static void add(hs_flow_graph *g, int a, int b, double c)
{
    hs_err err = {0};
    int id = hs_flow_add_edge(g, a, b, c, &err);
    if (id < 0) fprintf(stderr, "add %d->%d: %s\n", a, b, err.msg);
    CHECK(id >= 0);
}

static void both_equal(hs_flow_graph *g, int s, int t, double want, const char *what)
{
    for (int alg = ALG_PR; alg <= ALG_EK; alg++) {
        double v = -1.0;
        hs_err err = {0};
        CHECK_OK(solve(g, alg, s, t, &v, &err), &err);
        CHECK_NEAR(v, want, 1e-9 * (want > 1 ? want : 1));
        verify(g, s, t, v, what);
    }
}

static void test_clrs(void)
{
    /* CLRS Figure 26.1: s=0, v1..v4 = 1..4, t=5; max flow 23. */
    hs_flow_graph *g = make(6);
    add(g, 0, 1, 16);
    add(g, 0, 2, 13);
    add(g, 2, 1, 4);
    add(g, 1, 3, 12);
    add(g, 3, 2, 9);
    add(g, 2, 4, 14);
    add(g, 4, 3, 7);
    add(g, 3, 5, 20);
    add(g, 4, 5, 4);
    both_equal(g, 0, 5, 23.0, "CLRS");
    {
        /* the minimum cut is {s, v1, v2, v4}: edges v1->v3 12, v4->v3 7, v4->t 4 */
        unsigned char side[6];
        hs_err err = {0};
        double v;
        CHECK_OK(hs_flow_push_relabel(g, 0, 5, &v, &err), &err);
        CHECK_OK(hs_flow_min_cut(g, 0, side, &err), &err);
        CHECK_INT(side[0] + side[1] + side[2] + side[4], 4);
        CHECK_INT(side[3] + side[5], 0);
        CHECK_INT(hs_flow_min_cut(g, 1, side, &err), HS_EINVAL);
    }
    hs_flow_destroy(g);
}

static void test_parallel_zero_selfloop(void)
{
    hs_flow_graph *g = make(4);
    add(g, 0, 1, 3);
    add(g, 0, 1, 4);      /* parallel */
    add(g, 1, 3, 10);
    add(g, 0, 3, 2);
    add(g, 0, 3, 1);      /* parallel s->t */
    add(g, 0, 2, 0);      /* zero capacity */
    add(g, 2, 3, 5);
    add(g, 1, 1, 9);      /* self-loop carries nothing */
    add(g, 3, 0, 6);      /* t->s edge carries nothing */
    both_equal(g, 0, 3, 10.0, "parallel");
    CHECK_NEAR(hs_flow_edge_flow(g, 0) + hs_flow_edge_flow(g, 1), 7.0, 1e-12);
    CHECK_INT(hs_flow_edge_flow(g, 7) == 0.0, 1);
    CHECK_INT(hs_flow_edge_flow(g, 5) == 0.0, 1);
    hs_flow_destroy(g);

    /* fractional capacities, a bottleneck in the middle */
    g = make(5);
    add(g, 0, 1, 0.25);
    add(g, 0, 2, 0.5);
    add(g, 1, 3, 0.125);
    add(g, 2, 3, 0.0625);
    add(g, 1, 2, 1e-3);
    add(g, 3, 4, 1.0);
    both_equal(g, 0, 4, 0.1875, "fractional");
    hs_flow_destroy(g);
}

static void test_disconnected_and_errors(void)
{
    hs_flow_graph *g = make(5);
    hs_err err = {0};
    double v = -1;
    unsigned char side[5];
    add(g, 0, 1, 5);
    add(g, 1, 0, 5);
    add(g, 3, 4, 7);
    add(g, 4, 2, 1);
    CHECK_INT(hs_flow_min_cut(g, 0, side, &err), HS_ESTATE);
    both_equal(g, 0, 4, 0.0, "disconnected");
    CHECK_OK(hs_flow_min_cut(g, 0, side, &err), &err);
    CHECK_INT(side[0] + side[1], 2);
    CHECK_INT(side[2] + side[3] + side[4], 0);

    CHECK_INT(hs_flow_push_relabel(g, 2, 2, &v, &err), HS_EINVAL);
    CHECK_INT(hs_flow_edmonds_karp(g, 2, 2, &v, &err), HS_EINVAL);
    CHECK_INT(hs_flow_push_relabel(g, 0, 5, &v, &err), HS_EINVAL);
    CHECK_INT(hs_flow_push_relabel(g, -1, 4, &v, &err), HS_EINVAL);
    CHECK_INT(hs_flow_add_edge(g, 0, 5, 1.0, &err), HS_EINVAL);
    CHECK_INT(hs_flow_add_edge(g, 0, 1, -1.0, &err), HS_EINVAL);
    CHECK_INT(hs_flow_add_edge(g, 0, 1, NAN, &err), HS_EINVAL);
    CHECK_INT(hs_flow_add_edge(g, 0, 1, INFINITY, &err), HS_EINVAL);
    CHECK_INT(hs_flow_edges(g), 4);
    /* adding an edge invalidates the solve */
    CHECK_INT(hs_flow_add_edge(g, 1, 4, 2.5, &err), 4);
    CHECK_INT(hs_flow_min_cut(g, 0, side, &err), HS_ESTATE);
    both_equal(g, 0, 4, 2.5, "after add");
    /* capacities that overflow when summed at the source */
    CHECK_INT(hs_flow_add_edge(g, 0, 2, DBL_MAX, &err), 5);
    CHECK_INT(hs_flow_add_edge(g, 0, 3, DBL_MAX, &err), 6);
    CHECK_INT(hs_flow_push_relabel(g, 0, 4, &v, &err), HS_ERANGE);
    hs_flow_destroy(g);

    CHECK_INT(hs_flow_create(&g, 0, &err), HS_EINVAL);
    CHECK(g == NULL);
    hs_flow_destroy(NULL);
}

/* Random graph: n nodes, each ordered pair an edge with probability p,
 * sometimes doubled; capacities integer, fractional or mixed-scale. */
static hs_flow_graph *random_graph(gsl_rng *r, int n, double p, int kind, int *nedges)
{
    hs_flow_graph *g = make(n);
    *nedges = 0;
    for (int a = 0; a < n; a++) {
        for (int b = 0; b < n; b++) {
            int copies;
            if (a == b || gsl_rng_uniform(r) >= p) continue;
            copies = gsl_rng_uniform(r) < 0.1 ? 2 : 1;
            for (int k = 0; k < copies; k++) {
                double c;
                if (kind == 0) c = (double)gsl_rng_uniform_int(r, 21);           /* 0..20 */
                else if (kind == 1) c = 100.0 * gsl_rng_uniform(r);
                else c = pow(10.0, -3.0 + 9.0 * gsl_rng_uniform(r));            /* 1e-3..1e6 */
                if (gsl_rng_uniform(r) < 0.05) c = 0.0;
                add(g, a, b, c);
                (*nedges)++;
            }
        }
    }
    return g;
}

static void test_random(void)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    int bad = 0, mismatch = 0, nonzero = 0;
    gsl_rng_set(r, 20240606);
    for (int it = 0; it < 500; it++) {
        int n = 2 + (int)gsl_rng_uniform_int(r, 59), m;
        double p = 0.02 + 0.98 * pow(gsl_rng_uniform(r), 2.0);
        int kind = (int)gsl_rng_uniform_int(r, 3);
        int s = (int)gsl_rng_uniform_int(r, (unsigned long)n), t;
        double vpr = -1, vek = -2, vpr2 = -3;
        hs_err err = {0};
        char what[96];
        hs_flow_graph *g = random_graph(r, n, p, kind, &m);
        double *fl = malloc(((size_t)m + 1) * sizeof *fl);
        do t = (int)gsl_rng_uniform_int(r, (unsigned long)n); while (t == s);
        snprintf(what, sizeof what, "random #%d: n=%d m=%d p=%.3f kind=%d s=%d t=%d", it, n, m, p, kind, s, t);

        CHECK_OK(hs_flow_edmonds_karp(g, s, t, &vek, &err), &err);
        bad += verify(g, s, t, vek, what) != 0;
        CHECK_OK(hs_flow_push_relabel(g, s, t, &vpr, &err), &err);
        bad += verify(g, s, t, vpr, what) != 0;
        if (fabs(vpr - vek) > 1e-9 * fabs(vek) + 1e-12 * max_cap(g)) {
            mismatch++;
            fprintf(stderr, "%s: push-relabel %.17g vs Edmonds-Karp %.17g\n", what, vpr, vek);
        }
        if (vek > 0) nonzero++;
        /* deterministic: a second solve gives the same flows bit for bit */
        for (int e = 0; e < m; e++) fl[e] = hs_flow_edge_flow(g, e);
        CHECK_OK(hs_flow_push_relabel(g, s, t, &vpr2, &err), &err);
        {
            int same = vpr2 == vpr;
            for (int e = 0; e < m; e++) same &= fl[e] == hs_flow_edge_flow(g, e);
            if (!same) fprintf(stderr, "%s: second solve differs\n", what);
            CHECK(same);
        }
        free(fl);
        hs_flow_destroy(g);
    }
    CHECK_INT(bad, 0);
    CHECK_INT(mismatch, 0);
    CHECK(nonzero > 300);   /* the generator is not degenerate */
    printf("random: 500 graphs, %d with positive flow, %d mismatches\n", nonzero, mismatch);
    gsl_rng_free(r);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_timing(void)
{
    const int n = 2000, m = 20000;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    hs_flow_graph *g = make(n);
    hs_err err = {0};
    double vpr = -1, vek = -2, t0, t1, t2;
    gsl_rng_set(r, 7);
    /* 19,000 random edges plus 500 out of s and 500 into t, so that the
     * cut is not just the edges at s */
    for (int i = 0; i < m; i++) {
        int a = (int)gsl_rng_uniform_int(r, n), b = (int)gsl_rng_uniform_int(r, n);
        if (i < 500) a = 0;
        else if (i < 1000) b = n - 1;
        add(g, a, b, (i < 1000 ? 100.0 : 1.0) + 99.0 * gsl_rng_uniform(r));
    }
    t0 = now_s();
    CHECK_OK(hs_flow_push_relabel(g, 0, n - 1, &vpr, &err), &err);
    t1 = now_s();
    verify(g, 0, n - 1, vpr, "timing graph (push-relabel)");
    t1 = t1 - t0;
    t0 = now_s();
    CHECK_OK(hs_flow_edmonds_karp(g, 0, n - 1, &vek, &err), &err);
    t2 = now_s() - t0;
    verify(g, 0, n - 1, vek, "timing graph (Edmonds-Karp)");
    CHECK_NEAR(vpr, vek, 1e-9 * vek);
    printf("timing (not asserted): %d nodes, %d edges, max flow %.6g: push-relabel %.3f ms, "
           "Edmonds-Karp %.3f ms\n", n, m, vpr, 1e3 * t1, 1e3 * t2);
    hs_flow_destroy(g);
    gsl_rng_free(r);
}

int main(void)
{
    test_clrs();
    test_parallel_zero_selfloop();
    test_disconnected_and_errors();
    test_random();
    test_timing();
    return hs_check_result();
}
