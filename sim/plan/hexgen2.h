/* hexgen2.h - the HexGen-2 placement scheduler (ICLR'25, papers/hexgen2.txt
 * Section 3) and the search machinery its baselines share.
 *
 * A placement is a partition of the GPUs into groups (one model replica per
 * group), a role per group (prefill or decode; colocated for the HexGen
 * baseline) and, derived from it, a parallel layout per group and the KV
 * routing between prefill and decode replicas.
 *
 * Estimator (hs_hg2_eval_*, hexgen2_est.c, which says what each term
 * models): stage times from the run's own latency tables (built once per
 * GPU type and TP, combined per layer; tests compare them with
 * hs_perf_build's), with the engine's host cost per lane iteration:
 *   - prefill group: the latency-optimal layout (smallest sum of stage
 *     times for one s_in-token prompt), prompts batched as the runtime
 *     batches them; capacity per period T from its lanes' iterations;
 *   - decode group: the throughput-optimal layout; the batch is what the
 *     decode admission commits (every member at its expected final length,
 *     s_in + s_out, within KV and engine.max_num_seqs per lane), attention
 *     over s_in + s_out/2 tokens; capacity = T * tokens/s / s_out;
 *   - colocated (HexGen): requests/s = 1 / (1/prefill rate + s_out / decode
 *     tokens/s) at the same batch;
 *   - KV transfer prefill i -> decode j: the flows the engine starts (each
 *     GPU holding layer l sends to the GPU(s) holding layer l, max(tp) flows
 *     per overlapping stage pair), time = max over flows of latency +
 *     bytes / link bandwidth; capacity = T / time.
 * Layouts: a group's GPUs sorted by (node, type, id) are cut into stages of
 * at most t GPUs of one node and type (t in 1, 2, 4, 8, 16 dividing the
 * heads), so TP stays inside a node and stages may differ in TP and GPU
 * type (asymmetric); layers go to stages in proportion to their speed
 * (FLOP/s for prefill, memory bandwidth for decode) within each stage's
 * memory cap (weights + activations + one max_model_len context per lane).
 *
 * Flow network (Section 3.3): source -> prefill i (capacity) -> decode j
 * (KV transfer capacity) -> sink (decode capacity); a pair whose KV crosses
 * nodes goes prefill i -> NIC(i) -> NIC(j) -> decode j, where NIC(k)'s
 * edge is the capacity of group k's GPUs' NICs (our network model, hw/net.h,
 * shares a GPU's NIC among its cross-node flows: without it the estimate
 * counted one slow link many times over); solved by
 * push-relabel (plan/maxflow.h).  The flow value per T times s_out / T is the
 * estimated output-token throughput.  Flows become routing weights: prefill
 * replica weight = its flow, decode weight = its flow, and per prefill
 * replica the "kv_route" vector of flows to each decode replica.
 *
 * Search (hs_hg2_search):
 *   initial: K = total memory / (weights + 32 requests' KV), spectral
 *     partition + Kernighan-Lin with memory balance (plan/partition.h),
 *     coarsen, max-cut bipartition = prefill / decode sides (both
 *     orientations tried);
 *   guided (the paper's loop, Sections 3.2-3.4): rounds of
 *     (a) max-flow-guided swaps: the max-flow's minimum cut names the
 *         bottleneck groups (capacity, NIC or KV edges on the cut) and the
 *         under-used ones (flow below capacity, or groups that do not
 *         fit); each swap step ranks its candidates - move or swap one GPU
 *         of each (node, type) class from an under-used group into a
 *         bottleneck group, merge the two, flip the under-used one, split
 *         any group - by the flow change the cut predicts from the groups'
 *         new capacities, solves the cands= best by max-flow and applies
 *         the best, gaining or not (Kernighan-Lin style: moved GPUs are
 *         locked for the round, depth= non-improving steps at most), the
 *         round keeping its best prefix;
 *     (b) the two-phase algorithm re-run on the swapped partition:
 *         Kernighan-Lin re-partition (cut lowered, each group's memory
 *         kept within tol=: hs_part_kl_refine_to), coarsening, the
 *         max-cut secondary partition into prefill and decode (both
 *         orientations) refined by the max-flow (every role assignment up
 *         to 8 groups, single flips above) and projection, the best kept;
 *     until a round improves nothing even with the donors and receivers
 *     widened (width= doubled per round that gains nothing, up to every
 *     group, back to width= after a gain); then phase 1 re-run from scratch at
 *     other group counts near the refined one, each refined the same way,
 *     while one gains (iters= rounds, time= seconds bound it all);
 *   hill: the earlier local search: best improving max-flow-guided move
 *     (move / swap / flip / merge / split) until none gains, restarted
 *     from partitions with K/2, K-1, K, K+1, 2K groups;
 *   random: random moves / swaps / flips, kept when they gain;
 *   ga: a genetic algorithm (HexGen's style: population, tournament
 *     selection, group-preserving crossover, mutations move / swap / flip /
 *     merge / split, elitism).
 * Deterministic for a seed (xorshift PRNG, fixed scan orders, no hashing
 * by address); a time= limit cuts a search short, so its result then
 * depends on the machine (iters= bounds them reproducibly; without time=
 * the guided and hill searches end on their own). */
#ifndef HS_HEXGEN2_H
#define HS_HEXGEN2_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "plan/plan.h"

/* search=: none, guided (the paper's loop), random, ga, hill (the earlier
 * hill-climb, kept to compare; appended so the other values stay) */
enum { HS_HG2_NONE = 0, HS_HG2_GUIDED, HS_HG2_RANDOM, HS_HG2_GA, HS_HG2_HILL };
enum { HS_HG2_PREFILL = 0, HS_HG2_DECODE = 1, HS_HG2_COLOC = 2 };

typedef struct hs_hg2_opts {
    double s_in, s_out;     /* mean prompt / output tokens (in=, out=) */
    double period;          /* T, s (period=) */
    int conc;               /* requests whose KV sizes K (conc=, 32) */
    double mem_tol;         /* KL memory balance tolerance (tol=, 0.25) */
    int search;             /* search=guided|hill|random|ga|none */
    double time_limit;      /* s, every search (time=, 0: none) */
    int max_iters;          /* guided rounds / random tries / GA generations
                             * (iters=, 0: guided until no gain) */
    int pop;                /* GA population (pop=, 24) */
    int max_tp;             /* largest TP tried (maxtp=, 16) */
    int width;              /* guided, hill: donors and receivers tried per step (width=, 8) */
    int cands;              /* guided: candidates of a swap step solved by
                             * max-flow, the best predicted (cands=; 0: 512 /
                             * groups, at least 16: a solve costs ~groups^2) */
    int depth;              /* guided: swap steps a round takes past its best
                             * before it returns to it (depth=, Kernighan-Lin's
                             * negative-gain moves) */
    double kv_reserve;      /* decode batch = KV tokens / (s_in + reserve * s_out)
                             * (reserve=, default 1: room for every request's
                             * final context; 0.5, the mean context, planned
                             * batches that vLLM then preempted hundreds of
                             * times on settings 1-2 and lost ~40%) */
    int first;              /* guided, hill: take the first improving move in
                             * the flow's order (hill: most slack donor ->
                             * tightest receiver; guided: best predicted
                             * first) instead of the best (first=1) */
    int prefill_tput;       /* prefill=throughput: prefill groups take their
                             * highest-rate layout, not the paper's
                             * latency-optimal one (prefill=latency) */
    double ttft_s, tpot_s;  /* SLO for distserve's filter (ttft=, tpot= ms) */
    char trace[512];        /* write "seconds best_tokens_per_s iteration
                             * evaluations" lines at each new best (trace=) */
    int quiet;
} hs_hg2_opts;

/* Defaults then "key=value,..." (errors name the key), as planner hexgen2
 * reads them; hs__hg2_opts_parse as planner p (its baselines) does.  The
 * keys are hs_hg2_opt_fields, which these planners declare. */
int hs_hg2_opts_parse(hs_hg2_opts *o, const char *s, hs_err *err);
int hs__hg2_opts_parse(const hs_planner_ops *p, hs_hg2_opts *o, const char *s, hs_err *err);
extern const hs_field hs_hg2_opt_fields[];

typedef struct hs_hg2_ctx hs_hg2_ctx;

/* One evaluated group (cached; owned by the context).  Stage s holds
 * gpus[off_s .. off_s + tp[s]) where off_s = tp[0] + ... + tp[s-1]. */
typedef struct hs_hg2_group {
    int ok;                 /* the model fits the group */
    int pp;
    int *tp, *layers, *gpus;
    double rate;            /* requests/s (prefill, decode or colocated) */
    double lat_s;           /* prefill latency of one prompt / decode round (TPOT) */
    double batch;           /* decode requests in flight (all lanes) */
    long id;                /* cache slot (-1: not cached) */
} hs_hg2_group;

/* The group's layout in the deployment form. */
void hs_hg2_group_layout(const hs_hg2_ctx *x, const hs_hg2_group *g, hs_layout *l);

int hs_hg2_ctx_create(hs_hg2_ctx **out, const hs_plan_req *req,
                      const hs_hg2_opts *o, hs_err *err);
/* A whole planner run: context, search (colocated: HexGen's replicas, else
 * HexGen-2's prefill/decode groups), deployment named `name`, a summary
 * line on stderr unless o->quiet.  Returns 0 or an error. */
int hs_hg2_plan_search(const hs_plan_req *q, const hs_hg2_opts *o, int colocated, const char *name,
                       hs_deploy *out, hs_err *err);
/* After a search: an evaluation that ran out of memory reads as "does not
 * fit" inside the search; this turns it into HS_ENOMEM (freeing out when
 * rc was 0).  Returns rc otherwise. */
int hs_hg2_check_oom(const hs_hg2_ctx *x, int rc, hs_deploy *out, hs_err *err);
void hs_hg2_ctx_destroy(hs_hg2_ctx *x);

/* Evaluates gpus[0..n) as one replica of the role, best layout over the TP
 * caps (t_only > 0: only that cap, with exactly pp_only stages when > 0).
 * Cached per (role, GPU set, caps). */
const hs_hg2_group *hs_hg2_eval_group(hs_hg2_ctx *x, const int *gpus, int n,
                                      int role, int t_only, int pp_only);
/* Seconds to move one request's KV (s_in tokens) from group a to b. */
double hs_hg2_kv_time(hs_hg2_ctx *x, const hs_hg2_group *a, const hs_hg2_group *b);
/* One stage's time (s) for the shape, the same formula as the roofline
 * tables (tests compare with hs_perf_stage_ns). */
double hs_hg2_stage_s(const hs_hg2_ctx *x, const hs_layout *l, int s,
                      const hs_batch_shape *b);

/* A placement: group of each GPU (-1: unused) and role of each group. */
typedef struct hs_hg2_place {
    int n_gpus, K;
    int *group;             /* [n_gpus] */
    int *role;              /* [n_gpus] (K <= n_gpus) */
    int *t_only, *pp_only;  /* NULL, or [K] a fixed TP cap / stage count per
                             * group (homogeneous baselines) */
} hs_hg2_place;

/* Allocates a placement of n GPUs with K = n slots, all unassigned (-1). */
int hs_hg2_place_alloc(hs_hg2_place *p, int n);

/* The evaluation of a placement. */
typedef struct hs_hg2_eval {
    double flow;            /* requests per T */
    double tput;            /* output tokens/s */
    int K;
    double *cap;            /* [K] requests per T (0: infeasible) */
    double *gflow;          /* [K] flow through the group */
    double *ncap;           /* [K] NIC capacity for cross-node KV (egress of
                             * prefill, ingress of decode), requests per T */
    double *pair;           /* [K * K] flow prefill i -> decode j */
    double *pcap;           /* [K * K] KV transfer capacity */
    double *cross;          /* [K * K] 1: the pair's KV crosses nodes (goes
                             * through both groups' NIC nodes) */
    int *used, nused;       /* [K] the non-empty groups, ascending: every
                             * nonzero entry above is theirs (the next
                             * evaluation clears only those) */
} hs_hg2_eval;

int hs_hg2_evaluate(hs_hg2_ctx *x, const hs_hg2_place *p, hs_hg2_eval *ev,
                    hs_err *err);
void hs_hg2_eval_free(hs_hg2_eval *ev);

/* The initial placement (partition, coarsen, max-cut) then the search of
 * opts.search; best placement in *p (caller frees with hs_hg2_place_free).
 * colocated = 1: every group colocated (HexGen), no flow network. */
int hs_hg2_search(hs_hg2_ctx *x, hs_hg2_place *p, int colocated, hs_err *err);
void hs_hg2_place_free(hs_hg2_place *p);

/* Turns a placement into a deployment (weights and kv_route from flows). */
int hs_hg2_to_deploy(hs_hg2_ctx *x, const hs_hg2_place *p, const char *planner,
                     hs_deploy *out, hs_err *err);

/* Counters of the last search (bench).  steps: the search's iterations
 * (guided: rounds, hill: moves, random: tries, GA: generations); the
 * guided search also counts its applied swap steps (swaps), the rounds
 * whose re-partition (KL, coarsening, secondary partition) beat the swapped
 * placement (repart_gains) and the phase-1 re-runs from scratch at another
 * group count that became the best (k_changes). */
typedef struct hs_hg2_stats {
    double seconds, best_tput;
    double cpu_seconds;     /* the process's CPU time over the search (seconds is
                             * wall time: on a loaded machine it is longer) */
    long evals, group_evals, steps;
    long swaps, repart_gains, k_changes;
} hs_hg2_stats;
void hs_hg2_stats_get(const hs_hg2_ctx *x, hs_hg2_stats *st);

#endif
