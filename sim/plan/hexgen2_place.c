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

static int cmp_res_id(const void *a, const void *b)
{
    long i = ((const hs__hg2_res *)a)->id, j = ((const hs__hg2_res *)b)->id;
    return (i > j) - (i < j);
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
    int K = p->K, s = 2 * K, t = 2 * K + 1, e, rc;
    hs_flow_graph *fg = NULL;
    /* nodes: group k, its NIC side K + k, source 2K, sink 2K + 1;
     * cross-node KV goes P_i -> nic(P_i) -> nic(D_j) -> D_j so the
     * flows of one group share its GPUs' NICs as in hw/net.h */
    if ((rc = hs_flow_create(&fg, 2 * K + 2, err))) return rc;
    memset(ev->gflow, 0, (size_t)K * sizeof *ev->gflow);
    memset(ev->pair, 0, (size_t)K * K * sizeof *ev->pair);
    for (int k = 0; k < K && !rc; k++) {
        if (ev->cap[k] <= 0) continue;
        e = p->role[k] == HS_HG2_PREFILL ? hs_flow_add_edge(fg, k, K + k, ev->ncap[k], err)
                                         : hs_flow_add_edge(fg, K + k, k, ev->ncap[k], err);
        if (e >= 0) e = p->role[k] == HS_HG2_PREFILL ? hs_flow_add_edge(fg, s, k, ev->cap[k], err)
                                                     : hs_flow_add_edge(fg, k, t, ev->cap[k], err);
        if (e < 0) rc = e;
    }
    for (int i = 0; i < K && !rc; i++)
        for (int j = 0; j < K && !rc; j++) {
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
 * it) and ran at 17.9 req/s; this gives 17.8.  The capacities go to
 * cap[] (loaded cross-node pairs from base, the others as in ev->pcap).
 * Returns 1 when some pair's flow exceeds its capacity so computed, 0 when
 * none, < 0 on error. */
static int contention(hs_hg2_ctx *x, const hs_hg2_place *p, const hs_hg2_group *const *g,
                      const hs_hg2_eval *ev, const double *base, double *cap, hs_err *err)
{
    int K = p->K, n = x->c->n_gpus, np = 0, nres = 0, changed = 0, rc = 0, kmax = 0;
    double T = x->o.period, *nic = NULL, *rho = NULL, *rhob = NULL, *lat = NULL, *sa = NULL, *sb = NULL;
    int *pi = NULL, *off = NULL;
    hs__hg2_res *res = NULL, *all = NULL;
    long *ids = NULL;
    size_t cap_res = 0;
    memcpy(cap, ev->pcap, (size_t)K * K * sizeof *cap);
    for (size_t ij = 0; ij < (size_t)K * K; ij++) np += ev->pair[ij] > 0 && ev->cross[ij];
    if (!np) return 0;
    for (int k = 0; k < K; k++) {
        int m = 0;
        for (int s = 0; g[k] && s < g[k]->pp; s++) m += g[k]->tp[s];
        if (m > kmax) kmax = m;
    }
    cap_res = (size_t)3 * kmax * kmax;
    nic = malloc((size_t)2 * n * sizeof *nic);
    pi = malloc((size_t)np * sizeof *pi);
    off = malloc(((size_t)np + 1) * sizeof *off);
    lat = malloc((size_t)np * sizeof *lat);
    res = malloc(cap_res * np * sizeof *res);
    if (!nic || !pi || !off || !lat || !res) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < 2 * n; i++) nic[i] = -1;
    /* every loaded cross-node pair's resources, one block per pair */
    np = 0;
    off[0] = 0;
    for (int i = 0; i < K; i++)
        for (int j = 0; j < K; j++) {
            size_t ij = (size_t)i * K + j;
            int m;
            if (!(ev->pair[ij] > 0 && ev->cross[ij])) continue;
            m = hs__hg2_pair_res(x, g[i], g[j], nic, res + off[np], (int)cap_res, &lat[np]);
            assert(m >= 0); /* cap_res = 3 |a| |b| at most */
            pi[np] = (int)ij;
            off[np + 1] = off[np] + m;
            np++;
        }
    nres = off[np];
    /* the load of each resource: sum over pairs of flow x busy time */
    all = malloc((size_t)nres * sizeof *all);
    ids = malloc((size_t)nres * sizeof *ids);
    rho = calloc((size_t)nres, sizeof *rho);
    rhob = calloc((size_t)nres, sizeof *rhob);
    sa = malloc((size_t)nres * sizeof *sa);
    sb = malloc((size_t)nres * sizeof *sb);
    if (!all || !ids || !rho || !rhob || !sa || !sb) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    for (int q = 0; q < np; q++)
        for (int r = off[q]; r < off[q + 1]; r++)
            all[r] = (hs__hg2_res){res[r].id, ev->pair[pi[q]] / T * res[r].t, ev->pair[pi[q]] / T * res[r].tb};
    {
        /* distinct ids, sorted, with their summed load */
        int u = 0;
        hs__hg2_res *tmp = malloc((size_t)nres * sizeof *tmp);
        if (!tmp) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        memcpy(tmp, all, (size_t)nres * sizeof *tmp);
        qsort(tmp, (size_t)nres, sizeof *tmp, cmp_res_id);
        for (int i = 0; i < nres; i++) {
            if (u && ids[u - 1] == tmp[i].id) {
                rho[u - 1] += tmp[i].t;
                rhob[u - 1] += tmp[i].tb;
            } else {
                ids[u] = tmp[i].id;
                rho[u] = tmp[i].t;
                rhob[u++] = tmp[i].tb;
            }
        }
        nres = u;
        free(tmp);
    }
    for (int q = 0; q < np; q++) {
        size_t ij = (size_t)pi[q];
        double X = ev->pair[ij] / T, D = 0, tau, c;
        int k = 0;
        for (int r = off[q]; r < off[q + 1]; r++) {
            double t = res[r].t, ro, rb;
            int lo = 0, hi = nres - 1;
            while (lo < hi) { /* ids[] is sorted and holds res[r].id */
                int mid = (lo + hi) / 2;
                if (ids[mid] < res[r].id) lo = mid + 1;
                else hi = mid;
            }
            ro = rho[lo] - X * t; /* the others' load */
            rb = rhob[lo] - X * res[r].tb;
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
        cap[ij] = c;
    }
out:
    free(nic);
    free(pi);
    free(off);
    free(lat);
    free(res);
    free(all);
    free(ids);
    free(rho);
    free(rhob);
    free(sa);
    free(sb);
    return rc ? rc : changed;
}

int hs_hg2_evaluate(hs_hg2_ctx *x, const hs_hg2_place *p, hs_hg2_eval *ev, hs_err *err)
{
    int K = p->K, n = p->n_gpus, rc = 0, coloc = 1;
    int *mem = NULL, *start = NULL;
    const hs_hg2_group **g = NULL;
    double T = x->o.period, *base = NULL;
    assert(place_sane(p) && n == x->c->n_gpus);
    assert(isfinite(T) && T > 0);
    x->st.evals++;
    if (ev->K != K || !ev->cap) {
        hs_hg2_eval_free(ev);
        ev->cap = calloc((size_t)(3 * K + 3 * K * K), sizeof *ev->cap);
        if (!ev->cap) return hs_errf(err, HS_ENOMEM, "out of memory");
        ev->gflow = ev->cap + K;
        ev->ncap = ev->gflow + K;
        ev->pair = ev->ncap + K;
        ev->pcap = ev->pair + (size_t)K * K;
        ev->cross = ev->pcap + (size_t)K * K;
        ev->K = K;
    } else {
        memset(ev->cap, 0, (size_t)(3 * K + 3 * K * K) * sizeof *ev->cap);
    }
    mem = malloc((size_t)n * sizeof *mem);
    start = calloc((size_t)K + 1, sizeof *start);
    g = calloc((size_t)K, sizeof *g);
    if (!mem || !start || !g) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++)
        if (p->group[i] >= 0) start[p->group[i] + 1]++;
    for (int k = 0; k < K; k++) start[k + 1] += start[k];
    {
        int *fill = x->scratch;
        memcpy(fill, start, (size_t)K * sizeof *fill);
        for (int i = 0; i < n; i++)
            if (p->group[i] >= 0) mem[fill[p->group[i]]++] = i;
    }
    for (int k = 0; k < K; k++) {
        g[k] = hs_hg2_eval_group(x, mem + start[k], start[k + 1] - start[k], p->role[k],
                                 p->t_only ? p->t_only[k] : 0, p->pp_only ? p->pp_only[k] : 0);
        ev->cap[k] = g[k]->ok ? g[k]->rate * T : 0;
        assert(isfinite(ev->cap[k]) && ev->cap[k] >= 0);
        if (g[k]->ok && p->role[k] != HS_HG2_COLOC) {
            double tn = hs__hg2_nic_time(x, g[k], p->role[k] == HS_HG2_DECODE);
            ev->ncap[k] = tn > 0 ? T / tn : -1; /* unbounded: set below */
        }
        if (start[k + 1] > start[k] && p->role[k] != HS_HG2_COLOC) coloc = 0;
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
        double unbounded = 1;
        for (int k = 0; k < K; k++) unbounded += 2 * ev->cap[k];
        for (int k = 0; k < K; k++)
            if (ev->ncap[k] < 0 || ev->ncap[k] > unbounded) ev->ncap[k] = unbounded;
        for (int i = 0; i < K; i++) {
            if (ev->cap[i] <= 0 || p->role[i] != HS_HG2_PREFILL) continue;
            for (int j = 0; j < K; j++) {
                double tt;
                if (ev->cap[j] <= 0 || p->role[j] != HS_HG2_DECODE) continue;
                tt = hs__hg2_pair_time(x, g[i], g[j]);
                ev->pcap[(size_t)i * K + j] = tt > 0 ? fmin(T / tt, unbounded) : unbounded;
                ev->cross[(size_t)i * K + j] = !same_node(x, g[i], g[j]);
            }
        }
        if ((rc = solve(p, ev, err))) goto out;
        /* contention lowers the capacities of loaded cross-node pairs from
         * their fluid values (base); the flows move, so redo it from base
         * on the new flows, a few rounds at most */
        if (!(base = malloc((size_t)2 * K * K * sizeof *base))) {
            rc = hs_errf(err, HS_ENOMEM, "out of memory");
            goto out;
        }
        memcpy(base, ev->pcap, (size_t)K * K * sizeof *base);
        /* the network solved is always the one whose capacities ev holds */
        for (int round = 0; round < 4; round++) {
            double *cap = base + (size_t)K * K;
            int c = contention(x, p, g, ev, base, cap, err);
            if (c < 0) {
                rc = c;
                goto out;
            }
            if (!c) break;
            memcpy(ev->pcap, cap, (size_t)K * K * sizeof *cap);
            if ((rc = solve(p, ev, err))) goto out;
        }
    }
    ev->tput = ev->flow / T * x->o.s_out;
    assert(isfinite(ev->tput) && ev->tput >= 0);
out:
    free(base);
    free(mem);
    free(start);
    free(g);
    return rc;
}
