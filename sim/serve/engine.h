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

#include <stdint.h>

#include "core/conf.h"
#include "core/err.h"
#include "core/evq.h"
#include "hw/net.h"
#include "serve/runtime.h"
#include "serve/schedule.h"
#include "serve/sink.h"
#include "workload/workload.h"

typedef struct hs_engine hs_engine;   /* opaque; plug-ins see it through serve/plugin.h */

/* Counters of a run (hs_engine_stats). */
typedef struct hs_engine_stats {
    hs_ns now;               /* the clock */
    hs_ns end_time;          /* time of the last event, once the run returned */
    int64_t arrivals, completed, dropped, truncated, preemptions, iterations, handoffs;
    uint64_t events;         /* events handled */
} hs_engine_stats;

/* One replica's state at a time t (hs_engine_replica_load). */
typedef struct hs_replica_load {
    hs_ns busy_ns;           /* lane-ns spent in iterations up to t, all lanes */
    int64_t blocks_total, blocks_used;
    int64_t running, waiting;/* decoding requests; waiting requests */
    int32_t lanes;
} hs_replica_load;

/* Creates an engine over replicas, a source and a sink, running policy
 * with options popts (NULL: its defaults) and routing arrivals with router
 * (hs_routers[], runtime.h; HS_EINVAL when NULL).  max_model_len: context
 * limit in tokens.  The cluster is read during the call (the network model
 * of disaggregated deployments); a deployment with prefill replicas needs
 * decode replicas and the reverse.
 * Ownership: the replicas, source and sink stay the caller's and must
 * outlive the engine; the engine hangs its lanes on the replicas
 * (replicas[i].lanes, n_lanes, stage_free) and hs_engine_destroy takes
 * them off again, so the replicas can serve another engine afterwards. */
int hs_engine_create(hs_engine **out, const hs_engine_cfg *cfg,
                     const hs_policy_ops *policy, const void *popts, const hs_router_ops *router,
                     hs_replica *replicas, int32_t n_replicas, hs_source *src,
                     const hs_sink *sink, int32_t max_model_len,
                     const hs_cluster *cluster, hs_err *err);

/* Runs until the source is exhausted and every request has ended.
 * Returns 0, or the error raised by the source or the sink. */
int hs_engine_run(hs_engine *e, hs_err *err);

void hs_engine_destroy(hs_engine *e);

/* The run's counters. */
void hs_engine_stats_get(const hs_engine *e, hs_engine_stats *out);
/* Replica i's lanes as of time t (the engine's clock, or a sample instant
 * not after it: an iteration in flight counts up to t). */
void hs_engine_replica_load(const hs_engine *e, int32_t i, hs_ns t, hs_replica_load *out);

/* Optional observers, set after create and before run; the engine does not
 * own ctx.
 *  - trace: writes the executed schedule of the replicas it wants
 *    (schedule.h); turns fast-forward off.
 *  - timeline: told every iteration, preemption and KV hand-over
 *    (sink.h); leaves fast-forward on (each step of a run is told).
 *  - progress: called every 2^16 events.
 *  - sample: called with the state at every multiple t of period (ns,
 *    > 0) of simulated time up to the last event, before events later than
 *    t are handled; a nonzero return stops the run with that code.  In a
 *    gap where no iteration runs, only the gap's first and last multiples
 *    are sampled (the others would repeat the last), so a trace with a long
 *    idle gap costs two samples, not one per period. */
void hs_engine_set_trace(hs_engine *e, hs_sched_writer *w);
void hs_engine_set_timeline(hs_engine *e, const hs_timeline *tl);
void hs_engine_on_progress(hs_engine *e, void (*fn)(void *ctx, const hs_engine *e), void *ctx);
void hs_engine_on_sample(hs_engine *e, hs_ns period, int (*fn)(void *ctx, const hs_engine *e, hs_ns t),
                         void *ctx);

/* Checks every lane's invariants (INV-KV, INV-DEC); 1 when sane. */
int hs_engine_audit(hs_engine *e);

#endif
