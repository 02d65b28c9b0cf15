/* hetis.c - the `hetis` runtime policy: vLLM-style continuous batching
 * whose decode attention runs on the head placement of serve/hetis.h.
 *
 * Each lane step: the head books are synced (members that left are
 * dropped, joiners dispatched), memory pressure is relieved and the
 * compute balance checked (hs_hetis_prepare); then waiting requests are
 * admitted first-come first-served as in vLLM, with one more condition:
 * every stage's devices must have room for the prompt's groups; then the
 * books are synced again (vLLM-style preemption may have evicted members).
 * Replicas without Hetis state behave exactly as under `vllm`. */
#include "serve/engine.h"
#include "serve/hetis.h"

static int schedule(hs_engine *e, hs_lane *l)
{
    int32_t max_tok = e->cfg.max_batched_tokens;
    int rc;
    if ((rc = hs_hetis_prepare(e, l))) {
        e->fatal = rc;
        return 0;
    }
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
            if (!hs_hetis_admit_ok(e, l, r)) {
                /* Nothing holds cache on the replica's devices and still
                 * no room: the prompt can never be placed. */
                if (l->n_dec == 0 && l->prefilling.len == 0 && l->it.n_chunks == 0 &&
                    hs_hetis_idle(e, l)) {
                    hs_lane_drop(e, l, r, "prompt exceeds the free cache of the replica's devices");
                    continue;
                }
                break;
            }
            hs_lane_admit(e, l, r);
            if (hs_iter_add_chunk(e, l, r, q->prefill_len)) {
                e->fatal = HS_ENOMEM;
                return 0;
            }
            seqs++;
        }
        if (l->it.n_chunks) break;
        if (l->n_dec == 0) return 0;
        if (hs_lane_reserve_decode(e, l) < 0) {
            e->fatal = HS_ESTATE;
            return 0;
        }
        if (l->n_dec > 0) {
            hs_lane_decode_shape(l);
            break;
        }
    }
    hs_hetis_resync(e, l);
    return l->it.n_chunks > 0 || l->it.decode;
}

/* A completion hook (even the default one) keeps fast-forward off: every
 * step must pass through the head books. */
static void complete(hs_engine *e, hs_lane *l)
{
    hs_lane_complete(e, l);
}

const hs_policy_ops hs_policy_hetis = {
    .name = "hetis",
    .help = "vLLM batching with Hetis head-level attention offload to attention workers (needs a hetis deployment)",
    .schedule = schedule,
    .complete = complete,
    .disagg = 1,   /* complete is hs_lane_complete's, hand-overs included */
};
