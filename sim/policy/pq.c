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
    for (int pass = 0; pass < 2; pass++) {
        int rc;
        if (hs_lane_admit_fcfs(e, l, e->cfg.max_batched_tokens, e->cfg.prefill_seqs, NULL, NULL) < 0) return 0;
        if (l->it.n_chunks) return 1;
        if (l->n_dec == 0) return 0;
        if ((rc = hs_lane_decode_setup(e, l)) != 0) return rc > 0;
    }
    return 0;
}

const hs_policy_ops hs_policy_pq = {
    .name = "pq",
    .help = "LLM-PQ micro-batching: prefill micro-batches of engine.prefill_seqs (eta), decode of max_num_seqs (xi) per lane",
    .schedule = schedule,
};
