/* engine.h - the discrete-event serving engine.
 *
 * One run: arrivals stream from a source (one pending arrival in the queue
 * at a time), a router assigns each to a replica lane, lanes run
 * iterations composed by the runtime policy, and every request ends in the
 * sink as finished or dropped.  Events: ARRIVAL, KICK (a lane may start an
 * iteration; deferred to the end of the instant so simultaneous arrivals
 * batch together), ITER_END and NET (the network's next flow event: KV
 * hand-overs of disaggregated replicas, handover.c).
 *
 * Invariants: INV-1 the clock never goes back (evq); INV-CONS every arrival
 * is finished or dropped when hs_engine_run returns 0
 * (arrivals == completed + dropped); INV-KV per lane (runtime.h). */
#ifndef HS_ENGINE_H
#define HS_ENGINE_H

#include "core/conf.h"
#include "core/err.h"
#include "core/evq.h"
#include "hw/net.h"
#include "serve/runtime.h"
#include "serve/schedule.h"
#include "serve/sink.h"
#include "workload/workload.h"

typedef struct hs_engine {
    hs_engine_cfg cfg;
    const hs_policy_ops *policy;
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
    hs_lane **lanes;          /* all lanes, flat */
    int32_t n_lanes;
    hs_req *pool;
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
} hs_engine;

/* Creates an engine over replicas (owned by the caller, outlive the engine),
 * a source and a sink, routing arrivals with router (hs_routers[],
 * runtime.h; HS_EINVAL when NULL).  max_model_len: context limit in tokens.
 * The cluster is read during the call (the network model of disaggregated
 * deployments); a deployment with prefill replicas needs decode replicas
 * and the reverse. */
int hs_engine_create(hs_engine **out, const hs_engine_cfg *cfg,
                     const hs_policy_ops *policy, const hs_router_ops *router,
                     hs_replica *replicas, int32_t n_replicas, hs_source *src,
                     const hs_sink *sink, int32_t max_model_len,
                     const hs_cluster *cluster, hs_err *err);

/* Runs until the source is exhausted and every request has ended.
 * Returns 0, or the error raised by the source or the sink. */
int hs_engine_run(hs_engine *e, hs_err *err);

void hs_engine_destroy(hs_engine *e);

/* Asks lane l to look for work at the end of the current instant (a no-op
 * while it is busy or already asked).  Policies whose lanes wait for each
 * other (rra) wake their siblings with it. */
void hs_engine_kick(hs_engine *e, hs_lane *l);

/* Checks every lane's invariants (INV-KV, INV-DEC); 1 when sane. */
int hs_engine_audit(hs_engine *e);

#endif
