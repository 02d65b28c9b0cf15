/* bnb.c - branch-and-bound over monotone control variables; see bnb.h.
 *
 * Algorithm 1 of ExeGPT in d dimensions:
 *   - blocks live in a max-heap keyed by their top corner's throughput (the
 *     block's upper bound), ties broken by creation order so the search is
 *     deterministic;
 *   - a popped block whose bound no longer beats the incumbent is dropped
 *     there (lazy form of line 18's "remove from Q");
 *   - split dimension (lines 7-10): the paper compares the top-left and
 *     bottom-right corners of a 2-D block, i.e. the corners that raise one
 *     variable only, and splits the OTHER variable when one of them is the
 *     better feasible point (top-left better -> vertical split, which halves
 *     x1 and keeps x2's full range).  In d dimensions we evaluate every
 *     "raise only dimension k" corner e_k and split the dimension whose e_k
 *     ranks worst (infeasible, or least throughput), so that the search
 *     localises the latency frontier along the variable that breaks the
 *     bound first; when no e_k is feasible we split the longest side, as the
 *     paper does;
 *   - children are bisected at the midpoint; each child's top and bottom
 *     corners are evaluated (lines 12-13) and the child is dropped, resolved
 *     or queued as described in bnb.h.
 * Invariant: every queued block has at least two points, an ok bottom
 * corner within lat_bound + eps_l, an infeasible top corner, and a bound
 * above the incumbent (minus eps_t) when it was queued. */
#include "plan/bnb.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- memo: open addressing over points ---------------------------------- */

typedef struct memo_slot {
    int used;
    int x[HS_BNB_MAX_DIM];
    hs_bnb_val v;
} memo_slot;

typedef struct memo {
    memo_slot *s;
    size_t cap, n;           /* cap is a power of two */
    int dim;
} memo;

static uint64_t point_hash(const int *x, int dim)
{
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < dim; k++) {
        h ^= (uint64_t)(uint32_t)x[k];
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h;
}

static memo_slot *memo_find(memo *m, const int *x)
{
    size_t i = (size_t)point_hash(x, m->dim) & (m->cap - 1);
    for (;;) {
        memo_slot *s = &m->s[i];
        if (!s->used || !memcmp(s->x, x, sizeof(int) * (size_t)m->dim)) return s;
        i = (i + 1) & (m->cap - 1);
    }
}

static int memo_grow(memo *m)
{
    memo old = *m;
    m->cap = old.cap ? old.cap * 2 : 256;
    m->n = 0;
    m->s = calloc(m->cap, sizeof *m->s);
    if (!m->s) {
        *m = old;
        return HS_ENOMEM;
    }
    for (size_t i = 0; i < old.cap; i++)
        if (old.s[i].used) {
            *memo_find(m, old.s[i].x) = old.s[i];
            m->n++;
        }
    free(old.s);
    return 0;
}

/* ---- search state ---------------------------------------------------------- */

typedef struct block {
    int lo[HS_BNB_MAX_DIM], hi[HS_BNB_MAX_DIM];
    double bound;            /* thr of the top corner */
    int64_t seq;
} block;

typedef struct search {
    int dim;
    hs_bnb_fn fn;
    void *ctx;
    const hs_bnb_opts *o;
    hs_bnb_result *res;
    hs_err *err;
    memo memo;
    block *heap;
    size_t nheap, capheap;
    int64_t seq;
} search;

int hs_bnb_better(const hs_bnb_val *a, const int *xa, const hs_bnb_val *b,
                  const int *xb, int dim)
{
    if (a->thr != b->thr) return a->thr > b->thr;
    if (a->lat != b->lat) return a->lat < b->lat;
    for (int k = 0; k < dim; k++)
        if (xa[k] != xb[k]) return xa[k] < xb[k];
    return 0;
}

static int feasible(const search *s, const hs_bnb_val *v)
{
    return v->ok && v->lat <= s->o->lat_bound;
}

/* Evaluates x (memoised) and offers it to the incumbent. */
static int eval(search *s, const int *x, hs_bnb_val *out)
{
    memo_slot *slot;
    int rc;
    s->res->lookups++;
    if (s->memo.n * 2 >= s->memo.cap && (rc = memo_grow(&s->memo)))
        return hs_errf(s->err, rc, "branch and bound: out of memory (memo of %zu points)", s->memo.n);
    slot = memo_find(&s->memo, x);
    if (slot->used) {
        *out = slot->v;
        return 0;
    }
    memset(out, 0, sizeof *out);
    if ((rc = s->fn(s->ctx, x, out, s->err))) return rc;
    if (isnan(out->lat) || isnan(out->thr))
        return hs_errf(s->err, HS_ESTATE, "branch and bound: perf() returned NaN");
    slot->used = 1;
    memcpy(slot->x, x, sizeof(int) * (size_t)s->dim);
    slot->v = *out;
    s->memo.n++;
    s->res->evals++;
    if (feasible(s, out) &&
        (!s->res->found || hs_bnb_better(out, x, &s->res->val, s->res->x, s->dim))) {
        s->res->found = 1;
        s->res->val = *out;
        memcpy(s->res->x, x, sizeof(int) * (size_t)s->dim);
    }
    return 0;
}

/* 1 when a block whose top corner has throughput `bound` cannot beat the
 * incumbent by more than the tolerance. */
static int beaten(const search *s, double bound)
{
    return s->res->found && bound + s->o->eps_t <= s->res->val.thr;
}

static int heap_less(const block *a, const block *b)
{
    if (a->bound != b->bound) return a->bound < b->bound;
    return a->seq > b->seq; /* earlier blocks first among equals */
}

static int heap_push(search *s, const block *b)
{
    size_t i;
    if (s->nheap == s->capheap) {
        size_t cap = s->capheap ? s->capheap * 2 : 64;
        block *nb = realloc(s->heap, cap * sizeof *nb);
        if (!nb) return hs_errf(s->err, HS_ENOMEM, "branch and bound: out of memory (queue)");
        s->heap = nb;
        s->capheap = cap;
    }
    i = s->nheap++;
    s->heap[i] = *b;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&s->heap[p], &s->heap[i])) break;
        block t = s->heap[p];
        s->heap[p] = s->heap[i];
        s->heap[i] = t;
        i = p;
    }
    return 0;
}

static block heap_pop(search *s)
{
    block top = s->heap[0];
    size_t i = 0;
    s->heap[0] = s->heap[--s->nheap];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->nheap && heap_less(&s->heap[m], &s->heap[l])) m = l;
        if (r < s->nheap && heap_less(&s->heap[m], &s->heap[r])) m = r;
        if (m == i) break;
        block t = s->heap[m];
        s->heap[m] = s->heap[i];
        s->heap[i] = t;
        i = m;
    }
    return top;
}

/* Evaluates a new block's corners and queues it unless it is resolved or
 * pruned (Algorithm 1 lines 11-18). */
static int offer(search *s, block *b)
{
    hs_bnb_val top, bot;
    int rc;
    if ((rc = eval(s, b->hi, &top)) || (rc = eval(s, b->lo, &bot))) return rc;
    if (!bot.ok || bot.lat > s->o->lat_bound + s->o->eps_l) return 0; /* nothing fits */
    if (feasible(s, &top)) return 0;      /* its best point is the incumbent candidate */
    if (!memcmp(b->lo, b->hi, sizeof(int) * (size_t)s->dim)) return 0;
    if (beaten(s, top.thr)) return 0;
    b->bound = top.thr;
    b->seq = s->seq++;
    return heap_push(s, b);
}

/* Chooses the dimension to bisect (see the file comment). */
static int split_dim(search *s, const block *b, int *dim_out)
{
    int worst = -1, longest = -1, any_ok = 0;
    hs_bnb_val wv = {0, 0, 0};
    for (int k = 0; k < s->dim; k++) {
        if (b->lo[k] == b->hi[k]) continue;
        if (longest < 0 || b->hi[k] - b->lo[k] > b->hi[longest] - b->lo[longest]) longest = k;
    }
    *dim_out = longest;
    if (s->o->split == HS_BNB_SPLIT_LONGEST) return 0;
    for (int k = 0; k < s->dim; k++) {
        int x[HS_BNB_MAX_DIM], rc;
        hs_bnb_val v;
        if (b->lo[k] == b->hi[k]) continue;
        memcpy(x, b->lo, sizeof x);
        x[k] = b->hi[k];
        if ((rc = eval(s, x, &v))) return rc;
        if (feasible(s, &v)) any_ok = 1;
        /* Rank: infeasible below feasible; among feasible, lower throughput
         * (then higher latency) is worse; the first such dimension wins. */
        if (worst < 0 ||
            (feasible(s, &wv) && !feasible(s, &v)) ||
            (feasible(s, &wv) == feasible(s, &v) && feasible(s, &v) &&
             (v.thr < wv.thr || (v.thr == wv.thr && v.lat > wv.lat)))) {
            worst = k;
            wv = v;
        }
    }
    if (any_ok) *dim_out = worst;
    return 0;
}

static int run_bnb(search *s, const int *lo, const int *hi)
{
    block b0;
    int rc;
    memcpy(b0.lo, lo, sizeof(int) * (size_t)s->dim);
    memcpy(b0.hi, hi, sizeof(int) * (size_t)s->dim);
    if ((rc = offer(s, &b0))) return rc;
    while (s->nheap) {
        block b = heap_pop(s), c1, c2;
        int k, mid;
        s->res->blocks++;
        if (beaten(s, b.bound)) continue;
        if ((rc = split_dim(s, &b, &k))) return rc;
        mid = b.lo[k] + (b.hi[k] - b.lo[k]) / 2;
        c1 = b;
        c2 = b;
        c1.hi[k] = mid;
        c2.lo[k] = mid + 1;
        /* The upper half first: it holds the better points when it fits. */
        if ((rc = offer(s, &c2)) || (rc = offer(s, &c1))) return rc;
    }
    return 0;
}

static int run_exhaustive(search *s, const int *lo, const int *hi)
{
    int x[HS_BNB_MAX_DIM];
    memcpy(x, lo, sizeof(int) * (size_t)s->dim);
    for (;;) {
        hs_bnb_val v;
        int rc = eval(s, x, &v), k;
        if (rc) return rc;
        for (k = s->dim - 1; k >= 0; k--) {
            if (x[k] < hi[k]) {
                x[k]++;
                break;
            }
            x[k] = lo[k];
        }
        if (k < 0) return 0;
    }
}

void hs_bnb_opts_defaults(hs_bnb_opts *o)
{
    memset(o, 0, sizeof *o);
    o->lat_bound = INFINITY;
    o->split = HS_BNB_SPLIT_PAPER;
}

int hs_bnb_solve(int dim, const int *lo, const int *hi, hs_bnb_fn fn, void *ctx,
                 const hs_bnb_opts *o, hs_bnb_result *res, hs_err *err)
{
    search s;
    double points = 1;
    int rc;
    memset(res, 0, sizeof *res);
    if (dim < 1 || dim > HS_BNB_MAX_DIM || !fn || !o)
        return hs_errf(err, HS_EINVAL, "branch and bound: %d dimensions (1..%d)", dim, HS_BNB_MAX_DIM);
    if (!(o->eps_t >= 0) || !(o->eps_l >= 0) || isnan(o->lat_bound))
        return hs_errf(err, HS_EINVAL, "branch and bound: tolerances must be >= 0 and the bound a number");
    for (int k = 0; k < dim; k++) {
        if (lo[k] > hi[k])
            return hs_errf(err, HS_EINVAL, "branch and bound: dimension %d: lo %d > hi %d", k, lo[k], hi[k]);
        points *= (double)hi[k] - lo[k] + 1;
    }
    res->points = points < 9e18 ? (int64_t)points : INT64_MAX;
    if (o->exhaustive && points > 1e8)
        return hs_errf(err, HS_ERANGE, "branch and bound: exhaustive search of %.3g points refused", points);
    memset(&s, 0, sizeof s);
    s.dim = dim;
    s.fn = fn;
    s.ctx = ctx;
    s.o = o;
    s.res = res;
    s.err = err;
    s.memo.dim = dim;
    if (memo_grow(&s.memo)) return hs_errf(err, HS_ENOMEM, "branch and bound: out of memory");
    rc = o->exhaustive ? run_exhaustive(&s, lo, hi) : run_bnb(&s, lo, hi);
    free(s.memo.s);
    free(s.heap);
    return rc;
}
