/* profile.h - `hetsim-exec profile`: measured per-op tables of one model on
 * the device a backend runs on (format in exec/README.md):
 *
 *   dense.csv         op,tp,bits,tokens,time_us
 *   attn_decode.csv   tp,batch,context,time_us
 *   attn_prefill.csv  tp,chunk,prefix,time_us
 *   meta.json         device, memory and KV-block figures
 *
 * Times are medians of repeated runs in microseconds for one instance of
 * the op on one TP rank.  Files are written to temporaries and renamed at
 * the end, so a failed profile leaves no partial table behind. */
#ifndef HS_EXEC_PROFILE_H
#define HS_EXEC_PROFILE_H

#include <stddef.h>

#include "exec.h"
#include "llm/model.h"

#define HS_EXEC_MAX_TPS 8

#define HS_EXEC_MAX_TOKENS 64   /* --tokens and --chunks values */

typedef struct hs_exec_profile_opts {
    int tp[HS_EXEC_MAX_TPS];   /* TP degrees to profile, in order */
    int n_tp;
    int bits[3];               /* weight bits of the GEMM ops: 16, 8, 4 */
    int n_bits;
    const char *out;           /* directory; NULL: <root>/profiles/<device>/<model>/ */
    int quick;                 /* small grids and few repeats */
    int tokens[HS_EXEC_MAX_TOKENS];   /* the dense ops' token counts, increasing; */
    int n_tokens;                     /* 0: the backend's grid */
    int chunks[HS_EXEC_MAX_TOKENS];   /* prefill attention's chunk lengths, increasing; */
    int n_chunks;                     /* 0: the backend's grid */
    hs_exec_timing_mode timing;   /* how each op is timed (hs_exec_measure) */
    double rest;               /* idle this many times each row's time after it
                                  (hs_exec_timing.rest); < 0: the backend's
                                  default, 1 on a GPU and 0 on the CPU */
    double kv_pool_gib;        /* attention rows: a KV pool (K and V) of at least this
                                  many GiB, blocks shuffled over all of it; 0: what
                                  the grid needs */
    int progress;              /* one line per table on stderr */
} hs_exec_profile_opts;

/* Runs the sweeps and writes the four files; the directory used is copied
 * to dir_out.  Errors: HS_EINVAL (bad --tp), HS_EIO (directory not
 * writable), device errors from the backend. */
int hs_exec_profile(hs_exec *x, const hs_model *m, const hs_exec_profile_opts *o,
                    char *dir_out, size_t cap, hs_err *err);

/* The folder name of x's device: the hetsim GPU name (profiles/gpus) when
 * the device matches one, else the sanitised device name; on the CPU
 * "cpu-<sanitised CPU model>". */
void hs_exec_device_dirname(const hs_exec_info *info, char *buf, size_t cap);

#endif
