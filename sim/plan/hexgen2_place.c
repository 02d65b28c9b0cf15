/* hexgen2_place.c - placements of the HexGen-2 planner and their
 * evaluation: the flow network of Section 3.3 (hexgen2.h, "Flow network").
 *
 * A placement (hs_hg2_place) gives each GPU a group (-1: unused) and each
 * group a role; hs_hg2_evaluate estimates every group (hexgen2_est.c),
 * builds source -> prefill -> (NIC -> NIC ->) decode -> sink and solves it
 * by push-relabel (plan/maxflow.h), then lowers the KV capacity of loaded
 * cross-node pairs for transfer contention and solves again (contention,
 * at most four rounds).
 *
 * Invariants (asserted in hs_hg2_evaluate):
 *   - K <= n_gpus (role[] has n_gpus entries; scratch counts K groups);
 *     every group id is in [-1, K) and every non-empty group's role is
 *     prefill, decode or colocated; groups are disjoint by construction
 *     (one group per GPU), which hs_hg2_kv_time relies on;
 *   - the period T > 0; every capacity is finite and >= 0 (a group that
 *     does not fit has capacity 0 and no edge);
 *   - after the solve 0 <= flow <= capacity on every edge (maxflow.h), so a
 *     group's flow, a pair's flow and the flow through a NIC stay within
 *     their capacities (HG2-2), and the throughput is finite and >= 0. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/hexgen2_int.h"
#include "plan/maxflow.h"

/* ---------------------------------------------------------------- placement */

void hs_hg2_place_free(hs_hg2_place *p)
{
    free(p->group);
    free(p->role);
    free(p->t_only);
    free(p->pp_only);
    memset(p, 0, sizeof *p);
}

int hs__hg2_place_alloc(hs_hg2_place *p, int n)
{
    memset(p, 0, sizeof *p);
    p->n_gpus = n;
    p->K = n;
    p->group = malloc((size_t)n * sizeof *p->group);
    p->role = calloc((size_t)n, sizeof *p->role);
    if (!p->group || !p->role) {
        hs_hg2_place_free(p);
        return -1;
    }
    return 0;
}

int hs_hg2_place_alloc(hs_hg2_place *p, int n)
{
    int rc = hs__hg2_place_alloc(p, n);
    if (!rc)
        for (int i = 0; i < n; i++) p->group[i] = -1;
    return rc;
}

void hs__hg2_place_copy(hs_hg2_place *d, const hs_hg2_place *s)
{
    assert(d->n_gpus == s->n_gpus);
    memcpy(d->group, s->group, (size_t)s->n_gpus * sizeof *d->group);
    memcpy(d->role, s->role, (size_t)s->n_gpus * sizeof *d->role);
    d->K = s->K;
}

#ifndef NDEBUG
/* Sanity of a placement (for assert): K <= n_gpus, every GPU's group in
 * [-1, K), every non-empty group's role prefill, decode or colocated. */
static int place_sane(const hs_hg2_place *p)
{
    if (p->K < 0 || p->K > p->n_gpus) return 0;
    for (int i = 0; i < p->n_gpus; i++) {
        int k = p->group[i];
        if (k < -1 || k >= p->K) return 0;
        if (k >= 0 && p->role[k] != HS_HG2_PREFILL && p->role[k] != HS_HG2_DECODE && p->role[k] != HS_HG2_COLOC)
            return 0;
    }
    return 1;
}
#endif

/* ---------------------------------------------------------------- evaluation */

void hs_hg2_eval_free(hs_hg2_eval *ev)
{
    free(ev->cap);
    free(ev->used);
    memset(ev, 0, sizeof *ev);
}

/* 1 when every GPU of both groups sits in one node (no NIC in between). */
static int same_node(const hs_hg2_ctx *x, const hs_hg2_group *a, const hs_hg2_group *b)
{
    int n0 = x->c->gpu_node[a->gpus[0]], na = 0, nb = 0;
    for (int s = 0; s < a->pp; s++) na += a->tp[s];
    for (int s = 0; s < b->pp; s++) nb += b->tp[s];
    for (int i = 0; i < na; i++)
        if (x->c->gpu_node[a->gpus[i]] != n0) return 0;
    for (int i = 0; i < nb; i++)
        if (x->c->gpu_node[b->gpus[i]] != n0) return 0;
    return 1;
}

/* Most shared resources whose spread enters a pair's expected transfer
 * time (expected_max); a hand-over's flows touch at most both groups' GPUs,
 * and the shards that are spread (NICs loaded by bursty other pairs) are
 * far fewer in the paper's settings. */
#define HS__HG2_SHARDS 32

/* Builds source -> prefill -> (NIC -> NIC ->) decode -> sink from ev's
 * capacities (cap, ncap, pcap, cross) and solves it: ev->flow, gflow and
 * pair.  Returns 0 or an error. */
static int solve(const hs_hg2_place *p, hs_hg2_eval *ev, hs_err *err)
{
    int K = p->K, s = 2 * K, t = 2 * K + 1, e, rc, nu = ev->nused;
    const int *u = ev->used;
    hs_flow_graph *fg = NULL;
    /* nodes: group k, its NIC side K + k, source 2K, sink 2K + 1;
     * cross-node KV goes P_i -> nic(P_i) -> nic(D_j) -> D_j so the
     * flows of one group share its GPUs' NICs as in hw/net.h.  Empty
     * groups keep their (isolated) nodes: the solver's work limits count
     * nodes, and the same network gives the same flows.  Edges are added
     * in slot order; only the used groups have any. */
    if ((rc = hs_flow_create(&fg, 2 * K + 2, err))) return rc;
    memset(ev->gflow, 0, (size_t)K * sizeof *ev->gflow);
    for (int a = 0; a < nu; a++)
        for (int b = 0; b < nu; b++) ev->pair[(size_t)u[a] * K + u[b]] = 0;
    for (int a = 0; a < nu && !rc; a++) {
        int k = u[a];
        if (ev->cap[k] <= 0) continue;
        e = p->role[k] == HS_HG2_PREFILL ? hs_flow_add_edge(fg, k, K + k, ev->ncap[k], err)
                                         : hs_flow_add_edge(fg, K + k, k, ev->ncap[k], err);
        if (e >= 0) e = p->role[k] == HS_HG2_PREFILL ? hs_flow_add_edge(fg, s, k, ev->cap[k], err)
                                                     : hs_flow_add_edge(fg, k, t, ev->cap[k], err);
        if (e < 0) rc = e;
    }
    for (int a = 0; a < nu && !rc; a++)
        for (int b = 0; b < nu && !rc; b++) {
            int i = u[a], j = u[b];
            size_t ij = (size_t)i * K + j;
            if (ev->pcap[ij] <= 0) continue;
            e = ev->cross[ij] ? hs_flow_add_edge(fg, K + i, K + j, ev->pcap[ij], err)
                              : hs_flow_add_edge(fg, i, j, ev->pcap[ij], err);
            if (e < 0) rc = e;
        }
    if (!rc) rc = hs_flow_push_relabel(fg, s, t, &ev->flow, err);
    for (e = 0; !rc && e < hs_flow_edges(fg); e++) {
        int a = hs_flow_edge_from(fg, e), b = hs_flow_edge_to(fg, e);
        double f = hs_flow_edge_flow(fg, e);
        assert(f >= 0 && f <= hs_flow_edge_cap(fg, e)); /* HG2-2 (maxflow.h: exact) */
        if (a == s) ev->gflow[b] = f;
        else if (b == t) ev->gflow[a] = f;
        else if (a < K && b < K) ev->pair[(size_t)a * K + b] = f;
        else if (a >= K && b >= K) ev->pair[(size_t)(a - K) * K + (b - K)] = f;
    }
    hs_flow_destroy(fg);
    return rc;
}

/* Max-flow carries the whole flow with any split among routes that are
 * equally good for it, and the deployment's weights route the requests by
 * that split: HexGen-2's plan for OPT-30B on 4 x H100 (one decode group
 * binding) sent 79% of the requests to one of two identical prefill GPUs,
 * whose queue then set the run's rate at 0.64 of the estimate.  Here each
 * role's groups are held to the smallest share lambda of their capacity
 * that still passes the whole flow (bisection, 40 halvings), prefill first,
 * then decode with the prefill shares fixed. */
int hs__hg2_balance(const hs_hg2_place *p, hs_hg2_eval *ev, hs_err *err)
{
    static const int roles[] = {HS_HG2_PREFILL, HS_HG2_DECODE};
    int K = ev->K, rc = 0;
    double F = ev->flow, *orig, *share;
    if (!(F > 0)) return 0;
    orig = malloc((size_t)K * sizeof *orig);
    share = malloc((size_t)K * sizeof *share);
    if (!orig || !share) {
        free(orig);
        free(share);
        return hs_errf(err, HS_ENOMEM, "out of memory");
    }
    memcpy(orig, ev->cap, (size_t)K * sizeof *orig);
    memcpy(share, ev->cap, (size_t)K * sizeof *share);
    for (size_t r = 0; r < sizeof roles / sizeof roles[0] && !rc; r++) {
        double lo = 0, hi = 1;
        int any = 0;
        for (int k = 0; k < K; k++) any |= p->role[k] == roles[r] && orig[k] > 0;
        if (!any) continue;
        for (int it = 0; it <= 40 && !rc; it++) {
            /* the last pass re-solves at hi, the smallest share that passed */
            double lam = it < 40 ? (lo + hi) / 2 : hi;
            for (int k = 0; k < K; k++) ev->cap[k] = p->role[k] == roles[r] ? orig[k] * lam : share[k];
            if ((rc = solve(p, ev, err))) break;
            if (it < 40) {
                if (ev->flow >= F * (1 - 1e-9)) hi = lam;
                else lo = lam;
            }
        }
        /* this role's shares hold while the next role's are bisected */
        for (int k = 0; k < K; k++)
            if (p->role[k] == roles[r]) share[k] = orig[k] * hi;
    }
    memcpy(ev->cap, orig, (size_t)K * sizeof *orig);
    free(orig);
    free(share);
    ev->flow = F;
    return rc;
}

/* E[max(D, X_1 .. X_k)] for X_i = a_i + an exponential of mean b_i > 0
 * (independent), s. */
static double expected_max(double D, const double *a, const double *b, int k)
{
    enum { STEPS = 128 };
    double lo = D, h, sum = 0, bmax = 0, left[HS__HG2_SHARDS], step[HS__HG2_SHARDS];
    assert(k <= HS__HG2_SHARDS);
    for (int i = 0; i < k; i++) {
        if (a[i] > lo) lo = a[i];
        if (b[i] > bmax) bmax = b[i];
    }
    if (k == 0) return lo;
    /* below lo some term is certainly unfinished; above, integrate the
     * probability that one still is (Simpson) to where it is below e^-30,
     * each term's tail advanced by one factor a step */
    h = 30 * bmax / STEPS;
    for (int i = 0; i < k; i++) {
        left[i] = exp(-(lo - a[i]) / b[i]);
        step[i] = exp(-h / b[i]);
    }
    for (int s = 0; s <= STEPS; s++) {
        double done = 1;
        for (int i = 0; i < k; i++) {
            done *= 1 - left[i];
            left[i] *= step[i];
        }
        sum += (s == 0 || s == STEPS ? 1 : s % 2 ? 4 : 2) * (1 - done);
    }
    return lo + sum * h / 3;
}

/* Entries of the pair_res memo and most resources its pool holds. */
#define RM_SLOTS 8192
#define RM_POOL (1L << 20)

/* hs__hg2_pair_res memoised by the groups' ids (x->rm_*; results are the
 * same bits: they depend on the two groups alone).  cap >= 3 |a| |b|.
 * Returns the count, or -1 when out of memory. */
static int pair_res(hs_hg2_ctx *x, const hs_hg2_group *a, const hs_hg2_group *b, hs__hg2_res *out, int cap,
                    double *lat)
{
    uint64_t key = (((uint64_t)a->id << 32) | (uint64_t)b->id) + 1;
    size_t s = (size_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 40) & (RM_SLOTS - 1);
    hs__hg2_res *pool;
    int m;
    if (a->id < 0 || b->id < 0) {
        m = hs__hg2_pair_res(x, a, b, out, cap, lat);
        assert(m >= 0); /* cap = 3 |a| |b| at most */
        return m;
    }
    if (!x->rm_key) {
        x->rm_key = calloc(RM_SLOTS, sizeof *x->rm_key);
        x->rm_off = malloc(RM_SLOTS * sizeof *x->rm_off);
        x->rm_m = malloc(RM_SLOTS * sizeof *x->rm_m);
        x->rm_lat = malloc(RM_SLOTS * sizeof *x->rm_lat);
        x->rm_pool = malloc(RM_POOL * sizeof *pool);
        if (!x->rm_key || !x->rm_off || !x->rm_m || !x->rm_lat || !x->rm_pool) {
            free(x->rm_key);
            x->rm_key = NULL; /* the rest is freed with the context */
            return -1;
        }
        x->rm_cap = RM_POOL;
    }
    pool = x->rm_pool;
    if (x->rm_key[s] == key) {
        memcpy(out, pool + x->rm_off[s], (size_t)x->rm_m[s] * sizeof *out);
        *lat = x->rm_lat[s];
        return x->rm_m[s];
    }
    m = hs__hg2_pair_res(x, a, b, out, cap, lat);
    assert(m >= 0); /* cap = 3 |a| |b| at most */
    if (m > x->rm_cap) return m;
    if (x->rm_used + m > x->rm_cap) {
        memset(x->rm_key, 0, RM_SLOTS * sizeof *x->rm_key);
        x->rm_used = 0;
    }
    memcpy(pool + x->rm_used, out, (size_t)m * sizeof *out);
    x->rm_key[s] = key;
    x->rm_off[s] = x->rm_used;
    x->rm_m[s] = m;
    x->rm_lat[s] = *lat;
    x->rm_used += m;
    return m;
}

/* Transfer contention.  The engine moves one request of a pair at a time
 * per decode lane (serve/handover.c) and its flows share NICs max-min
 * fairly with other pairs' flows (hw/net.h); a request is in when its
 * slowest flow is.  Per request of pair p, each resource R it uses is busy
 * t_R alone; on a NIC that other pairs load to rho (their planned flows),
 * processor sharing stretches that to a mean of t_R / (1 - rho).  Others'
 * flows that their own pair bandwidth holds well below the NIC (a 1 Gb/s
 * path behind a 10 Gb/s NIC) are a steady background; those that can take
 * the whole NIC (load rho_b) make p's share come and go: a spread of
 * variance 2 rho_b t_R^2 / (1 - rho)^3 (M/M/1-PS, jobs as large as p's),
 * taken as a shifted exponential of that mean and variance.  The pair's
 * transfer time is the expected slowest of its resources plus the
 * latency, and its capacity T over that, at most the fluid pcap.  het4: the H100 -> A100 pair, planned at its full 22 req/s,
 * shares the lone pod-1 A100's NIC with two A100 prefill groups (30% of
 * it) and ran at 17.9 req/s; this gives 17.8.  The loaded cross-node
 * pairs it may bind get capacities from base (their fluid values); when
 * some pair's flow exceeds its capacity so computed they go to ev->pcap
 * (the others keep theirs) and it returns 1; 0 when none (ev unchanged),
 * < 0 on error. */
static int contention(hs_hg2_ctx *x, const hs_hg2_group *const *g, hs_hg2_eval *ev, const double *base,
                      hs_err *err)
{
    int K = ev->K, nu = ev->nused, np = 0, nres = 0, changed = 0, rc = 0, kmax = 0;
    const int *u = ev->used;
    double T = x->o.period, *rho = NULL, *rhob = NULL, *lat = NULL, *cv = NULL;
    double sa[HS__HG2_SHARDS], sb[HS__HG2_SHARDS];
    int *pi = NULL, *off = NULL;
    hs__hg2_res *res;
    size_t cap_res = 0;
    /* only the used groups have pairs; scanned in slot order */
    for (int a = 0; a < nu; a++)
        for (int b = 0; b < nu; b++) {
            size_t ij = (size_t)u[a] * K + u[b];
            np += ev->pair[ij] > 0 && ev->cross[ij];
        }
    if (!np) return 0;
    for (int a = 0; a < nu; a++) {
        int m = 0, k = u[a];
        for (int s = 0; g[k] && s < g[k]->pp; s++) m += g[k]->tp[s];
        if (m > kmax) kmax = m;
    }
    cap_res = (size_t)3 * kmax * kmax;
    if (x->cres_cap < cap_res * np) {
        /* the context keeps the largest buffer: it is reused by every
         * evaluation */
        void *nb = realloc(x->cres, cap_res * np * sizeof *res);
        if (!nb) return hs_errf(err, HS_ENOMEM, "out of memory");
        x->cres = nb;
        x->cres_cap = cap_res * np;
    }
    res = x->cres;
    pi = malloc((size_t)np * sizeof *pi);
    off = malloc(((size_t)np + 1) * sizeof *off);
    lat = malloc((size_t)np * sizeof *lat);
    cv = malloc((size_t)np * sizeof *cv);
    if (!pi || !off || !lat || !cv) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    /* every loaded cross-node pair's resources, one block per pair */
    np = 0;
    off[0] = 0;
    for (int a = 0; a < nu; a++)
        for (int b = 0; b < nu; b++) {
            int i = u[a], j = u[b], m;
            size_t ij = (size_t)i * K + j;
            if (!(ev->pair[ij] > 0 && ev->cross[ij])) continue;
            m = pair_res(x, g[i], g[j], res + off[np], (int)cap_res, &lat[np]);
            if (m < 0) {
                rc = hs_errf(err, HS_ENOMEM, "out of memory");
                goto out;
            }
            pi[np] = (int)ij;
            off[np + 1] = off[np] + m;
            np++;
        }
    nres = off[np];
    if (!x->crho) {
        /* a resource id is below 2n + n^2 (hexgen2_int.h, hs__hg2_res) */
        long nid = 2L * x->c->n_gpus + (long)x->c->n_gpus * x->c->n_gpus;
        if (!(x->crho = calloc((size_t)nid * 2, sizeof *x->crho))) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        x->crhob = x->crho + nid;
    }
    rho = x->crho;
    rhob = x->crhob;
    /* the load of each resource: sum over pairs of flow x busy time, in
     * pair order (the sums are the same bits whatever sizes the cluster) */
    for (int q = 0; q < np; q++)
        for (int r = off[q]; r < off[q + 1]; r++) {
            rho[res[r].id] += ev->pair[pi[q]] / T * res[r].t;
            rhob[res[r].id] += ev->pair[pi[q]] / T * res[r].tb;
        }
    for (int q = 0; q < np; q++) {
        size_t ij = (size_t)pi[q];
        double X = ev->pair[ij] / T, D = 0, tau, c;
        int k = 0;
        cv[q] = -1; /* not bound: keeps its capacity */
        for (int r = off[q]; r < off[q + 1]; r++) {
            double t = res[r].t, ro, rb;
            ro = rho[res[r].id] - X * t; /* the others' load */
            rb = rhob[res[r].id] - X * res[r].tb;
            if (ro > 0.999) ro = 0.999;
            if (rb <= 1e-12) {
                /* a steady background at most: deterministic */
                if (ro > 0) t /= 1 - ro;
                if (t > D) D = t;
                continue;
            }
            {
                double mean = t / (1 - ro), sd = t * sqrt(2 * rb / ((1 - ro) * (1 - ro) * (1 - ro)));
                if (sd > mean) sd = mean;
                if (k == HS__HG2_SHARDS) {
                    /* beyond the shards the expectation takes, the spread
                     * is left out: the deterministic bound holds them */
                    if (mean > D) D = mean;
                    continue;
                }
                sa[k] = mean - sd;
                sb[k++] = sd;
            }
        }
        {
            /* the exact expectation only for a pair it may bind: the mean of
             * the slowest is at most the largest shift plus every spread */
            double hi = D, spread = 0;
            for (int i = 0; i < k; i++) {
                if (sa[i] > hi) hi = sa[i];
                spread += sb[i];
            }
            if (ev->pair[ij] <= T / (lat[q] + hi + spread)) continue;
        }
        tau = lat[q] + expected_max(D, sa, sb, k);
        c = tau > 0 ? fmin(base[ij], T / tau) : base[ij];
        if (c < ev->pair[ij] * (1 - 1e-9)) changed = 1;
        cv[q] = c;
    }
    /* the new capacities only when some pair is over its own: otherwise
     * the network solved stays the one ev describes */
    for (int q = 0; changed && q < np; q++)
        if (cv[q] >= 0) ev->pcap[pi[q]] = cv[q];
out:
    /* the load arrays are zero between calls */
    for (int r = 0; rho && r < nres; r++) rho[res[r].id] = rhob[res[r].id] = 0;
    free(pi);
    free(off);
    free(lat);
    free(cv);
    return rc ? rc : changed;
}

/* The slot-pair memo's arrays for placements of K slots (x->sp_K);
 * -1 when out of memory (the evaluation then goes without). */
static int sp_ready(hs_hg2_ctx *x, int K)
{
    size_t kk = (size_t)K * K;
    if (x->sp_K == K) return 0;
    free(x->sp_key);
    free(x->sp_val);
    free(x->sp_cross);
    free(x->cbase);
    x->sp_K = 0;
    x->sp_key = calloc(2 * kk, sizeof *x->sp_key);
    x->sp_val = malloc(2 * kk * sizeof *x->sp_val);
    x->sp_cross = malloc(2 * kk);
    x->cbase = malloc(kk * sizeof *x->cbase);
    if (!x->sp_key || !x->sp_val || !x->sp_cross || !x->cbase) {
        free(x->sp_key);
        free(x->sp_val);
        free(x->sp_cross);
        free(x->cbase);
        x->sp_key = NULL;
        x->sp_val = x->cbase = NULL;
        x->sp_cross = NULL;
        return -1;
    }
    x->sp_K = K;
    return 0;
}

/* The group memo's arrays for placements of K slots (x->sg_K), empty;
 * -1 when out of memory (the evaluation then goes without). */
static int sg_ready(hs_hg2_ctx *x, int K)
{
    int n = x->c->n_gpus;
    if (x->sg_K == K) return 0;
    free(x->sg);
    free(x->sg_n);
    x->sg_K = 0;
    x->sg = calloc((size_t)K, sizeof *x->sg);
    x->sg_n = malloc(((size_t)2 * K + (size_t)K * n) * sizeof *x->sg_n);
    if (!x->sg || !x->sg_n) {
        free(x->sg);
        free(x->sg_n);
        x->sg = NULL;
        x->sg_n = NULL;
        return -1;
    }
    x->sg_role = x->sg_n + K;
    x->sg_mem = x->sg_n + 2 * K;
    x->sg_K = K;
    return 0;
}

int hs_hg2_evaluate(hs_hg2_ctx *x, const hs_hg2_place *p, hs_hg2_eval *ev, hs_err *err)
{
    int K = p->K, n = p->n_gpus, rc = 0, coloc = 1, nu = 0, smemo;
    int *mem = NULL, *start = NULL, *u;
    const hs_hg2_group **g = NULL;
    double T = x->o.period;
    assert(place_sane(p) && n == x->c->n_gpus);
    assert(isfinite(T) && T > 0);
    x->st.evals++;
    if (ev->K != K || !ev->cap) {
        hs_hg2_eval_free(ev);
        ev->cap = calloc((size_t)(3 * K + 3 * K * K), sizeof *ev->cap);
        ev->used = malloc((size_t)K * sizeof *ev->used);
        if (!ev->cap || !ev->used) {
            hs_hg2_eval_free(ev);
            return hs_errf(err, HS_ENOMEM, "out of memory");
        }
        ev->gflow = ev->cap + K;
        ev->ncap = ev->gflow + K;
        ev->pair = ev->ncap + K;
        ev->pcap = ev->pair + (size_t)K * K;
        ev->cross = ev->pcap + (size_t)K * K;
        ev->K = K;
    } else {
        /* only the last placement's used groups have nonzero entries: a
         * placement of K = n_gpus slots uses a few of them, and clearing
         * the whole K x K matrices cost more than the evaluation */
        memset(ev->cap, 0, (size_t)3 * K * sizeof *ev->cap);
        for (int a = 0; a < ev->nused; a++)
            for (int b = 0; b < ev->nused; b++) {
                size_t ij = (size_t)ev->used[a] * K + ev->used[b];
                ev->pair[ij] = ev->pcap[ij] = ev->cross[ij] = 0;
            }
    }
    ev->nused = 0;
    u = ev->used;
    mem = malloc((size_t)n * sizeof *mem);
    start = calloc((size_t)K + 1, sizeof *start);
    g = calloc((size_t)K, sizeof *g);
    if (!mem || !start || !g) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++)
        if (p->group[i] >= 0) start[p->group[i] + 1]++;
    for (int k = 0; k < K; k++) {
        if (start[k + 1]) u[nu++] = k;
        start[k + 1] += start[k];
    }
    ev->nused = nu;
    {
        int *fill = x->scratch;
        memcpy(fill, start, (size_t)K * sizeof *fill);
        for (int i = 0; i < n; i++)
            if (p->group[i] >= 0) mem[fill[p->group[i]]++] = i;
    }
    /* empty groups: no replica, capacity 0, no edge (g[k] stays NULL) */
    smemo = sg_ready(x, K) == 0;
    for (int a = 0; a < nu; a++) {
        int k = u[a], m = start[k + 1] - start[k], t = p->t_only ? p->t_only[k] : 0;
        int pq = p->pp_only ? p->pp_only[k] : 0, *sm = x->sg_mem + (size_t)k * n;
        /* the group cache answers the same (entries are never dropped),
         * but a slot that kept its GPUs and role needs no hashing */
        if (smemo && !t && !pq && x->sg[k] && x->sg_n[k] == m && x->sg_role[k] == p->role[k] &&
            !memcmp(sm, mem + start[k], (size_t)m * sizeof *sm)) {
            g[k] = x->sg[k];
        } else {
            g[k] = hs_hg2_eval_group(x, mem + start[k], m, p->role[k], t, pq);
            if (smemo) {
                x->sg[k] = !t && !pq && g[k]->id >= 0 ? g[k] : NULL;
                x->sg_n[k] = m;
                x->sg_role[k] = p->role[k];
                memcpy(sm, mem + start[k], (size_t)m * sizeof *sm);
            }
        }
        ev->cap[k] = g[k]->ok ? g[k]->rate * T : 0;
        assert(isfinite(ev->cap[k]) && ev->cap[k] >= 0);
        if (g[k]->ok && p->role[k] != HS_HG2_COLOC) {
            double tn = hs__hg2_nic_time(x, g[k], p->role[k] == HS_HG2_DECODE);
            ev->ncap[k] = tn > 0 ? T / tn : -1; /* unbounded: set below */
        }
        if (p->role[k] != HS_HG2_COLOC) coloc = 0;
    }
    if (coloc) {
        ev->flow = 0;
        for (int k = 0; k < K; k++) {
            ev->gflow[k] = ev->cap[k];
            ev->flow += ev->cap[k];
        }
    } else {
        /* "unbounded" edges get a finite cap that never binds: push-relabel's
         * zero tolerance scales with the largest capacity (maxflow.h) */
        double unbounded = 1, *base;
        int memo = sp_ready(x, K) == 0;
        for (int a = 0; a < nu; a++) unbounded += 2 * ev->cap[u[a]];
        for (int a = 0; a < nu; a++)
            if (ev->ncap[u[a]] < 0 || ev->ncap[u[a]] > unbounded) ev->ncap[u[a]] = unbounded;
        for (int a = 0; a < nu; a++) {
            int i = u[a];
            if (ev->cap[i] <= 0 || p->role[i] != HS_HG2_PREFILL) continue;
            for (int b = 0; b < nu; b++) {
                int j = u[b];
                size_t ij = (size_t)i * K + j;
                double tt;
                int cross;
                if (ev->cap[j] <= 0 || p->role[j] != HS_HG2_DECODE) continue;
                uint64_t key = (((uint64_t)g[i]->id << 32) | (uint64_t)g[j]->id) + 1;
                size_t w = 2 * ij; /* two ways: the current placement's pair and a candidate's */
                if (!memo || g[i]->id < 0 || g[j]->id < 0) {
                    tt = hs__hg2_pair_time(x, g[i], g[j]);
                    cross = !same_node(x, g[i], g[j]);
                } else if (x->sp_key[w] == key) {
                    tt = x->sp_val[w];
                    cross = x->sp_cross[w];
                } else if (x->sp_key[w + 1] == key) {
                    tt = x->sp_val[w + 1];
                    cross = x->sp_cross[w + 1];
                } else {
                    tt = hs__hg2_pair_time(x, g[i], g[j]);
                    cross = !same_node(x, g[i], g[j]);
                    /* the older way goes */
                    x->sp_key[w + 1] = x->sp_key[w];
                    x->sp_val[w + 1] = x->sp_val[w];
                    x->sp_cross[w + 1] = x->sp_cross[w];
                    x->sp_key[w] = key;
                    x->sp_val[w] = tt;
                    x->sp_cross[w] = (unsigned char)cross;
                }
                ev->pcap[ij] = tt > 0 ? fmin(T / tt, unbounded) : unbounded;
                ev->cross[ij] = cross;
            }
        }
        if ((rc = solve(p, ev, err))) goto out;
        /* contention lowers the capacities of loaded cross-node pairs from
         * their fluid values (base); the flows move, so redo it from base
         * on the new flows, a few rounds at most */
        if (!memo) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        base = x->cbase;
        for (int a = 0; a < nu; a++)
            for (int b = 0; b < nu; b++) {
                size_t ij = (size_t)u[a] * K + u[b];
                base[ij] = ev->pcap[ij];
            }
        /* the network solved is always the one whose capacities ev holds */
        for (int round = 0; round < 4; round++) {
            int c = contention(x, g, ev, base, err);
            if (c < 0) {
                rc = c;
                goto out;
            }
            if (!c) break;
            if ((rc = solve(p, ev, err))) goto out;
        }
    }
    ev->tput = ev->flow / T * x->o.s_out;
    assert(isfinite(ev->tput) && ev->tput >= 0);
out:
    free(mem);
    free(start);
    free(g);
    return rc;
}
