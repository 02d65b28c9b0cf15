/* net.h - fluid, max-min fair transfers between GPUs (KV-cache hand-over,
 * weight or head migration).
 *
 * Resource model, built once from an hs_cluster:
 *   - two GPUs of the same node: one directed link per ordered pair (i -> j)
 *     of capacity bw(i,j) (NVLink or PCIe peer-to-peer, per direction);
 *   - two GPUs of different nodes: the flow i -> j uses i's NIC egress and
 *     j's NIC ingress.  A GPU's egress capacity is the largest bw(i,k) over
 *     GPUs k of other nodes (its ingress: the largest bw(k,i)), so the
 *     concurrent cross-node flows of one GPU share its NIC.  Each cross-node
 *     flow is also capped by its own pair bandwidth bw(i,j).
 * A flow therefore uses 1 (intra-node) or 2 (inter-node) shared resources
 * plus, across nodes, its own pair cap.
 *
 * Limits of the model (stated, not hidden): no switch or spine
 * oversubscription (the fabric between NICs is non-blocking), no sharing of a
 * PCIe root complex or host bridge between GPUs of one host, no NVSwitch port
 * limit beyond the per-pair link, no protocol overhead beyond what the
 * cluster's bandwidth figures already include, and the egress and ingress of
 * a NIC are independent (full duplex).  An intra-node link carries only the
 * flows of its own (i -> j) pair.
 *
 * Flows are fluid.  hs_net_start() puts a flow in a latency phase of
 * lat(src,dst) during which it uses no bandwidth; then it transfers its bytes
 * at its max-min fair rate.  Rates are recomputed by progressive filling
 * (water-filling, exact) whenever the set of transferring flows changes: a
 * flow finishes its latency phase, completes, or is cancelled.  Between such
 * changes every rate is constant, so each flow's completion time is exact up
 * to rounding up to the next ns (a flow is never reported early).
 *
 * Invariants (asserted in debug builds via hs__net_sane):
 *   NET-1 on every resource the sum of the rates of its flows never exceeds
 *         its capacity (up to a relative 1e-9 for floating-point rounding),
 *         and no cross-node flow exceeds its pair cap;
 *   NET-2 max-min fairness: every transferring flow is at its pair cap or
 *         crosses a saturated resource on which no flow is faster (tested);
 *   NET-3 a flow's remaining bytes never increase and lie in [0, bytes];
 *         bytes delivered by completed flows equal the bytes they started with;
 *   NET-4 completions are reported in (finish time, flow id) order, each at
 *         most once, never before the fluid completion time.
 * Determinism: every tie (equal water levels, equal finish times) is broken
 * by flow id, then by resource index; no hashing, no wall clock.
 *
 * Cost: a rate update is O(F k log F) for F transferring flows and k <= 2
 * resources per flow (a heap of water levels); hs_net_next_event() is O(1)
 * (cached).  Memory is O(R + peak concurrent flows) where R is the number of
 * resources (sum over nodes of gpus^2, plus 2 per GPU); slots are reused
 * through a free list, while ids (64-bit, ((serial << 24) | slot)) stay
 * unique for the whole run and increase with start order.
 *
 * How an event loop drives it (the engine owns events; this module owns no
 * queue):
 *
 *     // starting a transfer at `now`
 *     hs_net_start(net, now, src, dst, bytes, request_id, &fid, err);
 *     reschedule();
 *
 *     // on the NET event at `now` (or any event, before reading flows)
 *     hs_net_advance(net, now);
 *     while (hs_net_pop_done(net, now, &tag, NULL))
 *         kv_transfer_done(tag, now);           // may start new flows
 *     reschedule();
 *
 *     // reschedule(): keep exactly one pending NET event
 *     hs_ns t = hs_net_next_event(net);
 *     if (t != net_ev_time) {
 *         if (net_ev_seq) hs_evq_cancel(q, net_ev_seq);
 *         net_ev_seq = t == HS_NS_MAX ? 0
 *                    : hs_evq_push(q, t, HS_PRIO_TRANSFER, EV_NET, 0, 0);
 *         net_ev_time = t;
 *     }
 *
 * Any call taking `now` first advances the network to `now`, so an engine
 * that is late by a few events still gets exact piecewise-constant answers;
 * `now` must never go backwards. */
#ifndef HS_NET_H
#define HS_NET_H

#include <stdint.h>

#include "core/err.h"
#include "core/time.h"
#include "hw/hw.h"

typedef struct hs_net hs_net;

enum {
    HS_NET_LATENCY = 1,  /* waiting lat(src,dst), no bandwidth used */
    HS_NET_XFER = 2,     /* transferring at its fair rate */
    HS_NET_DONE = 3      /* finished, not yet popped */
};

/* A flow as seen by hs_net_flow_get (a copy). */
typedef struct hs_net_flow {
    uint64_t id;
    int64_t tag;          /* caller's value */
    int src, dst;         /* GPU indices */
    int phase;            /* HS_NET_* */
    double bytes;         /* bytes, as started */
    double remaining;     /* bytes, as of the network's current time */
    double rate;          /* bytes/s, 0 outside HS_NET_XFER */
    double cap;           /* bytes/s, pair cap bw(src,dst) */
    hs_ns t_start;        /* ns */
    hs_ns t_ready;        /* ns, end of the latency phase */
    hs_ns t_done;         /* ns: actual when DONE, predicted when XFER at the
                           * current rates, HS_NS_MAX in the latency phase */
} hs_net_flow;

/* A completed flow, as returned by hs_net_pop_done. */
typedef struct hs_net_done {
    uint64_t id;
    int64_t tag;
    int src, dst;
    double bytes;         /* bytes */
    hs_ns t_start, t_done;/* ns */
} hs_net_done;

typedef struct hs_net_stats {
    int n_latency, n_xfer, n_done;   /* flows in each phase now */
    int slot_cap;                    /* slots allocated (peak concurrency) */
    int n_resources;
    uint64_t started, completed, cancelled;
    uint64_t rate_updates;           /* water-filling runs */
    double bytes_started, bytes_completed;  /* bytes */
} hs_net_stats;

/* Builds the resource model of `c` (which is only read during the call).
 * Returns 0, HS_EINVAL (no GPUs, non-finite or non-positive off-diagonal
 * bandwidth, negative latency) or HS_ENOMEM. */
int hs_net_create(hs_net **out, const hs_cluster *c, hs_err *err);
void hs_net_destroy(hs_net *net);  /* NULL is a no-op */

/* Starts a transfer of `bytes` (finite, >= 0) from GPU src to GPU dst
 * (src != dst) at `now` (>= the network's time).  *flow_id (may be NULL)
 * receives the id.  A flow of 0 bytes completes when its latency phase ends.
 * Returns 0, HS_EINVAL or HS_ENOMEM; on failure nothing changed except that
 * the network may have advanced to `now`. */
int hs_net_start(hs_net *net, hs_ns now, int src, int dst, double bytes,
                 int64_t tag, uint64_t *flow_id, hs_err *err);

/* Advances every flow to `now` (>= the network's time; earlier is ignored),
 * processing in time order every latency end and completion up to `now`.
 * Never allocates, never fails. */
void hs_net_advance(hs_net *net, hs_ns now);

/* Earliest time at which anything changes: a latency phase ends, a flow
 * completes, or a completed flow waits to be popped (then a time <= now).
 * HS_NS_MAX when idle. */
hs_ns hs_net_next_event(const hs_net *net);

/* Advances to `now`, then pops the next completed flow with finish time
 * <= now in (finish time, flow id) order: 1 and *tag (and *info, both may be
 * NULL) filled, or 0 when none.  The flow's id is dead afterwards. */
int hs_net_pop_done(hs_net *net, hs_ns now, int64_t *tag, hs_net_done *info);

/* Cancels a live flow (latency phase, transferring, or completed but not yet
 * popped) at `now` (advancing first); its bandwidth goes to the others and it
 * is never reported.  *sent (may be NULL) receives the bytes it delivered.
 * Returns 0 or HS_ENOTFOUND (unknown, popped or already cancelled id). */
int hs_net_cancel(hs_net *net, hs_ns now, uint64_t flow_id, double *sent);

/* Copies flow `flow_id` as of the network's current time; 0 or
 * HS_ENOTFOUND. */
int hs_net_flow_get(const hs_net *net, uint64_t flow_id, hs_net_flow *out);

/* The network's current time (ns): the latest `now` it was advanced to. */
hs_ns hs_net_now(const hs_net *net);

/* Resources, for tests and reports.  Indices are dense in [0, n). */
int hs_net_n_resources(const hs_net *net);
int hs_net_res_link(const hs_net *net, int i, int j);  /* -1 unless same node, i != j */
int hs_net_res_egress(const hs_net *net, int i);       /* -1 in a one-node cluster */
int hs_net_res_ingress(const hs_net *net, int i);      /* -1 in a one-node cluster */
double hs_net_res_capacity(const hs_net *net, int res);/* bytes/s */
/* Resources flow src -> dst uses: fills res[0..1], returns 1 or 2. */
int hs_net_route(const hs_net *net, int src, int dst, int res[2]);
/* Sum of the current rates (bytes/s) of the flows on resource `res`:
 * O(transferring flows). */
double hs_net_link_load(const hs_net *net, int res);

void hs_net_get_stats(const hs_net *net, hs_net_stats *out);

/* 1 when NET-1 and the internal lists are consistent (for assert()). */
int hs__net_sane(const hs_net *net);

#endif
