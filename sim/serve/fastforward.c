/* fastforward.c - runs of decode-only steps simulated in one event.
 *
 * A decode-only iteration with nothing waiting and nothing half-prefilled is
 * followed by identical decode steps (same members, context growing by one
 * token each) until the first member finishes, unless an arrival or a lack
 * of KV blocks intervenes.  Such a run is simulated as one ITER_END event
 * standing for ff_k steps; ends are recomputed with exactly the arithmetic
 * of single steps, so results are bit-identical with fast_forward off
 * (test_fastforward).  An arrival on the lane truncates the run at the
 * first step boundary after it.  Only single-stage replicas (no pipeline
 * reservations to replay) and policies using the default completion.
 *
 * Invariants: l->ff_k == 1 except while a run is in flight, and then
 * l->ff_seq is its pending ITER_END; a run in flight has taken the KV blocks
 * of its steps 1..ff_k-1 from blocks_free (hs__ff_extend; hs__ff_truncate
 * gives back those of the steps it cuts), which INV-KV counts as its
 * members' blocks for kv + ff_k tokens (hs_lane_sane). */
#include "serve/engine_int.h"

#include <math.h>

/* The end of step i of l's run (0: the step scheduled) starting at start:
 * the arithmetic of a single step (engine.c's try_start with one stage). */
static hs_ns ff_step_end(const hs_replica *rp, const hs_lane *l, int32_t i, hs_ns start)
{
    hs_batch_shape b = l->it.shape;
    b.dec_ctx += (int64_t)i * l->n_dec;
    return (hs_ns)ceil((double)start + hs_perf_step_ns(&rp->perf, &b) + hs_perf_stage_ns(&rp->perf, 0, &b));
}

/* Fresh KV blocks step i of l's run needs. */
static int32_t ff_need(const hs_engine *e, const hs_lane *l, int32_t i)
{
    int64_t m = (l->g + i) % e->cfg.block_size;
    return l->bucket[m < 0 ? m + e->cfg.block_size : m];
}

int hs__ff_eligible(const hs_engine *e, const hs_lane *l, const hs_replica *rp)
{
    return e->cfg.fast_forward && !e->trace && l->it.decode && l->it.n_chunks == 0 && rp->perf.pp == 1 &&
           !e->policy->complete && l->waiting.len == 0 && l->prefilling.len == 0 && l->n_dec > 0 &&
           l->incoming.len == 0 && l->landed.len == 0 && l->it.shape.enc_tokens == 0;
}

hs_ns hs__ff_extend(hs_engine *e, hs_lane *l, const hs_replica *rp, hs_ns end)
{
    int64_t steps = hs_req_at(e, l->heap[0])->finish_step - l->g;
    int32_t k = 1;
    while (k < steps && k < (1 << 20)) {
        int32_t need = ff_need(e, l, k);
        if (l->blocks_free < need) break;
        l->blocks_free -= need;
        end = ff_step_end(rp, l, k, end);
        k++;
    }
    l->ff_k = k;
    return end;
}

void hs__ff_truncate(hs_engine *e, hs_lane *l, hs_ns t)
{
    const hs_replica *rp = &e->replicas[l->replica];
    hs_ns end = ff_step_end(rp, l, 0, l->it.start);
    int32_t j = 1;
    while (end <= t && j < l->ff_k) end = ff_step_end(rp, l, j++, end);
    if (j == l->ff_k) return;
    for (int32_t i = j; i < l->ff_k; i++) l->blocks_free += ff_need(e, l, i);
    l->ff_k = j;
    l->it.end = end;
    if (hs_evq_cancel(&e->q, l->ff_seq) ||
        !(l->ff_seq = hs_evq_push(&e->q, end, HS_PRIO_COMPLETE, HS__EV_ITER_END, l->id, 0)))
        hs__engine_fail(e, HS_ENOMEM, "out of memory cutting a fast-forwarded run short");
}

/* The last step of the run may finish requests. */
void hs__ff_complete(hs_engine *e, hs_lane *l)
{
    const hs_replica *rp = &e->replicas[l->replica];
    hs_ns start = l->it.start;
    int32_t k = l->ff_k;
    hs_batch_shape b0 = l->it.shape;
    for (int32_t i = 0; i < k; i++) {
        l->it.shape = b0;
        l->it.shape.dec_ctx = l->sum_kv + l->n_dec;
        l->it.end = ff_step_end(rp, l, 0, start);
        if (e->tl) hs__tl_iter(e, l, start, l->it.end);
        start = l->it.end;
        hs_lane_complete(e, l);
    }
    l->iters += k - 1;
    e->iterations += k - 1;
    l->ff_k = 1;
}
