/* pq.c - LLM-PQ's phase-aware micro-batching for online traces.
 *
 * Each pipeline lane is one micro-batch stream (a replica with N stages
 * runs N lanes whose iterations overlap in the stages, like the paper's
 * micro-batch manager).  A lane decodes up to xi = engine.max_num_seqs
 * sequences together and prefills prompts in micro-batches of at most
 * eta = engine.prefill_seqs sequences (this policy's option; 0: no cap), so prefill and decode
 * use different micro-batch sizes; otherwise it is vLLM's scheduler
 * (prefill first, FCFS admission, watermark, preemption by recompute).
 * With N lanes, xi = B/N and eta <= xi this is the paper's runtime applied
 * to arriving requests instead of one offline batch (which
 * plan/llmpq_pipe.h simulates exactly). */
#include "serve/plugin.h"

typedef struct pq_opts {
    int prefill_seqs;        /* eta: prompts per prefill micro-batch, 0: no cap */
} pq_opts;

static const hs_field opts[] = {
    HS_FIELD_NUM(pq_opts, prefill_seqs, HS_F_INT, 0, 0, 0, 65536, "pq: prompts per prefill micro-batch (eta), 0: no cap"),
    {0},
};

static int schedule(hs_engine *e, hs_lane *l)
{
    const pq_opts *o = hs_engine_popts(e);
    return hs_lane_continuous(e, l, o->prefill_seqs, NULL, NULL);
}

const hs_policy_ops hs_policy_pq = {
    .name = "pq",
    .help = "LLM-PQ micro-batching: prefill micro-batches of engine.prefill_seqs (eta), decode of max_num_seqs (xi) per lane",
    .schedule = schedule,
    .opts = opts,
    .opts_size = sizeof(pq_opts),
};
