/* lane.c - the mechanisms of one scheduling lane: queues, KV blocks, the
 * aggregated decode set, preemption by recompute, completion.  Policies
 * (policy/) decide what to run; this file keeps the books.  See runtime.h
 * for the aggregate representation and its invariants. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/vec.h"
#include "serve/engine_int.h"

hs_req *hs_req_at(hs_engine *e, int32_t r)
{
    assert(r >= 0 && r < e->pool_cap);
    return &e->pool[r];
}

int hs_req_done(const hs_engine *e, int32_t r, int32_t gen)
{
    assert(r >= 0 && r < e->pool_cap);
    return gen >= e->eos[r];
}

int32_t hs_blocks_for(const hs_engine *e, int64_t tokens)
{
    return (int32_t)((tokens + e->cfg.block_size - 1) / e->cfg.block_size);
}

/* ---- intrusive lists over pool indices ---- */

void hs_list_push_back(hs_engine *e, hs_list *l, int32_t r)
{
    hs_req *q = hs_req_at(e, r);
    q->prev = l->tail;
    q->next = -1;
    if (l->tail >= 0) hs_req_at(e, l->tail)->next = r;
    else l->head = r;
    l->tail = r;
    l->len++;
}

void hs_list_push_front(hs_engine *e, hs_list *l, int32_t r)
{
    hs_req *q = hs_req_at(e, r);
    q->next = l->head;
    q->prev = -1;
    if (l->head >= 0) hs_req_at(e, l->head)->prev = r;
    else l->tail = r;
    l->head = r;
    l->len++;
}

void hs_list_remove(hs_engine *e, hs_list *l, int32_t r)
{
    hs_req *q = hs_req_at(e, r);
    if (q->prev >= 0) hs_req_at(e, q->prev)->next = q->next;
    else l->head = q->next;
    if (q->next >= 0) hs_req_at(e, q->next)->prev = q->prev;
    else l->tail = q->prev;
    q->prev = q->next = -1;
    l->len--;
}

/* ---- finish heap: min on (finish_step, id) ---- */

static int fin_before(const hs_engine *e, int32_t a, int32_t b)
{
    const hs_req *x = &e->pool[a], *y = &e->pool[b];
    if (x->finish_step != y->finish_step) return x->finish_step < y->finish_step;
    return x->id < y->id;
}

static void heap_set(hs_engine *e, hs_lane *l, int32_t i, int32_t r)
{
    l->heap[i] = r;
    e->pool[r].heap_idx = i;
}

static void heap_up(hs_engine *e, hs_lane *l, int32_t i)
{
    int32_t r = l->heap[i];
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (!fin_before(e, r, l->heap[p])) break;
        heap_set(e, l, i, l->heap[p]);
        i = p;
    }
    heap_set(e, l, i, r);
}

static void heap_down(hs_engine *e, hs_lane *l, int32_t i)
{
    int32_t n = l->n_dec, r = l->heap[i];
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && fin_before(e, l->heap[c + 1], l->heap[c])) c++;
        if (!fin_before(e, l->heap[c], r)) break;
        heap_set(e, l, i, l->heap[c]);
        i = c;
    }
    heap_set(e, l, i, r);
}

static int32_t mod_bs(const hs_engine *e, int64_t v)
{
    int64_t m = v % e->cfg.block_size;
    return (int32_t)(m < 0 ? m + e->cfg.block_size : m);
}

/* Joins the decode set after a prefill that produced token `gen` at t. */
int hs__dec_join(hs_engine *e, hs_lane *l, int32_t r, hs_ns t)
{
    hs_req *q = hs_req_at(e, r);
    if (hs_vec_reserve_i32((void **)&l->heap, &l->heap_cap, l->n_dec + 1, sizeof *l->heap, 16) ||
        hs_vec_reserve_i32((void **)&l->joiners, &l->cap_joiners, l->n_joiners + 1,
                           sizeof *l->joiners, 16))
        return HS_ENOMEM;
    q->state = HS_REQ_DECODE;
    q->g0 = l->g;
    q->gen0 = q->gen;
    q->kv0 = q->prefill_len;
    q->finish_step = l->g + e->eos[r] - q->gen;
    q->last_token = t;
    l->heap[l->n_dec] = r;
    q->heap_idx = l->n_dec;
    l->n_dec++;
    heap_up(e, l, q->heap_idx);
    l->bucket[mod_bs(e, q->g0 - q->kv0)]++;
    l->sum_kv += q->kv0;
    hs_list_push_back(e, &l->running, r);
    l->joiners[l->n_joiners++] = r;
    return 0;
}

/* Leaves the decode set; materialises gen and blocks into the request. */
static void dec_leave(hs_engine *e, hs_lane *l, int32_t r)
{
    hs_req *q = hs_req_at(e, r);
    int64_t kv = q->kv0 + (l->g - q->g0);
    int32_t i = q->heap_idx, last, k;
    int joiner = 0;
    assert(q->state == HS_REQ_DECODE);
    last = l->heap[--l->n_dec];
    if (i < l->n_dec) {
        heap_set(e, l, i, last);
        heap_up(e, l, i);
        heap_down(e, l, hs_req_at(e, last)->heap_idx);
    }
    q->heap_idx = -1;
    l->bucket[mod_bs(e, q->g0 - q->kv0)]--;
    l->sum_kv -= kv;
    hs_list_remove(e, &l->running, r);
    for (k = 0; k < l->n_joiners; k++)
        if (l->joiners[k] == r) {
            l->joiners[k] = l->joiners[--l->n_joiners];
            joiner = 1;
            break;
        }
    if (!joiner) {
        l->n_old--;
        q->last_token = l->last_dec_end;
    }
    q->gen = q->gen0 + (int32_t)(l->g - q->g0);
    q->blocks = hs_blocks_for(e, kv);
}

int hs_iter_add_chunk(hs_engine *e, hs_lane *l, int32_t r, int32_t len)
{
    hs_req *q = hs_req_at(e, r);
    hs_batch_shape *s = &l->it.shape;
    double p = q->prefilled;
    if (hs_vec_reserve_i32((void **)&l->it.chunks, &l->cap_chunks, l->it.n_chunks + 1,
                           sizeof *l->it.chunks, 16))
        return HS_ENOMEM;
    l->it.chunks[l->it.n_chunks].req = r;
    l->it.chunks[l->it.n_chunks].len = len;
    l->it.n_chunks++;
    if (e->replicas[l->replica].encdec) {
        /* Encoding: the whole prompt (policies that run encoder-decoder
         * models never chunk it) through the encoder, every token attending
         * to every other, and the cross-attention K/V projection.  A
         * recompute after preemption (gen > 0) encodes the prompt again -
         * on a decode replica, which holds no encoder, it projects the cross
         * KV from the encoder output it kept (hidden x 2 bytes per prompt
         * token, under 0.2% of T5's cross KV, not counted) - and runs the
         * decoder over the generated tokens (causal, and against the prompt
         * through cross-attention), sampling the next one. */
        int32_t gen = q->prefill_len - q->prompt;
        assert(q->prefilled == 0 && len == q->prefill_len);
        s->enc_tokens += q->prompt;
        s->enc_pairs += (double)q->prompt * q->prompt;
        s->enc_seqs++;
        s->enc_new += q->prompt;
        if (gen > 0) {
            s->tokens += gen;
            s->pre_chunks++;
            s->pre_self += (double)gen * (gen + 1) / 2.0;
            s->pre_tokens += gen;
            s->pre_cross += (double)gen * q->prompt;
            s->samples++;
        }
    } else {
        s->tokens += len;
        s->pre_chunks++;
        s->pre_self += (double)len * (len + 1) / 2.0;
        s->pre_tokens += len;
        s->pre_cross += (double)len * p;
        s->pre_prefix += q->prefilled;
        if (q->prefilled + len == q->prefill_len) s->samples++;
    }
    if (q->first_sched < 0) q->first_sched = e->q.now;
    return 0;
}

void hs_lane_admit(hs_engine *e, hs_lane *l, int32_t r)
{
    hs_req *q = hs_req_at(e, r);
    assert(q->state == HS_REQ_WAITING);
    hs_list_remove(e, &l->waiting, r);
    q->state = HS_REQ_PREFILL;
    q->prefilled = 0;
    q->blocks = hs_blocks_for(e, q->prefill_len);
    l->blocks_free -= q->blocks;
    assert(l->blocks_free >= 0); /* INV-KV */
    hs_list_push_back(e, &l->prefilling, r);
}

static void release(hs_engine *e, hs_lane *l, int32_t r, hs_req_record *rec)
{
    hs_req *q = hs_req_at(e, r);
    int rc = e->sink.request ? e->sink.request(e->sink.ctx, rec) : 0;
    if (rc) hs__engine_fail(e, rc, "the results sink refused request %lld", (long long)rec->id);
    l->out_reqs--;
    l->out_tokens -= q->prompt;
    e->load_req[l->replica]--;
    e->load_tok[l->replica] -= q->prompt;
    memset(q, 0, sizeof *q);
    q->state = HS_REQ_FREE;
    q->next = e->free_head;
    e->free_head = r;
}

static void record_of(const hs_req *q, const hs_lane *l, hs_ns t, hs_req_record *rec)
{
    memset(rec, 0, sizeof *rec);
    rec->id = q->id;
    rec->replica = l->replica;
    rec->prompt = q->prompt;
    rec->output = q->gen;
    rec->preemptions = q->preemptions;
    rec->arrival = q->arrival;
    rec->first_sched = q->first_sched;
    rec->first_token = q->first_token;
    rec->finish = t;
}

void hs_lane_drop(hs_engine *e, hs_lane *l, int32_t r, const char *why)
{
    hs_req *q = hs_req_at(e, r);
    hs_req_record rec;
    assert(q->state == HS_REQ_WAITING && q->blocks == 0);
    hs_list_remove(e, &l->waiting, r);
    record_of(q, l, e->q.now, &rec);
    rec.dropped = 1;
    rec.why = why;
    e->dropped++;
    release(e, l, r, &rec);
}

int hs_lane_drop_if_never_fits(hs_engine *e, hs_lane *l, int32_t r, int32_t max_tokens)
{
    hs_req *q = hs_req_at(e, r);
    if (hs_blocks_for(e, q->prefill_len) > l->blocks_total - l->watermark) {
        hs_lane_drop(e, l, r, "needs more KV blocks than the replica has");
        return 1;
    }
    if (max_tokens && q->prefill_len > max_tokens) {
        hs_lane_drop(e, l, r, "prompt longer than max_batched_tokens");
        return 1;
    }
    return 0;
}

void hs_lane_finish(hs_engine *e, hs_lane *l, int32_t r, hs_ns t)
{
    hs_req *q = hs_req_at(e, r);
    hs_req_record rec;
    l->blocks_free += q->blocks;
    assert(l->blocks_free <= l->blocks_total); /* INV-KV */
    l->fin_gen += q->gen;
    l->fin_n++;
    record_of(q, l, t, &rec);
    e->completed++;
    release(e, l, r, &rec);
}

int32_t hs_lane_batch_take(hs_engine *e, hs_lane *l, int32_t want, int32_t **reqs, int32_t *cap,
                           int32_t *max_prompt)
{
    int32_t n = 0;
    if (hs_vec_reserve_i32((void **)reqs, cap, want, sizeof **reqs, want)) {
        hs__engine_fail(e, HS_ENOMEM, "out of memory forming a batch");
        return -1;
    }
    *max_prompt = 0;
    while (l->waiting.head >= 0 && n < want) {
        int32_t r = l->waiting.head;
        hs_req *q = hs_req_at(e, r);
        hs_list_remove(e, &l->waiting, r);
        q->state = HS_REQ_STATIC;
        q->first_sched = e->q.now;
        hs_list_push_back(e, &l->running, r);
        (*reqs)[n++] = r;
        if (q->prompt > *max_prompt) *max_prompt = q->prompt;
    }
    return n;
}

int32_t hs_lane_batch_tokens(hs_engine *e, hs_lane *l, int32_t *reqs, int32_t alive, int32_t gen, hs_ns t)
{
    int32_t kept = 0;
    if (gen <= 0) return alive;
    for (int32_t k = 0; k < alive; k++) {
        hs_req *q = hs_req_at(e, reqs[k]);
        q->gen = gen;
        if (q->first_token < 0) q->first_token = t;
    }
    for (int32_t k = 0; k < alive; k++) {
        int32_t r = reqs[k];
        if (hs_req_done(e, r, gen)) {
            hs_list_remove(e, &l->running, r);
            hs_lane_finish(e, l, r, t);
        } else {
            reqs[kept++] = r;
        }
    }
    return kept;
}

void hs_fixed_shape(hs_engine *e, hs_lane *l, const hs_fixed_batch *b, int32_t n, hs_batch_shape *s)
{
    memset(s, 0, sizeof *s);
    if (b->prefill) {
        if (e->replicas[l->replica].encdec) {
            s->enc_tokens = s->enc_new = (int32_t)((int64_t)n * b->max_prompt);
            s->enc_pairs = (double)n * b->max_prompt * b->max_prompt;
            s->enc_seqs = n;
            return;
        }
        assert(!b->unpadded || n == b->n);
        s->samples = n;
        s->pre_chunks = n;
        s->tokens = s->pre_tokens = b->unpadded ? b->sum_prompt : (int64_t)n * b->max_prompt;
        s->pre_self = (double)n * b->max_prompt * (b->max_prompt + 1) / 2.0;
        return;
    }
    l->it.decode = 1;
    s->tokens = s->samples = s->dec_seqs = n;
    s->dec_ctx = (int64_t)n * (b->max_prompt + b->step + 1);
}

int hs_fixed_step(hs_engine *e, hs_lane *l, hs_fixed_batch *b, hs_ns t)
{
    /* tokens after `step` decoding steps: the prompt pass samples the first
     * of a decoder-only model; encoding samples none */
    int64_t shift = e->replicas[l->replica].encdec ? 0 : 1;
    if (b->prefill) {
        b->prefill = 0;
    } else {
        b->step++;
        if (e->sink.itl && b->alive > 0 && b->step + shift > 1)
            e->sink.itl(e->sink.ctx, t - b->last_end, b->alive);
    }
    b->alive = hs_lane_batch_tokens(e, l, b->reqs, b->alive, (int32_t)(b->step + shift), t);
    b->last_end = t;
    if (b->alive > 0) return 0;
    b->active = 0;
    return 1;
}

int hs_lane_continuous(hs_engine *e, hs_lane *l, int32_t max_new, hs_admit_veto veto, void *ctx)
{
    for (int pass = 0; pass < 2; pass++) {
        int rc;
        if (hs_lane_admit_fcfs(e, l, e->cfg.max_batched_tokens, max_new, veto, ctx) < 0) return 0;
        if (l->it.n_chunks) return 1;
        if (l->n_dec == 0) return 0;
        if ((rc = hs_lane_decode_setup(e, l)) != 0) return rc > 0;
    }
    return 0;
}

/* Evicts r (decode member or admitted prefill) back to the waiting queue's
 * head; its KV is dropped and recomputed on re-admission (recompute
 * preemption, the default for single-sequence requests). */
static void preempt(hs_engine *e, hs_lane *l, int32_t r)
{
    hs_req *q = hs_req_at(e, r);
    if (q->state == HS_REQ_DECODE) dec_leave(e, l, r);
    else hs_list_remove(e, &l->prefilling, r);
    l->blocks_free += q->blocks;
    q->blocks = 0;
    q->prefill_len = q->prompt + q->gen;
    q->prefilled = 0;
    q->proj_tokens = 0; /* the recompute projects the cross KV again */
    q->preemptions++;
    q->state = HS_REQ_WAITING;
    hs_list_push_front(e, &l->waiting, r);
    l->preemptions++;
    e->preemptions++;
    if (e->trace && hs_sched_wants(e->trace, l->replica)) hs__trace_preempt(e, l, q);
    if (e->tl && e->tl->preempt)
        e->tl->preempt(e->tl->ctx, l->replica, hs__lane_index(e, l), q->id, e->q.now);
}

void hs_lane_preempt(hs_engine *e, hs_lane *l, int32_t r)
{
    preempt(e, l, r);
}

int hs_lane_reserve_decode(hs_engine *e, hs_lane *l)
{
    for (;;) {
        int32_t need = l->n_dec ? l->bucket[mod_bs(e, l->g)] : 0, victim;
        if (l->blocks_free >= need) {
            l->blocks_free -= need;
            return 0;
        }
        victim = l->prefilling.tail >= 0 ? l->prefilling.tail : l->running.tail;
        /* Prefer evicting the latest-admitted: a half-done prefill of the
         * newest request before any decode member. */
        if (l->running.tail >= 0 && l->prefilling.tail < 0) victim = l->running.tail;
        if (victim < 0) return -1;
        preempt(e, l, victim);
    }
}

void hs_lane_decode_shape(hs_engine *e, hs_lane *l)
{
    hs_batch_shape *s = &l->it.shape;
    l->it.decode = 1;
    /* encoder output handed over: a joiner's first step projects its cross
     * KV (a preempted joiner left the list and is recomputed instead) */
    for (int32_t k = 0; e->replicas[l->replica].encdec && k < l->n_joiners; k++) {
        hs_req *q = &e->pool[l->joiners[k]];
        s->enc_tokens += q->proj_tokens;
        q->proj_tokens = 0;
    }
    s->dec_seqs = l->n_dec;
    s->dec_ctx = l->sum_kv + l->n_dec;
    s->tokens += l->n_dec;
    s->samples += l->n_dec;
}

int32_t hs_lane_admit_fcfs(hs_engine *e, hs_lane *l, int32_t max_tok, int32_t max_new,
                           hs_admit_veto veto, void *ctx)
{
    int32_t seqs = l->n_dec + l->prefilling.len, n = 0;
    while (l->waiting.head >= 0) {
        int32_t r = l->waiting.head;
        hs_req *q = hs_req_at(e, r);
        const char *why = NULL;
        if (hs_lane_drop_if_never_fits(e, l, r, max_tok)) continue;
        if (max_new > 0 && n >= max_new) break;
        if (seqs + 1 > e->cfg.max_num_seqs) break;
        if (l->it.shape.tokens + l->it.shape.enc_tokens + q->prefill_len > max_tok) break;
        if (l->blocks_free - hs_blocks_for(e, q->prefill_len) < l->watermark) break;
        if (veto) {
            int v = veto(ctx, e, l, r, &why);
            if (v == HS_ADMIT_STOP) break;
            if (v == HS_ADMIT_DROP) {
                hs_lane_drop(e, l, r, why ? why : "refused by the policy");
                continue;
            }
        }
        hs_lane_admit(e, l, r);
        if (hs_iter_add_chunk(e, l, r, q->prefill_len)) {
            hs__engine_fail(e, HS_ENOMEM, "out of memory adding a prompt to the batch");
            return -1;
        }
        seqs++;
        n++;
    }
    return n;
}

int hs_lane_decode_setup(hs_engine *e, hs_lane *l)
{
    if (l->n_dec == 0) return 0;
    if (hs_lane_reserve_decode(e, l) < 0) {
        hs__engine_fail(e, HS_ESTATE, "lane %d: no KV blocks for the decode step even after preempting every other member",
                        l->id);
        return -1;
    }
    if (l->n_dec == 0) return 0;
    hs_lane_decode_shape(e, l);
    return 1;
}

void hs_lane_complete(hs_engine *e, hs_lane *l)
{
    hs_ns t = l->it.end;
    if (l->it.decode && l->n_dec > 0) {
        l->g++;
        l->sum_kv += l->n_dec;
        if (e->sink.itl && l->n_old > 0) e->sink.itl(e->sink.ctx, t - l->last_dec_end, l->n_old);
        for (int32_t k = 0; k < l->n_joiners; k++) {
            hs_req *q = hs_req_at(e, l->joiners[k]);
            /* an encoded query's first token comes from its first step */
            if (q->first_token < 0) q->first_token = t;
            else if (e->sink.itl) e->sink.itl(e->sink.ctx, t - q->last_token, 1);
        }
        l->n_joiners = 0;
        l->n_old = l->n_dec;
        while (l->n_dec > 0 && hs_req_at(e, l->heap[0])->finish_step == l->g) {
            int32_t r = l->heap[0];
            dec_leave(e, l, r);
            hs_lane_finish(e, l, r, t);
        }
        l->last_dec_end = t;
    }
    for (int32_t k = 0; k < l->it.n_chunks; k++) {
        int32_t r = l->it.chunks[k].req;
        hs_req *q = hs_req_at(e, r);
        q->prefilled += l->it.chunks[k].len;
        if (q->prefilled < q->prefill_len) continue;
        /* Encoder-decoder models: encoding yields no token (D = S decoding
         * steps); a recompute after preemption does. */
        if (!e->replicas[l->replica].encdec || q->gen > 0) {
            q->gen++;
            if (q->first_token < 0) q->first_token = t;
            else if (e->sink.itl) /* recompute after preemption: a regular token */
                e->sink.itl(e->sink.ctx, t - q->last_token, 1);
        }
        hs_list_remove(e, &l->prefilling, r);
        if (q->gen >= e->eos[r]) {
            hs_lane_finish(e, l, r, t);
        } else if (e->replicas[l->replica].role_kind == HS_ROLE_PREFILL) {
            /* the engine hands it over once the iteration is applied
             * (hs__handoff_leaving), in this order */
            hs_list_push_back(e, &l->leaving, r);
        } else if (hs__dec_join(e, l, r, t)) {
            hs__engine_fail(e, HS_ENOMEM, "out of memory completing an iteration");
            return;
        }
    }
    l->it.n_chunks = 0;
}

int hs_lane_sane(hs_engine *e, const hs_lane *l)
{
    int64_t held = 0;
    int32_t n = 0, r;
    /* During a decode iteration the blocks for the token(s) being written are
     * already reserved: members hold blocks for kv + ff_k tokens. */
    int64_t writing = l->busy && l->it.decode ? l->ff_k : 0;
    held += l->xfer_out + l->xfer_in;
    for (r = l->prefilling.head; r >= 0; r = e->pool[r].next) held += e->pool[r].blocks;
    for (r = l->leaving.head; r >= 0; r = e->pool[r].next) held += e->pool[r].blocks;
    for (r = l->running.head; r >= 0; r = e->pool[r].next, n++) {
        const hs_req *q = &e->pool[r];
        if (q->state == HS_REQ_DECODE)
            held += hs_blocks_for(e, q->kv0 + (l->g - q->g0) + writing);
        else
            held += q->blocks;
    }
    for (r = l->waiting.head; r >= 0; r = e->pool[r].next)
        if (e->pool[r].blocks) return 0;
    if (l->blocks_free < 0 || l->blocks_free > l->blocks_total) return 0;
    if (held + l->reserved + l->blocks_free != l->blocks_total) return 0;
    /* Static batches keep their members in `running` outside the decode
     * set; every other policy uses the decode set's aggregates. */
    for (r = l->running.head; r >= 0; r = e->pool[r].next)
        if (e->pool[r].state == HS_REQ_STATIC) return 1;
    if (n != l->n_dec) return 0;
    {
        /* INV-DEC: the aggregates follow the members, the heap is ordered. */
        int64_t sum = 0;
        int32_t bs = e->cfg.block_size;
        for (int32_t k = 0; k < bs; k++) {
            int32_t cnt = 0;
            for (r = l->running.head; r >= 0; r = e->pool[r].next) {
                const hs_req *q = &e->pool[r];
                int64_t m = (q->g0 - q->kv0) % bs;
                cnt += (m < 0 ? m + bs : m) == k;
            }
            if (cnt != l->bucket[k]) return 0;
        }
        for (r = l->running.head; r >= 0; r = e->pool[r].next)
            sum += e->pool[r].kv0 + (l->g - e->pool[r].g0);
        if (sum != l->sum_kv) return 0;
        for (int32_t i = 1; i < l->n_dec; i++)
            if (fin_before(e, l->heap[i], l->heap[(i - 1) / 2])) return 0;
        for (int32_t i = 0; i < l->n_dec; i++)
            if (e->pool[l->heap[i]].heap_idx != i) return 0;
    }
    return 1;
}

/* Notes q's preemption on l; it is written with l's next iteration. */
void hs__trace_preempt(hs_engine *e, hs_lane *l, const hs_req *q)
{
    if (hs_vec_reserve_i32((void **)&l->trace_pm, &l->cap_trace_pm, l->n_trace_pm + 1,
                           sizeof *l->trace_pm, 64)) {
        hs__engine_fail(e, HS_ENOMEM, "out of memory in the engine");
        return;
    }
    l->trace_pm[l->n_trace_pm++] = q->id;
}

void hs_engine_kick(hs_engine *e, hs_lane *l)
{
    if (l->busy || l->kick) return;
    l->kick = 1;
    if (!hs_evq_push(&e->q, e->q.now, HS_PRIO_STEP, HS__EV_KICK, l->id, 0))
        hs__engine_fail(e, HS_ENOMEM, "out of memory queueing a lane's next step");
}
