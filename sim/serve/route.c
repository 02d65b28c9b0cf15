/* route.c - routing: the router registry (hs_routers[], hs_router_find),
 * which replicas take arrivals (hs_router_admits), which lane of a replica
 * takes an arrival (hs__pick_lane), and which decode replica takes a
 * disaggregated hand-over (hs__pick_decode).  The routers themselves, which
 * pick the replica of an arrival, are in routers.c (runtime.h has their
 * contract).
 *
 * Like routers, the choices here see only what a real router knows: per
 * replica the outstanding request count (e->load_req), lanes' outstanding
 * requests and the static weights; never a request's output length.  A
 * replica of weight 0 is switched off (hs_engine_create made sure every side
 * has one that is on).  Every choice is deterministic: ties go to the lowest
 * index. */
#include "serve/engine_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const hs_router_ops hs_router_rr;
extern const hs_router_ops hs_router_lor;
extern const hs_router_ops hs_router_lot;
extern const hs_router_ops hs_router_weighted;

const hs_router_ops *const hs_routers[] = {
    &hs_router_rr,
    &hs_router_lor,
    &hs_router_lot,
    &hs_router_weighted,
    NULL,
};

const hs_router_ops *hs_router_find(const char *name)
{
    for (int i = 0; hs_routers[i]; i++)
        if (!strcmp(hs_routers[i]->name, name)) return hs_routers[i];
    return NULL;
}

/* Arrivals go to colocated and prefill replicas of positive weight (create
 * made sure there is one). */
hs_lane *hs__pick_lane(hs_replica *rp)
{
    hs_lane *b = &rp->lanes[0];
    for (int32_t k = 1; k < rp->n_lanes; k++)
        if (rp->lanes[k].out_reqs < b->out_reqs) b = &rp->lanes[k];
    return b;
}

/* The decode replica for a hand-over from src when src has a kv_route
 * (deploy.h): smooth weighted round robin over the route's positive weights
 * toward decode replicas that are on, per source replica, so the pairs'
 * shares follow the planned flows; -1 when the route names none. */
static int32_t pick_decode_route(hs_engine *e, int32_t src)
{
    const hs_replica *sp = &e->replicas[src];
    double total = 0, bv = -INFINITY, *cur;
    int32_t best = -1;
    if (!sp->kv_route) return -1;
    if (!e->kv_wrr) {
        e->kv_wrr = calloc((size_t)e->n_replicas * (size_t)e->n_replicas, sizeof *e->kv_wrr);
        e->kv_pairs = calloc((size_t)e->n_replicas * (size_t)e->n_replicas, sizeof *e->kv_pairs);
        if (!e->kv_wrr || !e->kv_pairs) {
            hs__engine_fail(e, HS_ENOMEM, "out of memory in the engine");
            return -1;
        }
    }
    cur = e->kv_wrr + (size_t)src * (size_t)e->n_replicas;
    for (int32_t j = 0; j < sp->n_kv_route && j < e->n_replicas; j++) {
        double w = sp->kv_route[j];
        if (w <= 0 || e->replicas[j].role_kind != HS_ROLE_DECODE || e->replicas[j].weight <= 0) continue;
        cur[j] += w;
        total += w;
        if (cur[j] > bv) {
            bv = cur[j];
            best = j;
        }
    }
    if (best >= 0) {
        cur[best] -= total;
        e->kv_pairs[(size_t)src * (size_t)e->n_replicas + (size_t)best]++;
    }
    return best;
}

hs_lane *hs__pick_decode(hs_engine *e, int32_t src)
{
    int32_t best = pick_decode_route(e, src);
    double bv = INFINITY;
    if (best >= 0) return hs__pick_lane(&e->replicas[best]);
    for (int32_t i = 0; i < e->n_replicas; i++) {
        const hs_replica *rp = &e->replicas[i];
        double v;
        if (rp->role_kind != HS_ROLE_DECODE || rp->weight <= 0) continue;
        v = (double)e->load_req[i] / rp->weight;
        if (v < bv) {
            bv = v;
            best = i;
        }
    }
    return hs__pick_lane(&e->replicas[best]);
}
