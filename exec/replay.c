/* replay.c - `hetsim-exec replay`: one replica's schedule executed on a
 * backend, iteration by iteration; see replay.h for what is measured and
 * the output, exec/README.md for the notes a reader of the numbers needs.
 *
 * Two passes over the file, sharing stage_iter (the books and the host
 * inputs of one iteration):
 *   plan  checks the file, loads the model, runs the KV books in an
 *         unbounded pool to learn their peak, records the largest token
 *         count, sample count, decode batch, context and input size, and
 *         which token and sample counts occur (to prime them);
 *   run   sizes the device pool to max(peak of the books, largest
 *         kv_blocks_used of the schedule), allocates, primes, then per
 *         iteration: books -> host inputs -> one upload -> timed work.
 *
 * Rows of an iteration: decode requests first (row s is decode s, so the
 * decode attention reads its queries from row 0), then the prefill chunks
 * packed in schedule order (prefill seq_info q_start counts from n_dec).
 *
 * Block mapping: the kernels' pages hold HS_EXEC_KV_BLOCK (16) tokens; a
 * schedule block of block_size tokens (a multiple of 16) is sub =
 * block_size / 16 consecutive pages: schedule block b is pages b*sub ..
 * b*sub + sub - 1, so token p of a sequence is in page
 * blocks[p / block_size] * sub + (p % block_size) / 16, row p % 16.
 *
 * Sampling: a decode always samples; a prefill chunk samples when it
 * completes the request's prefill target: the prompt at first, prompt +
 * generated tokens after a preemption (recompute), as the simulator's lane
 * counts it (serve/lane.c).  Generated tokens are counted here: +1 per
 * completed prefill and per decode.  A request whose "request" record was
 * not seen samples when it is listed in "first" or "finished". */
#include "replay.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/progress.h"
#include "kvpool.h"
#include "layer.h"
#include "llm/model.h"
#include "profile.h"
#include "serve/schedule.h"
#include "core/time.h"

#define MEM_HEADROOM 0.95      /* fraction of usable memory the replay may plan to use */
#define DECODE_PART 512        /* tokens per partition of the CUDA decode kernel (its scratch) */

typedef struct req_info {
    int32_t prompt;            /* tokens; < 0: no "request" record seen */
    int32_t gen;               /* tokens generated so far */
    int64_t target;            /* tokens the current prefill must reach to sample */
} req_info;

/* Host inputs of one iteration, all int32 in one array uploaded at once. */
typedef struct stage {
    int32_t T, n_dec, n_pre, samples;
    int32_t max_ctx, max_qlen;     /* largest decode context, longest chunk */
    int32_t kb_dec, kb_pre;        /* pages per block-table row */
    size_t o_ids, o_pos, o_slots, o_dinfo, o_dtab, o_pinfo, o_ptab, n;   /* offsets, size */
    int32_t *ints;
    size_t cap;
} stage;

/* Device state of the run. */
typedef struct dev {
    hs_exec *x;
    int32_t *ints;             /* stage.ints on the device */
    void *emb, *pos_tab, *gamma, *beta;
    void *xa, *ya, *za, *qkv, *att, *up, *act, *logits;
    hs_exec_weight w[4];       /* qkv, attn_out, mlp_up, mlp_down at the header's bits */
    hs_exec_weight head;       /* lm_head: borrows emb */
    void **kc, **vc;           /* [K] KV pools, one per layer run */
} dev;

struct hs_exec_replay {
    hs_exec_replay_opts o;
    hs_sched_header h;
    hs_model m;
    hs_exec_shape s;
    int L, K, sub;             /* layers of the replica, layers run, pages per block */
    /* sizes from the plan */
    int64_t n_iters;
    int64_t sched_peak;        /* largest kv_blocks_used in the schedule */
    int64_t books_peak;        /* most blocks the books held at once */
    int64_t pool;              /* blocks of the device pool */
    int32_t max_T, max_S, max_dec, max_ctx;
    size_t max_ints;
    unsigned char *seen_T, *seen_S;   /* [max+1]: counts that occur */
    int32_t cap_T, cap_S;
    /* books */
    hs_exec_kvpool *kv;
    req_info *req;             /* by kvpool slot */
    int32_t cap_req;
    stage st;
    /* run */
    dev d;
    int64_t *it_no;            /* [n_iters] */
    int64_t *meas;             /* [n_iters] ns */
    int64_t n_done;
    double *samples;           /* [repeats] */
    hs_gpumon_stats *clk;      /* [n_iters] over each iteration's timed runs; NULL: no --clocks */
    int64_t *stamp;            /* [2 n_iters] host start, end (ns); NULL: no --stamps */
    double *opt;               /* [n_iters][RP_OPS] op times (us); NULL: no --op-times */
    unsigned char *opt_ran;    /* [n_iters][RP_OPS] 1: the op ran */
    int splitting;             /* 1: run_split is marking each op's end */
    int n_marks;               /* marks recorded in this split */
    double opt_scale;          /* what the ops being marked count for (layers / layers run) */
    signed char mark_op[HS_EXEC_MAX_MARKS];   /* the op that ends at mark i (-1: mark 0) */
    float mark_scale[HS_EXEC_MAX_MARKS];
    double mark_us[HS_EXEC_MAX_MARKS];
    int warmed;
    hs_progress pg;            /* the progress line (core/progress.h) */
};

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A token id for position p of request id, the same in every pass. */
static int32_t token_id(int64_t id, int64_t p, int vocab)
{
    return (int32_t)(mix64((uint64_t)id * 1000003u + (uint64_t)p) % (uint64_t)vocab);
}

static int mark(unsigned char **v, int32_t *cap, int32_t n, hs_err *err)
{
    if (n >= *cap) {
        int32_t c = *cap ? *cap : 256;
        unsigned char *p;
        while (c <= n) c *= 2;
        if (!(p = realloc(*v, (size_t)c))) return hs_errf(err, HS_ENOMEM, "out of memory");
        memset(p + *cap, 0, (size_t)(c - *cap));
        *v = p;
        *cap = c;
    }
    (*v)[n] = 1;
    return 0;
}

/* ---- books ---------------------------------------------------------- */

/* Slot of request id, created (with unknown prompt) when new. */
static int32_t req_slot(hs_exec_replay *r, int64_t id, hs_err *err)
{
    int created;
    int32_t slot = hs_exec_kvpool_seq(r->kv, id, 1, &created, err);
    if (slot < 0) return -1;
    if (slot >= r->cap_req) {
        int32_t c = r->cap_req ? r->cap_req : 64;
        req_info *p;
        while (c <= slot) c *= 2;
        if (!(p = realloc(r->req, (size_t)c * sizeof *p))) {
            hs_errf(err, HS_ENOMEM, "out of memory (requests)");
            return -1;
        }
        r->req = p;
        r->cap_req = c;
    }
    if (created) r->req[slot] = (req_info){-1, 0, 0};
    return slot;
}

static int on_request(hs_exec_replay *r, const hs_sched_request *q, hs_err *err)
{
    int32_t slot = req_slot(r, q->id, err);
    if (slot < 0) return err->code ? err->code : HS_ENOMEM;
    r->req[slot] = (req_info){q->prompt, 0, q->prompt};
    return 0;
}

static int listed(const int64_t *v, int32_t n, int64_t id)
{
    for (int32_t i = 0; i < n; i++)
        if (v[i] == id) return 1;
    return 0;
}

static int stage_grow(stage *st, size_t n, hs_err *err)
{
    if (n > st->cap) {
        size_t c = st->cap ? st->cap : 1024;
        int32_t *p;
        while (c < n) c *= 2;
        if (!(p = realloc(st->ints, c * sizeof *p))) return hs_errf(err, HS_ENOMEM, "out of memory");
        st->ints = p;
        st->cap = c;
    }
    return 0;
}

/* Page holding token p of the sequence in `slot`, as a cache slot (page * 16 + row). */
static int32_t token_slot(const hs_exec_replay *r, int32_t slot, int64_t p)
{
    int32_t n;
    const int32_t *b = hs_exec_kvpool_table(r->kv, slot, &n);
    int64_t bs = r->h.block_size;
    int64_t page = (int64_t)b[p / bs] * r->sub + (p % bs) / HS_EXEC_KV_BLOCK;
    assert(p / bs < n);
    return (int32_t)(page * HS_EXEC_KV_BLOCK + p % HS_EXEC_KV_BLOCK);
}

/* Block-table row of `kb` pages for the sequence in `slot`. */
static void table_row(const hs_exec_replay *r, int32_t slot, int32_t kb, int32_t width, int32_t *row)
{
    int32_t n;
    const int32_t *b = hs_exec_kvpool_table(r->kv, slot, &n);
    for (int32_t k = 0; k < width; k++)
        row[k] = k < kb ? b[k / r->sub] * r->sub + k % r->sub : 0;
}

#define PAGES(tokens) ((int32_t)(((int64_t)(tokens) + HS_EXEC_KV_BLOCK - 1) / HS_EXEC_KV_BLOCK))

/* Before iteration `it`: drops the preempted requests' blocks, grows the
 * blocks of every chunk and decode, and builds the host inputs in r->st. */
static int stage_iter(hs_exec_replay *r, const hs_sched_iter *it, hs_err *err)
{
    stage *st = &r->st;
    const hs_exec_shape *s = &r->s;
    int64_t T = it->n_dec, row;
    int rc;
    for (int32_t i = 0; i < it->n_preempted; i++) {
        int32_t slot = hs_exec_kvpool_seq(r->kv, it->preempted[i], 0, NULL, err);
        if (slot < 0) continue;
        hs_exec_kvpool_release(r->kv, slot);
        if (r->req[slot].prompt >= 0)
            r->req[slot].target = (int64_t)r->req[slot].prompt + r->req[slot].gen;
    }
    for (int32_t i = 0; i < it->n_pre; i++) {
        if (it->pre[i].prefix < 0 || it->pre[i].len < 1 ||
            (int64_t)it->pre[i].prefix + it->pre[i].len > (1 << 30))
            return hs_errf(err, HS_EPARSE,
                           "%s: replica %d, iteration %lld: prefill of request %lld: "
                           "chunk %d after %d tokens",
                           r->o.path, r->h.replica, (long long)it->it, (long long)it->pre[i].id,
                           it->pre[i].len, it->pre[i].prefix);
        T += it->pre[i].len;
    }
    for (int32_t i = 0; i < it->n_dec; i++)
        if (it->dec[i].ctx < 1 || it->dec[i].ctx > (1 << 30))
            return hs_errf(err, HS_EPARSE,
                           "%s: replica %d, iteration %lld: decode of request %lld: context %d",
                           r->o.path, r->h.replica, (long long)it->it, (long long)it->dec[i].id,
                           it->dec[i].ctx);
    if (T > (1 << 24))
        return hs_errf(err, HS_ERANGE, "%s: replica %d, iteration %lld: %lld tokens in one iteration",
                       r->o.path, r->h.replica, (long long)it->it, (long long)T);
    st->T = (int32_t)T;
    st->n_dec = it->n_dec;
    st->n_pre = it->n_pre;
    st->samples = 0;
    st->max_ctx = st->max_qlen = 0;
    st->kb_dec = st->kb_pre = 0;

    /* Blocks first (the tables below read them). */
    for (int32_t i = 0; i < it->n_dec; i++) {
        int32_t slot = req_slot(r, it->dec[i].id, err);
        if (slot < 0) return err->code ? err->code : HS_ENOMEM;
        if ((rc = hs_exec_kvpool_ensure(r->kv, slot, it->dec[i].ctx, err))) goto fail;
        if (it->dec[i].ctx > st->max_ctx) st->max_ctx = it->dec[i].ctx;
        if (PAGES(it->dec[i].ctx) > st->kb_dec) st->kb_dec = PAGES(it->dec[i].ctx);
    }
    for (int32_t i = 0; i < it->n_pre; i++) {
        int32_t slot = req_slot(r, it->pre[i].id, err), end = it->pre[i].prefix + it->pre[i].len;
        if (slot < 0) return err->code ? err->code : HS_ENOMEM;
        /* The simulator holds a prompt's blocks from admission (target),
         * even when it runs in chunks; the pages written are those of end. */
        if ((rc = hs_exec_kvpool_ensure(r->kv, slot, it->pre[i].target, err))) goto fail;
        if (it->pre[i].len > st->max_qlen) st->max_qlen = it->pre[i].len;
        if (PAGES(end) > st->kb_pre) st->kb_pre = PAGES(end);
    }

    st->o_ids = 0;
    st->o_pos = (size_t)T;
    st->o_slots = 2 * (size_t)T;
    st->o_dinfo = 3 * (size_t)T;
    st->o_dtab = st->o_dinfo + (size_t)it->n_dec;
    st->o_pinfo = st->o_dtab + (size_t)it->n_dec * st->kb_dec;
    st->o_ptab = st->o_pinfo + 3 * (size_t)it->n_pre;
    st->n = st->o_ptab + (size_t)it->n_pre * st->kb_pre;
    if ((rc = stage_grow(st, st->n, err))) return rc;

    row = 0;
    for (int32_t i = 0; i < it->n_dec; i++, row++) {
        int32_t slot = hs_exec_kvpool_seq(r->kv, it->dec[i].id, 0, NULL, err);
        int64_t p = it->dec[i].ctx - 1;
        st->ints[st->o_ids + row] = token_id(it->dec[i].id, p, s->vocab);
        st->ints[st->o_pos + row] = (int32_t)(p < s->max_pos ? p : s->max_pos - 1);
        st->ints[st->o_slots + row] = token_slot(r, slot, p);
        st->ints[st->o_dinfo + i] = it->dec[i].ctx;
        table_row(r, slot, PAGES(it->dec[i].ctx), st->kb_dec,
                  st->ints + st->o_dtab + (size_t)i * st->kb_dec);
        st->samples++;
        r->req[slot].gen++;
    }
    for (int32_t i = 0; i < it->n_pre; i++) {
        const hs_sched_chunk *c = &it->pre[i];
        int32_t slot = hs_exec_kvpool_seq(r->kv, c->id, 0, NULL, err), end = c->prefix + c->len;
        req_info *q = &r->req[slot];
        int32_t *info = st->ints + st->o_pinfo + 3 * (size_t)i;
        int sample;
        info[0] = (int32_t)row;
        info[1] = c->len;
        info[2] = c->prefix;
        for (int32_t t = 0; t < c->len; t++, row++) {
            int64_t p = (int64_t)c->prefix + t;
            st->ints[st->o_ids + row] = token_id(c->id, p, s->vocab);
            st->ints[st->o_pos + row] = (int32_t)(p < s->max_pos ? p : s->max_pos - 1);
            st->ints[st->o_slots + row] = token_slot(r, slot, p);
        }
        table_row(r, slot, PAGES(end), st->kb_pre, st->ints + st->o_ptab + (size_t)i * st->kb_pre);
        sample = q->prompt >= 0 ? end >= q->target
                                : listed(it->first, it->n_first, c->id) ||
                                      listed(it->finished, it->n_finished, c->id);
        if (sample) {
            st->samples++;
            q->gen++;
        }
    }
    assert(row == T);
    return 0;
fail:
    hs_err_prefix(err, "%s: replica %d, iteration %lld: ", r->o.path, r->h.replica, (long long)it->it);
    return rc;
}

/* After iteration `it`: the finished requests give their blocks back. */
static void finish_iter(hs_exec_replay *r, const hs_sched_iter *it)
{
    for (int32_t i = 0; i < it->n_finished; i++) hs_exec_kvpool_forget(r->kv, it->finished[i]);
}

/* ---- plan ------------------------------------------------------------ */

static int check_header(hs_exec_replay *r, hs_err *err)
{
    const hs_sched_header *h = &r->h;
    int rc;
    if (h->pp != 1)
        return hs_errf(err, HS_EINVAL,
                       "%s: replica %d: pp %d: replay runs single-stage (pp 1) replicas only",
                       r->o.path, h->replica, h->pp);
    if (h->bits != 16 && h->bits != 8 && h->bits != 4)
        return hs_errf(err, HS_EINVAL, "%s: replica %d: bits %d: the executor runs 16, 8 or 4",
                       r->o.path, h->replica, h->bits);
    if (h->kv_bits != 16 && h->kv_bits != 8)
        return hs_errf(err, HS_EINVAL, "%s: replica %d: kv_bits %d: not 16 or 8", r->o.path,
                       h->replica, h->kv_bits);
    if (h->block_size % HS_EXEC_KV_BLOCK)
        return hs_errf(err, HS_EINVAL,
                       "%s: replica %d: block_size %d: the executor's paged attention uses "
                       "%d-token pages, so the block size must be a multiple of %d",
                       r->o.path, h->replica, h->block_size, HS_EXEC_KV_BLOCK, HS_EXEC_KV_BLOCK);
    if ((rc = hs_model_find(&r->m, h->model, err))) {
        hs_err_prefix(err, "%s: replica %d: ", r->o.path, h->replica);
        return rc;
    }
    if (r->m.heads % h->tp)
        return hs_errf(err, HS_EINVAL,
                       "%s: replica %d: tp %d does not divide the %d attention heads of %s",
                       r->o.path, h->replica, h->tp, r->m.heads, r->m.name);
    if ((rc = hs_exec_shape_make(&r->s, &r->m, h->tp, err))) {
        hs_err_prefix(err, "%s: replica %d: ", r->o.path, h->replica);
        return rc;
    }
    r->L = h->layers;
    r->K = r->o.layers ? r->o.layers : r->L;
    if (r->K < 1 || r->K > r->L)
        return hs_errf(err, HS_EINVAL, "--layers %d: replica %d of %s has %d layers", r->o.layers,
                       h->replica, r->o.path, r->L);
    r->sub = h->block_size / HS_EXEC_KV_BLOCK;
    return 0;
}

static int books_open(hs_exec_replay *r, int64_t capacity, hs_err *err)
{
    hs_exec_kvpool_destroy(r->kv);
    r->kv = NULL;
    free(r->req);
    r->req = NULL;
    r->cap_req = 0;
    return hs_exec_kvpool_create(&r->kv, r->h.block_size, capacity, err);
}

/* The rows a GEMM of a T-row step runs on: T, or T rounded up to a
 * multiple of --pad-tokens.  The padding rows hold earlier values (finite:
 * every GEMM input buffer is filled at open) and nothing reads their
 * outputs. */
static int pad_rows(const hs_exec_replay *r, int T)
{
    int p = r->o.pad_tokens;
    return p > 1 ? (T + p - 1) / p * p : T;
}

static int plan_iter(hs_exec_replay *r, const hs_sched_iter *it, hs_err *err)
{
    stage *st = &r->st;
    int rc;
    if ((rc = stage_iter(r, it, err))) return rc;
    r->n_iters++;
    if (it->kv_blocks_used > r->sched_peak) r->sched_peak = it->kv_blocks_used;
    if (st->T > r->max_T) r->max_T = st->T;
    if (st->samples > r->max_S) r->max_S = st->samples;
    if (st->n_dec > r->max_dec) r->max_dec = st->n_dec;
    if (st->max_ctx > r->max_ctx) r->max_ctx = st->max_ctx;
    if (st->n > r->max_ints) r->max_ints = st->n;
    if ((rc = mark(&r->seen_T, &r->cap_T, st->T, err)) ||
        (st->samples && (rc = mark(&r->seen_S, &r->cap_S, st->samples, err))))
        return rc;
    finish_iter(r, it);
    return 0;
}

/* One pass over the file: records of the chosen replica go to on_request
 * and to fn (plan_iter or run_iter).  Planning picks the header (the first,
 * or --replica's) and opens unbounded books; running finds them open. */
static int walk(hs_exec_replay *r, int planning,
                int (*fn)(hs_exec_replay *, const hs_sched_iter *, hs_err *), hs_err *err)
{
    hs_sched_reader *rd;
    hs_sched_header h;
    hs_sched_request q;
    hs_sched_iter it;
    int rc = 0, kind, have = !planning;
    if ((rc = hs_sched_open(&rd, r->o.path, err))) return rc;
    while ((kind = hs_sched_next(rd, &h, &q, &it, err)) > 0) {
        int32_t replica = kind == HS_SCHED_REQUEST ? q.replica
                          : kind == HS_SCHED_ITER  ? it.replica
                                                   : h.replica;
        if (kind == HS_SCHED_HEADER) {
            if (!have && (r->o.replica < 0 || replica == r->o.replica)) {
                r->h = h;
                if ((rc = check_header(r, err)) || (rc = books_open(r, 0, err))) break;
                have = 1;
            }
            continue;
        }
        if (!have) {
            if (r->o.replica >= 0 && replica != r->o.replica) continue;
            rc = hs_errf(err, HS_EPARSE, "%s: replica %d: a %s record before the replica's header",
                         r->o.path, replica, kind == HS_SCHED_REQUEST ? "request" : "iter");
            break;
        }
        if (replica != r->h.replica) continue;
        if ((rc = kind == HS_SCHED_REQUEST ? on_request(r, &q, err) : fn(r, &it, err))) break;
    }
    if (!rc && kind < 0) rc = kind;
    hs_sched_close(rd);
    if (!rc && !have) {
        if (r->o.replica < 0)
            rc = hs_errf(err, HS_ENOTFOUND, "%s: no replica header in the file", r->o.path);
        else
            rc = hs_errf(err, HS_ENOTFOUND, "%s: replica %d is not in the file", r->o.path,
                         r->o.replica);
    }
    return rc;
}

int hs_exec_replay_plan(hs_exec_replay **out, const hs_exec_replay_opts *o, hs_err *err)
{
    hs_exec_replay *r;
    int rc;
    *out = NULL;
    if (o->repeats < 1) return hs_errf(err, HS_EINVAL, "--repeats %d: must be at least 1", o->repeats);
    if (o->layers < 0) return hs_errf(err, HS_EINVAL, "--layers %d: must be at least 1", o->layers);
    if (o->pad_tokens < 0 || o->pad_tokens > 256)
        return hs_errf(err, HS_EINVAL, "--pad-tokens %d: must be between 1 and 256", o->pad_tokens);
    if (!(r = calloc(1, sizeof *r))) return hs_errf(err, HS_ENOMEM, "out of memory");
    r->o = *o;
    if ((rc = walk(r, 1, plan_iter, err))) goto fail;
    r->max_T = pad_rows(r, r->max_T);   /* the buffers hold the padded rows */
    r->books_peak = hs_exec_kvpool_peak(r->kv);
    r->pool = r->books_peak > r->sched_peak ? r->books_peak : r->sched_peak;
    if (r->pool < 1) r->pool = 1;
    if (r->pool > INT32_MAX / r->h.block_size) {
        rc = hs_errf(err, HS_ERANGE,
                     "%s: replica %d: a pool of %lld KV blocks is beyond the executor's 32-bit slots",
                     o->path, r->h.replica, (long long)r->pool);
        goto fail;
    }
    *out = r;
    return 0;
fail:
    hs_exec_replay_free(r);
    return rc;
}

/* ---- run ------------------------------------------------------------- */

/* Device bytes of the run: one layer's weights (shared by the K layers
 * run), the activation and input buffers with the backends' scratch, and
 * the KV pool of one layer. */
typedef struct memplan {
    double weights, buffers, kv_layer;   /* bytes */
    size_t n_ints;                       /* int32 inputs on the device */
} memplan;

static void gemm_nk(const hs_exec_shape *s, int nk[4][2])
{
    nk[0][0] = s->qkv_n, nk[0][1] = s->hidden;
    nk[1][0] = s->hidden, nk[1][1] = s->attn_k;
    nk[2][0] = s->up_n, nk[2][1] = s->hidden;
    nk[3][0] = s->hidden, nk[3][1] = s->ffn;
}

static void mem_plan(const hs_exec_replay *r, const hs_exec *x, memplan *mp)
{
    const hs_exec_shape *s = &r->s;
    double es = x->info.elem_bytes, big = 0;
    int nk[4][2], bits = r->h.bits;
    size_t prime = (size_t)r->max_dec * (1 + (size_t)PAGES(r->max_ctx));
    gemm_nk(s, nk);
    memset(mp, 0, sizeof *mp);
    for (int i = 0; i < 4; i++) {
        double n = nk[i][0], k = nk[i][1];
        int groups = (nk[i][1] + HS_EXEC_QGROUP - 1) / HS_EXEC_QGROUP;
        mp->weights += bits == 16 ? n * k * es
                                  : n * (double)hs_exec_qrow_bytes(nk[i][1], bits) + 2 * n * groups * es;
        if (n * k > big) big = n * k;
    }
    mp->weights += ((double)s->vocab + (s->learned_pos ? s->max_pos : 0) + 2) * s->hidden * es;
    mp->n_ints = r->max_ints;
    if (3 * (size_t)r->max_T > mp->n_ints) mp->n_ints = 3 * (size_t)r->max_T;
    if (prime > mp->n_ints) mp->n_ints = prime;
    if (mp->n_ints < 4) mp->n_ints = 4;
    mp->buffers = (double)r->max_T * (3.0 * s->hidden + s->qkv_n + s->attn_k + s->up_n + s->ffn) * es +
                  (double)r->max_S * s->vocab * es + 4.0 * mp->n_ints +
                  (bits != 16 ? big * 4 : 0) +   /* dequantised weight (CPU FP32, CUDA 16-bit) */
                  (double)r->max_dec * s->heads * ((r->max_ctx + DECODE_PART - 1) / DECODE_PART) *
                      (2.0 + s->head_dim) * 4;   /* CUDA decode partitions */
    mp->kv_layer = 2.0 * (double)r->pool * r->sub * s->kv_heads * HS_EXEC_KV_BLOCK * s->head_dim * es;
}

/* KV blocks of the header's block size that fit on one rank of this device
 * after the whole model's weights and the activation peak, by the
 * simulator's memory model (as profile's meta.json kv_blocks, at the
 * header's tp, bits and kv_bits). */
static long long capacity_blocks(const hs_exec_replay *r, double usable)
{
    hs_stage_mem mem;
    int max_tokens = r->m.max_seq_len > 2048 ? r->m.max_seq_len : 2048;
    double avail;
    hs_model_stage_mem(&r->m, r->L, 1, 1, r->h.tp, r->h.bits, r->h.kv_bits, max_tokens, 256, &mem);
    avail = usable - mem.weights - mem.activation;
    if (avail <= 0 || mem.kv_per_token <= 0) return 0;
    return (long long)floor(avail / (mem.kv_per_token * r->h.block_size));
}

static void dev_close(hs_exec_replay *r)
{
    dev *d = &r->d;
    hs_exec *x = d->x;
    void *bufs[] = {d->ints, d->emb, d->pos_tab, d->gamma, d->beta, d->xa, d->ya, d->za,
                    d->qkv, d->att, d->up, d->act, d->logits};
    if (!x) return;
    for (int i = 0; i < 4; i++) hs_exec_weight_free(x, &d->w[i]);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) x->ops->free(x, bufs[i]);
    for (int l = 0; l < r->K; l++) {
        if (d->kc) x->ops->free(x, d->kc[l]);
        if (d->vc) x->ops->free(x, d->vc[l]);
    }
    free(d->kc);
    free(d->vc);
    memset(d, 0, sizeof *d);
}

static int dev_alloc(hs_exec *x, void **p, double bytes, hs_err *err)
{
    x->bytes_alloc += bytes > 0 ? bytes : 1;
    return x->ops->alloc(x, p, bytes > 0 ? (size_t)bytes : 1, err);
}

static int dev_open(hs_exec_replay *r, hs_exec *x, const memplan *mp, hs_err *err)
{
    const hs_exec_ops *o = x->ops;
    const hs_exec_shape *s = &r->s;
    dev *d = &r->d;
    double es = x->info.elem_bytes, T = r->max_T, S = r->max_S ? r->max_S : 1;
    size_t kv_elems = (size_t)r->pool * r->sub * s->kv_heads * HS_EXEC_KV_BLOCK * s->head_dim;
    int nk[4][2], rc;
    memset(d, 0, sizeof *d);
    d->x = x;
    gemm_nk(s, nk);
    if (!(d->kc = calloc((size_t)r->K, sizeof *d->kc)) ||
        !(d->vc = calloc((size_t)r->K, sizeof *d->vc))) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = dev_alloc(x, (void **)&d->ints, 4.0 * mp->n_ints, err)) ||
        (rc = dev_alloc(x, &d->emb, (double)s->vocab * s->hidden * es, err)) ||
        (s->learned_pos && (rc = dev_alloc(x, &d->pos_tab, (double)s->max_pos * s->hidden * es, err))) ||
        (rc = dev_alloc(x, &d->gamma, s->hidden * es, err)) ||
        (rc = dev_alloc(x, &d->beta, s->hidden * es, err)) ||
        (rc = dev_alloc(x, &d->xa, T * s->hidden * es, err)) ||
        (rc = dev_alloc(x, &d->ya, T * s->hidden * es, err)) ||
        (rc = dev_alloc(x, &d->za, T * s->hidden * es, err)) ||
        (rc = dev_alloc(x, &d->qkv, T * s->qkv_n * es, err)) ||
        (rc = dev_alloc(x, &d->att, T * s->attn_k * es, err)) ||
        (rc = dev_alloc(x, &d->up, T * s->up_n * es, err)) ||
        (rc = dev_alloc(x, &d->act, T * s->ffn * es, err)) ||
        (rc = dev_alloc(x, &d->logits, S * s->vocab * es, err)))
        goto fail;
    for (int i = 0; i < 4; i++)
        if ((rc = hs_exec_weight_alloc(x, &d->w[i], nk[i][0], nk[i][1], r->h.bits, err)) ||
            (rc = hs_exec_weight_random(x, &d->w[i], 100 + (uint64_t)i,
                                        1.0f / sqrtf((float)nk[i][1]), err)))
            goto fail;
    d->head = (hs_exec_weight){.n = s->vocab, .k = s->hidden, .bits = 16, .data = d->emb};
    for (int l = 0; l < r->K; l++)
        if ((rc = dev_alloc(x, &d->kc[l], (double)kv_elems * es, err)) ||
            (rc = dev_alloc(x, &d->vc[l], (double)kv_elems * es, err)) ||
            (rc = o->fill_random(x, d->kc[l], kv_elems, 30 + 2 * (uint64_t)l, 1.0f, err)) ||
            (rc = o->fill_random(x, d->vc[l], kv_elems, 31 + 2 * (uint64_t)l, 1.0f, err)))
            goto fail;
    /* Every buffer a kernel reads before the replay writes it gets finite
     * values (uninitialised memory may hold NaNs or denormals). */
    if ((rc = o->fill_random(x, d->emb, (size_t)s->vocab * s->hidden, 13, 1.0f, err)) ||
        (d->pos_tab &&
         (rc = o->fill_random(x, d->pos_tab, (size_t)s->max_pos * s->hidden, 14, 1.0f, err))) ||
        (rc = o->fill_random(x, d->gamma, (size_t)s->hidden, 15, 1.0f, err)) ||
        (rc = o->fill_random(x, d->beta, (size_t)s->hidden, 16, 1.0f, err)) ||
        (rc = o->fill_random(x, d->xa, (size_t)T * s->hidden, 17, 1.0f, err)) ||
        (rc = o->fill_random(x, d->za, (size_t)T * s->hidden, 18, 1.0f, err)) ||
        (rc = o->fill_random(x, d->att, (size_t)T * s->attn_k, 19, 1.0f, err)) ||
        (rc = o->fill_random(x, d->qkv, (size_t)T * s->qkv_n, 20, 1.0f, err)) ||
        (rc = o->fill_random(x, d->ya, (size_t)T * s->hidden, 21, 1.0f, err)) ||
        (rc = o->fill_random(x, d->act, (size_t)T * s->ffn, 22, 1.0f, err)))
        goto fail;
    return o->sync(x, err);
fail:
    dev_close(r);
    return rc;
}

/* Arguments of layer l's attention over n_seqs sequences whose block
 * tables and per-sequence info start at tables / info. */
static void attn_base(const hs_exec_replay *r, hs_exec_attn *a, int l, int n_seqs, void *tables,
                      int max_blocks, void *info)
{
    const hs_exec_shape *s = &r->s;
    memset(a, 0, sizeof *a);
    a->k_cache = r->d.kc[l];
    a->v_cache = r->d.vc[l];
    a->n_seqs = n_seqs;
    a->block_tables = tables;
    a->max_blocks = max_blocks;
    a->seq_info = info;
    a->heads = s->heads;
    a->kv_heads = s->kv_heads;
    a->head_dim = s->head_dim;
    a->scale = 1.0f / sqrtf((float)s->head_dim);
    a->q = r->d.qkv;
    a->q_stride = s->qkv_n;
    a->out = r->d.att;
}

/* --op-times: the ops a step runs, as the table names them but for the
 * K/V write (inside the table's attention rows) and the head (final norm
 * and LM head on the sampled rows). */
enum {
    RP_EMB, RP_NORM, RP_QKV, RP_ROPE, RP_KV_WRITE, RP_ATTN_DECODE, RP_ATTN_PREFILL, RP_ATTN_OUT,
    RP_ADD, RP_MLP_UP, RP_ACT, RP_MLP_DOWN, RP_HEAD, RP_OPS
};
static const char *const rp_op_names[RP_OPS] = {
    "emb", "norm", "qkv", "rope", "kv_write", "attn_decode", "attn_prefill", "attn_out",
    "add", "mlp_up", "act", "mlp_down", "head"};

/* While an iteration is being split, marks the end of op `op` on the
 * stream (no wait): an op's time is the distance from the previous mark,
 * launch gaps included, as in a step.  Nothing otherwise. */
static int op_mark(hs_exec_replay *r, int op, hs_err *err)
{
    if (!r->splitting) return 0;
    if (r->n_marks >= HS_EXEC_MAX_MARKS)
        return hs_errf(err, HS_ERANGE, "--op-times: more than %d ops in one iteration", HS_EXEC_MAX_MARKS - 1);
    r->mark_op[r->n_marks] = (signed char)op;
    r->mark_scale[r->n_marks] = (float)r->opt_scale;
    return r->d.x->ops->mark(r->d.x, r->n_marks++, err);
}

/* (rc = call), its end marked as op `k` when splitting; needs r, rc, err */
#define OP(k, call) ((rc = (call)) || (rc = op_mark(r, (k), err)))

/* Layer l on the rows of st (attention too when `attention`). */
static int run_layer(hs_exec_replay *r, int l, const stage *st, int attention, hs_err *err)
{
    const hs_exec_shape *s = &r->s;
    dev *d = &r->d;
    hs_exec *x = d->x;
    const hs_exec_ops *o = x->ops;
    size_t es = (size_t)x->info.elem_bytes;
    const char *qkv = d->qkv;
    int T = st->T, G = pad_rows(r, T), rc;
    if (OP(RP_NORM, o->norm(x, s->norm, d->ya, d->xa, d->gamma, d->beta, T, s->hidden, s->norm_eps, err)) ||
        OP(RP_QKV, o->gemm(x, d->qkv, d->ya, &d->w[0], G, err)) ||
        (s->rope && OP(RP_ROPE, o->rope(x, d->qkv, s->qkv_n, T, s->heads + s->kv_heads, s->head_dim,
                                        d->ints + st->o_pos, s->rope_theta, err))) ||
        OP(RP_KV_WRITE, o->kv_write(x, d->kc[l], d->vc[l], qkv + (size_t)s->heads * s->head_dim * es,
                                    qkv + (size_t)(s->heads + s->kv_heads) * s->head_dim * es, s->qkv_n,
                                    T, s->kv_heads, s->head_dim, d->ints + st->o_slots, err)))
        return rc;
    if (attention && st->n_dec) {
        hs_exec_attn a;
        attn_base(r, &a, l, st->n_dec, d->ints + st->o_dtab, st->kb_dec, d->ints + st->o_dinfo);
        a.seq_info_host = st->ints + st->o_dinfo;
        a.max_context = st->max_ctx;
        if (OP(RP_ATTN_DECODE, o->attention_decode(x, &a, err))) return rc;
    }
    if (attention && st->n_pre) {
        hs_exec_attn a;
        attn_base(r, &a, l, st->n_pre, d->ints + st->o_ptab, st->kb_pre, d->ints + st->o_pinfo);
        a.seq_info_host = st->ints + st->o_pinfo;
        a.max_q_len = st->max_qlen;
        if (OP(RP_ATTN_PREFILL, o->attention_prefill(x, &a, err))) return rc;
    }
    /* The residual stream: layer input xa (the embedding output, left as
     * is so values stay bounded over layers and repeats), za after the
     * attention block and after the MLP block; same work as x += f(x). */
    if (OP(RP_ATTN_OUT, o->gemm(x, d->za, d->att, &d->w[1], G, err)) ||
        OP(RP_ADD, o->add(x, d->za, d->xa, d->za, (size_t)T * s->hidden, err)) ||
        OP(RP_NORM, o->norm(x, s->norm, d->ya, d->za, d->gamma, d->beta, T, s->hidden, s->norm_eps, err)) ||
        OP(RP_MLP_UP, o->gemm(x, d->up, d->ya, &d->w[2], G, err)) ||
        OP(RP_ACT, o->act(x, s->act, s->gated, d->act, d->up, T, s->ffn, err)) ||
        OP(RP_MLP_DOWN, o->gemm(x, d->ya, d->act, &d->w[3], G, err)) ||
        OP(RP_ADD, o->add(x, d->za, d->za, d->ya, (size_t)T * s->hidden, err)))
        return rc;
    return 0;
}

/* Final norm and LM head on `n` sampled rows. */
static int run_head(hs_exec_replay *r, int n, hs_err *err)
{
    const hs_exec_shape *s = &r->s;
    dev *d = &r->d;
    hs_exec *x = d->x;
    int rc;
    if ((rc = x->ops->norm(x, s->norm, d->ya, d->za, d->gamma, d->beta, n, s->hidden, s->norm_eps, err)))
        return rc;
    return x->ops->gemm(x, d->logits, d->ya, &d->head, n, err);
}

/* One timed execution of the staged iteration (inputs uploaded): ns. */
static int run_once(hs_exec_replay *r, const stage *st, double *ns, hs_err *err)
{
    dev *d = &r->d;
    hs_exec *x = d->x;
    const hs_exec_ops *o = x->ops;
    double te = 0, tl = 0, th = 0;
    int rc;
    if ((rc = o->timer_start(x, err)) ||
        (rc = o->embed(x, d->xa, d->emb, d->pos_tab, d->ints + st->o_ids, d->ints + st->o_pos, st->T,
                       r->s.hidden, err)) ||
        (rc = o->timer_stop(x, &te, err)) || (rc = o->timer_start(x, err)))
        return rc;
    for (int l = 0; l < r->K; l++)
        if ((rc = run_layer(r, l, st, 1, err))) return rc;
    if ((rc = o->timer_stop(x, &tl, err))) return rc;
    if (st->samples &&
        ((rc = o->timer_start(x, err)) || (rc = run_head(r, st->samples, err)) ||
         (rc = o->timer_stop(x, &th, err))))
        return rc;
    *ns = (te + tl * r->L / r->K + th) * 1e3;
    return 0;
}

/* --op-times: the staged iteration once more, the end of each op marked on
 * the stream and nothing waited for until the last; into row (us, layer ops
 * scaled to all layers as run_once scales them) and ran. */
static int run_split(hs_exec_replay *r, const stage *st, double *row, unsigned char *ran, hs_err *err)
{
    hs_exec *x = r->d.x;
    const hs_exec_ops *o = x->ops;
    int rc;
    r->splitting = 1;
    r->n_marks = 0;
    r->opt_scale = 1;
    if ((rc = op_mark(r, -1, err))) goto out;
    if (OP(RP_EMB, o->embed(x, r->d.xa, r->d.emb, r->d.pos_tab, r->d.ints + st->o_ids, r->d.ints + st->o_pos,
                            st->T, r->s.hidden, err)))
        goto out;
    r->opt_scale = (double)r->L / r->K;
    for (int l = 0; l < r->K && !rc; l++) rc = run_layer(r, l, st, 1, err);
    r->opt_scale = 1;
    if (rc || (st->samples && OP(RP_HEAD, run_head(r, st->samples, err))) ||
        (rc = o->marks_read(x, r->n_marks, r->mark_us, err)))
        goto out;
    for (int i = 1; i < r->n_marks; i++) {
        row[r->mark_op[i]] += (r->mark_us[i] - r->mark_us[i - 1]) * r->mark_scale[i];
        ran[r->mark_op[i]] = 1;
    }
out:
    r->splitting = 0;
    return rc;
}
#undef OP

/* Untimed runs of every token count and sample count the schedule has,
 * and of the attention kernels at their largest decode shape, so that
 * first-use costs (lazily loaded GPU kernels, cuBLAS heuristics, scratch
 * growth) fall here and not in a measured iteration. */
static int prime(hs_exec_replay *r, const memplan *mp, hs_err *err)
{
    dev *d = &r->d;
    hs_exec *x = d->x;
    const hs_exec_ops *o = x->ops;
    int32_t *z = calloc(mp->n_ints, sizeof *z);
    int rc = 0;
    if (!z) return hs_errf(err, HS_ENOMEM, "out of memory");
    if ((rc = o->upload_bytes(x, d->ints, z, mp->n_ints * sizeof *z, err))) goto out;
    for (int32_t t = 1; t < r->cap_T && !rc; t++) {
        stage st;
        if (!r->seen_T[t]) continue;
        memset(&st, 0, sizeof st);
        st.T = t;
        st.o_pos = (size_t)t;
        st.o_slots = 2 * (size_t)t;
        if (!(rc = o->embed(x, d->xa, d->emb, d->pos_tab, d->ints, d->ints + st.o_pos, t,
                            r->s.hidden, err)))
            rc = run_layer(r, 0, &st, 0, err);
    }
    for (int32_t n = 1; n < r->cap_S && !rc; n++)
        if (r->seen_S[n]) rc = run_head(r, n, err);
    if (!rc && r->max_dec) {
        /* all block tables point at page 0 */
        hs_exec_attn a;
        int32_t kb = PAGES(r->max_ctx);
        for (int32_t i = 0; i < r->max_dec; i++) z[i] = r->max_ctx;
        size_t bytes = (size_t)r->max_dec * (1 + (size_t)kb) * sizeof *z;
        if (!(rc = o->upload_bytes(x, d->ints, z, bytes, err))) {
            attn_base(r, &a, 0, r->max_dec, d->ints + r->max_dec, kb, d->ints);
            a.max_context = r->max_ctx;
            rc = o->attention_decode(x, &a, err);
        }
    }
    if (!rc) {
        hs_exec_attn a;
        int32_t pi[4] = {0, 1, 0, 0};   /* one query over one key, page 0 */
        if (!(rc = o->upload_bytes(x, d->ints, pi, sizeof pi, err))) {
            attn_base(r, &a, 0, 1, d->ints + 3, 1, d->ints);
            a.seq_info_host = pi;
            a.max_q_len = 1;
            rc = o->attention_prefill(x, &a, err);
        }
    }
    if (!rc) rc = o->sync(x, err);
out:
    free(z);
    if (rc) hs_err_prefix(err, "priming: ");
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The progress line: iterations done of all, ETA from the mean time per
 * iteration so far; every iteration asks, the line comes every 2 s (and
 * once at the end, final). */
static void progress_line(hs_exec_replay *r, int final)
{
    double el;
    if (!final && !hs_progress_due(&r->pg)) return;
    el = hs_wall_s() - r->pg.t0;
    hs_progress_printf(&r->pg, "%lld/%lld iterations (%.1f%%), ETA %.1f s", (long long)r->n_done,
                       (long long)r->n_iters,
                       r->n_iters ? 100.0 * (double)r->n_done / (double)r->n_iters : 100.0,
                       r->n_done ? el / (double)r->n_done * (double)(r->n_iters - r->n_done) : 0.0);
    if (final) hs_progress_end(&r->pg);
}

static int run_iter(hs_exec_replay *r, const hs_sched_iter *it, hs_err *err)
{
    stage *st = &r->st;
    hs_exec *x = r->d.x;
    int64_t during, after;
    double med;
    int rc, n = r->o.repeats;
    if (r->n_done >= r->n_iters)
        return hs_errf(err, HS_ESTATE, "%s: changed while being replayed", r->o.path);
    if ((rc = stage_iter(r, it, err))) return rc;
    if ((rc = x->ops->upload_bytes(x, r->d.ints, st->ints, st->n * sizeof *st->ints, err))) goto fail;
    if (!r->warmed) {
        /* warm-up: the first iteration once, untimed */
        if ((rc = run_once(r, st, &med, err))) goto fail;
        r->warmed = 1;
    }
    if (r->stamp) r->stamp[2 * r->n_done] = hs_wall_ns();
    if (r->clk) hs_gpumon_begin(x->mon);
    for (int i = 0; i < n && !rc; i++) rc = run_once(r, st, &r->samples[i], err);
    if (r->clk) hs_gpumon_end(x->mon, &r->clk[r->n_done]);
    if (r->stamp) r->stamp[2 * r->n_done + 1] = hs_wall_ns();
    if (!rc && r->opt)
        rc = run_split(r, st, r->opt + (size_t)r->n_done * RP_OPS, r->opt_ran + (size_t)r->n_done * RP_OPS, err);
    if (rc) goto fail;
    qsort(r->samples, (size_t)n, sizeof *r->samples, cmp_double);
    med = n % 2 ? r->samples[n / 2] : 0.5 * (r->samples[n / 2 - 1] + r->samples[n / 2]);
    r->it_no[r->n_done] = it->it;
    r->meas[r->n_done] = llround(med);
    r->n_done++;
    progress_line(r, 0);
    during = hs_exec_kvpool_used(r->kv);
    finish_iter(r, it);
    after = hs_exec_kvpool_used(r->kv);
    if (r->o.check) {
        if (!hs_exec_kvpool_sane(r->kv))
            return hs_errf(err, HS_ESTATE, "%s: replica %d, iteration %lld: KV books inconsistent",
                           r->o.path, r->h.replica, (long long)it->it);
        fprintf(stderr,
                "check it=%lld tokens=%d samples=%d decode=%d prefill=%d blocks=%lld "
                "sched_blocks=%lld after=%lld\n",
                (long long)it->it, st->T, st->samples, st->n_dec, st->n_pre, (long long)during,
                (long long)it->kv_blocks_used, (long long)after);
    }
    return 0;
fail:
    hs_err_prefix(err, "%s: replica %d, iteration %lld: ", r->o.path, r->h.replica, (long long)it->it);
    return rc;
}

static void notes(const hs_exec_replay *r, const hs_exec *x, const memplan *mp)
{
    const hs_sched_header *h = &r->h;
    fprintf(stderr,
            "hetsim-exec: replay: %s replica %d: %lld iterations of %s (tp %d, %d-bit weights) "
            "on %s %s; %d of %d layers run (layer time scaled by %d/%d); KV pool %lld blocks "
            "of %d tokens (%.3g GiB per layer)\n",
            r->o.path, h->replica, (long long)r->n_iters, h->model, h->tp, h->bits, x->info.backend,
            x->info.device, r->K, r->L, r->L, r->K, (long long)r->pool, h->block_size,
            mp->kv_layer / 1073741824.0);
    if (h->tp > 1)
        fprintf(stderr,
                "hetsim-exec: replay: note: one of %d TP ranks is executed; tensor-parallel "
                "all-reduces are not, so measured_ns leaves out their time, which the "
                "simulator's predicted times include\n",
                h->tp);
    fprintf(stderr,
            "hetsim-exec: replay: note: measured_ns is device time only; the scheduler's "
            "per-step overhead (step_overhead_ns %.0f in the header) is not in it\n",
            h->step_overhead_ns);
    if (h->kv_bits != 16)
        fprintf(stderr,
                "hetsim-exec: replay: note: kv_bits %d is not executed; the KV cache is kept in %s\n",
                h->kv_bits, hs_exec_dtype_name(x->info.dtype));
}

/* --clocks, --stamps and --op-times FILE: rows per iteration, as the measured
 * CSV, each written to PATH.tmp, renamed only once every output is
 * written (side_commit), so a failed run leaves none of them.  side_probe
 * finds a path that cannot be written before the replay, not after an
 * hour of it. */
static int side_probe(const hs_exec_replay *r, const char *flag, const char *path, hs_err *err)
{
    char probe[1100];
    FILE *pf;
    if (r->o.out && !strcmp(r->o.out, path))
        return hs_errf(err, HS_EINVAL, "%s %s: the same file as --out", flag, path);
    if ((size_t)snprintf(probe, sizeof probe, "%s.tmp", path) >= sizeof probe)
        return hs_errf(err, HS_EINVAL, "%s %s: path too long", flag, path);
    if (!(pf = fopen(probe, "w")))
        return hs_errf(err, HS_EIO, "%s %s: cannot write %s: %s", flag, path, probe, strerror(errno));
    fclose(pf);
    remove(probe);
    return 0;
}

/* The side files, in the order they are written and put in place. */
enum { SIDE_CLOCKS, SIDE_STAMPS, SIDE_OPS, SIDE_COUNT };
static const char *const side_flags[SIDE_COUNT] = {"--clocks", "--stamps", "--op-times"};

static const char *side_path(const hs_exec_replay *r, int k)
{
    return k == SIDE_CLOCKS ? r->o.clocks : k == SIDE_STAMPS ? r->o.stamps : r->o.op_times;
}

/* Whether side file k is written: --clocks only where a monitor reads them. */
static int side_on(const hs_exec_replay *r, int k)
{
    return k == SIDE_CLOCKS ? r->clk != NULL : k == SIDE_STAMPS ? r->stamp != NULL : r->opt != NULL;
}

static void write_side_rows(const hs_exec_replay *r, int k, FILE *fp)
{
    static const char *const head[SIDE_COUNT] = {
        "it,samples,sm_mhz_mean,sm_mhz_min,sm_mhz_max,power_w_mean,power_w_max,reasons",
        "it,start_ns,end_ns", "it,op,time_ns"};
    fprintf(fp, "%s\n", head[k]);
    for (int64_t i = 0; i < r->n_done; i++) {
        long long it = (long long)r->it_no[i];
        if (k == SIDE_CLOCKS) {
            const hs_gpumon_stats *c = &r->clk[i];
            char why[160];
            hs_gpumon_stats_reasons(c, why, sizeof why);
            fprintf(fp, "%lld,%d,%.1f,%.0f,%.0f,%.1f,%.1f,%s\n", it, c->n, c->sm_mhz_mean, c->sm_mhz_min,
                    c->sm_mhz_max, c->power_w_mean, c->power_w_max, why);
        } else if (k == SIDE_STAMPS) {
            fprintf(fp, "%lld,%lld,%lld\n", it, (long long)r->stamp[2 * i], (long long)r->stamp[2 * i + 1]);
        } else {
            /* the ops the iteration ran (a decode-only step has no prefill
             * attention, a model without RoPE no rope) */
            const double *row = r->opt + (size_t)i * RP_OPS;
            const unsigned char *ran = r->opt_ran + (size_t)i * RP_OPS;
            for (int op = 0; op < RP_OPS; op++)
                if (ran[op]) fprintf(fp, "%lld,%s,%.0f\n", it, rp_op_names[op], row[op] * 1e3);
        }
    }
}

static int write_side(const hs_exec_replay *r, int k, hs_err *err)
{
    const char *flag = side_flags[k], *path = side_path(r, k);
    char tmp[1100];
    FILE *fp;
    int bad;
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return hs_errf(err, HS_EINVAL, "%s %s: path too long", flag, path);
    if (!(fp = fopen(tmp, "w")))
        return hs_errf(err, HS_EIO, "%s %s: cannot write %s: %s", flag, path, tmp, strerror(errno));
    write_side_rows(r, k, fp);
    bad = ferror(fp);
    bad |= fclose(fp) != 0;
    if (bad) {
        int e = errno;
        remove(tmp);
        return hs_errf(err, HS_EIO, "%s %s: cannot write %s: %s", flag, path, tmp, strerror(e));
    }
    return 0;
}

static int side_commit(const char *flag, const char *path, hs_err *err)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);   /* fitted in write_side */
    if (rename(tmp, path))
        return hs_errf(err, HS_EIO, "%s %s: cannot rename %s: %s", flag, path, tmp, strerror(errno));
    return 0;
}

static void side_drop(const char *path)
{
    char tmp[1100];
    if (path && (size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) < sizeof tmp) remove(tmp);
}

int hs_exec_replay_run(hs_exec_replay *r, hs_exec *x, hs_err *err)
{
    memplan mp;
    char tmp[1100], devname[160];
    FILE *fp = stdout;
    double budget = MEM_HEADROOM * x->info.mem_usable, t0 = hs_wall_s();
    int rc, bad;

    mem_plan(r, x, &mp);
    if (mp.weights + mp.buffers + r->K * mp.kv_layer > budget) {
        double gib = 1073741824.0, left = budget - mp.weights - mp.buffers;
        int fit = left > 0 ? (int)floor(left / mp.kv_layer) : 0;
        if (fit >= 1)
            return hs_errf(err, HS_ENOFIT,
                           "%s: replica %d: the KV pool of %lld blocks of %d tokens needs %.2f GiB "
                           "per layer, %.2f GiB for %d layers; with %.3g GiB of weights and buffers "
                           "that is more than the %.2f GiB usable on %s: run fewer layers "
                           "(--layers %d fits)",
                           r->o.path, r->h.replica, (long long)r->pool, r->h.block_size,
                           mp.kv_layer / gib, r->K * mp.kv_layer / gib, r->K,
                           (mp.weights + mp.buffers) / gib, budget / gib,
                           x->info.device, fit);
        return hs_errf(err, HS_ENOFIT,
                       "%s: replica %d: the KV pool of %lld blocks of %d tokens needs %.2f GiB "
                       "per layer; with %.3g GiB of weights and buffers it does not fit in the "
                       "%.2f GiB usable on %s even with --layers 1",
                       r->o.path, r->h.replica, (long long)r->pool, r->h.block_size, mp.kv_layer / gib,
                       (mp.weights + mp.buffers) / gib, budget / gib, x->info.device);
    }
    if (r->o.op_times && (!x->ops->mark || !x->ops->marks_read))
        return hs_errf(err, HS_EUNSUPPORTED, "--op-times: the %s backend cannot mark its stream", x->ops->name);
    for (int k = 0; k < SIDE_COUNT; k++) {
        const char *path = side_path(r, k);
        if (!path) continue;
        for (int j = 0; j < k; j++)
            if (side_path(r, j) && !strcmp(side_path(r, j), path))
                return hs_errf(err, HS_EINVAL, "%s %s: the same file as %s", side_flags[k], path,
                               side_flags[j]);
        /* --clocks without a monitor is not written (main warned) */
        if ((k != SIDE_CLOCKS || x->mon) && (rc = side_probe(r, side_flags[k], path, err))) return rc;
    }
    if (r->o.out) {
        if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", r->o.out) >= sizeof tmp)
            return hs_errf(err, HS_EINVAL, "--out %s: path too long", r->o.out);
        if (!(fp = fopen(tmp, "w")))
            return hs_errf(err, HS_EIO, "--out %s: cannot write %s: %s", r->o.out, tmp, strerror(errno));
    }
    if (!(r->it_no = malloc(((size_t)r->n_iters + 1) * sizeof *r->it_no)) ||
        !(r->meas = malloc(((size_t)r->n_iters + 1) * sizeof *r->meas)) ||
        !(r->samples = malloc((size_t)r->o.repeats * sizeof *r->samples)) ||
        (r->o.clocks && x->mon && !(r->clk = calloc((size_t)r->n_iters + 1, sizeof *r->clk))) ||
        (r->o.stamps && !(r->stamp = calloc(2 * ((size_t)r->n_iters + 1), sizeof *r->stamp))) ||
        (r->o.op_times && (!(r->opt = calloc(((size_t)r->n_iters + 1) * RP_OPS, sizeof *r->opt)) ||
                           !(r->opt_ran = calloc(((size_t)r->n_iters + 1) * RP_OPS, 1))))) {
        rc = hs_errf(err, HS_ENOMEM, "out of memory");
        goto fail;
    }
    if (!r->o.quiet) notes(r, x, &mp);
    r->n_done = 0;
    r->warmed = 0;
    /* main decides (--progress, or a terminal without --quiet); the
     * environment's HS_PROGRESS may still set the interval or turn it off */
    hs_progress_start(&r->pg, "hetsim-exec: replay", 1, r->o.progress);
    if (!r->o.progress) r->pg.on = 0;
    if (r->n_iters > 0 &&
        ((rc = dev_open(r, x, &mp, err)) || (rc = books_open(r, r->pool, err)) ||
         (rc = prime(r, &mp, err)) || (rc = walk(r, 0, run_iter, err))))
        goto fail;
    if (r->n_done != r->n_iters) {
        rc = hs_errf(err, HS_ESTATE, "%s: changed while being replayed", r->o.path);
        goto fail;
    }
    progress_line(r, 1);
    assert(hs_exec_kvpool_sane(r->kv));
    if (r->o.check)
        fprintf(stderr, "check end blocks=%lld peak=%lld pool=%lld\n",
                (long long)hs_exec_kvpool_used(r->kv), (long long)hs_exec_kvpool_peak(r->kv),
                (long long)r->pool);

    for (int k = 0; k < SIDE_COUNT; k++)
        if (side_on(r, k) && (rc = write_side(r, k, err))) goto fail;
    hs_exec_device_dirname(&x->info, devname, sizeof devname);
    fprintf(fp,
            "# hetsim-exec replay: device=%s, backend=%s, model=%s, replica=%d, layers_run=%d, "
            "scale=%d/%d, pad_tokens=%d, kv_blocks_capacity=%lld\n",
            devname, x->info.backend, r->h.model, r->h.replica, r->K, r->L, r->K,
            r->o.pad_tokens > 1 ? r->o.pad_tokens : 1, capacity_blocks(r, x->info.mem_usable));
    fprintf(fp, "it,measured_ns\n");
    for (int64_t i = 0; i < r->n_done; i++)
        fprintf(fp, "%lld,%lld\n", (long long)r->it_no[i], (long long)r->meas[i]);
    bad = ferror(fp);
    if (r->o.out) {
        bad |= fclose(fp) != 0;
        fp = NULL;
        if (bad) {
            rc = hs_errf(err, HS_EIO, "--out %s: write failed", r->o.out);
            goto fail;
        }
    } else if (fflush(fp) || bad) {
        rc = hs_errf(err, HS_EIO, "stdout: write failed");
        goto fail;
    }
    /* every file written: the side files first, the measured CSV last,
     * taking back the side files if it cannot be put in place */
    for (int k = 0; k < SIDE_COUNT; k++) {
        if (!side_on(r, k) || !(rc = side_commit(side_flags[k], side_path(r, k), err))) continue;
        for (int j = 0; j < k; j++)
            if (side_on(r, j)) remove(side_path(r, j));
        goto fail;
    }
    if (r->o.out && rename(tmp, r->o.out)) {
        rc = hs_errf(err, HS_EIO, "--out %s: cannot rename %s: %s", r->o.out, tmp, strerror(errno));
        for (int k = 0; k < SIDE_COUNT; k++)
            if (side_on(r, k)) remove(side_path(r, k));
        goto fail;
    }
    if (!r->o.quiet)
        fprintf(stderr, "hetsim-exec: replay: %lld iterations in %.2f s\n", (long long)r->n_done,
                hs_wall_s() - t0);
    dev_close(r);
    return 0;
fail:
    hs_progress_end(&r->pg);   /* the error gets a line of its own */
    if (r->o.out) {
        if (fp) fclose(fp);
        remove(tmp);
    }
    for (int k = 0; k < SIDE_COUNT; k++)
        if (side_on(r, k)) side_drop(side_path(r, k));
    dev_close(r);
    return rc;
}

void hs_exec_replay_free(hs_exec_replay *r)
{
    if (!r) return;
    dev_close(r);
    hs_exec_kvpool_destroy(r->kv);
    free(r->req);
    free(r->st.ints);
    free(r->seen_T);
    free(r->seen_S);
    free(r->it_no);
    free(r->meas);
    free(r->samples);
    free(r->clk);
    free(r->stamp);
    free(r->opt);
    free(r->opt_ran);
    free(r);
}
