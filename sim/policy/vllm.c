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
    int32_t max_tok = e->cfg.max_batched_tokens;
    for (int pass = 0; pass < 2; pass++) {
        int32_t seqs = l->n_dec + l->prefilling.len;
        while (l->waiting.head >= 0) {
            int32_t r = l->waiting.head;
            hs_req *q = hs_req_at(e, r);
            int32_t need;
            if (hs_lane_drop_if_never_fits(e, l, r, max_tok)) continue;
            need = hs_blocks_for(e, q->prefill_len);
            if (seqs + 1 > e->cfg.max_num_seqs) break;
            if (l->it.shape.tokens + q->prefill_len > max_tok) break;
            if (l->blocks_free - need < l->watermark) break;
            hs_lane_admit(e, l, r);
            if (hs_iter_add_chunk(e, l, r, q->prefill_len)) {
                e->fatal = HS_ENOMEM;
                return 0;
            }
            seqs++;
        }
        if (l->it.n_chunks) return 1;
        if (l->n_dec == 0) return 0;
        if (hs_lane_reserve_decode(e, l) < 0) {
            e->fatal = HS_ESTATE;
            return 0;
        }
        if (l->n_dec > 0) {
            hs_lane_decode_shape(l);
            return 1;
        }
        /* Everything was preempted (one sequence outgrew the lane): the
         * second pass re-admits or drops it. */
    }
    return 0;
}

const hs_policy_ops hs_policy_vllm = {
    .name = "vllm",
    .help = "continuous batching, prefill-priority, paged KV, preemption by recompute (vLLM)",
    .schedule = schedule,
};
