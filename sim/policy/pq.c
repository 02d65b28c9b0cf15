/* pq.c - LLM-PQ's phase-aware micro-batching for online traces.
 *
 * Each pipeline lane is one micro-batch stream (a replica with N stages
 * runs N lanes whose iterations overlap in the stages, like the paper's
 * micro-batch manager).  A lane decodes up to xi = engine.max_num_seqs
 * sequences together and prefills prompts in micro-batches of at most
 * eta = engine.prefill_seqs sequences (0: no cap), so prefill and decode
 * use different micro-batch sizes; otherwise it is vLLM's scheduler
 * (prefill first, FCFS admission, watermark, preemption by recompute).
 * With N lanes, xi = B/N and eta <= xi this is the paper's runtime applied
 * to arriving requests instead of one offline batch (which
 * serve/pqpipe.h simulates exactly). */
#include "serve/engine.h"

static int schedule(hs_engine *e, hs_lane *l)
{
    int32_t max_tok = e->cfg.max_batched_tokens, eta = e->cfg.prefill_seqs;
    for (int pass = 0; pass < 2; pass++) {
        int32_t seqs = l->n_dec + l->prefilling.len;
        while (l->waiting.head >= 0) {
            int32_t r = l->waiting.head;
            hs_req *q = hs_req_at(e, r);
            int32_t need;
            if (hs_lane_drop_if_never_fits(e, l, r, max_tok)) continue;
            need = hs_blocks_for(e, q->prefill_len);
            if (eta > 0 && l->it.n_chunks >= eta) break;
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
    }
    return 0;
}

const hs_policy_ops hs_policy_pq = {
    .name = "pq",
    .help = "LLM-PQ micro-batching: prefill micro-batches of engine.prefill_seqs (eta), decode of max_num_seqs (xi) per lane",
    .schedule = schedule,
};
