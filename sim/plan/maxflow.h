/* maxflow.h - maximum s-t flow on a directed graph with double capacities.
 *
 * Used by the HexGen-2 planner (Section 3.3 of the paper): source ->
 * prefill replicas -> decode replicas -> sink, with per-replica and per-link
 * capacities in requests per period; the flow on each prefill->decode edge
 * sets the KV routing weights.  The module knows nothing about replicas.
 *
 * Graph: nodes 0..n-1 fixed at creation; directed edges added one at a time
 * with a finite capacity >= 0, numbered 0, 1, 2, ... in the order added.
 * Parallel edges, zero-capacity edges and self-loops are allowed (a self-loop
 * never carries flow).  A solve resets every flow and fills them anew.
 *
 * Two solvers give the same maximum flow value (not necessarily the same
 * edge flows):
 *   hs_flow_push_relabel  - the one to use: FIFO preflow-push with the gap
 *                           heuristic and global relabelling, O(V^3);
 *   hs_flow_edmonds_karp  - BFS augmenting paths, O(V E^2): the slow,
 *                           independent reference the tests check against.
 *
 * Guarantees after a successful solve (eps = HS_FLOW_REL_EPS * the largest
 * capacity in the graph):
 *   - 0 <= flow(e) <= cap(e) exactly, for every edge;
 *   - at every node other than s and t, |inflow - outflow| <= eps plus
 *     rounding (push-relabel treats an excess <= eps as zero, which is what
 *     makes it terminate on doubles; Edmonds-Karp conserves up to rounding);
 *   - the reported value is the net flow into t, recomputed from the edge
 *     flows; it equals the capacity of the cut from hs_flow_min_cut up to
 *     n * eps plus rounding;
 *   - results are deterministic (no hashing, fixed arc and queue order).
 * The total capacity leaving s must be finite (HS_ERANGE otherwise).
 *
 * Memory O(V + E); no recursion.  A graph is not thread-safe. */
#ifndef HS_MAXFLOW_H
#define HS_MAXFLOW_H

#include "core/err.h"

/* Relative tolerance: an excess at or below this times the largest
 * capacity counts as zero in push-relabel.  1e-14 is ~100 ulps: well above
 * round-off crumbs, small enough that push-relabel matched Edmonds-Karp to
 * 1e-9 relative on graphs whose capacities span 16 decades. */
#define HS_FLOW_REL_EPS 1e-14

typedef struct hs_flow_graph hs_flow_graph;

/* Creates a graph with n nodes (1 <= n <= 2^28) and no edges.
 * Errors: HS_EINVAL (n out of range), HS_ENOMEM. */
int hs_flow_create(hs_flow_graph **out, int n, hs_err *err);

/* Frees the graph; NULL is a no-op. */
void hs_flow_destroy(hs_flow_graph *g);

/* Adds edge from -> to with capacity cap and returns its id (>= 0), or a
 * negative HS_E* code: HS_EINVAL for a node out of range or a capacity that
 * is negative, NaN or infinite; HS_ENOMEM.  Invalidates the last solve
 * (flows read as 0 until the next one). */
int hs_flow_add_edge(hs_flow_graph *g, int from, int to, double cap, hs_err *err);

int hs_flow_nodes(const hs_flow_graph *g);
int hs_flow_edges(const hs_flow_graph *g);

/* Capacity and endpoints of edge e (0 <= e < hs_flow_edges(g)). */
double hs_flow_edge_cap(const hs_flow_graph *g, int e);
int hs_flow_edge_from(const hs_flow_graph *g, int e);
int hs_flow_edge_to(const hs_flow_graph *g, int e);

/* Flow on edge e after the last solve (0 when none is current). */
double hs_flow_edge_flow(const hs_flow_graph *g, int e);

/* Maximum s-t flow by push-relabel; *value (may be NULL) gets the net flow
 * into t.  Errors: HS_EINVAL (s or t out of range, s == t), HS_ERANGE (the
 * capacity leaving s sums to infinity), HS_ENOMEM (the flows are then left
 * as they were). */
int hs_flow_push_relabel(hs_flow_graph *g, int s, int t, double *value, hs_err *err);

/* Maximum s-t flow by Edmonds-Karp (slow reference); same contract. */
int hs_flow_edmonds_karp(hs_flow_graph *g, int s, int t, double *value, hs_err *err);

/* After a solve from source s: side[v] = 1 for the nodes reachable from s
 * through edges with residual capacity > 0 (the source side of a minimum
 * cut), 0 for the others.  side has hs_flow_nodes(g) entries.
 * Errors: HS_ESTATE (no current solve), HS_EINVAL (s is not the source of
 * the last solve), HS_ENOMEM. */
int hs_flow_min_cut(const hs_flow_graph *g, int s, unsigned char *side, hs_err *err);

#endif
