/* vllm.c - vLLM-style continuous batching (vLLM v0 default scheduler).
 *
 * Each iteration is either a prefill-only batch or a decode step of every
 * running sequence.  Waiting requests are admitted first-come first-served
 * (no skipping) while the batch stays within max_num_seqs and
 * max_batched_tokens and the free KV blocks stay above the watermark; when
 * a decode step needs blocks that are not free, the latest-admitted
 * sequences are preempted and later recomputed. */
#include "serve/plugin.h"

static int schedule(hs_engine *e, hs_lane *l)
{
    return hs_lane_continuous(e, l, 0, NULL, NULL);
}

const hs_policy_ops hs_policy_vllm = {
    .name = "vllm",
    .help = "continuous batching, prefill-priority, paged KV, preemption by recompute (vLLM)",
    .schedule = schedule,
    .encdec = 1,
    .whole_prompts = 1,
};
