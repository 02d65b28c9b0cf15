/* chrome.h - the engine's timeline as a Chrome trace-event JSON file
 * (`hetsim run --emit-trace F`), which Perfetto UI (ui.perfetto.dev) and
 * chrome://tracing open.
 *
 * Layout: one process per replica (pid = replica id + 1, named "replica
 * N: " with its role and GPUs), one thread per lane (tid = pid * 10000 +
 * lane index, named "lane K": never 0 and unique per lane, as Perfetto
 * needs; chrome.c says why); on it one complete
 * event ("ph":"X", cat "iter") per iteration, named prefill, decode or
 * mixed, with the batch in args (tokens, prefill_chunks, prefill_tokens,
 * prefix_tokens, decode_seqs, decode_ctx, kv_used, kv_total); preemptions
 * as instant events ("ph":"i", cat "preempt", args.req).  KV hand-overs are
 * async spans ("ph":"b"/"e", cat "kv", id = the request) on the receiving
 * replica, named after the sending one, args req and bytes.  Times are
 * whole microseconds of simulated time ("ts", "dur"), truncated, so that
 * back-to-back iterations touch without overlapping.
 *
 * Size: about 230 bytes per iteration, so the file grows with the run's
 * iterations (fast-forwarded decode steps are written one by one); `limit`
 * caps the iterations written, after which the file notes it was cut.
 * The file is written to F.tmp and renamed at close, so a failed run
 * leaves none. */
#ifndef HS_CHROME_H
#define HS_CHROME_H

#include <stdint.h>

#include "core/err.h"
#include "serve/sink.h"

typedef struct hs_chrome hs_chrome;

/* Creates path.tmp; limit: most iteration events written (0: no limit).
 * HS_EIO naming the path when it cannot be created. */
int hs_chrome_open(hs_chrome **out, const char *path, int64_t limit, hs_err *err);
/* Names replica `replica`'s process ("replica 0: prefill, a100-80g:0,1")
 * and its `lanes` threads; call before the run. */
void hs_chrome_replica(hs_chrome *c, int32_t replica, const char *role, const char *gpus, int32_t lanes);
/* The observer to hand to hs_engine_set_timeline; valid while c is. */
const hs_timeline *hs_chrome_timeline(hs_chrome *c);
/* Iteration events written so far, and those the limit left out. */
int64_t hs_chrome_iters(const hs_chrome *c);
int64_t hs_chrome_dropped(const hs_chrome *c);
/* Ends the JSON and renames it into place; with `discard` removes it
 * instead.  Returns the first write error (HS_EIO naming the path); NULL
 * is a no-op. */
int hs_chrome_close(hs_chrome *c, int discard, hs_err *err);

#endif
