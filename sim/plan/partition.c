/* partition.c - spectral + Kernighan-Lin partitioning of a GPU graph, coarsening
 * and the max-cut bipartition; see partition.h for the method and PART-1..6. */
#include "plan/partition.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_eigen.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>

int hs_part_graph_create(hs_part_graph **out, int n, hs_err *err)
{
    hs_part_graph *g;
    *out = NULL;
    if (n < 1) return hs_errf(err, HS_EINVAL, "partition graph: %d nodes", n);
    g = calloc(1, sizeof *g);
    if (!g) goto nomem;
    g->n = n;
    g->w = calloc((size_t)n * (size_t)n, sizeof *g->w);
    g->mem = calloc((size_t)n, sizeof *g->mem);
    if (!g->w || !g->mem) goto nomem;
    *out = g;
    return 0;
nomem:
    hs_part_graph_destroy(g);
    return hs_errf(err, HS_ENOMEM, "partition graph: %d nodes: out of memory", n);
}

void hs_part_graph_destroy(hs_part_graph *g)
{
    if (!g) return;
    free(g->w);
    free(g->mem);
    free(g);
}

void hs_part_graph_set_edge(hs_part_graph *g, int i, int j, double w)
{
    assert(i != j && i >= 0 && j >= 0 && i < g->n && j < g->n && w >= 0);
    g->w[(long)i * g->n + j] = w;
    g->w[(long)j * g->n + i] = w;
}

int hs_part_graph_from_cluster(hs_part_graph **out, const hs_cluster *c,
                               hs_err *err)
{
    hs_part_graph *g;
    int rc;
    *out = NULL;
    if (!c) return hs_errf(err, HS_EINVAL, "partition graph: no cluster");
    rc = hs_part_graph_create(&g, c->n_gpus, err);
    if (rc) return rc;
    for (int i = 0; i < c->n_gpus; i++) {
        g->mem[i] = hs_cluster_gpu(c, i)->mem_bytes;
        for (int j = i + 1; j < c->n_gpus; j++)
            hs_part_graph_set_edge(g, i, j, fmin(hs_cluster_bw(c, i, j),
                                                 hs_cluster_bw(c, j, i)));
    }
    *out = g;
    return 0;
}

int hs_part_k_from_memory(double total_mem, double one_replica_need)
{
    double k;
    if (!isfinite(total_mem) || !isfinite(one_replica_need) || one_replica_need <= 0)
        return 1;
    k = floor(total_mem / one_replica_need);
    if (k < 1) return 1;
    if (k > 1e9) return 1000000000;
    return (int)k;
}

double hs_part_cut(const hs_part_graph *g, const int *assign)
{
    double cut = 0;
    for (int i = 0; i < g->n; i++)
        for (int j = i + 1; j < g->n; j++)
            if (assign[i] != assign[j]) cut += hs_part_w(g, i, j);
    return cut;
}

void hs_part_mems(const hs_part_graph *g, int K, const int *assign, double *part_mem)
{
    for (int p = 0; p < K; p++) part_mem[p] = 0;
    for (int i = 0; i < g->n; i++) part_mem[assign[i]] += g->mem[i];
}

int hs_part_valid(const hs_part_graph *g, int K, const int *assign)
{
    int ok = 1, *cnt;
    if (!g || !assign || K < 1 || K > g->n) return 0;
    cnt = calloc((size_t)K, sizeof *cnt);
    if (!cnt) return 0;
    for (int i = 0; i < g->n; i++) {
        if (assign[i] < 0 || assign[i] >= K) { ok = 0; break; }
        cnt[assign[i]]++;
    }
    for (int p = 0; ok && p < K; p++)
        if (cnt[p] == 0) ok = 0;
    free(cnt);
    return ok;
}

/* ---- spectral bisection ------------------------------------------------ */

typedef struct hs__fkey {
    long long q;   /* Fiedler entry quantised to 1e-9 (entries are in [-1, 1]) */
    int id;
} hs__fkey;

static int fkey_cmp(const void *a, const void *b)
{
    const hs__fkey *x = a, *y = b;
    if (x->q != y->q) return x->q < y->q ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Orders nodes[0..m) by their Fiedler entry on the induced subgraph
 * (quantised, ties by id).  Returns 0 or HS_ENOMEM. */
static int fiedler_order(const hs_part_graph *g, int *nodes, int m,
                         hs__fkey *keys, hs_err *err)
{
    gsl_matrix *L = NULL, *V = NULL;
    gsl_vector *eval = NULL;
    gsl_eigen_symmv_workspace *ws = NULL;
    double wmax = 0, big = 0;
    int rc = 0, bi = 0;
    for (int a = 0; a < m; a++)
        for (int b = a + 1; b < m; b++)
            wmax = fmax(wmax, hs_part_w(g, nodes[a], nodes[b]));
    L = gsl_matrix_calloc((size_t)m, (size_t)m);
    V = gsl_matrix_alloc((size_t)m, (size_t)m);
    eval = gsl_vector_alloc((size_t)m);
    ws = gsl_eigen_symmv_alloc((size_t)m);
    if (!L || !V || !eval || !ws) {
        rc = hs_errf(err, HS_ENOMEM, "spectral partition: %d nodes: out of memory", m);
        goto out;
    }
    /* Laplacian of the weights scaled to [0, 1] (the eigenvectors are the
     * same; the scaling keeps bytes/s magnitudes out of the solver). */
    for (int a = 0; a < m; a++) {
        double deg = 0;
        for (int b = 0; b < m; b++) {
            double w;
            if (a == b) continue;
            w = wmax > 0 ? hs_part_w(g, nodes[a], nodes[b]) / wmax : 0;
            gsl_matrix_set(L, (size_t)a, (size_t)b, -w);
            deg += w;
        }
        gsl_matrix_set(L, (size_t)a, (size_t)a, deg);
    }
    gsl_eigen_symmv(L, eval, V, ws);
    gsl_eigen_symmv_sort(eval, V, GSL_EIGEN_SORT_VAL_ASC);
    /* Column 1 is the Fiedler vector; fix its sign by its largest entry
     * (first such node on ties). */
    for (int a = 0; a < m; a++) {
        double v = fabs(gsl_matrix_get(V, (size_t)a, 1));
        if (v > big + 1e-12) { big = v; bi = a; }
    }
    {
        double sgn = gsl_matrix_get(V, (size_t)bi, 1) < 0 ? -1.0 : 1.0;
        for (int a = 0; a < m; a++) {
            keys[a].q = llround(sgn * gsl_matrix_get(V, (size_t)a, 1) * 1e9);
            keys[a].id = nodes[a];
        }
    }
    qsort(keys, (size_t)m, sizeof *keys, fkey_cmp);
    for (int a = 0; a < m; a++) nodes[a] = keys[a].id;
out:
    gsl_eigen_symmv_free(ws);
    gsl_vector_free(eval);
    gsl_matrix_free(V);
    gsl_matrix_free(L);
    return rc;
}

/* Splits nodes[0..m) into k parts labelled base..base+k-1 (m >= k). */
static int spectral_rec(const hs_part_graph *g, int *nodes, int m, int k, int base,
                        int *assign, hs__fkey *keys, hs_err *err)
{
    int k1, k2, s, best_s, rc, by_count;
    double total = 0, target, cum = 0, best_d = INFINITY;
    assert(m >= k && k >= 1);
    if (k == 1) {
        for (int a = 0; a < m; a++) assign[nodes[a]] = base;
        return 0;
    }
    rc = fiedler_order(g, nodes, m, keys, err);
    if (rc) return rc;
    k1 = k / 2;
    k2 = k - k1;
    for (int a = 0; a < m; a++) total += g->mem[nodes[a]];
    by_count = !(total > 0);
    if (by_count) total = m;
    target = total * k1 / k;
    best_s = k1;
    /* Prefix nodes[0..s) gets k1 parts: k1 <= s <= m - k2. */
    for (s = 1; s <= m - k2; s++) {
        cum += by_count ? 1.0 : g->mem[nodes[s - 1]];
        if (s < k1) continue;
        if (fabs(cum - target) < best_d) {
            best_d = fabs(cum - target);
            best_s = s;
        }
    }
    rc = spectral_rec(g, nodes, best_s, k1, base, assign, keys, err);
    if (rc) return rc;
    return spectral_rec(g, nodes + best_s, m - best_s, k2, base + k1, assign, keys, err);
}

/* Relabels parts in order of their smallest node id. */
static void canonical_labels(int n, int K, int *assign, int *map)
{
    int next = 0;
    for (int p = 0; p < K; p++) map[p] = -1;
    for (int i = 0; i < n; i++)
        if (map[assign[i]] < 0) map[assign[i]] = next++;
    for (int i = 0; i < n; i++) assign[i] = map[assign[i]];
}

int hs_part_spectral(const hs_part_graph *g, int K, int *assign, hs_err *err)
{
    int *nodes = NULL, *out = NULL, *map = NULL, rc = 0;
    hs__fkey *keys = NULL;
    if (!g || !assign) return hs_errf(err, HS_EINVAL, "spectral partition: NULL argument");
    if (K < 1 || K > g->n)
        return hs_errf(err, HS_EINVAL, "spectral partition: K = %d with %d nodes "
                       "(need 1 <= K <= n)", K, g->n);
    nodes = malloc((size_t)g->n * sizeof *nodes);
    out = malloc((size_t)g->n * sizeof *out);
    map = malloc((size_t)K * sizeof *map);
    keys = malloc((size_t)g->n * sizeof *keys);
    if (!nodes || !out || !map || !keys) {
        rc = hs_errf(err, HS_ENOMEM, "spectral partition: out of memory");
        goto done;
    }
    for (int i = 0; i < g->n; i++) nodes[i] = i;
    rc = spectral_rec(g, nodes, g->n, K, 0, out, keys, err);
    if (rc) goto done;
    canonical_labels(g->n, K, out, map);
    assert(hs_part_valid(g, K, out)); /* PART-1, PART-2 */
    memcpy(assign, out, (size_t)g->n * sizeof *assign);
done:
    free(keys);
    free(map);
    free(out);
    free(nodes);
    return rc;
}

/* ---- Kernighan-Lin refinement ------------------------------------------ */

static double viol(double m, double lo, double hi)
{
    return (m < lo ? lo - m : 0) + (m > hi ? m - hi : 0);
}

typedef struct hs__step {
    int have, swap, i, x; /* x: target part (move) or partner node (swap) */
    double dv, gain;      /* violation change (<= 0 good), cut drop (> 0 good) */
} hs__step;

/* Offers a candidate; keeps the best.  Scan order breaks ties. */
static void offer(hs__step *best, int swap, int i, int x, double dv, double gain,
                  double eps_v, double eps_g)
{
    int improving = dv < -eps_v || (dv <= 0 && gain > eps_g);
    if (!improving) return;
    if (best->have) {
        if (dv > best->dv + eps_v) return;
        if (dv >= best->dv - eps_v && gain <= best->gain + eps_g) return;
    }
    best->have = 1;
    best->swap = swap;
    best->i = i;
    best->x = x;
    best->dv = dv;
    best->gain = gain;
}

static void move_node(const hs_part_graph *g, int K, int *a, double *pm, int *cnt,
                      double *conn, int i, int to)
{
    int from = a[i];
    pm[from] -= g->mem[i];
    pm[to] += g->mem[i];
    cnt[from]--;
    cnt[to]++;
    a[i] = to;
    for (int j = 0; j < g->n; j++) {
        double w = hs_part_w(g, i, j);
        if (j == i || w == 0) continue;
        conn[(long)j * K + from] -= w;
        conn[(long)j * K + to] += w;
    }
}

/* The KL loop of hs_part_kl_refine and hs_part_kl_refine_to: part p's
 * memory bounds are [lo[p], hi[p]]; uniform (bounds around the mean) only
 * picks the verdict's message, which then names the mean. */
static int kl_core(const hs_part_graph *g, int K, int *assign, const double *lo,
                   const double *hi, int uniform, double mem_tol, hs_err *err)
{
    int n = g->n, *a = NULL, *cnt = NULL, rc = 0, worst = 0;
    double *pm = NULL, *conn = NULL, *v0 = NULL, *gmax = NULL, *gpart = NULL, total = 0, wsum = 0, mean;
    unsigned char *pass = NULL;
    double eps_v, eps_g, worst_v = 0, bound;
    long iter, max_iter;
    a = malloc((size_t)n * sizeof *a);
    cnt = calloc((size_t)K, sizeof *cnt);
    pm = calloc((size_t)K, sizeof *pm);
    conn = calloc((size_t)n * (size_t)K, sizeof *conn);
    v0 = malloc(((size_t)2 * K + (size_t)n) * sizeof *v0);
    gpart = v0 ? v0 + K : NULL;
    gmax = v0 ? v0 + 2 * K : NULL;
    pass = malloc((size_t)K);
    if (!a || !cnt || !pm || !conn || !v0 || !pass) {
        rc = hs_errf(err, HS_ENOMEM, "KL refine: out of memory");
        goto done;
    }
    memcpy(a, assign, (size_t)n * sizeof *a);
    for (int i = 0; i < n; i++) {
        total += g->mem[i];
        pm[a[i]] += g->mem[i];
        cnt[a[i]]++;
        for (int j = 0; j < n; j++) {
            conn[(long)i * K + a[j]] += j == i ? 0 : hs_part_w(g, i, j);
            wsum += hs_part_w(g, i, j);
        }
    }
    mean = total / K;
    eps_v = 1e-12 * (total > 0 ? total : 1);
    eps_g = 1e-12 * (wsum > 0 ? wsum : 1);
    /* Each step lowers (violation, cut) lexicographically by more than an
     * epsilon, so the loop ends; the cap only guards against rounding. */
    max_iter = 1000L + 100L * n * K;
    /* A candidate counts only when it is improving (offer): dv < -eps_v,
     * or dv <= 0 and gain > eps_g.  Where neither part is violated (v0 = 0
     * exactly) dv >= 0, so only the gain can make it; a swap's gain is at
     * most gmax[i] + gmax[j] (each node's best move gain), and at most
     * i's move gain toward j's part + gpart (the best gmax in that part),
     * plus rounding far below bound.  Skipping the candidates that cannot count leaves
     * the scan order, and so the step taken, as it was. */
    bound = 1e-13 * (wsum > 0 ? wsum : 1);
    for (iter = 0; iter < max_iter; iter++) {
        hs__step best = {0};
        double gtop = -INFINITY;
        int any_v = 0;
        for (int p = 0; p < K; p++) {
            v0[p] = viol(pm[p], lo[p], hi[p]);
            any_v |= v0[p] != 0;
        }
        for (int i = 0; i < n; i++) {
            int pa = a[i];
            double mi = g->mem[i], own = conn[(long)i * K + pa];
            gmax[i] = -INFINITY;
            for (int b = 0; b < K; b++) {
                double dv, gain;
                if (b == pa) continue;
                gain = conn[(long)i * K + b] - own;
                if (gain > gmax[i]) gmax[i] = gain;
                if (cnt[pa] == 1) continue; /* PART-2 */
                if (v0[pa] == 0 && v0[b] == 0 && !(gain > eps_g)) continue;
                dv = viol(pm[pa] - mi, lo[pa], hi[pa]) + viol(pm[b] + mi, lo[b], hi[b])
                     - v0[pa] - v0[b];
                offer(&best, 0, i, b, dv, gain, eps_v, eps_g);
            }
            if (gmax[i] > gtop) gtop = gmax[i];
        }
        for (int p = 0; p < K; p++) gpart[p] = -INFINITY;
        for (int j = 0; j < n; j++)
            if (gmax[j] > gpart[a[j]]) gpart[a[j]] = gmax[j];
        for (int i = 0; i < n; i++) {
            int pa = a[i];
            double own = conn[(long)i * K + pa];
            if (!any_v && gmax[i] + gtop + bound <= eps_g) continue;
            /* the parts worth a look: i's gain toward part b plus the best
             * gain of one of b's nodes may pass eps_g (or a part is
             * violated) - for most parts in other machines it cannot */
            for (int b = 0; b < K; b++)
                pass[b] = b != pa && (v0[pa] != 0 || v0[b] != 0 || (conn[(long)i * K + b] - own) + gpart[b] + bound > eps_g);
            for (int j = i + 1; j < n; j++) {
                int pb = a[j];
                double d, dv, gain;
                if (!pass[pb]) continue;
                if (v0[pa] == 0 && v0[pb] == 0 && gmax[i] + gmax[j] + bound <= eps_g) continue;
                d = g->mem[j] - g->mem[i];
                dv = viol(pm[pa] + d, lo[pa], hi[pa]) + viol(pm[pb] - d, lo[pb], hi[pb])
                     - v0[pa] - v0[pb];
                gain = conn[(long)i * K + pb] - conn[(long)i * K + pa]
                       + conn[(long)j * K + pa] - conn[(long)j * K + pb]
                       - 2 * hs_part_w(g, i, j);
                offer(&best, 1, i, j, dv, gain, eps_v, eps_g);
            }
        }
        if (!best.have) break;
        if (best.swap) {
            int pa = a[best.i], pb = a[best.x];
            move_node(g, K, a, pm, cnt, conn, best.i, pb);
            move_node(g, K, a, pm, cnt, conn, best.x, pa);
        } else {
            move_node(g, K, a, pm, cnt, conn, best.i, best.x);
        }
    }
    /* Recompute the memories from scratch for the verdict. */
    hs_part_mems(g, K, a, pm);
    for (int p = 0; p < K; p++) {
        double v = viol(pm[p], lo[p], hi[p]);
        if (v > worst_v) { worst_v = v; worst = p; }
    }
    if (worst_v > 1e-9 * (mean > 0 ? mean : 1)) {
        if (uniform)
            rc = hs_errf(err, HS_ENOFIT, "KL refine: cannot balance memory within "
                         "+-%.3g of the mean %.4g GB over %d parts: part %d has "
                         "%.4g GB (bounds %.4g..%.4g GB)", mem_tol, mean / 1e9, K,
                         worst, pm[worst] / 1e9, lo[worst] / 1e9, hi[worst] / 1e9);
        else
            rc = hs_errf(err, HS_ENOFIT, "KL refine: cannot keep part %d within "
                         "+-%.3g of its target: it has %.4g GB (bounds %.4g..%.4g GB)",
                         worst, mem_tol, pm[worst] / 1e9, lo[worst] / 1e9, hi[worst] / 1e9);
        goto done;
    }
    assert(hs_part_valid(g, K, a)); /* PART-1, PART-2 */
    memcpy(assign, a, (size_t)n * sizeof *assign);
done:
    free(pass);
    free(v0);
    free(conn);
    free(pm);
    free(cnt);
    free(a);
    return rc;
}

/* Checks the arguments common to both KL entry points. */
static int kl_args(const hs_part_graph *g, int K, const int *assign, double mem_tol, hs_err *err)
{
    if (!g || !assign) return hs_errf(err, HS_EINVAL, "KL refine: NULL argument");
    if (K < 1 || K > g->n)
        return hs_errf(err, HS_EINVAL, "KL refine: K = %d with %d nodes", K, g->n);
    if (!(mem_tol >= 0) || !isfinite(mem_tol))
        return hs_errf(err, HS_EINVAL, "KL refine: mem_tol %g (need finite >= 0)", mem_tol);
    if (!hs_part_valid(g, K, assign))
        return hs_errf(err, HS_EINVAL, "KL refine: assignment is not a valid "
                       "%d-partition (a label out of range or an empty part)", K);
    return 0;
}

int hs_part_kl_refine(const hs_part_graph *g, int K, int *assign,
                      double mem_tol, hs_err *err)
{
    double *lo, *hi, total = 0;
    int rc;
    if ((rc = kl_args(g, K, assign, mem_tol, err))) return rc;
    lo = malloc((size_t)K * 2 * sizeof *lo);
    if (!lo) return hs_errf(err, HS_ENOMEM, "KL refine: out of memory");
    hi = lo + K;
    for (int i = 0; i < g->n; i++) total += g->mem[i];
    for (int p = 0; p < K; p++) {
        lo[p] = (1 - mem_tol) * (total / K);
        hi[p] = (1 + mem_tol) * (total / K);
    }
    rc = kl_core(g, K, assign, lo, hi, 1, mem_tol, err);
    free(lo);
    return rc;
}

int hs_part_kl_refine_to(const hs_part_graph *g, int K, int *assign,
                         const double *target, double mem_tol, hs_err *err)
{
    double *lo, *hi;
    int rc;
    if ((rc = kl_args(g, K, assign, mem_tol, err))) return rc;
    if (!target) return hs_errf(err, HS_EINVAL, "KL refine: NULL targets");
    for (int p = 0; p < K; p++)
        if (!(target[p] >= 0) || !isfinite(target[p]))
            return hs_errf(err, HS_EINVAL, "KL refine: part %d's target %g (need finite >= 0)", p, target[p]);
    lo = malloc((size_t)K * 2 * sizeof *lo);
    if (!lo) return hs_errf(err, HS_ENOMEM, "KL refine: out of memory");
    hi = lo + K;
    for (int p = 0; p < K; p++) {
        lo[p] = (1 - mem_tol) * target[p];
        hi[p] = (1 + mem_tol) * target[p];
    }
    rc = kl_core(g, K, assign, lo, hi, 0, mem_tol, err);
    free(lo);
    return rc;
}

/* ---- coarsening and the secondary partition ---------------------------- */

int hs_part_coarsen(const hs_part_graph *g, const int *assign, int K,
                    hs_part_graph **out, hs_err *err)
{
    hs_part_graph *cg;
    int rc;
    *out = NULL;
    if (!hs_part_valid(g, K, assign))
        return hs_errf(err, HS_EINVAL, "coarsen: assignment is not a valid %d-partition", K);
    rc = hs_part_graph_create(&cg, K, err);
    if (rc) return rc;
    hs_part_mems(g, K, assign, cg->mem);
    for (int i = 0; i < g->n; i++)
        for (int j = i + 1; j < g->n; j++) {
            int p = assign[i], q = assign[j];
            if (p == q) continue;
            cg->w[(long)p * K + q] += hs_part_w(g, i, j);
            cg->w[(long)q * K + p] += hs_part_w(g, i, j);
        }
    *out = cg;
    return 0;
}

static double crossing(const hs_part_graph *g, const int *side)
{
    double c = 0;
    for (int i = 0; i < g->n; i++)
        for (int j = i + 1; j < g->n; j++)
            if (side[i] != side[j]) c += hs_part_w(g, i, j);
    return c;
}

int hs_part_bipartition_max_cut(const hs_part_graph *g, int *side, hs_err *err)
{
    int n;
    if (!g || !side) return hs_errf(err, HS_EINVAL, "max-cut bipartition: NULL argument");
    n = g->n;
    if (n < 2)
        return hs_errf(err, HS_EINVAL, "max-cut bipartition: %d node(s), need 2", n);
    if (n <= HS_PART_MAXCUT_EXACT) {
        /* Node 0 stays on side 0; mask bit i (i >= 1) puts node i on side 1. */
        unsigned long best_mask = 0, mask, lim = 1UL << n;
        double best = -1;
        int tmp[HS_PART_MAXCUT_EXACT];
        for (mask = 2; mask < lim; mask += 2) {
            double c;
            for (int i = 0; i < n; i++) tmp[i] = (int)((mask >> i) & 1);
            c = crossing(g, tmp);
            if (c > best) { best = c; best_mask = mask; }
        }
        for (int i = 0; i < n; i++) side[i] = (int)((best_mask >> i) & 1);
    } else {
        int cnt[2] = {0, 0};
        double wsum = 0, eps;
        for (int i = 0; i < n; i++) {
            side[i] = i % 2;
            cnt[side[i]]++;
            for (int j = i + 1; j < n; j++) wsum += hs_part_w(g, i, j);
        }
        eps = 1e-12 * (wsum > 0 ? wsum : 1);
        /* Each flip raises the crossing weight by more than eps: it ends. */
        for (;;) {
            int bi = -1;
            double bg = eps;
            for (int i = 0; i < n; i++) {
                double gain = 0;
                if (cnt[side[i]] == 1) continue; /* PART-6 */
                for (int j = 0; j < n; j++)
                    if (j != i) gain += (side[j] == side[i] ? 1 : -1) * hs_part_w(g, i, j);
                if (gain > bg) { bg = gain; bi = i; }
            }
            if (bi < 0) break;
            cnt[side[bi]]--;
            side[bi] ^= 1;
            cnt[side[bi]]++;
        }
        if (side[0] == 1)
            for (int i = 0; i < n; i++) side[i] ^= 1;
    }
    return 0;
}
