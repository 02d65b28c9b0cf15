/* static.c - FasterTransformer-style static batching.
 *
 * The lane takes up to engine.static_batch waiting requests at once, pads
 * their prompts to the longest one and runs the batch to the end: every
 * slot keeps stepping until the longest output is done, finished requests
 * keep occupying their slot, and nothing new is admitted meanwhile.  KV
 * memory is reserved per slot for the whole context window (as FT
 * allocates its cache for max_seq_len), which caps the batch size.
 * Tokens are streamed: a request's TTFT is the end of the batch prefill and
 * it finishes when its own last token is produced.  Encoder-decoder models
 * encode the padded prompts (no token) and then decode output-many steps,
 * the first giving the TTFT, as FasterTransformer's T5 does. */
#include <stdlib.h>

#include "serve/engine.h"

typedef struct fixed_batch {
    int active, prefill;
    int32_t n, max_prompt, next_fin;
    int64_t step;              /* decode steps done */
    int32_t *reqs;             /* [cap], sorted by output, then id */
    int32_t cap;
    hs_ns last_end;
} fixed_batch;

/* Insertion sort by (output, id): batches are small and C11 qsort has no
 * context argument (a global would make runs non-reentrant). */
static void sort_by_output(hs_engine *e, int32_t *v, int32_t n)
{
    for (int32_t i = 1; i < n; i++) {
        int32_t r = v[i], j = i;
        const hs_req *x = hs_req_at(e, r);
        while (j > 0) {
            const hs_req *y = hs_req_at(e, v[j - 1]);
            if (y->output < x->output || (y->output == x->output && y->id < x->id)) break;
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
    if (!b) {
        b = l->pstate = calloc(1, sizeof *b);
        if (!b) goto nomem;
    }
    if (!b->active) {
        int32_t slots = (int32_t)(l->blocks_total / slot_blocks(e));
        int32_t want = e->cfg.static_batch < e->cfg.max_num_seqs ? e->cfg.static_batch
                                                                 : e->cfg.max_num_seqs;
        if (want > slots) want = slots;
        if (l->waiting.head < 0) return 0;
        if (want == 0) {
            while (l->waiting.head >= 0)
                hs_lane_drop(e, l, l->waiting.head,
                             "KV memory holds no static slot of the context length");
            return 0;
        }
        if (b->cap < want) {
            int32_t *nr = realloc(b->reqs, (size_t)want * sizeof *nr);
            if (!nr) goto nomem;
            b->reqs = nr;
            b->cap = want;
        }
        b->n = 0;
        b->max_prompt = 0;
        while (l->waiting.head >= 0 && b->n < want) {
            int32_t r = l->waiting.head;
            hs_req *q = hs_req_at(e, r);
            hs_list_remove(e, &l->waiting, r);
            q->state = HS_REQ_STATIC;
            q->first_sched = e->q.now;
            hs_list_push_back(e, &l->running, r);
            b->reqs[b->n++] = r;
            if (q->prompt > b->max_prompt) b->max_prompt = q->prompt;
        }
        l->reserved = (int64_t)b->n * slot_blocks(e);
        l->blocks_free -= l->reserved;
        sort_by_output(e, b->reqs, b->n);
        b->active = b->prefill = 1;
        b->next_fin = 0;
        b->step = 0;
        if (e->replicas[l->replica].encdec) {
            s->enc_tokens = b->n * b->max_prompt;
            s->enc_pairs = (double)b->n * b->max_prompt * b->max_prompt;
            return 1;
        }
        s->tokens = b->n * b->max_prompt;
        s->samples = b->n;
        s->pre_chunks = b->n;
        s->pre_self = (double)b->n * b->max_prompt * (b->max_prompt + 1) / 2.0;
        s->pre_tokens = (int64_t)b->n * b->max_prompt;
        return 1;
    }
    /* A decode step of every slot, padded contexts. */
    l->it.decode = 1;
    s->tokens = s->samples = s->dec_seqs = b->n;
    s->dec_ctx = (int64_t)b->n * (b->max_prompt + b->step + 1);
    return 1;
nomem:
    hs__engine_fail(e, HS_ENOMEM, "out of memory forming a static batch");
    return 0;
}

static void complete(hs_engine *e, hs_lane *l)
{
    fixed_batch *b = l->pstate;
    hs_ns t = l->it.end;
    int32_t alive = b->n - b->next_fin;
    /* tokens after `step` decoding steps: the prefill samples the first of
     * a decoder-only model; encoding samples none */
    int64_t shift = e->replicas[l->replica].encdec ? 0 : 1;
    if (b->prefill) {
        b->prefill = 0;
    } else {
        b->step++;
        if (e->sink.itl && alive > 0 && b->step + shift > 1)
            e->sink.itl(e->sink.ctx, t - b->last_end, alive);
    }
    for (int32_t k = b->next_fin; k < b->n && b->step + shift > 0; k++) {
        hs_req *q = hs_req_at(e, b->reqs[k]);
        q->gen = (int32_t)(b->step + shift);
        if (q->first_token < 0) q->first_token = t;
    }
    while (b->next_fin < b->n && hs_req_at(e, b->reqs[b->next_fin])->output <= b->step + shift) {
        int32_t r = b->reqs[b->next_fin++];
        hs_list_remove(e, &l->running, r);
        hs_lane_finish(e, l, r, t);
    }
    b->last_end = t;
    if (b->next_fin == b->n) {
        l->blocks_free += l->reserved;
        l->reserved = 0;
        b->active = 0;
    }
}

static void lane_free(hs_lane *l)
{
    fixed_batch *b = l->pstate;
    if (b) free(b->reqs);
    free(b);
    l->pstate = NULL;
}

/* Padded prefills: a full batch of context-long prompts (a batch never
 * holds more than max_num_seqs). */
static int64_t pass_tokens(const hs_engine_cfg *c, int32_t max_model_len)
{
    int64_t slots = c->static_batch < c->max_num_seqs ? c->static_batch : c->max_num_seqs;
    return slots * max_model_len;
}

const hs_policy_ops hs_policy_static = {
    .name = "static",
    .help = "static batching: fixed batch run to its longest output, slots held (FasterTransformer)",
    .schedule = schedule,
    .complete = complete,
    .lane_free = lane_free,
    .pass_tokens = pass_tokens,
    .encdec = 1,
};
