/* schedule.h - the executed schedule of chosen replicas, as JSON lines.
 *
 * `hetsim run --emit-schedule FILE` writes, for each chosen replica, every
 * iteration the simulator executed: its prefill chunks (request, chunk
 * length, cached prefix), its decode requests with their context lengths,
 * the KV blocks in use, which requests got their first token or finished,
 * which were preempted before it, and its predicted duration.
 * `hetsim-exec replay FILE` re-executes that work on a device;
 * `hetsim validate` joins predicted and measured times.
 *
 * One JSON object per line; "type" says which:
 *   {"type":"header","version":1,"model":"llama-2-7b","gpu":"a100-80g",
 *    "replica":0,"tp":1,"pp":1,"bits":16,"kv_bits":16,"layers":32,
 *    "block_size":16,"kv_blocks":N,"perf_model":"roofline",
 *    "step_overhead_ns":300000,"step_seq_ns":3000,   one per replica, first;
 *    "step_tok_ns":0,                                the host cost of an iteration;
 *    "latency_scale":0.5, "quant_kernels":"lptorch", optional: the deployment's
 *    "layer_bits":[16,8,..]}                         scale, kernels, per-layer widths
 *   {"type":"request","replica":0,"id":7,"arrival_ns":123,"prompt":512,
 *    "output":128}                                   when first routed there
 *   {"type":"iter","replica":0,"it":0,"start_ns":..,"end_ns":..,
 *    "preempted":[ids],                              KV dropped before it
 *    "prefill":[[id,chunk,prefix,target],..],        chunk tokens after prefix; the
 *                                                    request's whole prefill (its KV
 *                                                    blocks are held from admission)
 *    "decode":[[id,context],..],                     context incl. the new token
 *    "first":[ids], "finished":[ids],                after it
 *    "kv_blocks_used":n}                             during it
 * Iterations of one replica are in execution order; "it" counts from 0 per
 * replica.  Only single-stage (pp = 1) replicas under policies that use the
 * default completion (no `complete` hook) can be emitted; emission turns
 * fast-forward off, since it lists every decode step. */
#ifndef HS_SCHEDULE_H
#define HS_SCHEDULE_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "core/time.h"
#include "perf/perf.h"

typedef struct hs_sched_header {
    int32_t replica;
    char model[48];
    char gpu[32];
    char perf_model[32];
    int32_t tp, pp, bits, kv_bits, layers, block_size;
    int64_t kv_blocks;
    double step_overhead_ns;  /* host cost per iteration: this, */
    double step_seq_ns;       /* + this per sequence (prefill chunks and decodes), */
    double step_tok_ns;       /* + this per token (optional keys, 0 when absent) */
    double latency_scale;     /* the deployment's latency_scale of the replica,
                                 in the times above and the iterations' (optional
                                 key, written only when not 1; 0: none) */
    char quant_kernels[16];   /* its quantised layers' kernels (perf.quant_kernels;
                                 written only when not "model"; "": model) */
    int32_t n_layer_bits;     /* layer_bits given (0: every layer at bits) */
    unsigned char layer_bits[HS_MAX_LAYERS]; /* each layer's width */
} hs_sched_header;

typedef struct hs_sched_request {
    int32_t replica;
    int64_t id;
    hs_ns arrival;
    int32_t prompt, output;
} hs_sched_request;

typedef struct hs_sched_chunk {
    int64_t id;
    int32_t len, prefix;
    int32_t target;       /* tokens prefilled when the prompt is done (>= prefix + len) */
} hs_sched_chunk;

typedef struct hs_sched_dec {
    int64_t id;
    int32_t ctx;
} hs_sched_dec;

typedef struct hs_sched_iter {
    int32_t replica;
    int64_t it;
    hs_ns start, end;
    int64_t kv_blocks_used;
    int32_t n_pre, n_dec, n_preempted, n_first, n_finished;
    hs_sched_chunk *pre;      /* arrays owned by the reader, valid until the next call */
    hs_sched_dec *dec;
    int64_t *preempted, *first, *finished;
} hs_sched_iter;

enum { HS_SCHED_HEADER = 1, HS_SCHED_REQUEST, HS_SCHED_ITER };

/* ---- reading ---- */
typedef struct hs_sched_reader hs_sched_reader;

int hs_sched_open(hs_sched_reader **out, const char *path, hs_err *err);
/* Next record: returns its kind (HS_SCHED_*) and fills the matching struct,
 * 0 at the end, or a negative code with "path:line: problem". */
int hs_sched_next(hs_sched_reader *r, hs_sched_header *h, hs_sched_request *q,
                  hs_sched_iter *it, hs_err *err);
void hs_sched_close(hs_sched_reader *r);

/* ---- writing (used by the engine through hs_engine.trace) ---- */
typedef struct hs_sched_writer hs_sched_writer;

/* replicas: which replica ids to emit (NULL or n 0: replica 0 only). */
int hs_sched_writer_open(hs_sched_writer **out, const char *path, const int32_t *replicas,
                         int n_replicas, hs_err *err);
/* Flushes and closes; returns the first write error, if any.  With
 * `discard` the file is removed (a failed run leaves none). */
int hs_sched_writer_close(hs_sched_writer *w, int discard, hs_err *err);
/* 1 when replica is emitted. */
int hs_sched_wants(const hs_sched_writer *w, int32_t replica);
void hs_sched_write_header(hs_sched_writer *w, const hs_sched_header *h);
void hs_sched_write_request(hs_sched_writer *w, const hs_sched_request *q);
/* Writes it; it->it is assigned by the writer (per-replica counter). */
void hs_sched_write_iter(hs_sched_writer *w, hs_sched_iter *it);

#endif
