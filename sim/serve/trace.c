/* trace.c - schedule emission: the executed schedule of the replicas that
 * e->trace wants (serve/schedule.h), written as the engine runs; and the
 * timeline observer's iterations (e->tl, serve/sink.h; its preemptions are
 * told by lane.c, its hand-overs by handover.c).
 *
 * Lines are written when things are decided: a request when it is routed,
 * an iteration when it is scheduled (everything in it follows from the
 * state at its start), preemptions with the lane's next iteration.
 * Invariant INV-SCHED (docs/INVARIANTS.md): per replica, iterations in
 * execution order with the KV blocks in use, so that replaying their
 * allocations gives the same counts.  A trace turns fast-forward off
 * (hs__ff_eligible), so every iteration gets its own line.  Out of memory
 * stops the run through hs__engine_fail. */
#include "serve/engine_int.h"

#include <stdlib.h>

#include "core/vec.h"

/* Writes the iteration just scheduled: everything, including which requests
 * get their first token or finish, follows from the state at its start. */
void hs__trace_iter(hs_engine *e, hs_lane *l)
{
    hs_sched_iter *t = &e->trace_it;
    int32_t n = l->n_dec + l->it.n_chunks;
    t->replica = l->replica;
    t->start = l->it.start;
    t->end = l->it.end;
    t->kv_blocks_used = l->blocks_total - l->blocks_free;
    t->n_pre = t->n_dec = t->n_first = t->n_finished = 0;
    if (hs_vec_reserve_i32((void **)&t->pre, &e->cap_tpre, l->it.n_chunks, sizeof *t->pre, 64) ||
        hs_vec_reserve_i32((void **)&t->dec, &e->cap_tdec, l->n_dec, sizeof *t->dec, 64) ||
        hs_vec_reserve_i32((void **)&t->first, &e->cap_tfirst, n, sizeof *t->first, 64) ||
        hs_vec_reserve_i32((void **)&t->finished, &e->cap_tfin, n, sizeof *t->finished, 64)) {
        hs__engine_fail(e, HS_ENOMEM, "out of memory in the engine");
        return;
    }
    for (int32_t k = 0; k < l->it.n_chunks; k++) {
        int32_t r = l->it.chunks[k].req;
        const hs_req *q = hs_req_at(e, r);
        int32_t len = l->it.chunks[k].len;
        t->pre[t->n_pre++] = (hs_sched_chunk){q->id, len, q->prefilled, q->prefill_len};
        /* encoding an encoder-decoder query yields no token */
        if (q->prefilled + len == q->prefill_len && (!e->replicas[l->replica].encdec || q->gen > 0)) {
            if (q->first_token < 0) t->first[t->n_first++] = q->id;
            if (q->gen + 1 >= e->eos[r]) t->finished[t->n_finished++] = q->id;
        }
    }
    if (l->it.decode)
        for (int32_t r = l->running.head; r >= 0; r = e->pool[r].next) {
            const hs_req *q = &e->pool[r];
            t->dec[t->n_dec++] = (hs_sched_dec){q->id, (int32_t)(q->kv0 + (l->g - q->g0) + 1)};
            if (q->first_token < 0) t->first[t->n_first++] = q->id;
            if (q->finish_step == l->g + 1) t->finished[t->n_finished++] = q->id;
        }
    t->preempted = l->trace_pm;
    t->n_preempted = l->n_trace_pm;
    hs_sched_write_iter(e->trace, t);
    t->preempted = NULL;
    l->n_trace_pm = 0;
}

/* The request line: its replica and what is known at arrival. */
void hs__trace_request(hs_engine *e, const hs_req *q)
{
    hs_sched_request sr = {q->replica, q->id, q->arrival, q->prompt, e->eos[q - e->pool]};
    hs_sched_write_request(e->trace, &sr);
}

void hs__tl_iter(hs_engine *e, const hs_lane *l, hs_ns start, hs_ns end)
{
    const hs_batch_shape *b = &l->it.shape;
    hs_tl_iter it;
    if (!e->tl->iter) return;
    it.replica = l->replica;
    it.lane = hs__lane_index(e, l);
    it.start = start;
    it.end = end;
    it.tokens = b->tokens;
    it.prefill_chunks = l->it.n_chunks;
    it.prefill_tokens = b->pre_tokens;
    it.prefix_tokens = b->pre_prefix;
    it.decode_seqs = b->dec_seqs;
    it.decode_ctx = b->dec_ctx;
    it.kv_used = l->blocks_total - l->blocks_free;
    it.kv_total = l->blocks_total;
    e->tl->iter(e->tl->ctx, &it);
}
