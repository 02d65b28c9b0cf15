/* test_partition.c - plan/partition: spectral bisection, KL refinement,
 * coarsening and the max-cut bipartition (invariants PART-1..6). */
#include "check.h"
#include "plan/partition.h"

#define GB 1e9

static hs_part_graph *graph(int n)
{
    hs_part_graph *g = NULL;
    hs_err err = {0};
    CHECK_OK(hs_part_graph_create(&g, n, &err), &err);
    if (!g) exit(2);
    return g;
}

/* 1 when every part's memory is within (1 +- tol) of the mean. */
static int within(const hs_part_graph *g, int K, const int *a, double tol)
{
    double pm[64], total = 0;
    hs_part_mems(g, K, a, pm);
    for (int p = 0; p < K; p++) total += pm[p];
    for (int p = 0; p < K; p++)
        if (pm[p] < (1 - tol) * total / K * (1 - 1e-12) ||
            pm[p] > (1 + tol) * total / K * (1 + 1e-12)) return 0;
    return 1;
}

static void test_two_cliques(void)
{
    hs_part_graph *g = graph(12);
    hs_err err = {0};
    int a[12];
    for (int i = 0; i < 12; i++) {
        g->mem[i] = 80 * GB;
        for (int j = i + 1; j < 12; j++)
            if ((i < 6) == (j < 6)) hs_part_graph_set_edge(g, i, j, 100 * GB);
    }
    hs_part_graph_set_edge(g, 2, 8, 1 * GB);
    CHECK_OK(hs_part_spectral(g, 2, a, &err), &err);
    for (int i = 0; i < 12; i++) CHECK_INT(a[i], i < 6 ? 0 : 1);
    CHECK_NEAR(hs_part_cut(g, a), 1 * GB, 1);
    CHECK_OK(hs_part_kl_refine(g, 2, a, 0.0, &err), &err);
    for (int i = 0; i < 12; i++) CHECK_INT(a[i], i < 6 ? 0 : 1);
    /* From a bad balanced start (alternating), KL alone finds the weak edge. */
    for (int i = 0; i < 12; i++) a[i] = i % 2;
    CHECK_OK(hs_part_kl_refine(g, 2, a, 0.0, &err), &err);
    CHECK_NEAR(hs_part_cut(g, a), 1 * GB, 1);
    for (int i = 0; i < 12; i++) CHECK_INT(a[i], a[0] ^ (i >= 6));
    hs_part_graph_destroy(g);
}

static void test_ring(void)
{
    hs_part_graph *g = graph(8);
    hs_err err = {0};
    int a[8];
    for (int i = 0; i < 8; i++) {
        g->mem[i] = 1;
        hs_part_graph_set_edge(g, i, (i + 1) % 8, 1);
    }
    CHECK_OK(hs_part_spectral(g, 2, a, &err), &err);
    CHECK(hs_part_valid(g, 2, a));
    CHECK_NEAR(hs_part_cut(g, a), 2, 1e-12);
    CHECK(within(g, 2, a, 0));
    CHECK_OK(hs_part_spectral(g, 4, a, &err), &err);
    CHECK(hs_part_valid(g, 4, a));
    CHECK_NEAR(hs_part_cut(g, a), 4, 1e-12);
    CHECK(within(g, 4, a, 0));
    CHECK_OK(hs_part_kl_refine(g, 4, a, 0, &err), &err);
    CHECK_NEAR(hs_part_cut(g, a), 4, 1e-12);
    hs_part_graph_destroy(g);
}

/* A path 0-1-2-3-4-5 with memories 64, 64, 32, 32, 32, 32: the memory
 * median cuts after node 1 (128 | 128); a node-count median would give
 * 160 | 96. */
static void test_memory_weighted(void)
{
    static const double mem[6] = {64, 64, 32, 32, 32, 32};
    hs_part_graph *g = graph(6);
    hs_err err = {0};
    int a[6];
    double pm[2];
    for (int i = 0; i < 6; i++) {
        g->mem[i] = mem[i] * GB;
        if (i < 5) hs_part_graph_set_edge(g, i, i + 1, 10 * GB);
    }
    CHECK_OK(hs_part_spectral(g, 2, a, &err), &err);
    for (int i = 0; i < 6; i++) CHECK_INT(a[i], i < 2 ? 0 : 1);
    hs_part_mems(g, 2, a, pm);
    CHECK_NEAR(pm[0], 128 * GB, 1);
    CHECK_NEAR(pm[1], 128 * GB, 1);
    hs_part_graph_destroy(g);
}

static unsigned lcg(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static void test_kl_random(void)
{
    hs_err err = {0};
    for (unsigned seed = 1; seed <= 20; seed++) {
        unsigned s = seed;
        int n = 10 + (int)(seed % 11), K = 2 + (int)(seed % 4), a[32], b[32];
        hs_part_graph *g = graph(n);
        double before, after;
        int rc;
        for (int i = 0; i < n; i++) {
            g->mem[i] = (double)(16 + 8 * (lcg(&s) % 9)) * GB;
            for (int j = i + 1; j < n; j++)
                if (lcg(&s) % 3) hs_part_graph_set_edge(g, i, j, (double)(lcg(&s) % 100) * GB);
        }
        /* Start from the spectral partition, loosen until it is balanced. */
        CHECK_OK(hs_part_spectral(g, K, a, &err), &err);
        CHECK(hs_part_valid(g, K, a));
        memcpy(b, a, sizeof a);
        rc = hs_part_kl_refine(g, K, b, 0.3, &err);
        CHECK(rc == 0 || rc == HS_ENOFIT);
        if (rc == HS_ENOFIT) {
            CHECK(memcmp(a, b, (size_t)n * sizeof *a) == 0); /* unchanged */
            hs_part_graph_destroy(g);
            continue;
        }
        CHECK(hs_part_valid(g, K, b));
        CHECK(within(g, K, b, 0.3));
        /* From a balanced start the cut never rises (PART-4). */
        before = hs_part_cut(g, b);
        memcpy(a, b, sizeof a);
        CHECK_OK(hs_part_kl_refine(g, K, a, 0.3, &err), &err);
        after = hs_part_cut(g, a);
        CHECK(after <= before * (1 + 1e-12));
        /* A local optimum: refining again changes nothing. */
        CHECK(memcmp(a, b, (size_t)n * sizeof *a) == 0);
        /* From the round-robin start too (repairing its balance first). */
        for (int i = 0; i < n; i++) a[i] = i % K;
        before = hs_part_cut(g, a);
        {
            int balanced = within(g, K, a, 0.3);
            rc = hs_part_kl_refine(g, K, a, 0.3, &err);
            CHECK(rc == 0 || rc == HS_ENOFIT);
            CHECK(hs_part_valid(g, K, a));
            if (rc == 0) CHECK(within(g, K, a, 0.3));
            if (balanced) {
                CHECK_INT(rc, 0);
                CHECK(hs_part_cut(g, a) <= before * (1 + 1e-12));
            }
        }
        hs_part_graph_destroy(g);
    }
}

static void test_kl_infeasible(void)
{
    hs_part_graph *g = graph(3);
    hs_err err = {0};
    int a[3] = {0, 0, 1};
    for (int i = 0; i < 3; i++) g->mem[i] = 80 * GB;
    hs_part_graph_set_edge(g, 0, 1, 1);
    hs_part_graph_set_edge(g, 1, 2, 1);
    /* 240 GB in 2 parts: 80 | 160 can never be within 10% of 120. */
    CHECK_INT(hs_part_kl_refine(g, 2, a, 0.1, &err), HS_ENOFIT);
    CHECK(strstr(err.msg, "cannot balance") != NULL);
    CHECK_INT(a[0], 0);
    CHECK_INT(a[1], 0);
    CHECK_INT(a[2], 1);
    /* Bad arguments. */
    CHECK_INT(hs_part_kl_refine(g, 2, a, -0.1, &err), HS_EINVAL);
    CHECK_INT(hs_part_kl_refine(g, 2, a, NAN, &err), HS_EINVAL);
    a[2] = 0; /* part 1 empty */
    CHECK_INT(hs_part_kl_refine(g, 2, a, 1.0, &err), HS_EINVAL);
    CHECK_INT(hs_part_spectral(g, 4, a, &err), HS_EINVAL);
    CHECK_INT(hs_part_spectral(g, 0, a, &err), HS_EINVAL);
    hs_part_graph_destroy(g);
}

static void test_k_from_memory(void)
{
    CHECK_INT(hs_part_k_from_memory(1280 * GB, 300 * GB), 4);
    CHECK_INT(hs_part_k_from_memory(100 * GB, 300 * GB), 1);
    CHECK_INT(hs_part_k_from_memory(600 * GB, 300 * GB), 2);
    CHECK_INT(hs_part_k_from_memory(600 * GB, 0), 1);
    CHECK_INT(hs_part_k_from_memory(NAN, 1), 1);
}

static void print_parts(const char *what, const hs_part_graph *g, int K, const int *a)
{
    double pm[64];
    hs_part_mems(g, K, a, pm);
    printf("  %s: cut %.4g GB/s; part memories (GB):", what, hs_part_cut(g, a) / GB);
    for (int p = 0; p < K; p++) printf(" %.0f", pm[p] / GB);
    printf("; assign:");
    for (int i = 0; i < g->n; i++) printf(" %d", a[i]);
    printf("\n");
}

static void test_clusters(void)
{
    static const char *const names[] = {"hexgen2-het1", "hexgen2-het2", "hexgen2-het3",
                                        "hexgen2-het4", "hexgen2-het5", "hetis-mixed12",
                                        "dgx-a100x2", NULL};
    hs_test_root();
    for (int c = 0; names[c]; c++) {
        hs_cluster *cl = NULL;
        hs_part_graph *g = NULL;
        hs_err err = {0};
        CHECK_OK(hs_cluster_find(&cl, names[c], &err), &err);
        if (!cl) continue;
        CHECK_OK(hs_part_graph_from_cluster(&g, cl, &err), &err);
        CHECK_INT(g->n, cl->n_gpus);
        for (int K = 2; K <= 6 && K <= g->n; K++) {
            int a[512], b[512], r[512], rc, cnt[8] = {0};
            double before;
            if (g->n > 512) break;
            CHECK_OK(hs_part_spectral(g, K, a, &err), &err);
            for (int i = 0; i < g->n; i++) {
                CHECK(a[i] >= 0 && a[i] < K);
                if (a[i] >= 0 && a[i] < K) cnt[a[i]]++;
            }
            for (int p = 0; p < K; p++) CHECK(cnt[p] > 0);
            /* Determinism: same input, same output. */
            CHECK_OK(hs_part_spectral(g, K, r, &err), &err);
            CHECK(memcmp(a, r, (size_t)g->n * sizeof *a) == 0);
            memcpy(b, a, (size_t)g->n * sizeof *a);
            before = hs_part_cut(g, a);
            rc = hs_part_kl_refine(g, K, b, 0.25, &err);
            CHECK(rc == 0 || rc == HS_ENOFIT);
            CHECK(hs_part_valid(g, K, b));
            if (rc == 0) {
                CHECK(within(g, K, b, 0.25));
                if (within(g, K, a, 0.25)) CHECK(hs_part_cut(g, b) <= before * (1 + 1e-12));
                memcpy(r, a, (size_t)g->n * sizeof *a);
                CHECK_OK(hs_part_kl_refine(g, K, r, 0.25, &err), &err);
                CHECK(memcmp(b, r, (size_t)g->n * sizeof *b) == 0);
            } else {
                CHECK(memcmp(a, b, (size_t)g->n * sizeof *a) == 0);
                printf("  %s K=%d: %s\n", names[c], K, err.msg);
            }
            if (K == 4 && !strcmp(names[c], "hexgen2-het1")) {
                printf("hexgen2-het1, K = 4:\n");
                print_parts("spectral", g, K, a);
                if (rc == 0) print_parts("KL (tol 0.25)", g, K, b);
            }
        }
        hs_part_graph_destroy(g);
        hs_cluster_destroy(cl);
    }
}

/* Hand case: 8 nodes in 4 parts of two, P0 = {0,1}, P1 = {2,3}, P2 = {4,5},
 * P3 = {6,7}.  Inter-part edges: 0-2: 5, 1-3: 5 (W01 = 10); 0-4: 1 (W02 =
 * 1); 1-6: 2, 0-7: 2 (W03 = 4); 2-4: 3 (W12 = 3); 3-6: 1 (W13 = 1); 5-7: 8,
 * 4-6: 1 (W23 = 9); intra-part edges of 100 are dropped.  Splits with P0 on
 * side 0: {0}|{123} 15, {01}|{23} 9, {02}|{13} 26, {03}|{12} 21, {012}|{3}
 * 14, {013}|{2} 13, {023}|{1} 14; the maximum is {0,2} | {1,3} = 26. */
static void test_coarsen_maxcut(void)
{
    hs_part_graph *g = graph(8), *cg = NULL;
    hs_err err = {0};
    int a[8] = {0, 0, 1, 1, 2, 2, 3, 3}, side[4];
    static const double W[4][4] = {{0, 10, 1, 4}, {10, 0, 3, 1}, {1, 3, 0, 9}, {4, 1, 9, 0}};
    for (int i = 0; i < 8; i++) g->mem[i] = (double)(i + 1);
    for (int i = 0; i < 8; i += 2) hs_part_graph_set_edge(g, i, i + 1, 100);
    hs_part_graph_set_edge(g, 0, 2, 5);
    hs_part_graph_set_edge(g, 1, 3, 5);
    hs_part_graph_set_edge(g, 0, 4, 1);
    hs_part_graph_set_edge(g, 1, 6, 2);
    hs_part_graph_set_edge(g, 0, 7, 2);
    hs_part_graph_set_edge(g, 2, 4, 3);
    hs_part_graph_set_edge(g, 3, 6, 1);
    hs_part_graph_set_edge(g, 5, 7, 8);
    hs_part_graph_set_edge(g, 4, 6, 1);
    CHECK_OK(hs_part_coarsen(g, a, 4, &cg, &err), &err);
    if (!cg) { hs_part_graph_destroy(g); return; }
    CHECK_INT(cg->n, 4);
    for (int p = 0; p < 4; p++) {
        CHECK_NEAR(cg->mem[p], (double)(4 * p + 3), 0);
        for (int q = 0; q < 4; q++) CHECK_NEAR(hs_part_w(cg, p, q), W[p][q], 0);
    }
    CHECK_OK(hs_part_bipartition_max_cut(cg, side, &err), &err);
    CHECK_INT(side[0], 0);
    CHECK_INT(side[1], 1);
    CHECK_INT(side[2], 0);
    CHECK_INT(side[3], 1);
    hs_part_graph_destroy(cg);
    hs_part_graph_destroy(g);

    /* Greedy path (n > HS_PART_MAXCUT_EXACT): a complete bipartite graph
     * between evens and odds is cut entirely; two non-empty sides. */
    g = graph(20);
    {
        int s[20], c0 = 0;
        double total = 0;
        for (int i = 0; i < 20; i++)
            for (int j = i + 1; j < 20; j++)
                if ((i + j) % 2) { hs_part_graph_set_edge(g, i, j, 1); total += 1; }
        CHECK_OK(hs_part_bipartition_max_cut(g, s, &err), &err);
        for (int i = 0; i < 20; i++) c0 += s[i] == 0;
        CHECK(c0 > 0 && c0 < 20);
        CHECK_INT(s[0], 0);
        CHECK_NEAR(hs_part_cut(g, s), total, 0);
        /* A clique: greedy reaches a local optimum of >= half the weight. */
        for (int i = 0; i < 20; i++)
            for (int j = i + 1; j < 20; j++) hs_part_graph_set_edge(g, i, j, 1);
        CHECK_OK(hs_part_bipartition_max_cut(g, s, &err), &err);
        CHECK(hs_part_cut(g, s) >= 190 / 2.0);
    }
    hs_part_graph_destroy(g);
    g = graph(1);
    CHECK_INT(hs_part_bipartition_max_cut(g, side, &err), HS_EINVAL);
    hs_part_graph_destroy(g);
}

int main(void)
{
    test_two_cliques();
    test_ring();
    test_memory_weighted();
    test_kl_random();
    test_kl_infeasible();
    test_k_from_memory();
    test_clusters();
    test_coarsen_maxcut();
    return hs_check_result();
}
