/* hexgen2_search.c - the HexGen-2 placement search (hexgen2.h, "Search"):
 * the initial placement (K from memory, spectral partition + Kernighan-Lin,
 * coarsening, max-cut into prefill and decode sides), the paper's guided
 * loop (rounds of max-flow-guided swaps, then the two-phase algorithm re-run
 * on the swapped partition: Section 3.4), the earlier hill-climb (hill:
 * max-flow-driven moves restarted from a few K), and the random and genetic
 * searches, each keeping the best placement by estimated output tokens/s
 * (hs_hg2_evaluate, hexgen2_place.c).
 *
 * Invariants (asserted where a placement is kept and on return):
 *   - a search placement puts every GPU in exactly one group (HG2-1):
 *     group[i] in [0, K) with K = n_gpus slots, the unused ones free for
 *     splits; colocated searches give every used group the colocated role,
 *     disaggregated ones prefill or decode (a flip is role ^ 1);
 *   - the guided and hill searches' buffers are sized by K = n_gpus;
 *   - the guided search never returns a placement worse than its start:
 *     a round keeps its best prefix of swaps, a re-partition is kept only
 *     when it gains, and the loop returns the best placement it evaluated;
 *   - the GA's survivors fit the 1024-entry swap buffers (pop <= 512);
 *   - determinism (HG2-5): one xorshift64* stream per context, fixed scan
 *     orders, stable insertion sorts; wall time only stops the searches
 *     when a time= limit is set. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "plan/hexgen2_int.h"

double hs__hg2_cpu_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)) return 0;
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
#include "plan/partition.h"
#include "core/time.h"

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
    return hs_wall_s() - x->t0;
}

static void note_best(hs_hg2_ctx *x, double tput)
{
    /* the first evaluation always opens the trace (a best of 0 included);
     * later lines only rise */
    if (tput > x->st.best_tput * (1 + 1e-12) || x->st.evals == 1) {
        x->st.best_tput = tput;
        /* iteration and evaluation counts let the bench plot convergence
         * against work as well as wall time */
        if (x->trace) fprintf(x->trace, "%.6f %.6f %ld %ld\n", elapsed(x), tput, x->st.steps, x->st.evals);
    }
}

/* A search past a few seconds says where it is, every 2 s, on a terminal
 * (one line rewritten) or with verbose=1; scripts reading stderr see
 * nothing new otherwise.  "<name> search:" keeps it apart from the
 * summary line that starts "<name>:". */
static void progress(hs_hg2_ctx *x)
{
    double t;
    if (x->prog_tty < 0) x->prog_tty = isatty(2) || !x->o.quiet;
    if (!x->prog_tty || (x->st.evals & 63)) return;
    t = elapsed(x);
    if (t < 2 || t < x->prog_next) return;
    x->prog_next = t + 2;
    fprintf(stderr, "%s%s search: %.0f s, %ld evaluations, %ld iterations, best %.0f tokens/s estimated%s",
            isatty(2) ? "\r\033[K" : "", x->name[0] ? x->name : "planner", t, x->st.evals, x->st.steps,
            x->st.best_tput, isatty(2) ? "" : "\n");
    fflush(stderr);
    x->prog_shown = 1;
}

/* Scores a placement (output tokens/s); -1 on error. */
static double score(hs_hg2_ctx *x, const hs_hg2_place *p, hs_hg2_eval *ev, hs_err *err)
{
    if (hs_hg2_evaluate(x, p, ev, err)) return -1;
    note_best(x, ev->tput);
    progress(x);
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

/* The hill-climb (search=hill): best improving max-flow-guided move until
 * none gains, see hexgen2.h.  p becomes the local optimum; 0 or HS_ENOMEM. */
static int hill(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, hs_err *err)
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

/* ---------------------------------------------------------------- guided */

/* The paper's loop (search=guided, hexgen2.h "Search"; Section 3.4 of
 * papers/hexgen2.txt): rounds of max-flow-guided swaps, each followed by the
 * two-phase algorithm re-run on the swapped partition. */

/* Relative slack under which a flow counts as filling its edge. */
#define GL_SAT 1e-9

typedef struct gl_state {
    hs_hg2_place best;          /* the best placement evaluated so far: returned */
    double bestv;
    hs_hg2_place cand, pbest;   /* a step's best candidate; the round's best prefix */
    hs_hg2_place orig;          /* the placement at the start of a swap step */
    hs_hg2_eval ev, tv, cv;     /* the current placement's evaluation; scratch; cand's */
    hs_part_graph *g;           /* GPU graph (bandwidth, memory) for the re-partition */
    unsigned char *glock;       /* [n] GPUs moved in this round */
    unsigned char *klock;       /* [n] groups whose role flipped in this round */
    unsigned char *side;        /* [2n + 2] source side of the minimum cut */
    int *queue;                 /* [2n + 2] */
    int *size, *isd, *isr, *dl, *rl, *ra, *rb, *amem, *assign, *map, *inv, *cside, *brole; /* [n] each */
    double *nic, *target;       /* [2n]: NIC flow out of prefill / into decode; [n] */
    unsigned char *cutcap;      /* [n] the group's capacity edge is on the minimum cut */
    /* a swap step's memo of group capacities (gl_rm, gl_ad): GPU g's group
     * without g; group b with one GPU of class c added; valid while their
     * stamp is the step's */
    int *cls, ncls;             /* [n] (node, type) class of each GPU, numbered from 0 */
    int *mstart, *mlist;        /* [n + 1], [n] the GPUs of each group, by group */
    double *rm_val, *ad_val;    /* [n], [n * ncls] */
    long *rm_st, *ad_st, stamp;
    struct gl_move *mv;         /* a swap step's candidates [n_mv], capacity cap_mv */
    long n_mv, cap_mv;
    int width;                  /* donors and receivers a swap step tries (width=, widened) */
    /* the values of the placements scored (gl_value): open addressing by
     * a 128-bit hash of groups and roles, vm_key[2 s], vm_key[2 s + 1]
     * (0: empty), at most half full; a search comes back to the same
     * placement often (a quarter of its scores on 128 GPUs) */
    uint64_t *vm_key;
    double *vm_val;
    long vm_n, vm_cap;
} gl_state;

static void gl_free(gl_state *L)
{
    free(L->vm_key);
    free(L->vm_val);
    hs_hg2_place_free(&L->best);
    hs_hg2_place_free(&L->cand);
    hs_hg2_place_free(&L->pbest);
    hs_hg2_place_free(&L->orig);
    hs_hg2_eval_free(&L->ev);
    hs_hg2_eval_free(&L->tv);
    hs_hg2_eval_free(&L->cv);
    hs_part_graph_destroy(L->g);
    free(L->glock);
    free(L->mv);
    free(L->cls);
    free(L->rm_val);
    free(L->rm_st);
    free(L->side);
    free(L->queue);
    free(L->size);
    free(L->nic);
}

static int gl_alloc(hs_hg2_ctx *x, gl_state *L, int n, hs_err *err)
{
    int rc;
    memset(L, 0, sizeof *L);
    L->bestv = -1;
    if ((rc = hs_part_graph_from_cluster(&L->g, x->c, err))) return rc;
    L->glock = calloc((size_t)n * 3, 1);
    L->side = calloc((size_t)n * 2 + 2, 1);
    L->queue = malloc(((size_t)n * 2 + 2) * sizeof *L->queue);
    L->size = malloc((size_t)n * 13 * sizeof *L->size);
    L->nic = malloc((size_t)n * 3 * sizeof *L->nic);
    if (!L->glock || !L->side || !L->queue || !L->size || !L->nic || hs__hg2_place_alloc(&L->best, n) ||
        hs__hg2_place_alloc(&L->cand, n) || hs__hg2_place_alloc(&L->pbest, n) ||
        hs__hg2_place_alloc(&L->orig, n)) {
        gl_free(L);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    L->klock = L->glock + n;
    L->cutcap = L->glock + 2 * n;
    /* classes of interchangeable GPUs (same node and type) */
    L->cls = malloc((size_t)n * 3 * sizeof *L->cls + sizeof *L->cls);
    if (!L->cls) {
        gl_free(L);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    L->mstart = L->cls + n;
    L->mlist = L->mstart + n + 1;
    for (int i = 0; i < n; i++) {
        int c = -1;
        for (int j = 0; j < i && c < 0; j++)
            if (same_class(x->c, i, j)) c = L->cls[j];
        L->cls[i] = c >= 0 ? c : L->ncls++;
    }
    L->rm_val = malloc((size_t)n * (1 + (size_t)L->ncls) * sizeof *L->rm_val);
    L->rm_st = calloc((size_t)n * (1 + (size_t)L->ncls), sizeof *L->rm_st);
    if (!L->rm_val || !L->rm_st) {
        gl_free(L);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    L->ad_val = L->rm_val + n;
    L->ad_st = L->rm_st + n;
    L->isd = L->size + n;
    L->isr = L->size + 2 * n;
    L->dl = L->size + 3 * n;
    L->rl = L->size + 4 * n;
    L->ra = L->size + 5 * n;
    L->rb = L->size + 6 * n;
    L->amem = L->size + 7 * n;
    L->assign = L->size + 8 * n;
    L->map = L->size + 9 * n;
    L->inv = L->size + 10 * n;
    L->cside = L->size + 11 * n;
    L->brole = L->size + 12 * n;
    L->target = L->nic + 2 * n;
    return 0;
}

/* Scores p into ev; a new best is copied into L->best, so the search can
 * return the best placement it ever evaluated (which is what the trace
 * reports).  -1 on error. */
static double gl_score(hs_hg2_ctx *x, gl_state *L, const hs_hg2_place *p, hs_hg2_eval *ev, hs_err *err)
{
    double v = score(x, p, ev, err);
    if (v >= 0 && v > L->bestv * (1 + 1e-12)) {
        L->bestv = v;
        hs__hg2_place_copy(&L->best, p);
    }
    return v;
}

/* Two independent 64-bit hashes of p's groups and their roles (both
 * never 0). */
static void place_hash(const hs_hg2_place *p, uint64_t *h1, uint64_t *h2)
{
    uint64_t a = UINT64_C(0x243f6a8885a308d3) ^ (uint64_t)p->K, b = UINT64_C(0x13198a2e03707344) + (uint64_t)p->n_gpus;
    for (int i = 0; i < p->n_gpus; i++) {
        int k = p->group[i];
        uint64_t v = (uint64_t)(k + 1) * 4 + (uint64_t)(k >= 0 ? p->role[k] : 3);
        a = (a ^ v) * UINT64_C(0x100000001b3);
        a ^= a >> 29;
        b = (b + v) * UINT64_C(0x9e3779b97f4a7c15);
        b ^= b >> 31;
    }
    a = (a ^ (a >> 33)) * UINT64_C(0xff51afd7ed558ccd);
    b = (b ^ (b >> 33)) * UINT64_C(0xc4ceb9fe1a85ec53);
    *h1 = (a ^ (a >> 33)) | 1;
    *h2 = (b ^ (b >> 33)) | 1;
}

/* gl_score when only the value is needed: a placement scored before is
 * not evaluated again (the value is a function of the placement alone).
 * *full = 1 when ev now holds p's evaluation, 0 when it was not touched.
 * A search placement (no fixed layouts) only; -1 on error. */
static double gl_value(hs_hg2_ctx *x, gl_state *L, const hs_hg2_place *p, hs_hg2_eval *ev, int *full,
                       hs_err *err)
{
    uint64_t h1, h2;
    long s;
    double v;
    assert(!p->t_only && !p->pp_only);
    place_hash(p, &h1, &h2);
    if (L->vm_cap)
        for (s = (long)(h1 & (uint64_t)(L->vm_cap - 1)); L->vm_key[2 * s]; s = (s + 1) & (L->vm_cap - 1))
            if (L->vm_key[2 * s] == h1 && L->vm_key[2 * s + 1] == h2) {
                *full = 0;
                return L->vm_val[s];
            }
    *full = 1;
    if ((v = gl_score(x, L, p, ev, err)) < 0) return v;
    if ((L->vm_n + 1) * 2 > L->vm_cap) {
        long nc = L->vm_cap ? 2 * L->vm_cap : 4096;
        uint64_t *nk = calloc((size_t)nc * 2, sizeof *nk);
        double *nv = malloc((size_t)nc * sizeof *nv);
        if (!nk || !nv) { /* no room: the search goes on evaluating */
            free(nk);
            free(nv);
            return v;
        }
        for (long o = 0; o < L->vm_cap; o++) {
            if (!L->vm_key[2 * o]) continue;
            for (s = (long)(L->vm_key[2 * o] & (uint64_t)(nc - 1)); nk[2 * s]; s = (s + 1) & (nc - 1))
                ;
            nk[2 * s] = L->vm_key[2 * o];
            nk[2 * s + 1] = L->vm_key[2 * o + 1];
            nv[s] = L->vm_val[o];
        }
        free(L->vm_key);
        free(L->vm_val);
        L->vm_key = nk;
        L->vm_val = nv;
        L->vm_cap = nc;
    }
    for (s = (long)(h1 & (uint64_t)(L->vm_cap - 1)); L->vm_key[2 * s]; s = (s + 1) & (L->vm_cap - 1))
        ;
    L->vm_key[2 * s] = h1;
    L->vm_key[2 * s + 1] = h2;
    L->vm_val[s] = v;
    L->vm_n++;
    return v;
}

static void swap_eval(hs_hg2_eval *a, hs_hg2_eval *b)
{
    hs_hg2_eval t = *a;
    *a = *b;
    *b = t;
}

/* The source side of the max-flow's minimum cut (side[v] = 1), rebuilt from
 * the evaluation's flows on the network of hexgen2_place.c (group k, its NIC
 * node K + k, source 2K, sink 2K + 1): breadth-first from the source over
 * arcs with residual capacity, forward where the flow is below capacity,
 * backward where it is positive.  The edges leaving that side are the
 * bottleneck the paper's swaps target: raising any of them is the only
 * way to raise the flow. */
static void min_cut(const hs_hg2_place *p, const hs_hg2_eval *ev, gl_state *L)
{
    int K = ev->K, s = 2 * K, t = 2 * K + 1, qh = 0, qt = 0;
    double *nout = L->nic, *nin = L->nic + K;
    unsigned char *side = L->side;
#define GL_VISIT(v)                                                                                \
    do {                                                                                           \
        if (!side[v]) {                                                                            \
            side[v] = 1;                                                                           \
            L->queue[qt++] = (v);                                                                  \
        }                                                                                          \
    } while (0)
    memset(side, 0, (size_t)2 * K + 2);
    for (int k = 0; k < K; k++) nout[k] = nin[k] = 0;
    for (int i = 0; i < K; i++)
        for (int j = 0; j < K; j++)
            if (ev->cross[(size_t)i * K + j]) {
                nout[i] += ev->pair[(size_t)i * K + j];
                nin[j] += ev->pair[(size_t)i * K + j];
            }
    GL_VISIT(s);
    while (qh < qt) {
        int u = L->queue[qh++];
        if (u == t) continue;
        if (u == s) {
            for (int k = 0; k < K; k++)
                if (ev->cap[k] > 0 && p->role[k] == HS_HG2_PREFILL && ev->gflow[k] < ev->cap[k] * (1 - GL_SAT))
                    GL_VISIT(k);
        } else if (u < K && p->role[u] == HS_HG2_PREFILL) {
            if (ev->gflow[u] > 0) GL_VISIT(s);
            if (nout[u] < ev->ncap[u] * (1 - GL_SAT)) GL_VISIT(K + u);
            for (int j = 0; j < K; j++) {
                size_t e = (size_t)u * K + j;
                if (ev->pcap[e] > 0 && !ev->cross[e] && ev->pair[e] < ev->pcap[e] * (1 - GL_SAT)) GL_VISIT(j);
            }
        } else if (u < K) { /* decode */
            if (ev->gflow[u] < ev->cap[u] * (1 - GL_SAT)) GL_VISIT(t);
            if (nin[u] > 0) GL_VISIT(K + u);
            for (int i = 0; i < K; i++) {
                size_t e = (size_t)i * K + u;
                if (ev->pcap[e] > 0 && !ev->cross[e] && ev->pair[e] > 0) GL_VISIT(i);
            }
        } else if (p->role[u - K] == HS_HG2_PREFILL) { /* NIC of prefill i */
            int i = u - K;
            if (nout[i] > 0) GL_VISIT(i);
            for (int j = 0; j < K; j++) {
                size_t e = (size_t)i * K + j;
                if (ev->pcap[e] > 0 && ev->cross[e] && ev->pair[e] < ev->pcap[e] * (1 - GL_SAT)) GL_VISIT(K + j);
            }
        } else { /* NIC of decode j */
            int j = u - K;
            if (nin[j] < ev->ncap[j] * (1 - GL_SAT)) GL_VISIT(j);
            for (int i = 0; i < K; i++) {
                size_t e = (size_t)i * K + j;
                if (ev->pcap[e] > 0 && ev->cross[e] && ev->pair[e] > 0) GL_VISIT(K + i);
            }
        }
    }
#undef GL_VISIT
}

/* Donors (isd) and receivers (isr) of a swap step.  Receivers: the groups
 * with an edge on the minimum cut (their capacity, their NIC, or a KV edge
 * they end), the W tightest by capacity; donors: the others (under-used:
 * their flow is below capacity or they do not fit), those that do not fit
 * first, then by slack, W of them; the W richest receivers give too
 * (regrouping inside the bottleneck side, e.g. pooling small GPUs into a
 * deeper pipeline, also feeds it).  A colocated placement, or one with no
 * flow, has no cut to read: every group is both, as in the hill-climb. */
static void classify(const hs_hg2_place *p, const hs_hg2_eval *ev, int colocated, gl_state *L)
{
    int K = p->K, n = p->n_gpus, nd = 0, nr = 0, W = L->width, any_d = 0, any_r = 0;
    int *recv = L->cside;
    for (int k = 0; k < K; k++) {
        L->size[k] = recv[k] = 0;
        L->cutcap[k] = 1; /* no cut to read: every capacity counts */
    }
    for (int i = 0; i < n; i++) L->size[p->group[i]]++;
    if (!colocated && ev->flow > 0) {
        const unsigned char *sd = L->side;
        min_cut(p, ev, L);
        for (int k = 0; k < K; k++) {
            L->cutcap[k] = p->role[k] == HS_HG2_PREFILL ? !sd[k] : sd[k];
            if (!L->size[k] || ev->cap[k] <= 0) continue;
            if (p->role[k] == HS_HG2_PREFILL) recv[k] |= !sd[k] || !sd[K + k];
            else recv[k] |= sd[k] || sd[K + k];
        }
        for (int i = 0; i < K; i++)
            for (int j = 0; j < K; j++) {
                size_t e = (size_t)i * K + j;
                int a = ev->cross[e] ? K + i : i, b = ev->cross[e] ? K + j : j;
                if (ev->pcap[e] > 0 && sd[a] && !sd[b]) recv[i] = recv[j] = 1;
            }
    }
    for (int k = 0; k < K; k++) {
        any_d |= L->size[k] && !recv[k];
        any_r |= L->size[k] && recv[k];
    }
    for (int k = 0; k < K; k++) {
        L->isd[k] = L->isr[k] = 0;
        if (!L->size[k]) continue;
        if (!recv[k] || !any_r) L->dl[nd++] = k;
        if (recv[k] || !any_r || !any_d) L->rl[nr++] = k;
        if (recv[k] && !any_d) L->dl[nd++] = k;
    }
    for (int i = 1; i < nd; i++) { /* insertion sort, stable: slack desc (no fit first) */
        int v = L->dl[i], j = i;
        double sv = ev->cap[v] > 0 ? ev->cap[v] - ev->gflow[v] : INFINITY;
        while (j > 0 && (ev->cap[L->dl[j - 1]] > 0 ? ev->cap[L->dl[j - 1]] - ev->gflow[L->dl[j - 1]] : INFINITY) < sv) {
            L->dl[j] = L->dl[j - 1];
            j--;
        }
        L->dl[j] = v;
    }
    for (int i = 1; i < nr; i++) { /* capacity asc */
        int v = L->rl[i], j = i;
        while (j > 0 && ev->cap[L->rl[j - 1]] > ev->cap[v]) {
            L->rl[j] = L->rl[j - 1];
            j--;
        }
        L->rl[j] = v;
    }
    for (int i = 0; i < nd && i < W; i++) L->isd[L->dl[i]] = 1;
    for (int i = 0; i < nr && i < W; i++) L->isr[L->rl[i]] = 1;
    for (int i = nr - 1; i >= 0 && i >= nr - W; i--) L->isd[L->rl[i]] = 1;
}

/* One representative (largest id) per class among the unlocked GPUs of
 * group k. */
static int free_reps(const hs_hg2_ctx *x, const hs_hg2_place *p, int k, const unsigned char *lock, int *reps)
{
    int nr = 0;
    for (int i = p->n_gpus - 1; i >= 0; i--) {
        int dup = 0;
        if (p->group[i] != k || lock[i]) continue;
        for (int r = 0; r < nr && !dup; r++) dup = same_class(x->c, reps[r], i);
        if (!dup) reps[nr++] = i;
    }
    return nr;
}

/* A candidate of a swap step. */
enum { GL_FLIP, GL_SPLIT, GL_MERGE, GL_MOVE, GL_SWAP };
typedef struct gl_move {
    double pred;                /* predicted flow change, requests per T */
    int kind, a, b, g, h, e, role;
} gl_move;

/* Capacity (requests per T) of gpus[0..m) as one group of the role; 0 when
 * it does not fit or is empty.  Cached by hs_hg2_eval_group. */
static double gl_gcap(hs_hg2_ctx *x, const int *gpus, int m, int role)
{
    const hs_hg2_group *g;
    if (m <= 0) return 0;
    g = hs_hg2_eval_group(x, gpus, m, role, 0, 0);
    return g->ok ? g->rate * x->o.period : 0;
}

/* The GPUs of group k with `out` removed and `in` added (-1: none) into
 * buf; returns their count. */
static int gl_members(const hs_hg2_place *p, int k, int out, int in, int *buf)
{
    int m = 0;
    for (int i = 0; i < p->n_gpus; i++)
        if ((p->group[i] == k && i != out) || i == in) buf[m++] = i;
    return m;
}

/* Capacity of GPU g's group without g (memo of the step). */
static double gl_rm(hs_hg2_ctx *x, gl_state *L, const hs_hg2_place *p, int g, int *buf)
{
    if (L->rm_st[g] != L->stamp) {
        int k = p->group[g], m = 0;
        for (int i = L->mstart[k]; i < L->mstart[k + 1]; i++)
            if (L->mlist[i] != g) buf[m++] = L->mlist[i];
        L->rm_val[g] = gl_gcap(x, buf, m, p->role[k]);
        L->rm_st[g] = L->stamp;
    }
    return L->rm_val[g];
}

/* Capacity of group b with GPU g (not in b) added; memo of the step by g's
 * class: GPUs of one node and type are interchangeable in a group. */
static double gl_ad(hs_hg2_ctx *x, gl_state *L, const hs_hg2_place *p, int b, int g, int *buf)
{
    size_t e = (size_t)b * L->ncls + L->cls[g];
    if (L->ad_st[e] != L->stamp) {
        int m = 0;
        for (int i = L->mstart[b]; i < L->mstart[b + 1]; i++) buf[m++] = L->mlist[i];
        buf[m++] = g;
        L->ad_val[e] = gl_gcap(x, buf, m, p->role[b]);
        L->ad_st[e] = L->stamp;
    }
    return L->ad_val[e];
}

/* First-order change of the max flow when group k's capacity becomes c
 * (Section 3.4's reading of the flow: a bottleneck group - its capacity
 * edge on the minimum cut - passes every gain and loss on to the flow; an
 * under-used one gains nothing and loses only what falls below the flow it
 * carries). */
static double gl_delta(const gl_state *L, const hs_hg2_eval *ev, int k, double c)
{
    if (L->cutcap[k]) return c - ev->cap[k];
    return fmin(0, c - ev->gflow[k]);
}

/* Records candidate mv with its prediction (the list grows); -1 when out
 * of memory. */
static int gl_offer(gl_state *L, const gl_move *mv)
{
    if (L->n_mv == L->cap_mv) {
        long c = L->cap_mv ? 2 * L->cap_mv : 256;
        gl_move *nm = realloc(L->mv, (size_t)c * sizeof *nm);
        if (!nm) return -1;
        L->mv = nm;
        L->cap_mv = c;
    }
    L->mv[L->n_mv++] = *mv;
    return 0;
}

/* Applies mv to p (which is L->orig). */
static void gl_apply(const hs_hg2_ctx *x, hs_hg2_place *p, const gl_move *mv, int colocated)
{
    int n = p->n_gpus;
    switch (mv->kind) {
    case GL_FLIP: p->role[mv->a] ^= 1; break;
    case GL_SPLIT: {
        int sz = 0, c = 0;
        for (int i = 0; i < n; i++) sz += p->group[i] == mv->a;
        for (int i = 0; i < n; i++)
            if (p->group[i] == mv->a && (mv->g >= 0 ? same_class(x->c, i, mv->g) : c++ >= sz / 2))
                p->group[i] = mv->e;
        p->role[mv->e] = colocated ? HS_HG2_COLOC : mv->role;
        break;
    }
    case GL_MERGE:
        for (int i = 0; i < n; i++)
            if (p->group[i] == mv->a) p->group[i] = mv->b;
        break;
    case GL_MOVE: p->group[mv->g] = mv->b; break;
    default:
        p->group[mv->g] = mv->b;
        p->group[mv->h] = mv->a;
    }
}

/* One swap step on p (whose evaluation is L->ev): the candidates among the
 * donors and receivers of classify() - flip or split a donor, merge it into
 * a receiver, move one GPU of each of its classes there or swap it with
 * one of the receiver's other classes - are ranked by the flow change the
 * minimum cut predicts from the groups' new capacities (gl_delta; a flip or
 * a new group of the other role adds its capacity when that side has a
 * bottleneck), and the cands= best (default: 512 / groups, at least 16:
 * a max-flow solve costs about groups^2, so a step's budget of solves
 * shrinks as the cluster grows) are solved by
 * max-flow; the best of those is applied, gaining or not (Kernighan-Lin:
 * the round keeps its best prefix; first=1 takes the first that gains).
 * GPUs it moves are locked for the round, a flipped group keeps its role.
 * *v: the current value in, the new one out; returns 1 when a move was
 * applied, 0 when no candidate exists, -1 on error. */
static int swap_step(hs_hg2_ctx *x, gl_state *L, hs_hg2_place *p, int colocated, double *v, hs_err *err)
{
    int n = p->n_gpus, K = p->K, side_cut[2] = {0, 0}, *buf = L->amem, M, bfull = 0;
    double bv = -1, cur = *v;
    int bi = -1;
    const hs_hg2_eval *ev = &L->ev;
    classify(p, ev, colocated, L);
    for (int k = 0; k < K; k++)
        if (L->size[k] && L->cutcap[k] && p->role[k] != HS_HG2_COLOC) side_cut[p->role[k]] = 1;
    hs__hg2_place_copy(&L->orig, p);
    L->n_mv = 0;
    L->stamp++;
    for (int k = 0; k <= K; k++) L->mstart[k] = 0;
    for (int i = 0; i < n; i++) L->mstart[p->group[i] + 1]++;
    for (int k = 0; k < K; k++) L->mstart[k + 1] += L->mstart[k];
    {
        int *fill = L->amem; /* scratch until the candidates use it */
        for (int k = 0; k < K; k++) fill[k] = L->mstart[k];
        for (int i = 0; i < n; i++) L->mlist[fill[p->group[i]]++] = i;
    }
    /* split any group (a bottleneck one too: two groups that fit may
     * serve more than one, e.g. two latency-optimal prefill replicas):
     * its second half in GPU order, or its largest (node, type) class,
     * forms a new group of either role; GPUs locked this round may go (a
     * split opens room single moves cannot), a group split or flipped this
     * round stays */
    for (int a = 0, e = empty_slot(p); a < K && e >= 0; a++) {
        int sz = L->size[a], ra_role = p->role[a], nr;
        if (sz < 2 || L->klock[a]) continue;
        nr = class_reps(x, p, a, L->ra);
        for (int var = 0; var < (nr > 1 ? 2 : 1); var++) {
            int m1 = 0, m2 = 0, c = 0, big = L->ra[0], nbig = 0;
            double c1, c2;
            gl_move mv;
            if (var) /* the class with the most GPUs (first rep on ties) */
                for (int r = 0; r < nr; r++) {
                    int cnt = 0;
                    for (int i = 0; i < n; i++) cnt += p->group[i] == a && same_class(x->c, i, L->ra[r]);
                    if (cnt > nbig) {
                        nbig = cnt;
                        big = L->ra[r];
                    }
                }
            for (int i = 0; i < n; i++) {
                int second;
                if (p->group[i] != a) continue;
                second = var ? same_class(x->c, i, big) : c++ >= sz / 2;
                if (second) L->rb[m2++] = i;
                else buf[m1++] = i;
            }
            c1 = gl_gcap(x, buf, m1, ra_role);
            memset(&mv, 0, sizeof mv);
            mv.kind = GL_SPLIT;
            mv.a = a;
            mv.e = e;
            mv.g = var ? big : -1;
            for (int half = 0; half < (colocated ? 1 : 2); half++) {
                int role = colocated ? HS_HG2_COLOC : half;
                c2 = gl_gcap(x, L->rb, m2, role);
                mv.role = role;
                mv.pred = role == ra_role ? gl_delta(L, ev, a, c1 + c2)
                                          : gl_delta(L, ev, a, c1) + (side_cut[role] ? c2 : 0);
                if (gl_offer(L, &mv)) return -1;
            }
        }
    }
    for (int a = 0; a < K; a++) {
        int na, sz = L->size[a], all_free = 1, ra_role = p->role[a];
        gl_move mv;
        if (!L->isd[a]) continue;
        na = free_reps(x, p, a, L->glock, L->ra);
        for (int i = 0; i < n; i++) all_free &= p->group[i] != a || !L->glock[i];
        memset(&mv, 0, sizeof mv);
        mv.a = a;
        /* flip the donor's role (a swap across the secondary partition) */
        if (!colocated && !L->klock[a]) {
            int m = gl_members(p, a, -1, -1, buf);
            mv.kind = GL_FLIP;
            mv.pred = gl_delta(L, ev, a, 0) + (side_cut[ra_role ^ 1] ? gl_gcap(x, buf, m, ra_role ^ 1) : 0);
            if (gl_offer(L, &mv)) return -1;
        }
        for (int b = 0; b < K; b++) {
            int nb;
            if (b == a || !L->isr[b]) continue;
            nb = free_reps(x, p, b, L->glock, L->rb);
            mv.b = b;
            /* merge the donor into b */
            if (all_free) {
                int m = 0;
                for (int i = 0; i < n; i++)
                    if (p->group[i] == a || p->group[i] == b) buf[m++] = i;
                mv.kind = GL_MERGE;
                mv.pred = gl_delta(L, ev, a, 0) + gl_delta(L, ev, b, gl_gcap(x, buf, m, p->role[b]));
                if (gl_offer(L, &mv)) return -1;
            }
            for (int i = 0; i < na; i++) {
                int g = L->ra[i];
                double ca = gl_rm(x, L, p, g, buf), ea = L->ev.cap[a], eb = L->ev.cap[b];
                /* move g: a -> b (not the donor's last GPU: that is the merge) */
                if (sz > 1) {
                    mv.kind = GL_MOVE;
                    mv.g = g;
                    mv.pred = gl_delta(L, ev, a, ca) + gl_delta(L, ev, b, gl_ad(x, L, p, b, g, buf));
                    if (gl_offer(L, &mv)) return -1;
                }
                /* swap g with one of b's other classes; predicted from the
                 * one-GPU changes (each group's removal and addition
                 * added up): the ranking only picks what max-flow solves */
                for (int j = 0; j < nb; j++) {
                    int h = L->rb[j];
                    double na2, nb2;
                    if (same_class(x->c, g, h)) continue;
                    na2 = fmax(0, ca + gl_ad(x, L, p, a, h, buf) - ea);
                    nb2 = fmax(0, gl_rm(x, L, p, h, buf) + gl_ad(x, L, p, b, g, buf) - eb);
                    mv.pred = gl_delta(L, ev, a, na2) + gl_delta(L, ev, b, nb2);
                    mv.kind = GL_SWAP;
                    mv.g = g;
                    mv.h = h;
                    if (gl_offer(L, &mv)) return -1;
                }
            }
        }
    }
    if (!L->n_mv) return 0;
    /* the cands= best predictions, stable (ties in the scan order above) */
    {
        int groups = 0;
        for (int k = 0; k < K; k++) groups += L->size[k] > 0;
        M = x->o.cands > 0 ? x->o.cands : 512 / groups > 16 ? 512 / groups : 16;
        if (M > L->n_mv) M = (int)L->n_mv;
    }
    for (int i = 0; i < M; i++) {
        int top = i;
        for (int j = i + 1; j < L->n_mv; j++)
            if (L->mv[j].pred > L->mv[top].pred) top = j;
        if (top != i) {
            gl_move t = L->mv[top];
            memmove(&L->mv[i + 1], &L->mv[i], (size_t)(top - i) * sizeof t);
            L->mv[i] = t;
        }
    }
    for (int i = 0; i < M; i++) {
        double cv;
        int full;
        gl_apply(x, p, &L->mv[i], colocated);
        if ((cv = gl_value(x, L, p, &L->tv, &full, err)) < 0) return -1;
        if (cv > bv) {
            bv = cv;
            bi = i;
            hs__hg2_place_copy(&L->cand, p);
            if (full) swap_eval(&L->tv, &L->cv);
            bfull = full;
        }
        hs__hg2_place_copy(p, &L->orig);
        if (x->o.first && cv > cur * (1 + 1e-9)) break;
    }
    /* the step's placement came from the memo: its flows are needed */
    if (!bfull && hs_hg2_evaluate(x, &L->cand, &L->cv, err)) return -1;
    assert(L->cv.tput == bv);
    for (int i = 0; i < n; i++) L->glock[i] |= L->orig.group[i] != L->cand.group[i];
    for (int k = 0; k < K; k++) L->klock[k] |= L->orig.role[k] != L->cand.role[k];
    if (L->mv[bi].kind == GL_SPLIT) L->klock[L->mv[bi].a] = L->klock[L->mv[bi].e] = 1;
    hs__hg2_place_copy(p, &L->cand);
    swap_eval(&L->ev, &L->cv);
    assert(search_sane(p, colocated));
    x->st.swaps++;
    *v = bv;
    return 1;
}

/* Phase 3's swaps, one round: swap steps until depth= steps have passed
 * without a new best; p returns to the best prefix (never below its start).
 * L->ev is p's evaluation before and after; *cur its value.  0 or error. */
static int swap_round(hs_hg2_ctx *x, gl_state *L, hs_hg2_place *p, int colocated, double *cur, hs_err *err)
{
    double pv = *cur, v = *cur;
    int nonimp = 0, at_best = 1;
    memset(L->glock, 0, (size_t)p->n_gpus * 2);
    hs__hg2_place_copy(&L->pbest, p);
    for (;;) {
        int r;
        if (x->o.time_limit > 0 && elapsed(x) > x->o.time_limit) break;
        if ((r = swap_step(x, L, p, colocated, &v, err)) < 0) return HS_ENOMEM;
        if (!r) break;
        if (v > pv * (1 + 1e-9)) {
            pv = v;
            hs__hg2_place_copy(&L->pbest, p);
            nonimp = 0;
            at_best = 1;
        } else {
            at_best = 0;
            if (++nonimp > x->o.depth) break;
        }
    }
    if (!at_best) {
        hs__hg2_place_copy(p, &L->pbest);
        if (gl_score(x, L, p, &L->ev, err) < 0) return HS_ENOMEM;
    }
    *cur = pv;
    return 0;
}

/* Largest number of groups whose roles the secondary partition's
 * refinement enumerates (2^8 max-flow solves); above, single flips. */
#define GL_ROLES_EXACT 8

/* The secondary partition's refinement on L->cand (groups fixed, roles
 * from the best of the max-cut orientations and the current roles; *v its
 * value): the max-cut of Section 3.2 sees only bandwidth, so the roles are
 * then chosen by the max-flow itself - every assignment of the Kc groups
 * (inv[0..Kc)) when Kc <= GL_ROLES_EXACT, else single flips, the best
 * first, while one gains.  L->cand ends with the best roles and *v their
 * value.  0 or HS_ENOMEM. */
static int roles_refine(hs_hg2_ctx *x, gl_state *L, int Kc, double *v, hs_err *err)
{
    hs_hg2_place *c = &L->cand;
    int *brole = L->brole, full;
    for (int k = 0; k < Kc; k++) brole[k] = c->role[L->inv[k]];
    if (Kc <= GL_ROLES_EXACT) {
        for (unsigned m = 1; m + 1 < (1u << Kc); m++) {
            double w;
            for (int k = 0; k < Kc; k++) c->role[L->inv[k]] = (m >> k) & 1 ? HS_HG2_DECODE : HS_HG2_PREFILL;
            if ((w = gl_value(x, L, c, &L->tv, &full, err)) < 0) return HS_ENOMEM;
            if (w > *v * (1 + 1e-9)) {
                *v = w;
                for (int k = 0; k < Kc; k++) brole[k] = c->role[L->inv[k]];
            }
        }
    } else {
        for (int it = 0; it < Kc; it++) {
            int bk = -1;
            double bw = *v * (1 + 1e-9);
            for (int k = 0; k < Kc; k++) c->role[L->inv[k]] = brole[k];
            for (int k = 0; k < Kc; k++) {
                double w;
                c->role[L->inv[k]] ^= 1;
                if ((w = gl_value(x, L, c, &L->tv, &full, err)) < 0) return HS_ENOMEM;
                c->role[L->inv[k]] ^= 1;
                if (w > bw) {
                    bw = w;
                    bk = k;
                }
            }
            if (bk < 0) break;
            brole[bk] ^= 1;
            *v = bw;
        }
    }
    for (int k = 0; k < Kc; k++) c->role[L->inv[k]] = brole[k];
    return 0;
}

/* Phases 1-2 re-run on the swapped partition (Section 3.4: "after the
 * swaps, we rerun the two-phase algorithm"): Kernighan-Lin re-partition
 * of the groups (the cut lowered while each group's memory stays within
 * tol= of what the swaps gave it: balancing to the mean would undo them),
 * coarsening into super nodes, the max-cut secondary partition into
 * prefill and decode (both orientations, or the current roles when better)
 * refined by the max-flow (roles_refine), and projection back onto the
 * GPUs; done for the re-partitioned groups and for the swapped ones, each
 * solved by max-flow; the best replaces p when it gains.  0 or error. */
static int repartition(hs_hg2_ctx *x, gl_state *L, hs_hg2_place *p, int colocated, double *cur, hs_err *err)
{
    int n = p->n_gpus, K = p->K, Kc = 0, rc = 0, gained = 0, full;
    double bv = *cur;
    hs_part_graph *cg = NULL;
    for (int k = 0; k < K; k++) L->map[k] = -1;
    for (int i = 0; i < n; i++) {
        int k = p->group[i];
        if (L->map[k] < 0) {
            L->inv[Kc] = k;
            L->map[k] = Kc++;
        }
        L->assign[i] = L->map[k];
    }
    if (Kc < 2) return 0;
    hs_part_mems(L->g, Kc, L->assign, L->target);
    {
        hs_err e2 = {0};
        /* an unreachable balance cannot happen (the start meets its own
         * targets); any other failure is out of memory */
        rc = hs_part_kl_refine_to(L->g, Kc, L->assign, L->target, x->o.mem_tol, &e2);
        if (rc && rc != HS_ENOFIT) {
            *err = e2;
            return rc;
        }
        rc = 0;
    }
    for (int pass = 0; pass < 2 && !rc; pass++) {
        /* pass 0: the re-partitioned groups; pass 1: the swapped groups
         * (the secondary partition alone) */
        int changed = 0;
        double v;
        hs__hg2_place_copy(&L->cand, p);
        if (pass == 0)
            for (int i = 0; i < n; i++) {
                L->cand.group[i] = L->inv[L->assign[i]];
                changed |= L->cand.group[i] != p->group[i];
            }
        else
            for (int i = 0; i < n; i++) L->assign[i] = L->map[p->group[i]];
        if (pass == 0 && !changed) continue;
        /* the current roles first (pass 1: the value we hold) */
        if (pass == 1) v = *cur;
        else if ((v = gl_value(x, L, &L->cand, &L->tv, &full, err)) < 0) return HS_ENOMEM;
        if (!colocated) {
            int *keep = L->cside + Kc; /* roles of the best start so far (cside has n) */
            if ((rc = hs_part_coarsen(L->g, L->assign, Kc, &cg, err))) break;
            if ((rc = hs_part_bipartition_max_cut(cg, L->cside, err))) break;
            hs_part_graph_destroy(cg);
            cg = NULL;
            for (int k = 0; k < Kc; k++) keep[k] = L->cand.role[L->inv[k]];
            for (int o = 0; o < 2; o++) {
                double w;
                for (int k = 0; k < Kc; k++)
                    L->cand.role[L->inv[k]] = (L->cside[k] ^ o) ? HS_HG2_DECODE : HS_HG2_PREFILL;
                if ((w = gl_value(x, L, &L->cand, &L->tv, &full, err)) < 0) return HS_ENOMEM;
                if (w > v * (1 + 1e-9)) {
                    v = w;
                    for (int k = 0; k < Kc; k++) keep[k] = L->cand.role[L->inv[k]];
                }
            }
            for (int k = 0; k < Kc; k++) L->cand.role[L->inv[k]] = keep[k];
            if ((rc = roles_refine(x, L, Kc, &v, err))) break;
        }
        if (v > bv * (1 + 1e-9)) {
            bv = v;
            gained = 1;
            hs__hg2_place_copy(&L->pbest, &L->cand);
        }
    }
    hs_part_graph_destroy(cg);
    if (rc) return rc;
    if (gained) {
        hs__hg2_place_copy(p, &L->pbest);
        if (gl_score(x, L, p, &L->ev, err) < 0) return HS_ENOMEM;
        assert(search_sane(p, colocated));
        x->st.repart_gains++;
        *cur = bv;
    }
    return 0;
}

/* Phase-1 re-runs at other group counts in a row that may fail to beat
 * the best before the guided search ends. */
#define GL_KTRIES 4

/* Stops the guided search: iters= rounds or time= seconds spent. */
static int gl_budget_out(const hs_hg2_ctx *x)
{
    if (x->o.max_iters > 0 && x->st.steps >= x->o.max_iters) return 1;
    return x->o.time_limit > 0 && elapsed(x) > x->o.time_limit;
}

/* Iterative refinement of p (Section 3.4): rounds of swaps, each followed
 * by the re-partition, until a round gains nothing or the budget is out.
 * A round that gains nothing with width= donors and receivers is tried
 * again with twice as many, up to every group (on a large cluster the
 * bottleneck's few tightest groups are a small part of it), and the
 * width returns to width= after a gain.  L->ev is p's evaluation on entry
 * and exit, *cur its value.  0 or error. */
static int refine(hs_hg2_ctx *x, gl_state *L, hs_hg2_place *p, int colocated, double *cur, hs_err *err)
{
    int rc = 0, groups = 0;
    for (int k = 0; k < p->K; k++) groups += group_size(p, k) > 0;
    L->width = x->o.width;
    while (!gl_budget_out(x)) {
        double v0 = *cur;
        x->st.steps++;
        if ((rc = swap_round(x, L, p, colocated, cur, err))) break;
        if ((rc = repartition(x, L, p, colocated, cur, err))) break;
        if (*cur > v0 * (1 + 1e-9)) {
            L->width = x->o.width;
            continue;
        }
        if (L->width >= groups) break;
        L->width = L->width > groups / 2 ? groups : 2 * L->width;
    }
    return rc;
}

/* The guided search from the initial placement p (K from memory): refine
 * it; then re-run phase 1 from scratch (spectral + KL, coarsening, max-cut)
 * at other group counts, nearest to the number of replicas the refinement
 * arrived at first (Kc + 1, Kc - 1, Kc + 2, ..., then Kc): the swaps'
 * merges and splits tell how far the memory estimate of K was off, and
 * single-GPU swaps cannot regroup a whole cluster; each is refined, the
 * first that beats the best becomes it and the count is read again; ends
 * after GL_KTRIES counts in a row gain nothing (or on budget).  p becomes
 * the best placement evaluated; 0 or error. */
static int guided_loop(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, hs_err *err)
{
    gl_state L;
    hs_hg2_place q = {0};
    double cur, start;
    int rc, n = p->n_gpus, K0 = 0;
    unsigned char *tried = calloc((size_t)n + 1, 1);
    int *order = malloc(((size_t)n + 1) * sizeof *order);
    assert(p->K == p->n_gpus && search_sane(p, colocated)); /* buffers are sized by K = n */
    if (!tried || !order) {
        free(tried);
        free(order);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    if ((rc = gl_alloc(x, &L, n, err))) {
        free(tried);
        free(order);
        return rc;
    }
    if ((cur = gl_score(x, &L, p, &L.ev, err)) < 0) {
        rc = HS_ENOMEM;
        goto out;
    }
    start = cur;
    (void)start; /* read only by the assert below (NDEBUG builds drop it) */
    for (int k = 0; k < n; k++) K0 += group_size(p, k) > 0;
    tried[K0] = 1;
    if ((rc = refine(x, &L, p, colocated, &cur, err))) goto out;
    for (;;) {
        int Kc = 0, gained = 0, misses = 0, nk = 0, lo = colocated ? 1 : 2;
        for (int k = 0; k < n; k++) Kc += L.ev.cap[k] > 0;
        /* counts by distance from Kc, above first: Kc+1, Kc-1, Kc+2, ...,
         * then Kc itself (a fresh start when the best came from another
         * count); GL_KTRIES fresh partitions without a gain end it */
        for (int d = 1; d <= n; d++) {
            if (Kc + d <= n) order[nk++] = Kc + d;
            if (Kc - d >= lo) order[nk++] = Kc - d;
        }
        if (Kc >= lo && Kc <= n) order[nk++] = Kc;
        for (int i = 0; i < nk && !gained && misses < GL_KTRIES && !gl_budget_out(x); i++) {
            int k = order[i];
            double v;
            if (tried[k]) continue;
            tried[k] = 1;
            if ((rc = initial(x, &q, colocated, k, err))) break;
            if ((v = gl_score(x, &L, &q, &L.ev, err)) < 0) {
                rc = HS_ENOMEM;
                break;
            }
            if ((rc = refine(x, &L, &q, colocated, &v, err))) break;
            if (v > cur * (1 + 1e-9)) {
                cur = v;
                hs__hg2_place_copy(p, &q);
                gained = 1;
                x->st.k_changes++;
            } else {
                misses++;
            }
            hs_hg2_place_free(&q);
        }
        if (rc || !gained) break;
        /* L.ev must describe p for the next count */
        if (gl_score(x, &L, p, &L.ev, err) < 0) {
            rc = HS_ENOMEM;
            break;
        }
    }
out:
    hs_hg2_place_free(&q);
    if (!rc) {
        /* the best evaluated is at least the loop's placement, which is at
         * least its start: never worse than the initial placement */
        assert(L.bestv >= cur * (1 - 1e-12) && cur >= start * (1 - 1e-12));
        hs__hg2_place_copy(p, &L.best);
        assert(search_sane(p, colocated));
    }
    gl_free(&L);
    free(tried);
    free(order);
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
    x->t0 = hs_wall_s();
    x->cpu0 = hs__hg2_cpu_s();
    memset(&x->st, 0, sizeof x->st);
    if ((rc = initial(x, p, colocated, 0, err))) return rc;
    switch (x->o.search) {
    case HS_HG2_GUIDED: rc = guided_loop(x, p, colocated, err); break;
    case HS_HG2_HILL: {
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
            if ((rc = hill(x, &q, colocated, err))) break;
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
    x->st.cpu_seconds = hs__hg2_cpu_s() - x->cpu0;
    if (x->trace) fflush(x->trace);
    if (rc) hs_hg2_place_free(p);
    else assert(search_sane(p, colocated)); /* HG2-1 */
    return rc;
}

