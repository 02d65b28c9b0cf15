/* hexgen2_place.c - placements of the HexGen-2 planner and their
 * evaluation: the flow network of Section 3.3 (hexgen2.h, "Flow network").
 *
 * A placement (hs_hg2_place) gives each GPU a group (-1: unused) and each
 * group a role; hs_hg2_evaluate estimates every group (hexgen2_est.c),
 * builds source -> prefill -> (NIC -> NIC ->) decode -> sink and solves it
 * by push-relabel (plan/maxflow.h).
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

int hs_hg2_evaluate(hs_hg2_ctx *x, const hs_hg2_place *p, hs_hg2_eval *ev, hs_err *err)
{
    int K = p->K, n = p->n_gpus, rc = 0, coloc = 1;
    int *mem = NULL, *start = NULL;
    const hs_hg2_group **g = NULL;
    hs_flow_graph *fg = NULL;
    double T = x->o.period;
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
        /* nodes: group k, its NIC side K + k, source 2K, sink 2K + 1;
         * cross-node KV goes P_i -> nic(P_i) -> nic(D_j) -> D_j so the
         * flows of one group share its GPUs' NICs as in hw/net.h */
        int s = 2 * K, t = 2 * K + 1, e;
        /* "unbounded" edges get a finite cap that never binds: push-relabel's
         * zero tolerance scales with the largest capacity (maxflow.h) */
        double unbounded = 1;
        for (int k = 0; k < K; k++) unbounded += 2 * ev->cap[k];
        for (int k = 0; k < K; k++)
            if (ev->ncap[k] < 0 || ev->ncap[k] > unbounded) ev->ncap[k] = unbounded;
        if ((rc = hs_flow_create(&fg, 2 * K + 2, err))) goto out;
        for (int k = 0; k < K; k++) {
            if (ev->cap[k] <= 0) continue;
            e = p->role[k] == HS_HG2_PREFILL ? hs_flow_add_edge(fg, k, K + k, ev->ncap[k], err)
                                             : hs_flow_add_edge(fg, K + k, k, ev->ncap[k], err);
            if (e < 0) {
                rc = e;
                goto out;
            }
        }
        for (int k = 0; k < K; k++) {
            if (ev->cap[k] <= 0) continue;
            if (p->role[k] == HS_HG2_PREFILL) e = hs_flow_add_edge(fg, s, k, ev->cap[k], err);
            else e = hs_flow_add_edge(fg, k, t, ev->cap[k], err);
            if (e < 0) {
                rc = e;
                goto out;
            }
        }
        for (int i = 0; i < K; i++) {
            if (ev->cap[i] <= 0 || p->role[i] != HS_HG2_PREFILL) continue;
            for (int j = 0; j < K; j++) {
                double tt;
                if (ev->cap[j] <= 0 || p->role[j] != HS_HG2_DECODE) continue;
                tt = hs__hg2_pair_time(x, g[i], g[j]);
                ev->pcap[(size_t)i * K + j] = tt > 0 ? fmin(T / tt, unbounded) : unbounded;
                ev->cross[(size_t)i * K + j] = !same_node(x, g[i], g[j]);
                e = ev->cross[(size_t)i * K + j] ? hs_flow_add_edge(fg, K + i, K + j, ev->pcap[(size_t)i * K + j], err)
                                                 : hs_flow_add_edge(fg, i, j, ev->pcap[(size_t)i * K + j], err);
                if (e < 0) {
                    rc = e;
                    goto out;
                }
            }
        }
        if ((rc = hs_flow_push_relabel(fg, s, t, &ev->flow, err))) goto out;
        for (e = 0; e < hs_flow_edges(fg); e++) {
            int a = hs_flow_edge_from(fg, e), b = hs_flow_edge_to(fg, e);
            double f = hs_flow_edge_flow(fg, e);
            assert(f >= 0 && f <= hs_flow_edge_cap(fg, e)); /* HG2-2 (maxflow.h: exact) */
            if (a == s) ev->gflow[b] = f;
            else if (b == t) ev->gflow[a] = f;
            else if (a < K && b < K) ev->pair[(size_t)a * K + b] = f;
            else if (a >= K && b >= K) ev->pair[(size_t)(a - K) * K + (b - K)] = f;
        }
    }
    ev->tput = ev->flow / T * x->o.s_out;
    assert(isfinite(ev->tput) && ev->tput >= 0);
out:
    hs_flow_destroy(fg);
    free(mem);
    free(start);
    free(g);
    return rc;
}
