/* plugin.h - the engine as its plug-ins see it: policies (sim/policy/),
 * routers (serve/routers.c) and white-box tests.  The CLI and other users
 * hold an opaque hs_engine (engine.h) and use its functions.
 *
 * What a plug-in may touch: its own state (lane->pstate, e->rstate, a
 * replica's pstate), the lanes through the mechanisms in runtime.h, and
 * the engine's fields read-only, except where a mechanism says otherwise. */
#ifndef HS_PLUGIN_H
#define HS_PLUGIN_H

#include "serve/engine.h"

struct hs_engine {
    hs_engine_cfg cfg;
    const hs_policy_ops *policy;
    hs_popts popts;           /* the policy's options (hs_engine_popts) */
    const hs_router_ops *router;
    void *rstate;             /* the router's state (router->state_bytes, zeroed; NULL: none) */
    double *kv_wrr;           /* per (prefill, decode) pair, lazily [n_replicas^2] */
    int64_t *kv_pairs;        /* hand-overs routed by kv_route per pair (same shape) */
    /* Router view per replica, contiguous so a scan stays in cache:
     * outstanding requests and prompt tokens (known at arrival). */
    int64_t *load_req, *load_tok;
    hs_evq q;
    hs_replica *replicas;
    int32_t n_replicas;
    int32_t n_prefill;        /* replicas of role prefill (hand-over sources) */
    hs_lane **lanes;          /* all lanes, flat */
    int32_t n_lanes;
    hs_req *pool;
    int32_t *eos;             /* [pool_cap] output length per slot: the EOS
                                 oracle, read by hs_req_done and the engine only */
    int32_t pool_cap, free_head;
    hs_source *src;
    hs_arrival pending;
    hs_sink sink;
    int32_t max_model_len;
    int fatal;                /* error code raised inside a callback */
    hs_err fatal_err;         /* its message when the callback had one (else empty) */
    /* counters */
    int64_t arrivals, completed, dropped, truncated, preemptions, iterations;
    int64_t prompt_tokens_seen;   /* sum of arrivals' prompts (policies' running mean) */
    hs_ns end_time;           /* time of the last event */
    /* Disaggregation: KV moves prefill -> decode replica over the network
     * (hw/net.h), one pending NET event at a time. */
    hs_net *net;
    uint64_t net_seq;
    hs_ns net_time;
    int64_t handoffs;
    /* Optional: the executed schedule of chosen replicas (schedule.h).
     * Set after create; turns fast-forward off. */
    hs_sched_writer *trace;
    hs_sched_iter trace_it;   /* scratch for one iteration line */
    int32_t cap_tpre, cap_tdec, cap_tfirst, cap_tfin;
    /* Optional: the timeline observer (sink.h); NULL when none. */
    const hs_timeline *tl;
    /* Optional: called every 2^16 events (progress display). */
    void (*progress)(void *ctx, const struct hs_engine *e);
    void *progress_ctx;
    /* Optional: called with the state at every multiple t of sample_period
     * (ns, > 0) of simulated time up to the last event, before events later
     * than t are handled (time series of utilisation and KV use).  A
     * nonzero return stops the run with that code. */
    int (*sample)(void *ctx, const struct hs_engine *e, hs_ns t);
    void *sample_ctx;
    hs_ns sample_period, sample_next;
};

/* The policy's options (its opts_size bytes, laid out by policy->opts). */
static inline const void *hs_engine_popts(const hs_engine *e) { return e->popts.b; }

/* Asks lane l to look for work at the end of the current instant (a no-op
 * while it is busy or already asked).  Policies whose lanes wait for each
 * other wake their siblings with it. */
void hs_engine_kick(hs_engine *e, hs_lane *l);

#endif
