/* partition.h - graph partitioning of a GPU cluster (HexGen-2, Section 3.2,
 * step 1 "initial partition" and step 2 "coarsen & secondary partition").
 *
 * The graph: node = GPU with a memory weight (bytes), edge = link with a
 * bandwidth weight (bytes/s), undirected.  A cluster stores a bandwidth per
 * direction; the graph uses min(bw[i][j], bw[j][i]) for the edge {i, j}:
 * GPUs of one group exchange traffic both ways (tensor-parallel all-reduce
 * rings, pipeline stages, KV transfers), so the slower direction bounds the
 * link (profiles are symmetric today, where min = mean).
 *
 * Pipeline (the hexgen2 planner drives it):
 *   1. K = hs_part_k_from_memory(total memory, one replica's need);
 *   2. hs_part_spectral(): K groups by recursive spectral bisection, each
 *      split at the memory-weighted median of the Fiedler vector;
 *   3. hs_part_kl_refine(): move / swap GPUs between groups while that lowers
 *      the cut (inter-group bandwidth), keeping memory balanced;
 *   4. hs_part_coarsen(): one super node per group, edge = summed bandwidth;
 *   5. hs_part_bipartition_max_cut(): prefill vs decode sides of the coarse
 *      graph that maximise the bandwidth between them.
 *
 * Invariants (tests/test_partition.c checks each):
 *   PART-1 every node is in exactly one part: 0 <= assign[i] < K;
 *   PART-2 every part is non-empty (hence K <= n);
 *   PART-3 after hs_part_kl_refine() returns 0, every part's memory lies in
 *          [(1 - tol) mean, (1 + tol) mean], mean = total / K; when that is
 *          unreachable it returns HS_ENOFIT and leaves assign unchanged;
 *   PART-4 hs_part_kl_refine() never increases the cut of a partition that
 *          already meets the memory bounds;
 *   PART-5 determinism: every function is a pure function of its inputs;
 *          ties are broken by node id (sorts end on the id), never by
 *          address or hash order;
 *   PART-6 the max-cut bipartition has two non-empty sides.
 * hs_part_valid() is the sanity checker for PART-1/2 (use inside assert). */
#ifndef HS_PART_H
#define HS_PART_H

#include "core/err.h"
#include "hw/hw.h"

/* Exhaustive max-cut bipartition up to this many coarse nodes (2^(K-1)
 * candidate splits); greedy local search above. */
#define HS_PART_MAXCUT_EXACT 16

typedef struct hs_part_graph {
    int n;          /* nodes */
    double *w;      /* [n * n] bytes/s, symmetric, zero diagonal, >= 0 */
    double *mem;    /* [n] bytes, >= 0 */
} hs_part_graph;

/* Creates an n-node graph with no edges and zero memories.  *out is owned by
 * the caller (hs_part_graph_destroy).  Returns 0, HS_EINVAL (n < 1) or
 * HS_ENOMEM. */
int hs_part_graph_create(hs_part_graph **out, int n, hs_err *err);
/* NULL is a no-op. */
void hs_part_graph_destroy(hs_part_graph *g);
/* Sets the undirected edge {i, j} (i != j) to w >= 0 bytes/s. */
void hs_part_graph_set_edge(hs_part_graph *g, int i, int j, double w);
static inline double hs_part_w(const hs_part_graph *g, int i, int j)
{
    return g->w[(long)i * g->n + j];
}

/* The graph of a cluster: node i = GPU i, mem = its mem_bytes, edge weight
 * min(bw(i,j), bw(j,i)) bytes/s.  Returns 0 or HS_ENOMEM / HS_EINVAL. */
int hs_part_graph_from_cluster(hs_part_graph **out, const hs_cluster *c,
                               hs_err *err);

/* K = max(1, floor(total_mem / one_replica_need)) (both bytes); 1 when the
 * need is not positive or either value is not finite.  The need (weights
 * plus the KV cache of the planned concurrent requests, Appendix A) is
 * computed by the caller. */
int hs_part_k_from_memory(double total_mem, double one_replica_need);

/* K-way partition by recursive spectral bisection.  A set that must become
 * k parts is split into k/2 and k - k/2 parts: nodes are sorted by their
 * Fiedler-vector entry (eigenvector of the second-smallest eigenvalue of the
 * set's weighted Laplacian, from gsl_eigen_symmv; sign fixed so the entry
 * of largest magnitude is positive; equal entries ordered by id) and cut at
 * the prefix whose memory is closest to (k/2)/k of the set's memory, ties to
 * the shorter prefix, keeping at least one node per part on each side (a set
 * with zero memory is balanced by node count).  Parts are then relabelled in
 * order of their smallest node id (part 0 holds node 0).
 * assign: [g->n] output.  Returns 0, HS_EINVAL (K < 1 or K > n) or
 * HS_ENOMEM; assign is written only on success.  O(n^3) per level: meant for
 * up to a few hundred GPUs. */
int hs_part_spectral(const hs_part_graph *g, int K, int *assign, hs_err *err);

/* Kernighan-Lin style refinement with memory balance, greedy variant: each
 * step applies the best single move (node to another part, never emptying a
 * part) or pairwise swap, ranked first by the drop in memory-bound violation
 * (sum over parts of the distance outside [(1-tol) mean, (1+tol) mean]),
 * then by the drop in cut weight; among equals the first in scan order wins
 * (moves before swaps, then smaller node id, then smaller target part /
 * partner id).  A step is taken only if it lowers the violation, or keeps it
 * from rising and lowers the cut; it stops when no such step exists (a local
 * optimum: unlike classic KL it takes no negative-gain steps).  So from a
 * balanced start the cut never rises and the bounds always hold (PART-3/4);
 * from an unbalanced one it first repairs the balance.
 * assign: [g->n] in/out, a valid K-partition (PART-1/2).  Returns 0;
 * HS_EINVAL (bad K, tol < 0 or not finite, invalid assign); HS_ENOMEM; or
 * HS_ENOFIT when the bounds cannot be reached by such steps (message names
 * the worst part) - assign is then left unchanged. */
int hs_part_kl_refine(const hs_part_graph *g, int K, int *assign,
                      double mem_tol, hs_err *err);

/* The same refinement with a memory target per part instead of the mean:
 * part p's bounds are [(1 - tol) target[p], (1 + tol) target[p]]
 * (target: [K] bytes, finite, >= 0).  HexGen-2's re-partition after
 * max-flow-guided swaps (Section 3.4) uses it with each group's current
 * memory as its target: the swaps deliberately unbalanced memory toward
 * the bottleneck groups, and re-balancing to the mean would undo them, so
 * only the cut is lowered (GPUs of equal memory exchanged between groups
 * to raise the bandwidth inside each).  PART-3/4 hold with these bounds;
 * errors as hs_part_kl_refine (HS_EINVAL also for a bad target). */
int hs_part_kl_refine_to(const hs_part_graph *g, int K, int *assign,
                         const double *target, double mem_tol, hs_err *err);

/* Sum of w(i, j) over pairs i < j in different parts (bytes/s). */
double hs_part_cut(const hs_part_graph *g, const int *assign);
/* part_mem[p] = memory of part p (bytes), p < K. */
void hs_part_mems(const hs_part_graph *g, int K, const int *assign,
                  double *part_mem);
/* 1 when assign is a valid K-partition of g (PART-1/2), else 0. */
int hs_part_valid(const hs_part_graph *g, int K, const int *assign);

/* The coarse graph: node p = part p, mem = the part's memory, edge {p, q} =
 * sum of w(i, j) over i in p, j in q (intra-part bandwidth is dropped).
 * Returns 0, HS_EINVAL (invalid partition) or HS_ENOMEM; *out owned by the
 * caller. */
int hs_part_coarsen(const hs_part_graph *g, const int *assign, int K,
                    hs_part_graph **out, hs_err *err);

/* Splits the nodes of g (the coarse graph) into side 0 and side 1, both
 * non-empty, maximising the weight of edges crossing the sides (the
 * prefill-decode bandwidth).  n <= HS_PART_MAXCUT_EXACT: exhaustive over
 * the 2^(n-1) - 1 splits with node 0 on side 0, ties to the smallest side-1
 * bit mask (bit i = node i), so the optimum is exact.  Above: greedy local
 * search from side[i] = i % 2, flipping the node with the largest gain (ties
 * to the smaller id, never emptying a side) until no flip gains; a local
 * optimum crosses at least half the total weight.  Either way node 0 ends on
 * side 0.  side: [g->n] output.  Returns 0 or HS_EINVAL (n < 2). */
int hs_part_bipartition_max_cut(const hs_part_graph *g, int *side, hs_err *err);

#endif
