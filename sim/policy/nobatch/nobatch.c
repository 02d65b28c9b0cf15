/* nobatch.c - first come first served without batching.  Each lane serves
 * one request at a time, its prompt in one pass and then its decoding
 * steps alone, and takes the next only when it has finished (a
 * single-stream server, e.g. a plain HuggingFace generate() loop: the
 * baseline against which batching gains are measured).
 *
 * Option engine.nobatch_timeout_s: a request that has waited longer than this
 * when its turn comes is dropped instead of served (a client time-out;
 * 0: never).  Preemption cannot occur with one sequence unless the lane's
 * KV cannot hold it; then, as under `vllm`, it is recomputed or dropped.
 * On the decode replicas of a disaggregated deployment the engine's
 * hand-over joins requests to the decode set as they land, so this policy
 * is meant for colocated replicas.
 *
 * The whole plug-in is this folder (the policy, its test) and one line of
 * hs_policies[] (policy/policy.c): see docs/ARCHITECTURE.md. */
#include <math.h>

#include "serve/plugin.h"

typedef struct nobatch_opts {
    double nobatch_timeout_s;   /* s a request may wait for its turn (0: forever) */
} nobatch_opts;

static const hs_field opts[] = {
    HS_FIELD_NUM(nobatch_opts, nobatch_timeout_s, HS_F_DOUBLE, 0, 0, 0, 1e9,
                 "nobatch: drop a request that waited longer than this, s (0: never)"),
    {0},
};

/* Admission's last word on the head of the queue: too late, or go. */
static int in_time(void *ctx, hs_engine *e, hs_lane *l, int32_t r, const char **why)
{
    const nobatch_opts *o = ctx;
    (void)l;
    if (o->nobatch_timeout_s > 0 &&
        (double)(e->q.now - hs_req_at(e, r)->arrival) > o->nobatch_timeout_s * HS_NS_PER_S) {
        *why = "waited longer than engine.nobatch_timeout_s";
        return HS_ADMIT_DROP;
    }
    return HS_ADMIT_OK;
}

static int schedule(hs_engine *e, hs_lane *l)
{
    /* The second pass re-admits what a decode step preempted (the one
     * sequence outgrew the lane's free blocks). */
    for (int pass = 0; pass < 2; pass++) {
        int rc;
        if (l->n_dec > 0 && (rc = hs_lane_decode_setup(e, l)) != 0) return rc > 0;
        if (hs_lane_admit_fcfs(e, l, e->cfg.max_batched_tokens, 1, in_time, (void *)hs_engine_popts(e)) < 0)
            return 0;
        if (l->it.n_chunks) return 1;
        if (l->n_dec == 0) return 0;
    }
    return 0;
}

const hs_policy_ops hs_policy_nobatch = {
    .name = "nobatch",
    .help = "first come first served without batching: one request at a time per lane (engine.nobatch_timeout_s)",
    .schedule = schedule,
    .opts = opts,
    .opts_size = sizeof(nobatch_opts),
    .encdec = 1,
    .whole_prompts = 1,
};
