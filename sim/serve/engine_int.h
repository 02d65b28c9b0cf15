/* engine_int.h - the engine's private interface, shared by the files that
 * make up the engine: engine.c (life cycle, event loop, arrivals, iteration
 * start and end), lane.c (the lane mechanisms the policies call, and kicks),
 * route.c (the router registry, lanes for arrivals and hand-overs),
 * routers.c (the routers), fastforward.c (runs of decode steps in one
 * event), handover.c (disaggregation's KV hand-over and the network event),
 * trace.c (schedule emission) and fail.c (hs__engine_fail).  Not public:
 * policies and routers see serve/plugin.h and runtime.h.  Calls between
 * these files go one way only (tools/deps checks it).
 *
 * Event order is (time, priority, seq) alone (core/evq.h); the type below
 * only says which handler an event goes to. */
#ifndef HS_ENGINE_INT_H
#define HS_ENGINE_INT_H

#include "serve/plugin.h"

/* Event types (hs_event.type); `a` is the lane id for KICK and ITER_END,
 * the request id for ARRIVAL, 0 for NET. */
enum { HS__EV_ARRIVAL = 1, HS__EV_KICK, HS__EV_ITER_END, HS__EV_NET };

/* ---- route.c ---- (arrivals go to e->router->pick, runtime.h) */
/* The lane of rp with the fewest outstanding requests (the first on ties). */
hs_lane *hs__pick_lane(hs_replica *rp);
/* The decode lane for a hand-over from replica src: src's kv_route when it
 * has one, else least outstanding requests per weight; may set e->fatal. */
hs_lane *hs__pick_decode(hs_engine *e, int32_t src);

/* ---- fastforward.c ---- */
/* 1 when the iteration just scheduled on l (on replica rp) may stand for a
 * run of identical decode-only steps. */
int hs__ff_eligible(const hs_engine *e, const hs_lane *l, const hs_replica *rp);
/* Extends the decode step just scheduled on l, ending at end, into a run
 * (sets l->ff_k, takes the run's KV blocks); returns the run's end. */
hs_ns hs__ff_extend(hs_engine *e, hs_lane *l, const hs_replica *rp, hs_ns end);
/* Cuts l's run in flight after the first step ending after t and requeues
 * its ITER_END (on failure: hs__engine_fail). */
void hs__ff_truncate(hs_engine *e, hs_lane *l, hs_ns t);
/* Applies every step of l's run at its ITER_END, then sets ff_k to 1. */
void hs__ff_complete(hs_engine *e, hs_lane *l);

/* ---- handover.c ---- */
/* Hands every request on l->leaving (prompts done on prefill lane l, in
 * completion order) over to a decode replica at the iteration's end. */
void hs__handoff_leaving(hs_engine *e, hs_lane *l);
/* Admits dl's incoming requests (each at its expected final length, one
 * transfer in flight per source replica and lane, handover.c says why)
 * and starts their KV transfers. */
void hs__admit_incoming(hs_engine *e, hs_lane *dl);
/* At an iteration boundary of l: landed requests join its decode set. */
void hs__join_landed(hs_engine *e, hs_lane *l);
/* The NET event: advances the network to now, completes the hand-overs
 * whose last flow landed, queues the network's next event. */
void hs__on_net(hs_engine *e);

/* ---- trace.c ---- */
/* Writes the iteration just scheduled on l to e->trace (the caller checked
 * that the trace wants l's replica); on failure: hs__engine_fail. */
void hs__trace_iter(hs_engine *e, hs_lane *l);
/* Writes arrival q, routed to replica q->replica, to e->trace (the caller
 * checked that the trace wants that replica). */
void hs__trace_request(hs_engine *e, const hs_req *q);
/* Tells e->tl (set: the caller checked) lane l's iteration from start to
 * end, composed as l->it.shape says. */
void hs__tl_iter(hs_engine *e, const hs_lane *l, hs_ns start, hs_ns end);
/* The lane's index within its replica (its lanes are one array), as the
 * timeline names lanes. */
static inline int32_t hs__lane_index(const hs_engine *e, const hs_lane *l)
{
    return (int32_t)(l - e->replicas[l->replica].lanes);
}

#endif
