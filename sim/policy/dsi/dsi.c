/* dsi.c - DeepSpeed-Inference's hybrid micro-batching (papers/exegpt.txt
 * Sec. 2 and 7, the baseline ExeGPT compares with): one global static
 * batch per pipeline replica, its prompts padded to the longest and run in
 * engine.dsi_prompt_mb micro-batches, then decoded in engine.dsi_gen_mb
 * micro-batches (fewer, larger ones reuse the weights better) until its
 * longest output is done; no early termination (a finished query keeps
 * its slot), nothing admitted meanwhile.
 *
 * A lane with several micro-batches in flight.  The replica's first lane
 * runs the batch; the others pass their arrivals to it and stay idle.  An
 * iteration is one phase step of every micro-batch together: its shape is
 * one micro-batch (so the host work, the sends and the stage times are a
 * micro-batch's) and stage_ns stretches it to the pipeline's timing of m
 * micro-batches:
 *   prompt:   fill and drain, one pass plus (m - 1) times the slowest
 *             stage (host work on stage 0) or send;
 *   decoding: the ring period, max(m x slowest, one pass and the sampled
 *             token's way back to stage 0), as successive steps of one
 *             micro-batch cannot overlap but different micro-batches do.
 * The extra time goes on the bottleneck stage (prompt) or the last stage
 * (decoding), so the stage reservations stay in order.  This is the
 * timing of plan/exegpt.h's analytic hs_exegpt_dsi, which the tests use as
 * the cross-check (test_dsi.c).
 *
 * KV: every slot reserves a whole context window (max_model_len), as a
 * static batch allocates its cache, drawn from all the replica's lanes;
 * a batch is as large as engine.dsi_batch, max_num_seqs and the replica's
 * free KV allow.  Tokens stream: a query finishes at its own last token
 * (hs_req_done), its slot held until the batch ends.
 *
 * The whole plug-in is this folder and one line of hs_policies[]. */
#include <math.h>
#include <stdlib.h>

#include "serve/plugin.h"

typedef struct dsi_opts {
    int dsi_batch;             /* queries per global batch */
    int dsi_prompt_mb;         /* micro-batches of the prompt phase */
    int dsi_gen_mb;            /* micro-batches of the generation phase */
} dsi_opts;

static const hs_field opts[] = {
    HS_FIELD_NUM(dsi_opts, dsi_batch, HS_F_INT, 0, 8, 1, 65536, "dsi: queries per global batch"),
    HS_FIELD_NUM(dsi_opts, dsi_prompt_mb, HS_F_INT, 0, 1, 1, 4096, "dsi: micro-batches of the prompt phase"),
    HS_FIELD_NUM(dsi_opts, dsi_gen_mb, HS_F_INT, 0, 1, 1, 4096, "dsi: micro-batches of the generation phase"),
    {0},
};

/* The batch (first lane's pstate). */
typedef struct dsi_batch {
    hs_fixed_batch fb;         /* first: lane_free frees fb.reqs */
    int32_t m;                 /* micro-batches of the current phase */
    /* the iteration's pipeline scan (pipe_scan), for stage_ns */
    double mx, pass;           /* slowest stage or send; one pass */
    int arg;                   /* the stage of mx */
} dsi_batch;

static inline const dsi_opts *opt(const hs_engine *e) { return hs_engine_popts(e); }

static int32_t slot_blocks(hs_engine *e) { return hs_blocks_for(e, e->max_model_len); }

/* Passes a sibling lane's queue to the replica's first lane. */
static void pass_queue(hs_engine *e, hs_lane *from, hs_lane *to)
{
    while (from->waiting.head >= 0) {
        int32_t r = from->waiting.head;
        hs_list_remove(e, &from->waiting, r);
        hs_req_at(e, r)->lane = to->id;
        hs_list_push_back(e, &to->waiting, r);
    }
}

/* Reserves (sign 1) or returns (-1) `blocks` KV blocks over the replica's
 * lanes, each as far as its free (reserved) blocks go. */
static void reserve(hs_replica *rp, int64_t blocks, int sign)
{
    for (int32_t k = 0; k < rp->n_lanes && blocks > 0; k++) {
        hs_lane *l = &rp->lanes[k];
        int64_t take = sign > 0 ? (l->blocks_free < blocks ? l->blocks_free : blocks)
                                : (l->reserved < blocks ? l->reserved : blocks);
        if (take < 0) take = 0;
        l->blocks_free -= sign * take;
        l->reserved += sign * take;
        blocks -= take;
    }
}

static int64_t replica_free(const hs_replica *rp)
{
    int64_t f = 0;
    for (int32_t k = 0; k < rp->n_lanes; k++) f += rp->lanes[k].blocks_free;
    return f;
}


/* The iteration's slowest stage (host work on stage 0) or send, its
 * stage, and one pass through the pipeline, once per iteration rather
 * than once per stage_ns call. */
static void pipe_scan(hs_engine *e, hs_lane *l, dsi_batch *b)
{
    const hs_replica *rp = &e->replicas[l->replica];
    const hs_batch_shape *sh = &l->it.shape;
    int p = rp->perf.pp, tok = (int)(sh->tokens + (rp->enc_layers ? sh->enc_tokens : 0));
    b->mx = b->pass = 0;
    b->arg = 0;
    if (b->m <= 1) return;
    for (int i = 0; i < p; i++) {
        double ti = hs_perf_stage_ns(&rp->perf, i, sh) + (i == 0 ? hs_perf_step_ns(&rp->perf, sh) : 0);
        double si = i + 1 < p ? hs_perf_send_ns(&rp->perf, i, tok) : 0;
        b->pass += ti + si;
        if (ti > b->mx) b->mx = ti, b->arg = i;
        if (si > b->mx) b->mx = si, b->arg = i;
    }
    if (!b->fb.prefill && p > 1) b->pass += hs_perf_send_ns(&rp->perf, 0, 0); /* the sampled token goes back */
}

static int schedule(hs_engine *e, hs_lane *l)
{
    hs_replica *rp = &e->replicas[l->replica];
    hs_lane *first = &rp->lanes[0];
    dsi_batch *b = first->pstate;
    if (l != first) {
        if (l->waiting.head >= 0) {
            pass_queue(e, l, first);
            hs_engine_kick(e, first);
        }
        return 0;
    }
    if (!b->fb.active) {
        hs_fixed_batch *f = &b->fb;
        int64_t sb = slot_blocks(e), slots = sb > 0 ? replica_free(rp) / sb : 0;
        int32_t want = opt(e)->dsi_batch < e->cfg.max_num_seqs ? opt(e)->dsi_batch : e->cfg.max_num_seqs;
        for (int32_t k = 1; k < rp->n_lanes; k++) pass_queue(e, &rp->lanes[k], first);
        if (l->waiting.head < 0) return 0;
        if (want > slots) want = (int32_t)slots;
        if (want == 0) {
            while (l->waiting.head >= 0)
                hs_lane_drop(e, l, l->waiting.head, "KV memory holds no DSI slot of the context length");
            return 0;
        }
        if ((f->n = hs_lane_batch_take(e, l, want, &f->reqs, &f->cap, &f->max_prompt)) < 0) return 0;
        reserve(rp, (int64_t)f->n * sb, 1);
        f->active = f->prefill = 1;
        f->unpadded = 0;   /* DeepSpeed-Inference pads its prompts (micro-batches of the padded batch) */
        f->alive = f->n;
        f->step = 0;
        b->m = opt(e)->dsi_prompt_mb < f->n ? opt(e)->dsi_prompt_mb : f->n;
    }
    /* one micro-batch's shape of the current phase */
    hs_fixed_shape(e, l, &b->fb, (b->fb.n + b->m - 1) / b->m, &l->it.shape);
    pipe_scan(e, l, b);
    return 1;
}

/* Pipeline timing of m micro-batches (see the file's comment): stage s's
 * time with the phase's extra on the bottleneck (prompt) or last stage
 * (decoding), from schedule's pipe_scan. */
static double stage_ns(hs_engine *e, hs_lane *l, int s)
{
    const hs_replica *rp = &e->replicas[l->replica];
    const dsi_batch *b = rp->lanes[0].pstate;
    double t = hs_perf_stage_ns(&rp->perf, s, &l->it.shape);
    if (b->m <= 1) return t;
    if (b->fb.prefill) return s == b->arg ? t + (b->m - 1) * b->mx : t;
    return s == rp->perf.pp - 1 ? t + fmax(0, b->m * b->mx - b->pass) : t;
}

static void complete(hs_engine *e, hs_lane *l)
{
    dsi_batch *b = l->pstate;
    /* the generation phase runs its own micro-batches */
    if (b->fb.prefill) b->m = opt(e)->dsi_gen_mb < b->fb.n ? opt(e)->dsi_gen_mb : b->fb.n;
    if (hs_fixed_step(e, l, &b->fb, l->it.end))
        reserve(&e->replicas[l->replica], (int64_t)b->fb.n * slot_blocks(e), -1);
}

static void lane_free(hs_lane *l)
{
    dsi_batch *b = l->pstate;
    free(b->fb.reqs);
}

/* A prompt micro-batch of context-long prompts. */
static int64_t pass_tokens(const hs_engine_cfg *c, const void *o, int32_t max_model_len)
{
    const dsi_opts *d = o;
    int64_t n = d->dsi_batch < c->max_num_seqs ? d->dsi_batch : c->max_num_seqs;
    return (n + d->dsi_prompt_mb - 1) / d->dsi_prompt_mb * max_model_len;
}

const hs_policy_ops hs_policy_dsi = {
    .name = "dsi",
    .help = "DeepSpeed-Inference hybrid micro-batching: one static batch per pipeline, prompt and generation "
            "micro-batches in flight (engine.dsi_*)",
    .schedule = schedule,
    .complete = complete,
    .stage_ns = stage_ns,
    .opts = opts,
    .opts_size = sizeof(dsi_opts),
    .lane_bytes = sizeof(dsi_batch),
    .lane_free = lane_free,
    .pass_tokens = pass_tokens,
    .encdec = 1,
};
