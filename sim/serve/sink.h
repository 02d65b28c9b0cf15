/* sink.h - the narrow interface through which the serving runtime reports
 * outcomes.  serve/ knows nothing of SQLite or of how metrics are summarised;
 * the CLI wires a sink that feeds out/metrics and out/db. */
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

#endif
