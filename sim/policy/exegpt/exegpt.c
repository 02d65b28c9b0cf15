/* exegpt.c - ExeGPT's runtime policies (ASPLOS'24, papers/exegpt.txt
 * Sec. 4 and 5.2): RRA and WAA, the schedules the exegpt planner chooses
 * (plan/exegpt.h) run on the event-driven engine.
 *
 * rra  Round-robin allocation: one pipeline (a colocated replica whose
 *      stages hold consecutive layers, partial TP as laid out by the
 *      planner) alternates an encoding phase - B_E new queries prefilled
 *      together, nothing decoding - with N_D decoding iterations of every
 *      running query.  The replica's lanes (one per stage) are its micro-
 *      batches: each lane runs the alternation on its share of B_E, and the
 *      FIFO stage reservations pipeline them as ExeGPT's micro-batches are.
 * waa  Workload-aware allocation: a prefill ("encode") replica runs only
 *      encoding batches of B_E queries, back to back; each query's KV moves
 *      layer by layer to the decode replica (handover.c's hand-over over the
 *      links, hw/net.h), whose lanes (the decoder micro-batches B_m) run
 *      decoding iterations only.  Encoder and decoder run asynchronously; a
 *      decoder short of KV blocks stalls the hand-overs, and the held prompt
 *      KV stalls the encoder (back-pressure).  On a colocated replica waa
 *      runs as rra with N_D = 1 (the paper's WAA estimate assumes one
 *      encoding per decoding iteration).
 *
 * Both: early termination - a finished query leaves the decode set at once
 * and its KV blocks are freed (paged KV makes compaction implicit).  B_E is
 * split over the encoding lanes, the remainder rotating from phase to
 * phase so every lane gets B_E / lanes on average and a lane with a zero
 * share this phase gets one later (a fixed zero share would strand its
 * queue).
 *
 * Options (engine.exegpt_*, declared here, exegpt.h) are B_E, N_D, the
 * decoding target and the adjustment threshold; the exegpt planner writes
 * them into its deployments.
 *
 * Dynamic adjustment (Sec. 5.2), on when engine.exegpt_adjust > 0 with
 * threshold thr:
 *   - encoder workload: an encoding batch keeps taking queries while its
 *     prompt tokens are below (1 - thr) of count x mean prompt and stops
 *     before exceeding (1 + thr) of it (at least one query), so batches
 *     stay near the mean workload whatever the prompt lengths;
 *   - decoder workload: when the decoding population (the replica's lanes
 *     for rra; all decode replicas for waa) deviates from engine.exegpt_bd
 *     by more than thr, a lane's share of B_E is scaled by target /
 *     population, up to 2 B_E / lanes + 1 (adjust_share). */
#include "policy/exegpt/exegpt.h"

#include <math.h>

#include "serve/plugin.h"

const hs_field hs_exegpt_rt_fields[] = {
    HS_FIELD_NUM(hs_exegpt_rt, exegpt_be, HS_F_INT, 0, 16, 1, 65536, "rra/waa: encoder batch B_E (queries per encoding phase)"),
    HS_FIELD_NUM(hs_exegpt_rt, exegpt_nd, HS_F_INT, 0, 8, 1, 1 << 20, "rra: decoding iterations per encoding phase N_D"),
    HS_FIELD_NUM(hs_exegpt_rt, exegpt_bd, HS_F_DOUBLE, 0, 0, 0, 1e9, "rra/waa: target decoding population (0: no decoder adjustment)"),
    HS_FIELD_NUM(hs_exegpt_rt, exegpt_adjust, HS_F_DOUBLE, 0, 0.1, 0, 1, "rra/waa: dynamic workload adjustment threshold (0: off)"),
    HS_FIELD_NUM(hs_exegpt_rt, exegpt_prompt_mean, HS_F_DOUBLE, 0, 0, 0, 1e9, "rra/waa: mean prompt tokens for the encoder workload target (0: running mean)"),
    {0},
};

void hs_exegpt_rt_defaults(hs_exegpt_rt *o)
{
    hs_conf_defaults(o, hs_exegpt_rt_fields);
}

enum { PH_ENC = 0, PH_DEC = 1 };

/* A lane's phase (lane->pstate): the standard decode set stays the lane's,
 * so the decode-set audit applies. */
typedef struct phase {
    int32_t mode, left;
    int64_t count;
    hs_ns start;          /* when the current phase began */
} phase;

static inline phase *ph(const hs_lane *l) { return l->pstate; }
static inline const hs_exegpt_rt *opt(const hs_engine *e) { return hs_engine_popts(e); }

/* Lane k of n's share of b in phase j: b split as evenly as integers
 * allow, the larger shares rotating with j. */
static int32_t share(int32_t b, int32_t n, int64_t j, int32_t k)
{
    int32_t base = b / n, rem = b % n;
    int64_t slot = (k + j) % n;
    return base + (slot < rem);
}

static double prompt_mean(const hs_engine *e)
{
    if (opt(e)->exegpt_prompt_mean > 0) return opt(e)->exegpt_prompt_mean;
    /* Running mean of the prompts seen so far (the arrivals' only
     * workload statistic a runtime has). */
    return e->arrivals > 0 ? (double)e->prompt_tokens_seen / (double)e->arrivals : 0;
}

/* The encoding batch's bounds: `want` queries, or with the adjustment on,
 * a workload band around want x mean prompt (fill up to the lower edge
 * even past the count, never past the upper edge; at least one query). */
typedef struct enc_band {
    int32_t want, n;
    double thr, pm, tok;
} enc_band;

static int band_ok(void *ctx, hs_engine *e, hs_lane *l, int32_t r, const char **why)
{
    enc_band *b = ctx;
    const hs_req *q = hs_req_at(e, r);
    (void)l;
    (void)why;
    if (b->thr > 0 && b->pm > 0 && b->n > 0) {
        double lo = (1 - b->thr) * b->want * b->pm, hi = (1 + b->thr) * b->want * b->pm;
        if (b->tok + q->prefill_len > hi) return HS_ADMIT_STOP;
        if (b->n >= b->want && b->tok >= lo) return HS_ADMIT_STOP;
    } else if (b->n >= b->want) {
        return HS_ADMIT_STOP;
    }
    b->tok += q->prefill_len;
    b->n++;
    return HS_ADMIT_OK;
}

/* Admits one encoding batch of whole prompts; returns the count.
 * engine.max_batched_tokens caps it (and sizes the activation memory); the
 * exegpt planner sets it from B_E. */
static int32_t encode_batch(hs_engine *e, hs_lane *l, int32_t want)
{
    enc_band b = {want, 0, opt(e)->exegpt_adjust, prompt_mean(e), 0};
    int32_t n = hs_lane_admit_fcfs(e, l, e->cfg.max_batched_tokens, 0, band_ok, &b);
    return n < 0 ? 0 : n;
}

/* One decoding iteration of the lane's decode set; 0 when it is empty (or
 * everything was preempted back to waiting). */
static int decode_step(hs_engine *e, hs_lane *l)
{
    return hs_lane_decode_setup(e, l) > 0;
}

static int32_t lane_index(const hs_engine *e, const hs_lane *l)
{
    return (int32_t)(l - e->replicas[l->replica].lanes);
}

/* Sec. 5.2's decoder-workload rule: a lane's share of B_E, scaled by
 * target / population when the decoding population strays from the target
 * by more than the threshold (proportional, so noise does not swing it). */
static int32_t adjust_share(const hs_engine *e, int32_t want, int32_t lanes, double pop)
{
    double thr = opt(e)->exegpt_adjust, target = opt(e)->exegpt_bd;
    if (thr > 0 && target > 0 && fabs(pop - target) > thr * target) {
        double w = want * target / fmax(pop, 1), cap = 2.0 * opt(e)->exegpt_be / lanes + 1;
        want = (int32_t)lround(w > cap ? cap : w);
    }
    return want;
}

/* RRA's encoder batch for this lane and phase; the population is the
 * replica's (all its lanes) once the batch joins. */
static int32_t rra_want(hs_engine *e, hs_lane *l)
{
    const hs_replica *rp = &e->replicas[l->replica];
    int32_t k = rp->n_lanes;
    double pop = opt(e)->exegpt_be;
    for (int32_t i = 0; i < k; i++) pop += rp->lanes[i].n_dec;
    return adjust_share(e, share(opt(e)->exegpt_be, k, ph(l)->count, lane_index(e, l)), k, pop);
}

/* The replica's lanes are its micro-batches and run ExeGPT's phases in
 * step, as one schedule: encoding phases begin at a common boundary, when
 * no lane is still decoding.  A lane may begin a phase when every sibling
 * that is decoding (or busy) began its own phase at this very instant (the
 * boundary is now); otherwise it waits for the boundary.  Unsynchronised
 * lanes would scatter long encoding micro-batches among the others'
 * decoding iterations and stall them at every stage. */
static int siblings_decoding(const hs_engine *e, const hs_lane *l)
{
    const hs_replica *rp = &e->replicas[l->replica];
    for (int32_t k = 0; k < rp->n_lanes; k++) {
        const hs_lane *j = &rp->lanes[k];
        if (j != l && ph(j)->mode == PH_DEC && (j->n_dec > 0 || j->busy) && ph(j)->start != e->q.now)
            return 1;
    }
    return 0;
}

/* A lane's decoding phase is over: it waits for the next encoding, and
 * siblings waiting for this phase to end may go. */
static void end_phase(hs_engine *e, hs_lane *l)
{
    hs_replica *rp = &e->replicas[l->replica];
    ph(l)->mode = PH_ENC;
    for (int32_t k = 0; k < rp->n_lanes; k++)
        if (&rp->lanes[k] != l) hs_engine_kick(e, &rp->lanes[k]);
}

static int rra_schedule_nd(hs_engine *e, hs_lane *l, int nd)
{
    /* Two rounds at most: an encoding phase with nothing to encode falls
     * through to decoding, a decoding phase with nothing to decode to
     * encoding. */
    for (int round = 0; round < 2; round++) {
        if (ph(l)->mode == PH_ENC) {
            int32_t want;
            /* Nothing to encode or decode: idle, without starting a phase
             * (an empty phase would wake the siblings for nothing). */
            if (l->n_dec == 0 && l->waiting.head < 0) return 0;
            if (siblings_decoding(e, l)) return 0;
            want = l->waiting.head >= 0 ? rra_want(e, l) : 0;
            /* An idle lane with a zero share this phase would sleep with
             * its queue full: nothing else wakes it. */
            if (want == 0 && l->n_dec == 0 && l->waiting.head >= 0) want = 1;
            ph(l)->mode = PH_DEC;
            ph(l)->left = nd;
            ph(l)->count++;
            ph(l)->start = e->q.now;
            if (want > 0 && encode_batch(e, l, want) > 0) return 1;
            if (e->fatal) return 0;
        }
        if (ph(l)->left > 0 && decode_step(e, l)) return 1;
        if (e->fatal) return 0;
        end_phase(e, l);
        if (l->waiting.head < 0) return 0;
    }
    return 0;
}

static void rra_complete(hs_engine *e, hs_lane *l)
{
    if (l->it.decode && ph(l)->left > 0 && --ph(l)->left == 0) end_phase(e, l);
    hs_lane_complete(e, l);
}

static int rra_schedule(hs_engine *e, hs_lane *l)
{
    return rra_schedule_nd(e, l, opt(e)->exegpt_nd);
}

/* Decoding population of the decode replicas: everything handed over and
 * not yet finished (queued for blocks, in transfer, landed, decoding). */
static double decode_population(const hs_engine *e)
{
    double pop = 0;
    for (int32_t i = 0; i < e->n_replicas; i++)
        if (e->replicas[i].role_kind == HS_ROLE_DECODE) pop += (double)e->load_req[i];
    return pop;
}

static int waa_schedule(hs_engine *e, hs_lane *l)
{
    const hs_replica *rp = &e->replicas[l->replica];
    if (rp->role_kind == HS_ROLE_COLOCATED) return rra_schedule_nd(e, l, 1);
    /* Decoder: decoding iterations; a query preempted here for lack of KV
     * blocks is recomputed here first, as continuous batching does. */
    if (rp->role_kind == HS_ROLE_DECODE) return hs_lane_continuous(e, l, 0, NULL, NULL);
    /* Encoder: one batch per iteration while queries wait. */
    {
        int32_t want;
        if (l->waiting.head < 0) return 0;
        want = adjust_share(e, share(opt(e)->exegpt_be, rp->perf.pp, ph(l)->count++, lane_index(e, l)), rp->perf.pp,
                            decode_population(e));
        /* Never zero while queries wait: nothing else would wake the lane. */
        return encode_batch(e, l, want < 1 ? 1 : want) > 0;
    }
}

static void waa_complete(hs_engine *e, hs_lane *l)
{
    if (e->replicas[l->replica].role_kind == HS_ROLE_COLOCATED) rra_complete(e, l);
    else hs_lane_complete(e, l);
}

const hs_policy_ops hs_policy_rra = {
    .name = "rra",
    .help = "ExeGPT RRA: encoding phases of B_E queries alternating with N_D decoding iterations (exegpt planner)",
    .schedule = rra_schedule,
    .complete = rra_complete,
    .opts = hs_exegpt_rt_fields,
    .opts_size = sizeof(hs_exegpt_rt),
    .lane_bytes = sizeof(phase),
    .encdec = 1,
};

const hs_policy_ops hs_policy_waa = {
    .name = "waa",
    .help = "ExeGPT WAA: encode and decode replicas run asynchronously, KV handed over (exegpt planner)",
    .schedule = waa_schedule,
    .complete = waa_complete,
    .opts = hs_exegpt_rt_fields,
    .opts_size = sizeof(hs_exegpt_rt),
    .lane_bytes = sizeof(phase),
    .disagg = 1,
    .encdec = 1,
};
