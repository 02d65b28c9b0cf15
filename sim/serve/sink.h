/* sink.h - the narrow interface through which the serving runtime reports
 * outcomes.  serve/ knows nothing of SQLite or of how metrics are summarised;
 * the CLI wires a sink that feeds out/metrics and out/db, and optionally a
 * timeline (hs_timeline) that out/chrome.c writes as a Chrome trace. */
#ifndef HS_SINK_H
#define HS_SINK_H

#include <stdint.h>

#include "core/time.h"

typedef struct hs_req_record {
    int64_t id;
    int32_t replica;      /* replica index that served it (-1: never routed) */
    int32_t prompt;       /* tokens */
    int32_t output;       /* tokens generated (== requested unless dropped) */
    int32_t preemptions;  /* times evicted and recomputed */
    int dropped;          /* 1: could never be served (reason in `why`) */
    const char *why;      /* static string, NULL unless dropped */
    hs_ns arrival;        /* ns */
    hs_ns first_sched;    /* ns, first time a prefill of it began */
    hs_ns first_token;    /* ns, end of the iteration that produced token 1 */
    hs_ns finish;         /* ns, end of the iteration that produced the last token */
} hs_req_record;

typedef struct hs_sink {
    void *ctx;
    /* One call per request, when it finishes or is dropped. */
    int (*request)(void *ctx, const hs_req_record *rec);
    /* `count` inter-token intervals of `interval` ns (one decode iteration
     * of a batch of `count` sequences), so ITL costs O(1) per iteration. */
    void (*itl)(void *ctx, hs_ns interval, int64_t count);
} hs_sink;

/* One iteration of one lane, as the engine ran it (hs_timeline.iter). */
typedef struct hs_tl_iter {
    int32_t replica;
    int32_t lane;             /* index of the lane within its replica */
    hs_ns start, end;         /* ns */
    int32_t tokens;           /* all tokens of the forward pass */
    int32_t prefill_chunks;   /* prompt chunks in it */
    int64_t prefill_tokens;   /* new prompt tokens of those chunks */
    int64_t prefix_tokens;    /* tokens of the prompts before those chunks */
    int32_t decode_seqs;      /* sequences decoding one token each */
    int64_t decode_ctx;       /* tokens the decoding sequences attend to */
    int64_t kv_used, kv_total;/* the lane's KV blocks held at the end, and all */
} hs_tl_iter;

/* Optional observer of the engine's timeline: every iteration (also each
 * step of a fast-forwarded run), preemption and KV hand-over.  Set with
 * hs_engine_set_timeline; NULL costs one test per iteration.  The
 * callbacks cannot fail the run: a writer keeps its own error. */
typedef struct hs_timeline {
    void *ctx;
    void (*iter)(void *ctx, const hs_tl_iter *it);
    /* request req was evicted from lane `lane` of `replica` at t (ns) */
    void (*preempt)(void *ctx, int32_t replica, int32_t lane, int64_t req, hs_ns t);
    /* the KV (or encoder output) of request req leaves replica `from` for
     * replica `to`: kv_begin when its flows start (bytes over all flows),
     * kv_end when the last one lands */
    void (*kv_begin)(void *ctx, int64_t req, int32_t from, int32_t to, double bytes, hs_ns t);
    void (*kv_end)(void *ctx, int64_t req, int32_t from, int32_t to, hs_ns t);
} hs_timeline;

#endif
