/* vllm.c - vLLM-style continuous batching (vLLM v0 default scheduler).
 *
 * Each iteration is either a prefill-only batch or a decode step of every
 * running sequence.  Waiting requests are admitted first-come first-served
 * (no skipping) while the batch stays within max_num_seqs and
 * max_batched_tokens and the free KV blocks stay above the watermark; when
 * a decode step needs blocks that are not free, the latest-admitted
 * sequences are preempted and later recomputed. */
#include "serve/engine.h"

static int schedule(hs_engine *e, hs_lane *l)
{
    /* The second pass re-admits or drops what a decode step preempted when
     * everything was (one sequence outgrew the lane). */
    for (int pass = 0; pass < 2; pass++) {
        int rc;
        if (hs_lane_admit_fcfs(e, l, e->cfg.max_batched_tokens, 0, NULL, NULL) < 0) return 0;
        if (l->it.n_chunks) return 1;
        if (l->n_dec == 0) return 0;
        if ((rc = hs_lane_decode_setup(e, l)) != 0) return rc > 0;
    }
    return 0;
}

const hs_policy_ops hs_policy_vllm = {
    .name = "vllm",
    .help = "continuous batching, prefill-priority, paged KV, preemption by recompute (vLLM)",
    .schedule = schedule,
    .encdec = 1,
    .whole_prompts = 1,
};
