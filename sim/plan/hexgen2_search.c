/* hexgen2_search.c - the HexGen-2 placement search (hexgen2.h, "Search"):
 * the initial placement (K from memory, spectral partition + Kernighan-Lin,
 * coarsening, max-cut into prefill and decode sides) and the guided
 * (max-flow-driven moves, restarted from a few K), random and genetic
 * searches, each keeping the best placement by estimated output tokens/s
 * (hs_hg2_evaluate, hexgen2_place.c).
 *
 * Invariants (asserted where a placement is kept and on return):
 *   - a search placement puts every GPU in exactly one group (HG2-1):
 *     group[i] in [0, K) with K = n_gpus slots, the unused ones free for
 *     splits; colocated searches give every used group the colocated role,
 *     disaggregated ones prefill or decode (a flip is role ^ 1);
 *   - the guided search's buffers are sized by K = n_gpus;
 *   - the GA's survivors fit the 1024-entry swap buffers (pop <= 512);
 *   - determinism (HG2-5): one xorshift64* stream per context, fixed scan
 *     orders, stable insertion sorts; wall time only stops the searches
 *     when a time= limit is set. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan/hexgen2_int.h"

/* Wall clock for the search's time limits (never in results). */
double hs__hg2_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
#include "plan/partition.h"

static uint64_t rnd(hs_hg2_ctx *x) { return hs_rng_u64(&x->rng); }

/* n <= 1 draws nothing: the streams of existing plans depend on it. */
static int rndn(hs_hg2_ctx *x, int n)
{
    return n <= 1 ? 0 : (int)hs_rng_below(&x->rng, (uint64_t)n);
}

#ifndef NDEBUG
/* Sanity of a search placement (for assert): K = n_gpus slots, every GPU
 * in one of them (HG2-1), every used group colocated in a colocated
 * search, prefill or decode otherwise. */
static int search_sane(const hs_hg2_place *p, int colocated)
{
    if (p->K != p->n_gpus) return 0;
    for (int i = 0; i < p->n_gpus; i++) {
        int k = p->group[i];
        if (k < 0 || k >= p->K) return 0;
        if (colocated ? p->role[k] != HS_HG2_COLOC : p->role[k] != HS_HG2_PREFILL && p->role[k] != HS_HG2_DECODE)
            return 0;
    }
    return 1;
}
#endif

static double elapsed(const hs_hg2_ctx *x)
{
    return hs__hg2_now_s() - x->t0;
}

static void note_best(hs_hg2_ctx *x, double tput)
{
    if (tput > x->st.best_tput * (1 + 1e-12) || x->st.best_tput == 0) {
        x->st.best_tput = tput;
        if (x->trace) fprintf(x->trace, "%.6f %.6f\n", elapsed(x), tput);
    }
}

/* Scores a placement (output tokens/s); -1 on error. */
static double score(hs_hg2_ctx *x, const hs_hg2_place *p, hs_hg2_eval *ev, hs_err *err)
{
    if (hs_hg2_evaluate(x, p, ev, err)) return -1;
    note_best(x, ev->tput);
    return ev->tput;
}

/* Initial placement: K from memory, spectral + KL, coarsen, max-cut. */
static int k_from_memory(const hs_hg2_ctx *x)
{
    double total = 0, need;
    for (int i = 0; i < x->c->n_gpus; i++) total += hs_cluster_gpu(x->c, i)->mem_bytes * x->ec.gpu_mem_util;
    need = hs_model_params(x->m) * hs_weight_bytes_per_param(x->bits) +
           x->o.conc * (x->o.s_in + x->o.s_out) * x->kvbtl * x->m->layers;
    return hs_part_k_from_memory(total, need);
}

/* kforce > 0: that many groups instead of K from memory. */
static int initial(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, int kforce, hs_err *err)
{
    const hs_cluster *c = x->c;
    int n = c->n_gpus, K = kforce > 0 ? kforce : k_from_memory(x), rc;
    hs_part_graph *g = NULL, *cg = NULL;
    int *side = NULL;
    if (!colocated && K < 2) K = 2;
    if (K > n) K = n;
    if (hs__hg2_place_alloc(p, n)) return hs_errf(err, HS_ENOMEM, "out of memory");
    if ((rc = hs_part_graph_from_cluster(&g, c, err))) goto out;
    if ((rc = hs_part_spectral(g, K, p->group, err))) goto out;
    {
        hs_err e2 = {0};
        /* an unreachable balance keeps the spectral partition (ENOFIT) */
        rc = hs_part_kl_refine(g, K, p->group, x->o.mem_tol, &e2);
        if (rc && rc != HS_ENOFIT) {
            *err = e2;
            goto out;
        }
        rc = 0;
    }
    p->K = K;
    for (int k = 0; k < n; k++) p->role[k] = colocated ? HS_HG2_COLOC : HS_HG2_DECODE;
    if (!colocated && K >= 2) {
        side = malloc((size_t)K * sizeof *side);
        if (!side) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        if ((rc = hs_part_coarsen(g, p->group, K, &cg, err))) goto out;
        if ((rc = hs_part_bipartition_max_cut(cg, side, err))) goto out;
        {
            /* which side prefills: the better of the two orientations */
            hs_hg2_eval ev = {0};
            double a, b;
            for (int k = 0; k < K; k++) p->role[k] = side[k] ? HS_HG2_DECODE : HS_HG2_PREFILL;
            if ((a = score(x, p, &ev, err)) < 0) rc = HS_ENOMEM;
            for (int k = 0; k < K && !rc; k++) p->role[k] = side[k] ? HS_HG2_PREFILL : HS_HG2_DECODE;
            if (!rc && (b = score(x, p, &ev, err)) < 0) rc = HS_ENOMEM;
            if (!rc && a >= b)
                for (int k = 0; k < K; k++) p->role[k] = side[k] ? HS_HG2_DECODE : HS_HG2_PREFILL;
            hs_hg2_eval_free(&ev);
        }
    }
    /* group ids beyond K are free slots for splits (roles default decode) */
    p->K = n;
    assert(search_sane(p, colocated)); /* PART-1: the partition covers every GPU */
out:
    free(side);
    hs_part_graph_destroy(g);
    hs_part_graph_destroy(cg);
    if (rc) hs_hg2_place_free(p);
    return rc;
}

static int group_size(const hs_hg2_place *p, int k)
{
    int c = 0;
    for (int i = 0; i < p->n_gpus; i++) c += p->group[i] == k;
    return c;
}

/* Class of a GPU: same node and type are interchangeable for moves. */
static int same_class(const hs_cluster *c, int a, int b)
{
    return c->gpu_node[a] == c->gpu_node[b] && c->gpu_type[a] == c->gpu_type[b];
}

/* One representative (largest id) per class among the GPUs of group k. */
static int class_reps(const hs_hg2_ctx *x, const hs_hg2_place *p, int k, int *reps)
{
    int nr = 0;
    for (int i = p->n_gpus - 1; i >= 0; i--) {
        int dup = 0;
        if (p->group[i] != k) continue;
        for (int r = 0; r < nr && !dup; r++) dup = same_class(x->c, reps[r], i);
        if (!dup) reps[nr++] = i;
    }
    return nr;
}

/* The first group id in [0, K) no GPU uses; -1 when every slot is used. */
static int empty_slot(const hs_hg2_place *p)
{
    for (int k = 0; k < p->K; k++) {
        int used = 0;
        for (int i = 0; i < p->n_gpus && !used; i++) used = p->group[i] == k;
        if (!used) return k;
    }
    return -1;
}

/* Scores p, a candidate of a guided step: when it beats *bv by more than
 * 1e-9 relative, *bv takes its score and best a copy of it.  Returns 1 when
 * kept, 0 when not, -1 on error (out of memory). */
static int try_move(hs_hg2_ctx *x, const hs_hg2_place *p, hs_hg2_eval *tv, double *bv,
                    hs_hg2_place *best, hs_err *err)
{
    double v = score(x, p, tv, err);
    if (v < 0) return -1;
    if (!(v > *bv * (1 + 1e-9))) return 0;
    *bv = v;
    hs__hg2_place_copy(best, p);
    return 1;
}

/* Max-flow-guided refinement of p (a search placement): see hexgen2.h.
 * p becomes the local optimum; 0 or HS_ENOMEM. */
static int guided(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, hs_err *err)
{
    int n = p->n_gpus, K = p->K, rc = 0;
    hs_hg2_eval ev = {0}, tv = {0};
    hs_hg2_place best;
    int *recv = malloc((size_t)K * sizeof *recv), *size = malloc((size_t)K * sizeof *size);
    int *ra = malloc((size_t)n * sizeof *ra), *rb = malloc((size_t)n * sizeof *rb);
    int *amem = malloc((size_t)n * sizeof *amem), *isd = malloc((size_t)K * 4 * sizeof *isd);
    int *isr = isd + K, *dl = isd + 2 * K, *rl = isd + 3 * K;
    double cur;
    assert(K == n && search_sane(p, colocated)); /* the buffers are sized by K = n */
    if (!recv || !size || !ra || !rb || !amem || !isd || hs__hg2_place_alloc(&best, n)) {
        free(recv); free(size); free(ra); free(rb); free(amem); free(isd);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    if ((cur = score(x, p, &ev, err)) < 0) {
        rc = HS_ENOMEM;
        goto out;
    }
    for (;;) {
        double bv = cur;
        int found = 0, any_donor = 0;
        x->st.steps++;
        for (int k = 0; k < K; k++) {
            size[k] = group_size(p, k);
            recv[k] = 0;
            if (!size[k] || ev.cap[k] <= 0) continue;
            if (colocated) recv[k] = 1;
            else if (ev.gflow[k] >= ev.cap[k] * (1 - 1e-6)) recv[k] = 1;
            for (int j = 0; j < K && !recv[k]; j++) {
                double pc = p->role[k] == HS_HG2_PREFILL ? ev.pcap[(size_t)k * K + j] : ev.pcap[(size_t)j * K + k];
                double pf = p->role[k] == HS_HG2_PREFILL ? ev.pair[(size_t)k * K + j] : ev.pair[(size_t)j * K + k];
                if (pc > 0 && pf >= pc * (1 - 1e-6)) recv[k] = 1;
            }
        }
        for (int k = 0; k < K; k++) any_donor |= size[k] && !recv[k];
        /* the W donors with the most slack (infeasible groups first) and
         * the W tightest receivers (smallest capacity): the max-flow's
         * under-used and bottleneck parts; W bounds a step's candidates */
        {
            int nd = 0, nr = 0, W = x->o.width;
            for (int k = 0; k < K; k++) {
                isd[k] = isr[k] = 0;
                if (!size[k]) continue;
                if (!recv[k] || !any_donor) dl[nd++] = k;
                if (recv[k] || !any_donor) rl[nr++] = k;
            }
            for (int i = 1; i < nd; i++) { /* insertion sort, stable: slack desc */
                int v = dl[i], j = i;
                double sv = ev.cap[v] > 0 ? ev.cap[v] - ev.gflow[v] : INFINITY;
                while (j > 0 && (ev.cap[dl[j - 1]] > 0 ? ev.cap[dl[j - 1]] - ev.gflow[dl[j - 1]] : INFINITY) < sv) {
                    dl[j] = dl[j - 1];
                    j--;
                }
                dl[j] = v;
            }
            for (int i = 1; i < nr; i++) { /* capacity asc */
                int v = rl[i], j = i;
                while (j > 0 && ev.cap[rl[j - 1]] > ev.cap[v]) {
                    rl[j] = rl[j - 1];
                    j--;
                }
                rl[j] = v;
            }
            for (int i = 0; i < nd && i < W; i++) isd[dl[i]] = 1;
            for (int i = 0; i < nr && i < W; i++) isr[rl[i]] = 1;
            /* the richest receivers also give: regrouping inside the
             * bottleneck side (e.g. pooling small GPUs into a deeper
             * pipeline that holds more KV) is a move toward it too */
            for (int i = nr - 1; i >= 0 && i >= nr - W; i--) isd[rl[i]] = 1;
        }
        best.K = p->K;
        for (int a = 0; a < K; a++) {
            int na;
            if (!isd[a]) continue;
            na = class_reps(x, p, a, ra);
            /* flip the donor's role */
            if (!colocated) {
                int r;
                p->role[a] ^= 1;
                if ((r = try_move(x, p, &tv, &bv, &best, err)) < 0) { rc = HS_ENOMEM; goto out; }
                if (r) { found = 1; if (x->o.first) goto apply; }
                p->role[a] ^= 1;
            }
            /* split the donor in two halves (GPU order), new half of either role */
            if (size[a] >= 2) {
                int e = empty_slot(p), c = 0;
                if (e >= 0) {
                    for (int i = 0; i < n; i++)
                        if (p->group[i] == a && (c++ >= size[a] / 2)) p->group[i] = e;
                    for (int half = 0; half < (colocated ? 1 : 2); half++) {
                        int r;
                        p->role[e] = colocated ? HS_HG2_COLOC : half;
                        if ((r = try_move(x, p, &tv, &bv, &best, err)) < 0) { rc = HS_ENOMEM; goto out; }
                        if (r) { found = 1; if (x->o.first) goto apply; }
                    }
                    for (int i = 0; i < n; i++)
                        if (p->group[i] == e) p->group[i] = a;
                }
            }
            for (int b = 0; b < K; b++) {
                int nb;
                if (b == a || !isr[b]) continue;
                nb = class_reps(x, p, b, rb);
                /* merge the donor into b */
                {
                    int r, m = 0;
                    for (int i = 0; i < n; i++)
                        if (p->group[i] == a) {
                            amem[m++] = i;
                            p->group[i] = b;
                        }
                    if ((r = try_move(x, p, &tv, &bv, &best, err)) < 0) { rc = HS_ENOMEM; goto out; }
                    if (r) { found = 1; if (x->o.first) goto apply; }
                    for (int i = 0; i < m; i++) p->group[amem[i]] = a;
                }
                for (int i = 0; i < na; i++) {
                    int r, g = ra[i];
                    /* move g: a -> b */
                    p->group[g] = b;
                    if ((r = try_move(x, p, &tv, &bv, &best, err)) < 0) { rc = HS_ENOMEM; goto out; }
                    if (r) { found = 1; if (x->o.first) goto apply; }
                    /* swap g with one of b's other classes */
                    for (int j = 0; j < nb; j++) {
                        int h = rb[j];
                        if (same_class(x->c, g, h)) continue;
                        p->group[h] = a;
                        if ((r = try_move(x, p, &tv, &bv, &best, err)) < 0) { rc = HS_ENOMEM; goto out; }
                        if (r) { found = 1; if (x->o.first) goto apply; }
                        p->group[h] = b;
                    }
                    p->group[g] = a;
                }
            }
        }
    apply:
        if (!found) break;
        hs__hg2_place_copy(p, &best);
        assert(search_sane(p, colocated));
        if ((cur = score(x, p, &ev, err)) < 0) { rc = HS_ENOMEM; goto out; }
        if (x->o.time_limit > 0 && elapsed(x) > x->o.time_limit) break;
    }
out:
    hs_hg2_eval_free(&ev);
    hs_hg2_eval_free(&tv);
    hs_hg2_place_free(&best);
    free(recv); free(size); free(ra); free(rb); free(amem); free(isd);
    return rc;
}

static int nonempty_group(hs_hg2_ctx *x, const hs_hg2_place *p)
{
    return p->group[rndn(x, p->n_gpus)];
}

/* One random mutation (move, swap, flip, merge, split). */
static void mutate(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, int allow_merge)
{
    int n = p->n_gpus, op = rndn(x, allow_merge ? 10 : 7), g = rndn(x, n), h = rndn(x, n);
    if (op < 3) { /* move g into h's group */
        if (p->group[h] >= 0) p->group[g] = p->group[h];
    } else if (op < 6) { /* swap */
        int t = p->group[g];
        p->group[g] = p->group[h];
        p->group[h] = t;
    } else if (op < 7) {
        int k = nonempty_group(x, p);
        if (!colocated && k >= 0) p->role[k] ^= 1;
    } else if (op < 8) { /* merge h's group into g's */
        int a = p->group[g], b = p->group[h];
        if (a >= 0 && b >= 0 && a != b)
            for (int i = 0; i < n; i++)
                if (p->group[i] == b) p->group[i] = a;
    } else { /* split half of g's group off */
        int a = p->group[g], e = empty_slot(p), c = 0;
        if (a < 0 || e < 0) return;
        p->role[e] = colocated ? HS_HG2_COLOC : (rnd(x) & 1);
        for (int i = 0; i < n; i++)
            if (p->group[i] == a && (c++ & 1)) p->group[i] = e;
    }
}

static int stop_now(const hs_hg2_ctx *x, long it, long limit)
{
    if (x->o.time_limit > 0 && elapsed(x) > x->o.time_limit) return 1;
    return it >= limit;
}

static int random_search(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, hs_err *err)
{
    hs_hg2_eval ev = {0};
    hs_hg2_place t;
    long limit = x->o.max_iters ? x->o.max_iters : 20L * p->n_gpus;
    double cur;
    int rc = 0;
    if (hs__hg2_place_alloc(&t, p->n_gpus)) return hs_errf(err, HS_ENOMEM, "out of memory");
    if ((cur = score(x, p, &ev, err)) < 0) rc = HS_ENOMEM;
    for (long it = 0; !rc && !stop_now(x, it, limit); it++) {
        double v;
        hs__hg2_place_copy(&t, p);
        mutate(x, &t, colocated, 0);
        x->st.steps++;
        if ((v = score(x, &t, &ev, err)) < 0) rc = HS_ENOMEM;
        else if (v > cur * (1 + 1e-9)) {
            cur = v;
            hs__hg2_place_copy(p, &t);
            assert(search_sane(p, colocated));
        }
    }
    hs_hg2_eval_free(&ev);
    hs_hg2_place_free(&t);
    return rc;
}

static int ga_search(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, hs_err *err)
{
    int P = x->o.pop, n = p->n_gpus, rc = 0;
    long gens = x->o.max_iters ? x->o.max_iters : 60;
    hs_hg2_place *pop = calloc((size_t)P * 2, sizeof *pop);
    double *fit = calloc((size_t)P * 2, sizeof *fit);
    int *order = malloc((size_t)P * 2 * sizeof *order);
    hs_hg2_eval ev = {0};
    assert(P >= 1 && 2 * P <= 1024); /* the survivors' swap buffers below (pop <= 512) */
    if (!pop || !fit || !order) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < 2 * P; i++)
        if (hs__hg2_place_alloc(&pop[i], n)) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
    for (int i = 0; i < P && !rc; i++) {
        hs__hg2_place_copy(&pop[i], p);
        for (int k = 0; k < (i ? 1 + i % 5 : 0); k++) mutate(x, &pop[i], colocated, 1);
        if ((fit[i] = score(x, &pop[i], &ev, err)) < 0) rc = HS_ENOMEM;
    }
    for (long gen = 0; !rc && !stop_now(x, gen, gens); gen++) {
        x->st.steps++;
        for (int c = P; c < 2 * P && !rc; c++) {
            int pa = rndn(x, P), pb = rndn(x, P), q;
            /* tournament of 2 for each parent */
            q = rndn(x, P); if (fit[q] > fit[pa]) pa = q;
            q = rndn(x, P); if (fit[q] > fit[pb]) pb = q;
            hs__hg2_place_copy(&pop[c], &pop[pa]);
            if (rnd(x) & 1) {
                /* group-preserving crossover: one of b's groups, whole */
                int gb = pop[pb].group[rndn(x, n)], e = empty_slot(&pop[c]);
                if (gb >= 0 && e >= 0) {
                    pop[c].role[e] = pop[pb].role[gb];
                    for (int i = 0; i < n; i++)
                        if (pop[pb].group[i] == gb) pop[c].group[i] = e;
                }
            }
            for (int k = 0, nm = 1 + rndn(x, 2); k < nm; k++) mutate(x, &pop[c], colocated, 1);
            assert(search_sane(&pop[c], colocated));
            if ((fit[c] = score(x, &pop[c], &ev, err)) < 0) rc = HS_ENOMEM;
        }
        /* survivors: the best P of parents and children (stable by index) */
        for (int i = 0; i < 2 * P; i++) order[i] = i;
        for (int i = 1; i < 2 * P; i++) {
            int v = order[i], j = i;
            while (j > 0 && fit[order[j - 1]] < fit[v]) { order[j] = order[j - 1]; j--; }
            order[j] = v;
        }
        {
            hs_hg2_place tmp[1024];
            double tf[1024];
            int m = 2 * P < 1024 ? 2 * P : 1024;
            for (int i = 0; i < m; i++) { tmp[i] = pop[order[i]]; tf[i] = fit[order[i]]; }
            for (int i = 0; i < m; i++) { pop[i] = tmp[i]; fit[i] = tf[i]; }
        }
    }
    if (!rc) hs__hg2_place_copy(p, &pop[0]);
out:
    if (pop)
        for (int i = 0; i < 2 * P; i++) hs_hg2_place_free(&pop[i]);
    free(pop);
    free(fit);
    free(order);
    hs_hg2_eval_free(&ev);
    return rc;
}

int hs_hg2_search(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, hs_err *err)
{
    int rc;
    x->t0 = hs__hg2_now_s();
    memset(&x->st, 0, sizeof x->st);
    if ((rc = initial(x, p, colocated, 0, err))) return rc;
    switch (x->o.search) {
    case HS_HG2_GUIDED: {
        /* Local search from one partition stops at the first local optimum,
         * and single-GPU moves cannot regroup replicas wholesale, so the
         * guided search restarts from partitions with a few K around the
         * memory estimate (K/2, K-1, K, K+1, 2K) and keeps the best. */
        int K0 = k_from_memory(x), ks[5], nk = 0;
        double bestv = -1;
        hs_hg2_place q = {0};
        hs_hg2_eval ev = {0};
        int cand[5] = {K0, K0 - 1, K0 + 1, K0 / 2, 2 * K0};
        for (int i = 0; i < 5; i++) {
            int k = cand[i], dup = 0;
            if (!colocated && k < 2) k = 2;
            if (k < 1) k = 1;
            if (k > x->c->n_gpus) k = x->c->n_gpus;
            for (int j = 0; j < nk; j++) dup |= ks[j] == k;
            if (!dup) ks[nk++] = k;
        }
        hs_hg2_place_free(p);
        for (int i = 0; i < nk && !rc; i++) {
            double v;
            if ((rc = initial(x, &q, colocated, ks[i], err))) break;
            if ((rc = guided(x, &q, colocated, err))) break;
            if ((v = score(x, &q, &ev, err)) < 0) rc = HS_ENOMEM;
            else if (v > bestv * (1 + 1e-9)) {
                bestv = v;
                hs_hg2_place_free(p);
                *p = q;
                memset(&q, 0, sizeof q);
            }
            hs_hg2_place_free(&q);
        }
        hs_hg2_place_free(&q); /* a restart that failed part-way left it allocated */
        hs_hg2_eval_free(&ev);
        break;
    }
    case HS_HG2_RANDOM: rc = random_search(x, p, colocated, err); break;
    case HS_HG2_GA: rc = ga_search(x, p, colocated, err); break;
    default: {
        hs_hg2_eval ev = {0};
        if (score(x, p, &ev, err) < 0) rc = HS_ENOMEM;
        hs_hg2_eval_free(&ev);
    }
    }
    x->st.seconds = elapsed(x);
    if (x->trace) fflush(x->trace);
    if (rc) hs_hg2_place_free(p);
    else assert(search_sane(p, colocated)); /* HG2-1 */
    return rc;
}

