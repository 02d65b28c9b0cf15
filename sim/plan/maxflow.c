/* maxflow.c - push-relabel and Edmonds-Karp maximum flow; see maxflow.h.
 *
 * Representation.  Edge e has endpoints from[e] -> to[e], capacity cap[e]
 * and flow f[e].  It gives two residual arcs: arc 2e (from -> to, residual
 * cap - f) and arc 2e+1 (to -> from, residual f).  A solve builds a CSR
 * adjacency (off[], arc[]) listing each node's arcs in arc-id order, self-
 * loops left out.  Flow, not residual capacity, is stored, and a push that
 * uses up an arc's residual sets f to cap or 0 exactly, so 0 <= f <= cap
 * holds exactly at all times and a saturated arc has residual exactly 0.
 * An arc is residual when its residual is > 0 (no tolerance).
 *
 * Push-relabel (Goldberg-Tarjan, FIFO selection):
 *   - labels d[] with d[s] = n, d[t] = 0; the labelling stays valid
 *     (d[u] <= d[v] + 1 for every residual arc u -> v), so labels never
 *     decrease and s never reaches t in the residual graph at the end;
 *   - a node u != s, t is active when its excess e[u] > eps and d[u] < 2n;
 *     eps = HS_FLOW_REL_EPS * max capacity: round-off can leave a crumb of
 *     excess on a node with no residual path back to s, which is dropped
 *     rather than chased (termination itself rests on the label cap 2n
 *     below, which holds on doubles as in exact arithmetic: every push
 *     either zeroes the sender's excess or zeroes the arc's residual
 *     exactly, and only a push creates a residual arc, its reverse);
 *   - discharge(u): push along admissible arcs (d[u] = d[v] + 1) from the
 *     current-arc pointer until the excess is gone, or relabel once
 *     (d[u] = 1 + min over residual arcs) and send u to the back of the
 *     queue; a node with no residual arc, or whose label would reach 2n,
 *     gets label 2n and is dropped (cannot happen in exact arithmetic);
 *   - one phase: labels in [n, 2n) route excess that cannot reach t back to
 *     s, so the result is a flow, not just a preflow;
 *   - gap heuristic: when the last node with a label k < n leaves it, every
 *     node with k < d < n can no longer reach t and is lifted to n;
 *   - global relabel: exact distances by BFS over reverse residual arcs,
 *     from t (labels < n) then from s (labels n + distance), others 2n; at
 *     the start and whenever the relabel work since the last one (sum of
 *     degree + 12 per relabel) exceeds 6n + 2m.  The queue is then rebuilt
 *     in node order.
 * Valid labels are lower bounds on these distances, so global relabels and
 * gaps only raise labels: the O(V^3) bound of FIFO push-relabel stands
 * (each label < 2n, O(V^2) relabels, O(VE) saturating and O(V^3)
 * non-saturating pushes), global relabels cost O(V + E) each and are paid
 * for by the relabel work, and each gap scans O(V) for at most O(V^2)
 * relabels.
 *
 * Edmonds-Karp: BFS from s for a shortest residual path, augment by its
 * bottleneck (which saturates at least one arc exactly), repeat; O(V E)
 * augmentations. */
#include "plan/maxflow.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct hs_flow_graph {
    int n;                 /* nodes */
    int m, mcap;           /* edges, allocated edge slots */
    int *from, *to;        /* [mcap] endpoints */
    double *cap;           /* [mcap] capacity, finite, >= 0 */
    double *f;             /* [mcap] flow of the last solve */
    double maxcap;         /* largest capacity so far */
    /* CSR of residual arcs, valid for csr_m edges */
    int *off;              /* [n + 1] */
    int *arc;              /* [2 * csr_m] arc ids */
    int csr_m;             /* edges the CSR was built for, -1 = none */
    int solved_s;          /* source of the current solve, -1 = none */
};

#define HS_FLOW_MAX_NODES (1 << 28)

/* ---- arcs ---------------------------------------------------------------- */

static inline int arc_head(const hs_flow_graph *g, int a)
{
    return (a & 1) ? g->from[a >> 1] : g->to[a >> 1];
}

static inline double arc_resid(const hs_flow_graph *g, int a)
{
    int e = a >> 1;
    return (a & 1) ? g->f[e] : g->cap[e] - g->f[e];
}

/* Moves delta (0 < delta <= resid) along arc a; resid is arc_resid(a) as
 * the caller computed it.  Using up the residual sets the flow exactly. */
static inline void arc_push(hs_flow_graph *g, int a, double delta, double resid)
{
    int e = a >> 1;
    if (a & 1) {
        g->f[e] = delta >= resid ? 0.0 : fmax(0.0, g->f[e] - delta);
    } else {
        g->f[e] = delta >= resid ? g->cap[e] : fmin(g->cap[e], g->f[e] + delta);
    }
}

static void clear_flows(hs_flow_graph *g)
{
    if (g->m) memset(g->f, 0, (size_t)g->m * sizeof *g->f);
}

/* ---- graph --------------------------------------------------------------- */

int hs_flow_create(hs_flow_graph **out, int n, hs_err *err)
{
    hs_flow_graph *g;
    *out = NULL;
    if (n < 1 || n > HS_FLOW_MAX_NODES)
        return hs_errf(err, HS_EINVAL, "max-flow: %d nodes (1..%d)", n, HS_FLOW_MAX_NODES);
    g = calloc(1, sizeof *g);
    if (!g) return hs_errf(err, HS_ENOMEM, "max-flow: out of memory (graph)");
    g->n = n;
    g->csr_m = -1;
    g->solved_s = -1;
    *out = g;
    return 0;
}

void hs_flow_destroy(hs_flow_graph *g)
{
    if (!g) return;
    free(g->from);
    free(g->to);
    free(g->cap);
    free(g->f);
    free(g->off);
    free(g->arc);
    free(g);
}

static int grow_edges(hs_flow_graph *g, hs_err *err)
{
    int nc;
    void *p;
    if (g->m >= INT_MAX / 2 - 1)
        return hs_errf(err, HS_ERANGE, "max-flow: too many edges (%d)", g->m);
    nc = g->mcap ? g->mcap * 2 : 16;
    if (nc > INT_MAX / 2) nc = INT_MAX / 2;
    /* Each realloc that succeeds keeps the old contents; a failure leaves
     * mcap unchanged, so the graph stays consistent. */
    if (!(p = realloc(g->from, (size_t)nc * sizeof *g->from))) goto nomem;
    g->from = p;
    if (!(p = realloc(g->to, (size_t)nc * sizeof *g->to))) goto nomem;
    g->to = p;
    if (!(p = realloc(g->cap, (size_t)nc * sizeof *g->cap))) goto nomem;
    g->cap = p;
    if (!(p = realloc(g->f, (size_t)nc * sizeof *g->f))) goto nomem;
    g->f = p;
    g->mcap = nc;
    return 0;
nomem:
    return hs_errf(err, HS_ENOMEM, "max-flow: out of memory (%d edges)", nc);
}

int hs_flow_add_edge(hs_flow_graph *g, int from, int to, double cap, hs_err *err)
{
    int rc;
    if (from < 0 || from >= g->n || to < 0 || to >= g->n)
        return hs_errf(err, HS_EINVAL, "max-flow: edge %d -> %d: node out of range (0..%d)",
                       from, to, g->n - 1);
    if (!isfinite(cap) || cap < 0)
        return hs_errf(err, HS_EINVAL, "max-flow: edge %d -> %d: capacity %g (must be finite, >= 0)",
                       from, to, cap);
    if (g->m == g->mcap && (rc = grow_edges(g, err)) < 0) return rc;
    if (g->solved_s >= 0) clear_flows(g);
    g->solved_s = -1;
    g->from[g->m] = from;
    g->to[g->m] = to;
    g->cap[g->m] = cap;
    g->f[g->m] = 0.0;
    if (cap > g->maxcap) g->maxcap = cap;
    return g->m++;
}

int hs_flow_nodes(const hs_flow_graph *g) { return g->n; }
int hs_flow_edges(const hs_flow_graph *g) { return g->m; }

double hs_flow_edge_cap(const hs_flow_graph *g, int e)
{
    assert(e >= 0 && e < g->m);
    return g->cap[e];
}

int hs_flow_edge_from(const hs_flow_graph *g, int e)
{
    assert(e >= 0 && e < g->m);
    return g->from[e];
}

int hs_flow_edge_to(const hs_flow_graph *g, int e)
{
    assert(e >= 0 && e < g->m);
    return g->to[e];
}

double hs_flow_edge_flow(const hs_flow_graph *g, int e)
{
    assert(e >= 0 && e < g->m);
    return g->f[e];
}

/* Builds the CSR adjacency for the current edges (counting sort, arcs in id
 * order within a node).  Nothing changes on failure. */
static int build_csr(hs_flow_graph *g, hs_err *err)
{
    int n = g->n, m = g->m;
    int *off, *arc;
    if (g->csr_m == m) return 0;
    off = calloc((size_t)n + 1, sizeof *off);
    arc = malloc(((size_t)2 * (size_t)m + 1) * sizeof *arc);
    if (!off || !arc) {
        free(off);
        free(arc);
        return hs_errf(err, HS_ENOMEM, "max-flow: out of memory (adjacency of %d edges)", m);
    }
    for (int e = 0; e < m; e++) {
        if (g->from[e] == g->to[e]) continue;
        off[g->from[e] + 1]++;
        off[g->to[e] + 1]++;
    }
    for (int v = 0; v < n; v++) off[v + 1] += off[v];
    {
        int *pos = malloc((size_t)n * sizeof *pos);
        if (!pos) {
            free(off);
            free(arc);
            return hs_errf(err, HS_ENOMEM, "max-flow: out of memory (adjacency)");
        }
        memcpy(pos, off, (size_t)n * sizeof *pos);
        for (int a = 0; a < 2 * m; a++) {
            int e = a >> 1, tail = (a & 1) ? g->to[e] : g->from[e];
            if (g->from[e] == g->to[e]) continue;
            arc[pos[tail]++] = a;
        }
        free(pos);
    }
    free(g->off);
    free(g->arc);
    g->off = off;
    g->arc = arc;
    g->csr_m = m;
    return 0;
}

/* Common argument checks; builds the CSR.  Nothing changes on failure. */
static int solve_begin(hs_flow_graph *g, int s, int t, const char *who, hs_err *err)
{
    double out = 0.0;
    if (s < 0 || s >= g->n || t < 0 || t >= g->n)
        return hs_errf(err, HS_EINVAL, "%s: source %d / sink %d out of range (0..%d)", who, s, t,
                       g->n - 1);
    if (s == t) return hs_errf(err, HS_EINVAL, "%s: source and sink are both node %d", who, s);
    for (int e = 0; e < g->m; e++)
        if (g->from[e] == s && g->to[e] != s) out += g->cap[e];
    if (!isfinite(out))
        return hs_errf(err, HS_ERANGE, "%s: capacity leaving the source sums to infinity", who);
    return build_csr(g, err);
}

/* Net flow into t, from the edge flows, in edge order. */
static double net_inflow(const hs_flow_graph *g, int t)
{
    double v = 0.0;
    for (int e = 0; e < g->m; e++) {
        if (g->from[e] == g->to[e]) continue;
        if (g->to[e] == t) v += g->f[e];
        else if (g->from[e] == t) v -= g->f[e];
    }
    return v;
}

/* ---- push-relabel -------------------------------------------------------- */

typedef struct pr_state {
    hs_flow_graph *g;
    int n, s, t;
    double eps;
    int *d;          /* [n] labels, 0..2n */
    double *ex;      /* [n] excess */
    int *cur;        /* [n] current arc (index into g->arc) */
    int *cnt;        /* [n] nodes per label < n */
    int *q;          /* [n] FIFO ring; also the BFS queue of global relabel */
    unsigned char *inq;  /* [n] */
    int qh, qn;      /* ring head and length */
    long long work;  /* relabel work since the last global relabel */
    long long work_limit;
} pr_state;

static inline int pr_active(const pr_state *p, int v)
{
    return v != p->s && v != p->t && p->ex[v] > p->eps && p->d[v] < 2 * p->n;
}

static inline void pr_enqueue(pr_state *p, int v)
{
    if (p->inq[v] || !pr_active(p, v)) return;
    assert(p->qn < p->n);
    p->q[(p->qh + p->qn) % p->n] = v;
    p->qn++;
    p->inq[v] = 1;
}

static inline int pr_dequeue(pr_state *p)
{
    int v = p->q[p->qh];
    p->qh = (p->qh + 1) % p->n;
    p->qn--;
    p->inq[v] = 0;
    return v;
}

/* BFS over reverse residual arcs from root, labelling each unlabelled
 * node (label 2n) d[root] + its distance; q is used as scratch. */
static void pr_bfs(pr_state *p, int root)
{
    const hs_flow_graph *g = p->g;
    int *q = p->q, head = 0, tail = 0;
    q[tail++] = root;
    while (head < tail) {
        int v = q[head++];
        for (int i = g->off[v]; i < g->off[v + 1]; i++) {
            int a = g->arc[i], u = arc_head(g, a);
            /* arc a is v -> u; its reverse u -> v must be residual */
            if (p->d[u] != 2 * p->n || arc_resid(g, a ^ 1) <= 0.0) continue;
            p->d[u] = p->d[v] + 1;
            q[tail++] = u;
        }
    }
}

/* Exact distance labels, counts, current arcs and a fresh queue. */
static void pr_global_relabel(pr_state *p)
{
    int n = p->n;
#ifndef NDEBUG
    /* valid labels are lower bounds on the distances computed here */
    int *old = malloc((size_t)n * sizeof *old);
    if (old) memcpy(old, p->d, (size_t)n * sizeof *old);
#endif
    for (int v = 0; v < n; v++) p->d[v] = 2 * n;
    p->d[p->t] = 0;
    p->d[p->s] = n;
    /* BFS from t must not pass through s (s keeps label n); s is labelled
     * already so the "unlabelled" test skips it. */
    pr_bfs(p, p->t);
    pr_bfs(p, p->s);
#ifndef NDEBUG
    if (old) {
        for (int v = 0; v < n; v++) assert(p->d[v] >= old[v]);
        free(old);
    }
#endif
    memset(p->cnt, 0, (size_t)n * sizeof *p->cnt);
    for (int v = 0; v < n; v++) {
        if (p->d[v] < n) p->cnt[p->d[v]]++;
        p->cur[v] = p->g->off[v];
        p->inq[v] = 0;
    }
    p->qh = p->qn = 0;
    for (int v = 0; v < n; v++) pr_enqueue(p, v);
    p->work = 0;
}

/* Lifts every node with k < d < n to n (no node has label k any more). */
static void pr_gap(pr_state *p, int k)
{
    int n = p->n;
    for (int v = 0; v < n; v++) {
        if (p->d[v] > k && p->d[v] < n) {
            p->cnt[p->d[v]]--;
            p->d[v] = n;
            p->cur[v] = p->g->off[v];
        }
    }
}

/* Relabels u (which has no admissible arc) to 1 + the lowest label over
 * its residual arcs, or 2n when there is none; applies the gap heuristic. */
static void pr_relabel(pr_state *p, int u)
{
    const hs_flow_graph *g = p->g;
    int n = p->n, old = p->d[u], best = 2 * n;
    for (int i = g->off[u]; i < g->off[u + 1]; i++) {
        int a = g->arc[i];
        if (arc_resid(g, a) > 0.0) {
            int dv = p->d[arc_head(g, a)];
            if (dv + 1 < best) best = dv + 1;
        }
    }
    assert(best > old);
    if (best > 2 * n) best = 2 * n;
    p->work += 12 + (g->off[u + 1] - g->off[u]);
    p->d[u] = best;
    p->cur[u] = g->off[u];
    if (old < n) {
        p->cnt[old]--;
        if (best < n) p->cnt[best]++;
        if (p->cnt[old] == 0) pr_gap(p, old);
    }
}

/* Pushes from u until its excess is gone or it is relabelled once. */
static void pr_discharge(pr_state *p, int u)
{
    hs_flow_graph *g = p->g;
    int end = g->off[u + 1];
    while (p->ex[u] > p->eps) {
        int a, v;
        double r;
        if (p->cur[u] == end) {
            pr_relabel(p, u);
            return;
        }
        a = g->arc[p->cur[u]];
        v = arc_head(g, a);
        r = arc_resid(g, a);
        if (r > 0.0 && p->d[u] == p->d[v] + 1) {
            double delta = p->ex[u] < r ? p->ex[u] : r;
            arc_push(g, a, delta, r);
            p->ex[u] -= delta;
            p->ex[v] += delta;
            pr_enqueue(p, v);
            if (delta < r) break;   /* excess gone, arc still admissible */
        }
        p->cur[u]++;
    }
}

int hs_flow_push_relabel(hs_flow_graph *g, int s, int t, double *value, hs_err *err)
{
    const char *who = "max-flow (push-relabel)";
    pr_state p;
    int n = g->n, rc;
    if ((rc = solve_begin(g, s, t, who, err)) < 0) return rc;
    memset(&p, 0, sizeof p);
    p.d = calloc((size_t)n, sizeof *p.d);
    p.ex = calloc((size_t)n, sizeof *p.ex);
    p.cur = malloc((size_t)n * sizeof *p.cur);
    p.cnt = malloc((size_t)n * sizeof *p.cnt);
    p.q = malloc((size_t)n * sizeof *p.q);
    p.inq = calloc((size_t)n, 1);
    if (!p.d || !p.ex || !p.cur || !p.cnt || !p.q || !p.inq) {
        rc = hs_errf(err, HS_ENOMEM, "%s: out of memory (%d nodes)", who, n);
        goto done;
    }
    p.g = g;
    p.n = n;
    p.s = s;
    p.t = t;
    p.eps = HS_FLOW_REL_EPS * g->maxcap;
    p.work_limit = 6LL * n + 2LL * g->m;

    clear_flows(g);
    for (int i = g->off[s]; i < g->off[s + 1]; i++) {
        int a = g->arc[i];
        double r = arc_resid(g, a);
        if (r > 0.0) {
            arc_push(g, a, r, r);
            p.ex[arc_head(g, a)] += r;
        }
    }
    pr_global_relabel(&p);
    while (p.qn > 0) {
        int u = pr_dequeue(&p);
        if (!pr_active(&p, u)) continue;
        pr_discharge(&p, u);
        pr_enqueue(&p, u);
        if (p.work > p.work_limit) pr_global_relabel(&p);
    }
    g->solved_s = s;
    if (value) *value = net_inflow(g, t);
    rc = 0;
done:
    free(p.d);
    free(p.ex);
    free(p.cur);
    free(p.cnt);
    free(p.q);
    free(p.inq);
    return rc;
}

/* ---- Edmonds-Karp -------------------------------------------------------- */

int hs_flow_edmonds_karp(hs_flow_graph *g, int s, int t, double *value, hs_err *err)
{
    const char *who = "max-flow (Edmonds-Karp)";
    int n = g->n, rc;
    int *q, *par;    /* BFS queue; arc into each node, -1 = unreached */
    if ((rc = solve_begin(g, s, t, who, err)) < 0) return rc;
    q = malloc((size_t)n * sizeof *q);
    par = malloc((size_t)n * sizeof *par);
    if (!q || !par) {
        free(q);
        free(par);
        return hs_errf(err, HS_ENOMEM, "%s: out of memory (%d nodes)", who, n);
    }
    clear_flows(g);
    for (;;) {
        int head = 0, tail = 0;
        double b = INFINITY;
        for (int v = 0; v < n; v++) par[v] = -1;
        par[s] = INT_MAX;   /* reached, no arc */
        q[tail++] = s;
        while (head < tail && par[t] < 0) {
            int v = q[head++];
            for (int i = g->off[v]; i < g->off[v + 1]; i++) {
                int a = g->arc[i], u = arc_head(g, a);
                if (par[u] >= 0 || arc_resid(g, a) <= 0.0) continue;
                par[u] = a;
                q[tail++] = u;
            }
        }
        if (par[t] < 0) break;
        for (int v = t; v != s; v = arc_head(g, par[v] ^ 1)) {
            double r = arc_resid(g, par[v]);
            if (r < b) b = r;
        }
        for (int v = t; v != s; v = arc_head(g, par[v] ^ 1))
            arc_push(g, par[v], b, arc_resid(g, par[v]));
    }
    free(q);
    free(par);
    g->solved_s = s;
    if (value) *value = net_inflow(g, t);
    return 0;
}

/* ---- minimum cut --------------------------------------------------------- */

int hs_flow_min_cut(const hs_flow_graph *g, int s, unsigned char *side, hs_err *err)
{
    int *q, head = 0, tail = 0;
    if (g->solved_s < 0)
        return hs_errf(err, HS_ESTATE, "max-flow: minimum cut asked before a solve");
    if (s != g->solved_s)
        return hs_errf(err, HS_EINVAL, "max-flow: minimum cut from %d, but the solve was from %d", s,
                       g->solved_s);
    q = malloc((size_t)g->n * sizeof *q);
    if (!q) return hs_errf(err, HS_ENOMEM, "max-flow: out of memory (%d nodes)", g->n);
    memset(side, 0, (size_t)g->n);
    side[s] = 1;
    q[tail++] = s;
    while (head < tail) {
        int v = q[head++];
        for (int i = g->off[v]; i < g->off[v + 1]; i++) {
            int a = g->arc[i], u = arc_head(g, a);
            if (side[u] || arc_resid(g, a) <= 0.0) continue;
            side[u] = 1;
            q[tail++] = u;
        }
    }
    free(q);
    return 0;
}
