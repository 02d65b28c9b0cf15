/* replay.h - `hetsim-exec replay`: executes the iterations of one replica
 * of a schedule exported by `hetsim run --emit-schedule` (format in
 * sim/serve/schedule.h) on a backend and writes the measured time of each:
 *
 *   # hetsim-exec replay: device=D, backend=B, model=M, replica=R, layers_run=K, scale=L/K, pad_tokens=P, kv_blocks_capacity=N
 *   it,measured_ns
 *   0,1234567
 *   ...
 *
 * What one iteration runs (one TP rank's shapes, tp from the header):
 * the embedding gather of its T tokens (T = prefill chunk tokens + decode
 * requests), then K layers of norm, QKV, rope, K/V write into a paged
 * cache, decode attention of the decode requests and causal prefill
 * attention per chunk over that cache, output projection, residual add,
 * norm, MLP up, activation, MLP down, residual add; then the final norm and
 * LM head on the sequences that sample a token.  measured_ns = emb +
 * (L / K) * (the K layers) + head, each the median over --repeats.
 *
 * Not in measured_ns: tensor-parallel collectives (not executed), the
 * scheduler's per-step overhead, the host's input preparation.
 *
 * The KV cache is real: a pool of blocks on the device per layer run,
 * block ids from a free list (kvpool.h) following the schedule's
 * allocations and frees, so block tables are as scattered as the schedule
 * makes them.  Two passes over the file: the first checks it and sizes
 * everything (pool, buffers), the second executes. */
#ifndef HS_EXEC_REPLAY_H
#define HS_EXEC_REPLAY_H

#include "exec.h"

typedef struct hs_exec_replay_opts {
    const char *path;          /* schedule file */
    int replica;               /* -1: the first replica whose header the file has */
    int layers;                /* layers to run, 0: all (header's layers) */
    int repeats;               /* timed runs per iteration (median), >= 1 */
    const char *out;           /* CSV path; NULL: stdout */
    const char *clocks;        /* per-iteration clocks CSV (it,samples,sm_mhz_mean,
                                  sm_mhz_min,sm_mhz_max,power_w_mean,power_w_max,reasons),
                                  written when the hs_exec has a monitor; NULL: none */
    const char *stamps;        /* per-iteration host times CSV (it,start_ns,end_ns:
                                  CLOCK_MONOTONIC before the first timed run and
                                  after the last, shared by every process on the
                                  host, so that replays run side by side can be
                                  lined up); NULL: none */
    const char *op_times;      /* per-iteration op times CSV (it,op,time_ns): each
                                  iteration run once more with every op timed by
                                  itself (the host waits after each), scaled to all
                                  layers as measured_ns is; what a step pays op by
                                  op, beside the table's rows; NULL: none */
    int pad_tokens;            /* the GEMMs run on the step's rows rounded up to a
                                  multiple of this, as vLLM v0.1 padded its input to
                                  8 tokens for the tensor cores; 0 or 1: unpadded */
    int check;                 /* KV-pool books per iteration on stderr */
    int quiet;                 /* no notes or summary on stderr */
    int progress;              /* a progress line on stderr every few seconds
                                  (iterations done / total, elapsed, ETA);
                                  redrawn in place when stderr is a terminal */
} hs_exec_replay_opts;

typedef struct hs_exec_replay hs_exec_replay;

/* First pass: reads and checks the schedule, loads the model, sizes the KV
 * pool and the buffers.  Nothing on a device.  Errors (one line in err):
 * HS_EIO (cannot open), HS_EPARSE (malformed, "path:line: ..."),
 * HS_ENOTFOUND (replica not in the file, model unknown), HS_EINVAL
 * (--layers, tp, bits, block size the executor cannot run). */
int hs_exec_replay_plan(hs_exec_replay **out, const hs_exec_replay_opts *o, hs_err *err);

/* Second pass on backend x: allocates the pool and buffers (HS_ENOFIT with
 * what would fit when the device cannot hold them), executes every
 * iteration and writes the CSV (to a temporary renamed at the end when
 * opts.out is set, so a failed run leaves no file). */
int hs_exec_replay_run(hs_exec_replay *r, hs_exec *x, hs_err *err);

void hs_exec_replay_free(hs_exec_replay *r);     /* NULL: no-op */

#endif
