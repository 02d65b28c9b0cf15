/* handover.c - disaggregation: the KV hand-over from prefill to decode
 * replicas, and the network event that carries it.
 *
 * A request whose prompt is done on a prefill replica keeps its blocks
 * there (xfer_out) and queues on a decode lane (incoming) until that lane
 * admits it (hs__admit_incoming: room for what it will need, and no other
 * transfer of its pair in flight) and reserves blocks for its context
 * (xfer_in).  It stays on the incoming list, in state HS_REQ_XFER, while
 * each GPU holding layer j of the prefill replica sends that layer's KV to
 * the GPU holding layer j on the decode side, one flow per rank pair
 * (max(tp) flows per overlapping stage pair, the bytes split evenly),
 * sharing links max-min fairly (hw/net.h).  When its last flow lands the
 * prefill blocks are freed and the request joins the decode set at the
 * decode lane's next iteration boundary (landed), never in the middle of
 * one.  A request still preempted on a decode replica (the admission makes
 * it rare) is recomputed there, not sent back.  Which decode lane takes a
 * hand-over is route.c's hs__pick_decode.
 *
 * Invariants: at most one NET event is pending (e->net_seq, 0 when none),
 * queued for the network's next event (e->net_time); a handed-over request
 * holds src_blocks on its prefill lane (counted in that lane's xfer_out)
 * until its last flow lands, and from the start of its transfer
 * (HS_REQ_XFER, xfer_pending flows not yet delivered) blocks on its decode
 * lane (counted in xfer_in) until it joins the decode set; a decode lane's
 * incoming list holds its waiting (HS_REQ_INCOMING) and transferring
 * (HS_REQ_XFER) hand-overs in arrival order, at most one transferring per
 * source replica (INV-HANDOVER). */
#include "serve/engine_int.h"

#include <assert.h>

/* Queues the NET event at the network's next event time (or none when it
 * is idle), replacing the pending one when that time changed. */
static void net_reschedule(hs_engine *e)
{
    hs_ns t = hs_net_next_event(e->net);
    if (t == e->net_time) return;
    if (e->net_seq && hs_evq_cancel(&e->q, e->net_seq))
        hs__engine_fail(e, HS_ENOMEM, "out of memory rescheduling the network's next event");
    e->net_seq = 0;
    if (t != HS_NS_MAX) {
        if (t < e->q.now) t = e->q.now;
        e->net_seq = hs_evq_push(&e->q, t, HS_PRIO_TRANSFER, HS__EV_NET, 0, 0);
        if (!e->net_seq) hs__engine_fail(e, HS_ENOMEM, "out of memory queueing the network's next event");
    }
    e->net_time = t;
}

/* Starts one flow of r's hand-over, adding its bytes to *sum (for the
 * timeline); -1 with e->fatal set. */
static int flow(hs_engine *e, int32_t r, int from, int to, double bytes, double *sum)
{
    if (hs_net_start(e->net, e->q.now, from, to, bytes, r, NULL, NULL)) {
        hs__engine_fail(e, HS_ENOMEM, "out of memory in the engine");
        return -1;
    }
    e->pool[r].xfer_pending++;
    *sum += bytes;
    return 0;
}

/* Tells the timeline that r's transfer from sp to dp started. */
static void tl_begin(hs_engine *e, const hs_req *q, const hs_replica *sp, const hs_replica *dp, double bytes)
{
    if (e->tl && e->tl->kv_begin) e->tl->kv_begin(e->tl->ctx, q->id, sp->id, dp->id, bytes, e->q.now);
}

/* Starts every flow of incoming request r, whose blocks on decode lane dl
 * are reserved. */
static void start_transfer(hs_engine *e, hs_lane *dl, int32_t r)
{
    hs_req *q = &e->pool[r];
    const hs_replica *sp = &e->replicas[e->lanes[q->src_lane]->replica];
    const hs_replica *dp = &e->replicas[dl->replica];
    int a = 0;
    double sum = 0;
    q->state = HS_REQ_XFER;
    q->xfer_pending = 0;
    if (sp->encdec && sp->dec_layers == 0) {
        /* An encoder replica: the encoder output, from the last stage's
         * ranks to every rank of every decode stage (each projects the
         * cross-attention KV of its own heads); the decode side projects
         * it at the request's first step (proj_tokens). */
        const hs_stage_layout *ss = &sp->layout.stage[sp->layout.pp - 1];
        double bytes = (double)q->prefill_len * sp->enc_out_bytes_token;
        for (int d = 0; d < dp->layout.pp; d++)
            for (int k = 0; k < dp->layout.stage[d].tp; k++)
                if (flow(e, r, ss->gpus[k % ss->tp], dp->layout.stage[d].gpus[k], bytes, &sum)) return;
        tl_begin(e, q, sp, dp, sum);
        net_reschedule(e);
        return;
    }
    for (int s = 0; s < sp->layout.pp; s++) {
        const hs_stage_layout *ss = &sp->layout.stage[s];
        int c = 0;
        for (int d = 0; d < dp->layout.pp; d++) {
            const hs_stage_layout *ds = &dp->layout.stage[d];
            int lo = a > c ? a : c, hi = a + ss->layers < c + ds->layers ? a + ss->layers : c + ds->layers;
            if (hi > lo) {
                int nf = ss->tp > ds->tp ? ss->tp : ds->tp;
                double bytes = (double)(hi - lo) * q->prefill_len * sp->kv_bytes_token_layer / nf;
                for (int i = 0; i < nf; i++)
                    if (flow(e, r, ss->gpus[i % ss->tp], ds->gpus[i % ds->tp], bytes, &sum)) return;
            }
            c += ds->layers;
        }
        a += ss->layers;
    }
    tl_begin(e, q, sp, dp, sum);
    net_reschedule(e);
}

/* Decode steps lane l has done by now.  Mid-iteration, a fast-forwarded
 * run cut at now (hs__ff_truncate, which the callers apply first) has done
 * all its ff_k steps but the one in flight, exactly what single steps
 * would have done, so decisions are the same with fast_forward off. */
static int64_t steps_done(const hs_lane *l)
{
    return l->g + (l->busy && l->it.decode && l->ff_k > 1 ? l->ff_k - 1 : 0);
}

/* Generated tokens of r on lane l, g = steps_done(l) (a decode member's
 * come from the set's aggregates, runtime.h). */
static int32_t gen_of(const hs_engine *e, int64_t g, int32_t r)
{
    const hs_req *q = &e->pool[r];
    return q->state == HS_REQ_DECODE ? q->gen0 + (int32_t)(g - q->g0) : q->gen;
}

/* Blocks a request of prompt p, gen tokens generated, holds when it writes
 * the KV of its token max(gen, h) + 1: its context at horizon h. */
static int64_t horizon_blocks(const hs_engine *e, int32_t p, int32_t gen, int32_t h)
{
    return hs_blocks_for(e, (int64_t)p + (gen > h ? gen : h));
}

/* What a decode lane has committed: *blocks the blocks every request on it
 * (members, preempted ones waiting or recomputing, transferring and landed
 * hand-overs) holds at the horizon *h, twice the members' mean generated
 * tokens but at least the mean output of the requests finished on the lane
 * (rounded up; 0 without members); *n their count.  O(requests on the
 * lane): called only while hand-overs wait. */
static void committed(const hs_engine *e, const hs_lane *dl, int64_t *blocks, int32_t *h, int32_t *n)
{
    const hs_list *lists[] = {&dl->running, &dl->waiting, &dl->prefilling, &dl->landed, &dl->incoming};
    int64_t sum = 0, g = steps_done(dl);
    int32_t hz = 0, cnt = 0;
    {
        int64_t sg = 0, nm = 0;
        for (int32_t r = dl->running.head; r >= 0; r = e->pool[r].next, nm++) sg += gen_of(e, g, r);
        if (nm) hz = (int32_t)((2 * sg + nm - 1) / nm);
        /* a burst of hand-overs joins at the same age: until they are spread
         * out, twice their mean age is short of what the lane has seen
         * requests finish at */
        if (nm && dl->fin_n && (dl->fin_gen + dl->fin_n - 1) / dl->fin_n > hz)
            hz = (int32_t)((dl->fin_gen + dl->fin_n - 1) / dl->fin_n);
    }
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++)
        for (int32_t r = lists[k]->head; r >= 0; r = e->pool[r].next) {
            const hs_req *q = &e->pool[r];
            /* transfers in flight head the incoming list (hs__admit_incoming
             * moves them there); the waiting backlog behind them commits
             * nothing and is not walked */
            if (q->state == HS_REQ_INCOMING) break;
            sum += horizon_blocks(e, q->prompt, gen_of(e, g, r), hz);
            cnt++;
        }
    *blocks = sum;
    *h = hz;
    *n = cnt;
}

/* Decode-side admission, as a disaggregated system's decoding instance
 * pulls a KV cache:
 *   - room for what the request will need, not only for the prompt it
 *     brings: the lane commits for every request the blocks it holds at the
 *     horizon (committed()), keeps the watermark free and takes at most
 *     max_num_seqs requests, so a hand-over never starts a cycle of
 *     preemption and recompute on the decode replica (prompt-only
 *     reservation recomputed 23% of het1's 512/128-token requests, and its
 *     A100 decode replicas spent 29% of their time re-prefilling them).
 *     Output lengths are unknown to the runtime; what it sees is the
 *     members' progress.  Members in steady state are on average halfway
 *     through (a member's expected remaining output is the members' mean
 *     age, renewal theory), so each request is expected to reach twice the
 *     members' mean generated length, or its own if longer: exact for
 *     equal outputs (ages are uniform), the length-biased mean for spread
 *     ones.  (Expecting the longest-running member's length instead held
 *     Azure LPHD-like outputs, 129-1,000 tokens, to 12% below the old
 *     runtime; this rule is 2% above it, without preemptions.)  Ages are
 *     not uniform after a burst of hand-overs (an offline batch joins at
 *     one age), so the horizon is at least the mean output of the requests
 *     finished on the lane (without it, a disaggregated plan on 8 H100s
 *     preempted 8.8% of 229/178-token requests).  A lane with nothing
 *     committed takes a request anyway (INV-FIT: it fits);
 *   - one transfer in flight per (source replica, decode lane) pair: more
 *     on a saturated link deliver no more bytes, they only hold the decode
 *     lane's blocks longer (het5's 1 Gb/s links filled an A100 decode lane
 *     with ~90 transfers in flight, leaving it 7 decoding members).
 * Memory is first come first served (the pass stops at the first request
 * that does not fit); a request whose pair is busy waits and a later one of
 * another pair may go first.  Per pair the list keeps arrival order, so a
 * pair's transfer in flight comes before its waiting requests
 * (INV-HANDOVER).  A pass sees at most HS__PAIRS_SEEN sources; requests of
 * further ones wait for the next pass. */
#define HS__PAIRS_SEEN 32
void hs__admit_incoming(hs_engine *e, hs_lane *dl)
{
    int32_t h = 0, n = 0, busy[HS__PAIRS_SEEN], n_busy = 0;
    int64_t commit = -1;
    /* Once every prefill replica has a transfer in flight to this lane, the
     * rest of the queue can only wait: stop instead of walking a backlog
     * of thousands at every step (it made decode-bound runs 12x slower). */
    for (int32_t r = dl->incoming.head, next; r >= 0 && n_busy < e->n_prefill; r = next) {
        hs_req *q = &e->pool[r];
        int32_t need = hs_blocks_for(e, q->prefill_len), src = e->lanes[q->src_lane]->replica, seen = 0;
        int64_t at_h;
        next = q->next;
        for (int32_t k = 0; k < n_busy; k++) seen |= busy[k] == src;
        if (seen) continue;
        if (n_busy == HS__PAIRS_SEEN) break;
        if (q->state == HS_REQ_XFER) {
            busy[n_busy++] = src;
            continue;
        }
        /* Every lane holds one full context (INV-FIT), so need always fits
         * an empty lane and a stalled queue drains as decodes finish. */
        assert(need <= dl->blocks_total);
        if (dl->blocks_free < need) break;
        if (commit < 0) committed(e, dl, &commit, &h, &n);
        at_h = horizon_blocks(e, q->prompt, q->gen, h);
        if (n > 0 && (commit + at_h > dl->blocks_total - dl->watermark || n + 1 > e->cfg.max_num_seqs)) break;
        commit += at_h;
        n++;
        dl->blocks_free -= need;
        dl->xfer_in += need;
        q->blocks = need;
        busy[n_busy++] = src;
        /* to the head: committed() stops at the first request still waiting */
        hs_list_remove(e, &dl->incoming, r);
        hs_list_push_front(e, &dl->incoming, r);
        start_transfer(e, dl, r);
        if (e->fatal) return;
    }
}

/* Admits hand-overs now on every lane of decode replica rp
 * (hs__admit_incoming) whose preempted requests are served: they come
 * first, as in try_start.  A fast-forwarded run is cut at now first
 * (steps_done). */
static void admit_replica(hs_engine *e, hs_replica *rp)
{
    for (int32_t k = 0; k < rp->n_lanes && !e->fatal; k++) {
        hs_lane *l = &rp->lanes[k];
        if (l->incoming.head < 0 || l->waiting.head >= 0) continue;
        if (l->busy && l->ff_k > 1) hs__ff_truncate(e, l, e->q.now);
        hs__admit_incoming(e, l);
    }
}

/* Queues r on a decode lane (hs__pick_decode) and moves its load there;
 * its prefill blocks stay held until its last flow lands. */
static void handoff(hs_engine *e, hs_lane *sl, int32_t r, hs_ns t)
{
    hs_req *q = &e->pool[r];
    hs_lane *dl = hs__pick_decode(e, sl->replica);
    /* the prefill blocks stay held until the KV is out */
    sl->xfer_out += q->blocks;
    q->src_lane = sl->id;
    q->src_blocks = q->blocks;
    q->blocks = 0;
    sl->out_reqs--;
    sl->out_tokens -= q->prompt;
    e->load_req[sl->replica]--;
    e->load_tok[sl->replica] -= q->prompt;
    dl->out_reqs++;
    dl->out_tokens += q->prompt;
    e->load_req[dl->replica]++;
    e->load_tok[dl->replica] += q->prompt;
    q->replica = dl->replica;
    q->lane = dl->id;
    q->last_token = t;
    q->state = HS_REQ_INCOMING;
    hs_list_push_back(e, &dl->incoming, r);
    e->handoffs++;
    /* like an arrival: the next step boundary must look at it */
    if (dl->busy && dl->ff_k > 1) hs__ff_truncate(e, dl, t);
    /* its transfer may start now, mid-iteration: it takes free blocks only */
    if (dl->waiting.head < 0) hs__admit_incoming(e, dl);
    hs_engine_kick(e, dl);
}

/* The last flow of r landed: free the prefill side, queue the join. */
static void transfer_done(hs_engine *e, int32_t r)
{
    hs_req *q = &e->pool[r];
    hs_lane *sl = e->lanes[q->src_lane], *dl = e->lanes[q->lane];
    if (e->tl && e->tl->kv_end) e->tl->kv_end(e->tl->ctx, q->id, sl->replica, dl->replica, e->q.now);
    /* encoder output in: its first step on the decode lane projects its
     * cross KV (it joins the decode set at that step's boundary) */
    if (e->replicas[sl->replica].encdec && e->replicas[sl->replica].dec_layers == 0) q->proj_tokens = q->prefill_len;
    sl->blocks_free += q->src_blocks;
    sl->xfer_out -= q->src_blocks;
    q->src_blocks = 0;
    q->src_lane = -1;
    hs_list_remove(e, &dl->incoming, r);
    hs_list_push_back(e, &dl->landed, r);
    if (dl->busy && dl->ff_k > 1) hs__ff_truncate(e, dl, e->q.now);
    hs_engine_kick(e, dl);
    hs_engine_kick(e, sl);
    /* its pair is free: the pair's next hand-over starts now, not at the
     * lane's next iteration boundary */
    admit_replica(e, &e->replicas[dl->replica]);
}

/* At an iteration boundary: landed requests join the decode set (keeping
 * their last token time, so their first ITL spans the hand-over); the
 * caller (try_start) then lets queued hand-overs take the blocks that are
 * free. */
void hs__join_landed(hs_engine *e, hs_lane *l)
{
    while (l->landed.head >= 0) {
        int32_t r = l->landed.head;
        hs_req *q = &e->pool[r];
        hs_ns last = q->last_token;
        hs_list_remove(e, &l->landed, r);
        l->xfer_in -= q->blocks;
        if (hs__dec_join(e, l, r, e->q.now)) {
            hs__engine_fail(e, HS_ENOMEM, "out of memory in the engine");
            return;
        }
        e->pool[r].last_token = last;
    }
}

/* The network's next event: delivered flows, finished hand-overs. */
void hs__on_net(hs_engine *e)
{
    int64_t tag;
    e->net_seq = 0;
    e->net_time = -1;
    hs_net_advance(e->net, e->q.now);
    while (hs_net_pop_done(e->net, e->q.now, &tag, NULL))
        if (--e->pool[tag].xfer_pending == 0) transfer_done(e, (int32_t)tag);
    net_reschedule(e);
}

void hs__handoff_leaving(hs_engine *e, hs_lane *l)
{
    while (l->leaving.head >= 0 && !e->fatal) {
        int32_t r = l->leaving.head;
        hs_list_remove(e, &l->leaving, r);
        handoff(e, l, r, l->it.end);
    }
}
