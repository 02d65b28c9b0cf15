/* static.c - FasterTransformer-style static batching.
 *
 * The lane takes up to engine.static_batch (this policy's option) waiting
 * requests at once and runs the batch to the end: every
 * slot keeps stepping until the longest output is done, finished requests
 * keep occupying their slot, and nothing new is admitted meanwhile.  KV
 * memory is reserved per slot for the whole context window (as FT
 * allocates its cache for max_seq_len), which caps the batch size.
 * Tokens are streamed: a request's TTFT is the end of the batch prefill and
 * it finishes when its own last token is produced.  Encoder-decoder models
 * encode the padded prompts (no token) and then decode output-many steps,
 * the first giving the TTFT, as FasterTransformer's T5 does.  A request
 * leaves its slot when the end-of-sequence signal says so (hs_req_done),
 * as FT stops a sequence at its EOS token.
 *
 * The prompt pass of a decoder-only model runs its GEMMs on each prompt's
 * own tokens, as FT's GPT context decoder does with remove_padding (on in
 * FT 5.x's GPT and in the ExeGPT authors' FT baseline), while its
 * attention, the KV cache and every decode step span the prompts padded to
 * the longest: FT's default (unfused) context attention restores the
 * padding for its batched QK^T and PV (the fused kernel needs
 * FMHA_ENABLE).  static_padded=1 pads the GEMMs too (remove_padding off).
 * Encoders (T5) are always padded. */
#include <stdlib.h>

#include "serve/plugin.h"

typedef struct static_opts {
    int static_batch;          /* requests per batch */
    int static_padded;         /* 1: the prompt pass padded too */
} static_opts;

static const hs_field opts[] = {
    HS_FIELD_NUM(static_opts, static_batch, HS_F_INT, 0, 8, 1, 65536, "static: batch size"),
    HS_FIELD_NUM(static_opts, static_padded, HS_F_INT, 0, 0, 0, 1,
                 "static: 1 pads the prompt pass's GEMMs to the longest prompt (0: on each prompt's own "
                 "tokens, FT's remove_padding; attention stays padded)"),
    {0},
};

/* The lane's batch (lane->pstate, lane_bytes); reqs sorted by id. */
typedef hs_fixed_batch fixed_batch;

static int32_t batch_cap(const hs_engine_cfg *c, const static_opts *o)
{
    return o->static_batch < c->max_num_seqs ? o->static_batch : c->max_num_seqs;
}

/* Insertion sort by id, so requests that finish at the same step leave in
 * id order (batches are small). */
static void sort_by_id(hs_engine *e, int32_t *v, int32_t n)
{
    for (int32_t i = 1; i < n; i++) {
        int32_t r = v[i], j = i;
        int64_t id = hs_req_at(e, r)->id;
        while (j > 0 && hs_req_at(e, v[j - 1])->id > id) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = r;
    }
}

static int32_t slot_blocks(hs_engine *e)
{
    return hs_blocks_for(e, e->max_model_len);
}

static int schedule(hs_engine *e, hs_lane *l)
{
    fixed_batch *b = l->pstate;
    hs_batch_shape *s = &l->it.shape;
    if (!b->active) {
        int32_t slots = (int32_t)(l->blocks_total / slot_blocks(e));
        int32_t want = batch_cap(&e->cfg, hs_engine_popts(e));
        if (want > slots) want = slots;
        if (l->waiting.head < 0) return 0;
        if (want == 0) {
            while (l->waiting.head >= 0)
                hs_lane_drop(e, l, l->waiting.head,
                             "KV memory holds no static slot of the context length");
            return 0;
        }
        if ((b->n = hs_lane_batch_take(e, l, want, &b->reqs, &b->cap, &b->max_prompt)) < 0) return 0;
        l->reserved = (int64_t)b->n * slot_blocks(e);
        l->blocks_free -= l->reserved;
        sort_by_id(e, b->reqs, b->n);
        b->unpadded = !((const static_opts *)hs_engine_popts(e))->static_padded;
        b->sum_prompt = 0;
        for (int32_t i = 0; i < b->n; i++) b->sum_prompt += hs_req_at(e, b->reqs[i])->prompt;
        b->active = b->prefill = 1;
        b->alive = b->n;
        b->step = 0;
    }
    /* the prompt pass, then decode steps of every slot */
    hs_fixed_shape(e, l, b, b->n, s);
    return 1;
}

static void complete(hs_engine *e, hs_lane *l)
{
    if (hs_fixed_step(e, l, l->pstate, l->it.end)) {
        l->blocks_free += l->reserved;
        l->reserved = 0;
    }
}

static void lane_free(hs_lane *l)
{
    fixed_batch *b = l->pstate;
    free(b->reqs);
}

/* Padded prefills: a full batch of context-long prompts (a batch never
 * holds more than max_num_seqs). */
static int64_t pass_tokens(const hs_engine_cfg *c, const void *o, int32_t max_model_len)
{
    return (int64_t)batch_cap(c, o) * max_model_len;
}

const hs_policy_ops hs_policy_static = {
    .name = "static",
    .help = "static batching: fixed batch run to its longest output, slots held (FasterTransformer)",
    .schedule = schedule,
    .complete = complete,
    .opts = opts,
    .opts_size = sizeof(static_opts),
    .lane_bytes = sizeof(fixed_batch),
    .lane_free = lane_free,
    .pass_tokens = pass_tokens,
    .encdec = 1,
};
