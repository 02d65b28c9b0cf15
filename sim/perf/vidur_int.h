/* vidur_int.h - what the Vidur importer's two files share: vidur.c builds
 * one table (readers, shape, hs__vidur_import_src), vidur_all.c walks a
 * folder of either layout (hs_vidur_import_all).  Internal: hs__ prefix, not
 * part of the public API (that is table.h's "Vidur importer" section). */
#ifndef HS_PERF_VIDUR_INT_H
#define HS_PERF_VIDUR_INT_H

#include <stddef.h>

#include "core/err.h"
#include "perf/table.h"

/* Size of the path buffers (bytes, with the terminating NUL). */
#define HS__VIDUR_PATH_CAP 4096

/* printf into buf; 0, or HS_ERANGE naming the text's start when it does not fit (err may be NULL). */
__attribute__((format(printf, 4, 5))) int hs__vidur_fmt(char *buf, size_t cap, hs_err *err, const char *f, ...);

/* ---- model shape: the shape columns of mlp.csv ------------------------------ */

/* Fields of hs__vidur_shape, in the order of mlp.csv's columns n_head,
 * n_kv_head, n_embd, n_expanded_embd, vocab_size, use_gated_mlp (shape_cols
 * in vidur.c). */
enum {
    HS__VIDUR_SH_HEADS, HS__VIDUR_SH_KV, HS__VIDUR_SH_HIDDEN, HS__VIDUR_SH_FFN, HS__VIDUR_SH_VOCAB,
    HS__VIDUR_SH_GATED, HS__VIDUR_SH_N
};

/* A model's shape as mlp.csv gives it; -1 where the column is absent (the
 * first three are required); gated is 0 or 1. */
typedef struct hs__vidur_shape {
    long v[HS__VIDUR_SH_N];
} hs__vidur_shape;

/* Describes s in words into buf ("n_embd 4096, n_head 32, ..."), cut at cap. */
void hs__vidur_shape_str(const hs__vidur_shape *s, char *buf, size_t cap);

/* A mixed mlp.csv's distinct shapes, first-seen order, with row counts (*n each, the caller frees). */
int hs__vidur_mlp_shapes(const char *path, hs__vidur_shape **out, size_t **rows, size_t *n, hs_err *err);

/* ---- one table from any layout ---------------------------------------------- */

/* Where one table's files are; paths relative to root. */
typedef struct hs__vidur_src {
    const char *root;          /* the Vidur folder */
    const char *gpu;           /* Vidur's device name */
    const char *model_path;    /* "org/Model" naming the model, or NULL: */
    const char *model;         /*   our name, given */
    const char *layout;        /* "" or words for meta.source */
    const char *mlp;
    const char *mlp_note;      /* "" or words after mlp's name in meta.source */
    const hs__vidur_shape *filter; /* NULL: mlp holds one model */
    char *const *attn;         /* attention files, filtered by shape */
    int n_attn;
    const char *net[2];        /* all-reduce, send/recv file; NULL or absent: none */
    const char *net_label;     /* for meta.source; NULL: the files read */
} hs__vidur_src;

/* Builds the table s names into *out (the caller's; NULL on failure); flags, st, errors as hs_vidur_import_ex. */
int hs__vidur_import_src(hs_ptable **out, const hs__vidur_src *s, unsigned flags, hs_vidur_stats *st,
                         hs_err *err);

/* Vidur's device names that hetsim maps (a100, a40, h100), i-th or NULL past
 * the last; *network receives the device's default network folder. */
const char *hs__vidur_known_gpu(int i, const char **network);

/* A collectives-only table (meta model "") of Vidur's device gpu from
 * root/network/<net>/{all_reduce,send_recv}.csv: the device's measured NCCL
 * timings where it has no kernel tables.  *out NULL (and 0) when neither
 * file holds a usable row. */
int hs__vidur_import_net(hs_ptable **out, const char *root, const char *gpu, const char *net,
                         hs_vidur_stats *st, hs_err *err);

#endif
