/* hexgen2_int.h - what the HexGen-2 planner's files share (internal: hs__
 * prefix, not part of the public API, which is plan/hexgen2.h).
 *
 * The planner is four files, one concern each:
 *   hexgen2.c        options, the context, the deployment output, the planner;
 *   hexgen2_est.c    the estimator: one group's layout, rate and latency, the
 *                    group cache, KV transfer and NIC times;
 *   hexgen2_place.c  placements and their evaluation (the flow network);
 *   hexgen2_search.c the initial placement and the guided / random / GA
 *                    searches.
 *
 * Invariants of the context (asserted where they are relied on):
 *   - the group cache is open addressing over ent[]: tab_cap is a power of
 *     two, at most half full (n_ent * 2 <= tab_cap), tab[p].i is -1 or an
 *     index < n_ent, and an entry's id is its index (stable: entries are
 *     never freed or moved before hs_hg2_ctx_destroy);
 *   - an entry's key is its GPU ids sorted by (node, type, id): distinct and
 *     in [0, c->n_gpus);
 *   - the pair cache (pkey / pval) is open addressing too: p_cap is 0 or a
 *     power of two, at most half full; key 0 marks an empty slot;
 *   - kvbuf is all zero between hs_hg2_kv_time calls;
 *   - not thread-safe: scratch, kvbuf, touched and the sort's cluster are
 *     shared by every call. */
#ifndef HS_PLAN_HEXGEN2_INT_H
#define HS_PLAN_HEXGEN2_INT_H

#include <stdint.h>
#include <stdio.h>

#include "core/rng.h"
#include "perf/overhead.h"
#include "plan/hexgen2.h"

/* One cached group evaluation: the key (role, caps, sorted GPU set) and the
 * result.  Owned by the context; g.tp holds tp, layers and gpus in one
 * block of 2 HS_MAX_PP + n ints. */
typedef struct hs__hg2_centry {
    uint64_t h;                 /* hash of the key */
    int role, t_only, pp_only, n;
    int *key;                   /* sorted GPU ids [n] */
    hs_hg2_group g;
} hs__hg2_centry;

struct hs_hg2_ctx {
    int oom;                    /* an evaluation ran out of memory (reads as "does not fit") */
    const hs_model *m;
    const hs_cluster *c;
    hs_engine_cfg ec;
    hs_perf_cfg pc;
    hs_ovh_profile ovh;         /* engine profile of pc.engine; n = 0: none */
    uint64_t lat_fp;            /* fingerprint of the latency model's inputs, keying
                                 * hexgen2_est.c's unit tables; 0: not yet taken */
    int bits, max_tokens;       /* weight bits; tokens a step (activations) */
    int32_t mml;                /* tokens, max model length (one lane's context) */
    hs_hg2_opts o;
    hs_slo slo;                 /* the run's latency targets (0: none), for the plan's warning */
    int tps[8], n_tps;          /* TP caps tried: powers of two <= max_tp dividing the heads, ascending */
    double kvbtl;               /* KV bytes per token per layer, all heads */
    hs_rng rng;                 /* the searches' stream (xorshift64*, core/rng.h) */
    hs__hg2_centry **ent;       /* group cache entries [n_ent], capacity cap_ent */
    long n_ent;
    size_t cap_ent;
    struct hs__hg2_slot {
        int32_t i;              /* entry index, -1 empty */
        uint32_t h;             /* its hash's high half: most probes end here */
    } *tab;                     /* open addressing [tab_cap] */
    long tab_cap;
    int *scratch;               /* [n_gpus] */
    double *kvbuf;              /* [2 n_gpus] zero between kv_time calls */
    int *touched;               /* [2 n_gpus] */
    uint64_t *pkey;             /* KV time per (group id, group id) + 1, 0 empty */
    double *pval;
    long p_n, p_cap;
    double *nicbw;              /* [2 n_gpus] GPU g's NIC capacity (bytes/s): its largest
                                 * bandwidth to (nicbw[g]) and from (nicbw[n + g]) a GPU
                                 * of another node, as hw/net.h builds it; 0: none */
    /* hs_hg2_evaluate's memo by slot pair (hexgen2_place.c): for slots i, j
     * of a placement of sp_K slots, two ways w: sp_key[2 (i sp_K + j) + w]
     * = the (prefill, decode) group ids it was computed for + 1 (0: none),
     * sp_val their KV time (hs__hg2_pair_time), sp_cross their crossing of
     * nodes; way 0 the newer.  A
     * search's candidates differ from each other in a group or two, so
     * most pairs hit without hashing. */
    uint64_t *sp_key;
    double *sp_val;
    unsigned char *sp_cross;
    int sp_K;
    double *cbase;              /* [sp_K^2] contention's fluid pair capacities */
    void *cres;                 /* contention's resource buffer (hs__hg2_res), cres_cap entries */
    size_t cres_cap;
    double *crho, *crhob;       /* [2n + n^2] each, by resource id: contention's loads,
                                 * all zero between calls; NULL until first used */
    /* hs_hg2_evaluate's memo of groups by slot: slot k of the last
     * placement of sg_K slots evaluated held GPUs sg_mem[k n ..) (sg_n[k]
     * of them, by id) in role sg_role[k], group sg[k] (NULL: none) */
    const hs_hg2_group **sg;
    int *sg_n, *sg_role, *sg_mem, sg_K;
    /* contention's memo of hs__hg2_pair_res, direct-mapped by the pair's
     * group ids: rm_key[s] = ids + 1 (0: empty), its rm_m[s] resources at
     * rm_pool + rm_off[s], latency rm_lat[s]; the pool is emptied (every
     * key with it) when full */
    uint64_t *rm_key;
    long *rm_off;
    int *rm_m;
    double *rm_lat;
    void *rm_pool;
    long rm_used, rm_cap;
    hs_hg2_stats st;
    double t0;                  /* s, monotonic clock at the start of the search */
    double cpu0;                /* s, the process's CPU clock then */
    double prog_next;           /* s since t0 of the next progress line */
    int prog_tty;               /* progress shown: -1 not decided yet */
    int prog_shown;             /* a progress line was written (end it with a newline) */
    char name[32];              /* planner name for progress lines */
    FILE *trace;
};

/* ---- hexgen2.c */

/* Seconds of CPU time the process has used (statistics only). */
double hs__hg2_cpu_s(void);

/* ---- hexgen2_est.c */

/* hs_hg2_kv_time memoised per pair of cached groups (ids are stable);
 * groups that are not cached (id < 0) are computed each time.  Both groups
 * fit (ok) and share no GPU. */
double hs__hg2_pair_time(hs_hg2_ctx *x, const hs_hg2_group *a, const hs_hg2_group *b);
/* Spreads ev's flow (an evaluation of p) over the prefill groups, then the
 * decode groups, as evenly as their capacities and the links allow: the
 * smallest share of capacity every group of a role can keep while the
 * whole flow still passes (hexgen2_place.c).  ev->flow is unchanged;
 * gflow and pair are the spread flows.  Returns 0 or an error. */
int hs__hg2_balance(const hs_hg2_place *p, hs_hg2_eval *ev, hs_err *err);
/* Per request, the longest time one GPU of the group spends on its NIC
 * (egress for prefill, ingress for decode): the bytes of its stage's layers
 * over its NIC capacity, the largest bandwidth to another node (hw/net.h);
 * 0 when the group's GPUs have no other node.  g fits (ok). */
double hs__hg2_nic_time(const hs_hg2_ctx *x, const hs_hg2_group *g, int ingress);
/* One network resource of hw/net.h a KV hand-over uses and how long one
 * request keeps it busy (s): id g is GPU g's NIC egress, n + g its
 * ingress, 2n + i n + j the link (same node) or pair cap (across nodes)
 * of GPUs i -> j, n = GPUs of the cluster; tb: the part of t carried by
 * flows whose pair bandwidth can take the whole resource (bursty). */
typedef struct hs__hg2_res {
    long id;
    double t, tb;
} hs__hg2_res;
/* The resources of one request's hand-over a -> b, the engine's flows
 * (serve/handover.c), into out[0..cap) by ascending id; returns their
 * count (cap >= 3 |a| |b|, in GPUs, always suffices: one flow per GPU
 * pair; -1 when cap is short), *lat the largest flow latency.  a and b
 * fit (ok), share no GPU. */
int hs__hg2_pair_res(const hs_hg2_ctx *x, const hs_hg2_group *a, const hs_hg2_group *b,
                     hs__hg2_res *out, int cap, double *lat);

/* ---- hexgen2_place.c */

/* Allocates a placement of n GPUs with K = n slots: group[] uninitialised,
 * role[] zero, no fixed layouts.  Returns 0, or -1 (out of memory: *p is
 * then empty). */
int hs__hg2_place_alloc(hs_hg2_place *p, int n);
/* Copies groups, roles and K from s into d (both of s->n_gpus GPUs; the
 * fixed layouts are not copied). */
void hs__hg2_place_copy(hs_hg2_place *d, const hs_hg2_place *s);

#endif
