/* handover.c - disaggregation: the KV hand-over from prefill to decode
 * replicas, and the network event that carries it.
 *
 * A request whose prompt is done on a prefill replica keeps its blocks
 * there (xfer_out) and queues on a decode lane (incoming) until that lane
 * can reserve blocks for its context (xfer_in); then each GPU holding
 * layer j of the prefill replica sends that layer's KV to the GPU holding
 * layer j on the decode side, one flow per rank pair (max(tp) flows per
 * overlapping stage pair, the bytes split evenly), sharing links max-min
 * fairly (hw/net.h).  When its last flow lands the prefill blocks are freed
 * and the request joins the decode set at the decode lane's next iteration
 * boundary (landed), never in the middle of one.  A request preempted on a
 * decode replica is recomputed there (recompute preemption), not sent back.
 * Which decode lane takes a hand-over is route.c's hs__pick_decode.
 *
 * Invariants: at most one NET event is pending (e->net_seq, 0 when none),
 * queued for the network's next event (e->net_time); a handed-over request
 * holds src_blocks on its prefill lane (counted in that lane's xfer_out)
 * until its last flow lands, and from the start of its transfer
 * (HS_REQ_XFER, xfer_pending flows not yet delivered) blocks on its decode
 * lane (counted in xfer_in) until it joins the decode set. */
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

/* Starts one flow of r's hand-over; -1 with e->fatal set. */
static int flow(hs_engine *e, int32_t r, int from, int to, double bytes)
{
    if (hs_net_start(e->net, e->q.now, from, to, bytes, r, NULL, NULL)) {
        hs__engine_fail(e, HS_ENOMEM, "out of memory in the engine");
        return -1;
    }
    e->pool[r].xfer_pending++;
    return 0;
}

/* Starts every flow of incoming request r, whose blocks on decode lane dl
 * are reserved. */
static void start_transfer(hs_engine *e, hs_lane *dl, int32_t r)
{
    hs_req *q = &e->pool[r];
    const hs_replica *sp = &e->replicas[e->lanes[q->src_lane]->replica];
    const hs_replica *dp = &e->replicas[dl->replica];
    int a = 0;
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
                if (flow(e, r, ss->gpus[k % ss->tp], dp->layout.stage[d].gpus[k], bytes)) return;
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
                    if (flow(e, r, ss->gpus[i % ss->tp], ds->gpus[i % ds->tp], bytes)) return;
            }
            c += ds->layers;
        }
        a += ss->layers;
    }
    net_reschedule(e);
}

/* Starts the transfers of dl's incoming requests in queue order, stopping
 * at the first whose blocks are not free. */
void hs__admit_incoming(hs_engine *e, hs_lane *dl)
{
    while (dl->incoming.head >= 0) {
        int32_t r = dl->incoming.head;
        hs_req *q = &e->pool[r];
        int32_t need = hs_blocks_for(e, q->prefill_len);
        /* Every lane holds one full context (INV-FIT), so need always fits
         * an empty lane and a stalled queue drains as decodes finish. */
        assert(need <= dl->blocks_total);
        if (dl->blocks_free < need) break;
        hs_list_remove(e, &dl->incoming, r);
        dl->blocks_free -= need;
        dl->xfer_in += need;
        q->blocks = need;
        start_transfer(e, dl, r);
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
    if (!dl->busy) hs__admit_incoming(e, dl);
    hs_engine_kick(e, dl);
}

/* The last flow of r landed: free the prefill side, queue the join. */
static void transfer_done(hs_engine *e, int32_t r)
{
    hs_req *q = &e->pool[r];
    hs_lane *sl = e->lanes[q->src_lane], *dl = e->lanes[q->lane];
    /* encoder output in: its first step on the decode lane projects its
     * cross KV (it joins the decode set at that step's boundary) */
    if (e->replicas[sl->replica].encdec && e->replicas[sl->replica].dec_layers == 0) q->proj_tokens = q->prefill_len;
    sl->blocks_free += q->src_blocks;
    sl->xfer_out -= q->src_blocks;
    q->src_blocks = 0;
    q->src_lane = -1;
    hs_list_push_back(e, &dl->landed, r);
    if (dl->busy && dl->ff_k > 1) hs__ff_truncate(e, dl, e->q.now);
    hs_engine_kick(e, dl);
    hs_engine_kick(e, sl);
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
