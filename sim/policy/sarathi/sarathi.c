/* sarathi.c - chunked prefill with stall-free batching (Sarathi-Serve, and
 * vLLM with enable_chunked_prefill).
 *
 * Every iteration has a token budget (engine.chunk_size, this policy's
 * option).  All running
 * decodes go first, one token each; partly prefilled prompts continue next;
 * then new requests are admitted FCFS and their prompts cut into chunks
 * that fill the rest of the budget.  Decodes never stall behind a long
 * prompt, at the price of prompts taking several iterations. */
#include "serve/plugin.h"

typedef struct sarathi_opts {
    int chunk_size;          /* tokens per iteration, decodes included */
} sarathi_opts;

static const hs_field opts[] = {
    HS_FIELD_NUM(sarathi_opts, chunk_size, HS_F_INT, 0, 512, 1, 1 << 20, "sarathi: chunked-prefill token budget"),
    {0},
};

static int schedule(hs_engine *e, hs_lane *l)
{
    const sarathi_opts *o = hs_engine_popts(e);
    int32_t budget = o->chunk_size;
    if (hs_lane_decode_setup(e, l) < 0) return 0;
    if (l->it.decode) budget -= l->n_dec;
    for (int32_t r = l->prefilling.head; r >= 0 && budget > 0;) {
        hs_req *q = hs_req_at(e, r);
        int32_t c = q->prefill_len - q->prefilled, nx = q->next;
        if (c > budget) c = budget;
        if (hs_iter_add_chunk(e, l, r, c)) goto nomem;
        budget -= c;
        r = nx;
    }
    while (l->waiting.head >= 0 && budget > 0) {
        int32_t r = l->waiting.head, c;
        hs_req *q = hs_req_at(e, r);
        int32_t need;
        if (hs_lane_drop_if_never_fits(e, l, r, 0)) continue;
        need = hs_blocks_for(e, q->prefill_len);
        if (l->n_dec + l->prefilling.len + 1 > e->cfg.max_num_seqs) break;
        if (l->blocks_free - need < l->watermark) break;
        hs_lane_admit(e, l, r);
        c = q->prefill_len < budget ? q->prefill_len : budget;
        if (hs_iter_add_chunk(e, l, r, c)) goto nomem;
        budget -= c;
    }
    return l->it.decode || l->it.n_chunks > 0;
nomem:
    hs__engine_fail(e, HS_ENOMEM, "out of memory adding a chunk to the batch");
    return 0;
}

static int64_t pass_tokens(const hs_engine_cfg *c, const void *po, int32_t max_model_len)
{
    (void)c;
    (void)max_model_len;
    return ((const sarathi_opts *)po)->chunk_size;
}

const hs_policy_ops hs_policy_sarathi = {
    .name = "sarathi",
    .help = "chunked prefill, decodes first, prompts cut to fill a token budget (Sarathi-Serve)",
    .schedule = schedule,
    .opts = opts,
    .opts_size = sizeof(sarathi_opts),
    .pass_tokens = pass_tokens,
    .chunks = 1,
};
