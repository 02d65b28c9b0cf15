/* route.c - the routers: which replica an arrival goes to (hs_router_names,
 * hs_router_parse, hs__route), which lane of a replica takes it
 * (hs__pick_lane), and which decode replica takes a disaggregated hand-over
 * (hs__pick_decode).
 *
 * Routers see only what a real router knows at arrival: per replica the
 * outstanding request count and prompt tokens (e->load_req, e->load_tok),
 * and the static weights; never a request's output length.  A replica of
 * weight 0 is switched off (hs_engine_create made sure every side has one
 * that is on).  Every choice is deterministic: ties go to the lowest index. */
#include "serve/engine_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const hs_router_names[] = {"rr", "lor", "lot", "weighted", NULL};

int hs_router_parse(const char *name)
{
    for (int i = 0; hs_router_names[i]; i++)
        if (!strcmp(hs_router_names[i], name)) return i;
    return -1;
}

/* Arrivals go to colocated and prefill replicas of positive weight (create
 * made sure there is one). */
static int admits(const hs_engine *e, int32_t i)
{
    return e->replicas[i].role_kind != HS_ROLE_DECODE && e->replicas[i].weight > 0;
}

int32_t hs__route(hs_engine *e, const hs_req *q)
{
    int32_t best = 0;
    (void)q;
    switch (e->router) {
    case HS_ROUTE_RR:
        do best = (int32_t)(e->rr_next++ % e->n_replicas);
        while (!admits(e, best));
        break;
    case HS_ROUTE_LOR:
    case HS_ROUTE_LOT: {
        const int64_t *load = e->router == HS_ROUTE_LOR ? e->load_req : e->load_tok;
        double bv = INFINITY;
        /* A replica of weight 0 is switched off. */
        for (int32_t i = 0; i < e->n_replicas; i++) {
            double w = e->replicas[i].weight, v;
            if (!admits(e, i)) continue;
            v = (double)load[i] / w;
            if (v < bv) {
                bv = v;
                best = i;
            }
        }
        break;
    }
    case HS_ROUTE_WEIGHTED: {
        /* Smooth weighted round robin (nginx): deterministic, proportional. */
        double total = 0, bv = -INFINITY;
        for (int32_t i = 0; i < e->n_replicas; i++) {
            if (!admits(e, i)) continue;
            e->wrr[i] += e->replicas[i].weight;
            total += e->replicas[i].weight;
            if (e->wrr[i] > bv) {
                bv = e->wrr[i];
                best = i;
            }
        }
        e->wrr[best] -= total;
        break;
    }
    }
    return best;
}

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
