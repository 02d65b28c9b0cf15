/* llmpq_heur.c - the bitwidth-transfer heuristic (the paper's Algorithm 2)
 * and PipeEdge's heterogeneous partition.
 *
 * Heuristic, our reading of Algorithm 2: start from adabits (a split in
 * proportion to device memory, every unit at the highest precision, then
 * the unit whose next lower bit-width loses the least quality per byte
 * saved is lowered until each device fits; latency ignored).  Then, while
 * the objective improves, apply the best of: (a) a single unit's bit
 * change, (b) moving a boundary unit to the neighbouring stage at any
 * bit-width, (c) the paper's exchange rule: lower a unit of the slowest
 * stage (the straggler) and raise a unit of another stage (a pioneer),
 * e.g. one 8-bit layer for two 4-bit ones, which frees the straggler's
 * memory for a faster layout.  Every candidate is checked by hs_pq_eval,
 * so the result is always feasible. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/llmpq.h"

static int adabits(const hs_pq_inst *in, int *dev, int *bi)
{
    double total = 0, mem[HS_MAX_PP] = {0};
    int layers = 0, done = 0;
    for (int j = 0; j < in->N; j++) total += fmax(in->cap[j], 0);
    for (int u = 0; u < in->U; u++) layers += in->usize[u];
    /* unit u goes to the device whose share of the memory covers its
     * middle, kept contiguous and leaving every device non-empty */
    for (int u = 0; u < in->U; u++) {
        double mid = (done + in->usize[u] / 2.0) / layers, cum = 0;
        int t = in->N - 1, lo, hi;
        for (int j = 0; j < in->N; j++) {
            cum += fmax(in->cap[j], 0) / total;
            if (mid <= cum) {
                t = j;
                break;
            }
        }
        lo = in->N - (in->U - u);
        hi = u ? dev[u - 1] + 1 : 0;
        if (u && lo < dev[u - 1]) lo = dev[u - 1];
        if (lo < 0) lo = 0;
        if (hi > in->N - 1) hi = in->N - 1;
        dev[u] = t < lo ? lo : t > hi ? hi : t;
        done += in->usize[u];
    }
    for (int u = 0; u < in->U; u++) {
        bi[u] = 0;
        mem[dev[u]] += in->usize[u] * in->mlay[0];
    }
    for (int j = 0; j < in->N; j++)
        while (mem[j] > in->cap[j]) {
            int best = -1;
            double br = INFINITY;
            for (int u = 0; u < in->U; u++) {
                int k = bi[u];
                double dm, dq;
                if (dev[u] != j || k + 1 >= in->nb) continue;
                dm = in->usize[u] * (in->mlay[k] - in->mlay[k + 1]);
                dq = in->omega[u * in->nb + k + 1] - in->omega[u * in->nb + k];
                if (dm > 0 && dq / dm < br) br = dq / dm, best = u;
            }
            if (best < 0) return HS_ENOFIT;
            mem[j] -= in->usize[best] * (in->mlay[bi[best]] - in->mlay[bi[best] + 1]);
            bi[best]++;
        }
    return 0;
}

/* Slowest stage by its busy time over the workload. */
static int straggler(const hs_pq_inst *in, const int *dev, const int *bi)
{
    double t[HS_MAX_PP] = {0}, best = -1;
    int s = 0;
    for (int u = 0; u < in->U; u++)
        t[dev[u]] += in->usize[u] * (in->w_pre * in->lpre[dev[u]][bi[u]] +
                                     in->w_dec * in->ldec[dev[u]][bi[u]]);
    for (int j = 0; j < in->N; j++)
        if (t[j] > best) best = t[j], s = j;
    return s;
}

/* Per-stage aggregates of an assignment, so that a move of one or two
 * units is evaluated in O(N) instead of O(U). */
typedef struct agg {
    double tp[HS_MAX_PP], td[HS_MAX_PP], mem[HS_MAX_PP], q;
    int cnt[HS_MAX_PP];
} agg;

typedef struct chg {
    int u, dev, bi;
} chg;

static void agg_build(const hs_pq_inst *in, const int *dev, const int *bi, agg *a)
{
    memset(a, 0, sizeof *a);
    for (int u = 0; u < in->U; u++) {
        int j = dev[u], k = bi[u];
        a->tp[j] += in->usize[u] * in->lpre[j][k];
        a->td[j] += in->usize[u] * in->ldec[j][k];
        a->mem[j] += in->usize[u] * in->mlay[k];
        a->q += in->omega[u * in->nb + k];
        a->cnt[j]++;
    }
}

static void agg_apply(const hs_pq_inst *in, agg *a, int u, int j, int k, double sign)
{
    a->tp[j] += sign * in->usize[u] * in->lpre[j][k];
    a->td[j] += sign * in->usize[u] * in->ldec[j][k];
    a->mem[j] += sign * in->usize[u] * in->mlay[k];
    a->q += sign * in->omega[u * in->nb + k];
    a->cnt[j] += sign > 0 ? 1 : -1;
}

static double agg_obj(const hs_pq_inst *in, const agg *a)
{
    double sum = 0, tp = 0, td = 0;
    for (int j = 0; j < in->N; j++) {
        double p = a->tp[j] + in->cpre[j], d = a->td[j] + in->cdec[j];
        if (a->cnt[j] < 1 || a->mem[j] > in->cap[j] * (1 + 1e-9)) return INFINITY;
        sum += p + in->rounds * d;
        tp = fmax(tp, fmax(p, in->commpre[j]));
        td = fmax(td, fmax(d, in->commdec[j]));
    }
    return sum + in->a_pre * tp + in->a_dec * td + in->theta * a->q;
}

/* Objective after the changes (the units' current places in dev/bi). */
static double try_chg(const hs_pq_inst *in, const agg *a, const int *dev, const int *bi,
                      const chg *c, int n)
{
    agg t = *a;
    for (int i = 0; i < n; i++) {
        agg_apply(in, &t, c[i].u, dev[c[i].u], bi[c[i].u], -1);
        agg_apply(in, &t, c[i].u, c[i].dev, c[i].bi, +1);
    }
    return agg_obj(in, &t);
}

static int local_search(const hs_pq_inst *in, int *dev, int *bi, double *obj, hs_err *err)
{
    int U = in->U;
    agg a;
    double cur;
    (void)err;
    agg_build(in, dev, bi, &a);
    cur = agg_obj(in, &a);
    if (!isfinite(cur) || !isfinite(hs_pq_eval(in, dev, bi, NULL))) return HS_ENOFIT;
    for (int iter = 0; iter < 100000; iter++) {
        double best = cur, o;
        chg bc[2], c[2];
        int nbc = 0, st = straggler(in, dev, bi);
#define TRY(n_)                                              \
    do {                                                     \
        o = try_chg(in, &a, dev, bi, c, (n_));               \
        if (o < best - 1e-12) {                              \
            best = o;                                        \
            nbc = (n_);                                      \
            memcpy(bc, c, sizeof c[0] * (n_));               \
        }                                                    \
    } while (0)
        /* (a) one unit's bits */
        for (int u = 0; u < U; u++)
            for (int k = 0; k < in->nb; k++)
                if (k != bi[u]) {
                    c[0] = (chg){u, dev[u], k};
                    TRY(1);
                }
        /* (b) boundary moves: the unit keeps contiguity by construction */
        for (int u = 0; u + 1 < U; u++) {
            if (dev[u] == dev[u + 1]) continue;
            for (int k = 0; k < in->nb; k++) {
                c[0] = (chg){u, dev[u + 1], k};
                TRY(1);
                c[0] = (chg){u + 1, dev[u], k};
                TRY(1);
            }
        }
        /* (c) exchange: lower a straggler unit, raise a pioneer unit */
        for (int x = 0; x < U; x++) {
            if (dev[x] != st) continue;
            for (int kx = bi[x] + 1; kx < in->nb; kx++)
                for (int y = 0; y < U; y++) {
                    if (dev[y] == st) continue;
                    for (int ky = 0; ky < bi[y]; ky++) {
                        c[0] = (chg){x, dev[x], kx};
                        c[1] = (chg){y, dev[y], ky};
                        TRY(2);
                    }
                }
        }
#undef TRY
        if (!nbc) break;
        for (int i = 0; i < nbc; i++) {
            agg_apply(in, &a, bc[i].u, dev[bc[i].u], bi[bc[i].u], -1);
            agg_apply(in, &a, bc[i].u, bc[i].dev, bc[i].bi, +1);
            dev[bc[i].u] = bc[i].dev;
            bi[bc[i].u] = bc[i].bi;
        }
        cur = best;
    }
    /* the aggregates drift by rounding; report the exact objective */
    *obj = hs_pq_eval(in, dev, bi, NULL);
    return isfinite(*obj) ? 0 : HS_ENOFIT;
}

/* Local search from adabits and from PipeEdge's split at every uniform
 * bit-width (so the result is never worse than PipeEdge on the same
 * instance); the best end point wins. */
int hs_pq_heuristic(const hs_pq_inst *in, int *dev, int *bi, double *obj, hs_err *err)
{
    int U = in->U, rc = 0, found = 0;
    int *d = malloc(sizeof *d * U), *b = malloc(sizeof *b * U);
    double best = INFINITY;
    if (!d || !b) {
        free(d);
        free(b);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    for (int start = -1; start < in->nb && !rc; start++) {
        double o;
        int r = start < 0 ? adabits(in, d, b) : hs_pq_pipeedge_split(in, start, d, b, &o);
        if (r == HS_ENOFIT) continue;
        if (r) {
            rc = hs_errf(err, r, "out of memory");
            break;
        }
        r = local_search(in, d, b, &o, err);
        if (r == HS_ENOFIT) continue;
        if (r) {
            rc = r;
            break;
        }
        if (o < best) {
            best = o;
            found = 1;
            memcpy(dev, d, sizeof *d * U);
            memcpy(bi, b, sizeof *b * U);
        }
    }
    free(d);
    free(b);
    if (rc) return rc;
    *obj = best;
    return found ? 0 : HS_ENOFIT;
}

int hs_pq_pipeedge_split(const hs_pq_inst *in, int bi0, int *dev, int *bi, double *obj)
{
    int U = in->U, N = in->N;
    double *best = malloc(sizeof *best * (U + 1) * (N + 1));
    int *arg = malloc(sizeof *arg * (U + 1) * (N + 1));
    if (!best || !arg) {
        free(best);
        free(arg);
        return HS_ENOMEM;
    }
#define B(u, j) best[(u) * (N + 1) + (j)]
#define A(u, j) arg[(u) * (N + 1) + (j)]
    for (int u = 0; u <= U; u++)
        for (int j = 0; j <= N; j++) B(u, j) = INFINITY, A(u, j) = -1;
    B(0, 0) = 0;
    /* B(u, j): smallest bottleneck with units [0, u) on devices [0, j) */
    for (int j = 1; j <= N; j++)
        for (int u = j; u <= U; u++) {
            double w = 0, mem = 0, tp = in->cpre[j - 1], td = in->cdec[j - 1];
            for (int v = u - 1; v >= j - 1; v--) { /* units [v, u) on device j-1 */
                mem += in->usize[v] * in->mlay[bi0];
                if (mem > in->cap[j - 1]) break;
                tp += in->usize[v] * in->lpre[j - 1][bi0];
                td += in->usize[v] * in->ldec[j - 1][bi0];
                w = fmax(in->w_pre * fmax(tp, in->commpre[j - 1]) +
                             in->w_dec * fmax(td, in->commdec[j - 1]),
                         B(v, j - 1));
                if (w < B(u, j)) B(u, j) = w, A(u, j) = v;
            }
        }
    if (!isfinite(B(U, N))) {
        free(best);
        free(arg);
        return HS_ENOFIT;
    }
    for (int j = N, u = U; j > 0; j--) {
        int v = A(u, j);
        for (int x = v; x < u; x++) dev[x] = j - 1, bi[x] = bi0;
        u = v;
    }
#undef B
#undef A
    free(best);
    free(arg);
    *obj = hs_pq_eval(in, dev, bi, NULL);
    return 0;
}
