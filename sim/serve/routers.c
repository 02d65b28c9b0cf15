/* routers.c - the built-in routers (hs_router_ops, runtime.h), registered
 * in route.c's hs_routers[]:
 *   rr        round robin over the replicas that take arrivals;
 *   lor, lot  least outstanding requests / prompt tokens per unit of weight;
 *   weighted  smooth weighted round robin on the replicas' weights (nginx).
 * They share one file because each is a few lines and they share helpers
 * (lor and lot are one scan over a different load array); a larger router
 * goes in a file of its own.
 *
 * Each sees what a real router knows at arrival (the engine's load arrays,
 * the weights), never a request's output length, and returns a replica for
 * which hs_router_admits holds; ties go to the lowest index.  State: rr's
 * count and weighted's current weights live in e->rstate (their
 * state_bytes); lor and lot keep none. */
#include "serve/plugin.h"

#include <math.h>

/* ---- rr ---- */

/* State: the positions the round has passed, skipped replicas included. */
static size_t rr_state(const hs_engine *e)
{
    (void)e;
    return sizeof(int64_t);
}

static int32_t rr_pick(hs_engine *e, const hs_req *q)
{
    int64_t *next = e->rstate;
    int32_t best;
    (void)q;
    do best = (int32_t)((*next)++ % e->n_replicas);
    while (!hs_router_admits(e, best));
    return best;
}

const hs_router_ops hs_router_rr = {
    .name = "rr",
    .help = "round robin",
    .pick = rr_pick,
    .state_bytes = rr_state,
};

/* ---- lor, lot ---- */

/* The replica taking arrivals with the least load[i] / weight. */
static int32_t least_load(const hs_engine *e, const int64_t *load)
{
    int32_t best = 0;
    double bv = INFINITY;
    for (int32_t i = 0; i < e->n_replicas; i++) {
        double v;
        if (!hs_router_admits(e, i)) continue;
        v = (double)load[i] / e->replicas[i].weight;
        if (v < bv) {
            bv = v;
            best = i;
        }
    }
    return best;
}

static int32_t lor_pick(hs_engine *e, const hs_req *q)
{
    (void)q;
    return least_load(e, e->load_req);
}

static int32_t lot_pick(hs_engine *e, const hs_req *q)
{
    (void)q;
    return least_load(e, e->load_tok);
}

const hs_router_ops hs_router_lor = {
    .name = "lor",
    .help = "least outstanding requests",
    .pick = lor_pick,
};

const hs_router_ops hs_router_lot = {
    .name = "lot",
    .help = "least outstanding prompt tokens",
    .pick = lot_pick,
};

/* ---- weighted ---- */

/* State: the current weight of every replica, [n_replicas]. */
static size_t weighted_state(const hs_engine *e)
{
    return (size_t)e->n_replicas * sizeof(double);
}

/* Smooth weighted round robin: every replica taking arrivals gains its
 * weight, the one with the most current weight wins and loses the total;
 * deterministic and proportional to the weights. */
static int32_t weighted_pick(hs_engine *e, const hs_req *q)
{
    double *cur = e->rstate;
    double total = 0, bv = -INFINITY;
    int32_t best = 0;
    (void)q;
    for (int32_t i = 0; i < e->n_replicas; i++) {
        if (!hs_router_admits(e, i)) continue;
        cur[i] += e->replicas[i].weight;
        total += e->replicas[i].weight;
        if (cur[i] > bv) {
            bv = cur[i];
            best = i;
        }
    }
    cur[best] -= total;
    return best;
}

const hs_router_ops hs_router_weighted = {
    .name = "weighted",
    .help = "smooth weighted round robin on replica weights",
    .pick = weighted_pick,
    .state_bytes = weighted_state,
};

int hs_router_admits(const hs_engine *e, int32_t i)
{
    return e->replicas[i].role_kind != HS_ROLE_DECODE && e->replicas[i].weight > 0;
}
