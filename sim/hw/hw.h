/* hw.h - GPU types and cluster topologies.
 *
 * GPUs come from profiles/gpus/<name>.json, clusters from
 * profiles/clusters/<name>.json (formats in profiles/README.md).  Inside the
 * simulator every quantity is SI: FLOP/s, bytes, bytes/s, seconds.
 * A cluster is N GPUs numbered 0..N-1 in node order with a full N x N
 * per-direction bandwidth matrix and latency matrix, built from node/inter
 * values or given explicitly; every off-diagonal entry must be positive (a
 * missing link is an error at load time, never a division by zero later). */
#ifndef HS_HW_H
#define HS_HW_H

#include <stddef.h>

#include "core/err.h"

typedef struct hs_gpu {
    char name[32];
    char display[64];
    double flops16;        /* FLOP/s, dense FP16 GEMM with FP32 accumulation
                              (tensor cores; without them, the FP32 rate) */
    double flops32;        /* FLOP/s, FP32 on CUDA cores (0: not given) */
    int bf16;
    double ops8;           /* OP/s, dense INT8 (0: none) */
    double mem_bytes;      /* bytes, nominal */
    double mem_reported_bytes; /* bytes CUDA reports as the total (the
                                  file's mem_reported_gib, else mem_bytes) */
    double mem_bw;         /* bytes/s */
    double sm_rate;        /* SM cycles per second: SMs x boost clock (0: not
                              given); elementwise kernels scale with it */
    int hbm;               /* 1: HBM memory (the file's "memory": HBM2, HBM2e,
                              HBM3, HBM3e); 0: GDDR or not given */
    double nvlink_bw;      /* bytes/s per direction, 0: none */
    double pcie_bw;        /* bytes/s per direction */
    double tdp_w;          /* W */
    double price_per_hour; /* $ per GPU-hour */
    char price_source[512];
    char same_chip_as[32];  /* "" or a GPU on the same chip: its calibration
                               stands in when this one has none (perf/) */
    /* The links of a node of these GPUs in a cluster shorthand
     * (hs_cluster_find): GPU-to-GPU inside the node and per GPU between
     * nodes.  From the GPU file's intra_* / inter_* keys, else PCIe
     * (pcie_bw, 5 us) inside and a 100 Gb/s network (12.5 GB/s, 20 us)
     * between. */
    double intra_bw, intra_lat;   /* bytes/s per direction, s */
    double inter_bw, inter_lat;   /* bytes/s per direction, s */
} hs_gpu;

/* Directory holding models/ and profiles/ (HETSIM_ROOT, else the source tree
 * this binary was built from). */
const char *hs_data_root(void);

/* Resolves `name` to a file: a path when it contains '/' or ends in ".json",
 * else <root>/<dir>/<name>.json.  Returns 0 or HS_ERANGE when too long. */
int hs_resolve(char *buf, size_t cap, const char *dir, const char *name,
               hs_err *err);

/* " (did you mean \"X\"?)" naming the closest <root>/<dir>/X.json to a
 * misspelt `name`, or "" (hs_str_suggest); returns buf. */
const char *hs_suggest_file(char *buf, size_t cap, const char *dir, const char *name);

int hs_gpu_load(hs_gpu *g, const char *path, hs_err *err);
/* The chip of g: the GPU its same_chip_as names, else its own name (an H200
 * and an H100 share one). */
static inline const char *hs_gpu_chip(const hs_gpu *g)
{
    return g->same_chip_as[0] ? g->same_chip_as : g->name;
}
/* 0 when its FP16 GEMMs run at its FP32 rate (no tensor cores, the
 * P100); 1 otherwise, or when the file gives no FP32 rate. */
static inline int hs_gpu_tensor_cores(const hs_gpu *g)
{
    return !(g->flops32 > 0 && g->flops16 <= g->flops32);
}
/* Loads by name (or path), see hs_resolve. */
int hs_gpu_find(hs_gpu *g, const char *name, hs_err *err);

typedef struct hs_cluster {
    char name[64];
    char description[1024];
    int n_gpus, n_nodes, n_types;
    hs_gpu *types;        /* distinct GPU types, in first-use order */
    int *gpu_type;        /* [n_gpus] index into types */
    int *gpu_node;        /* [n_gpus] node index */
    char (*node_name)[32];/* [n_nodes] */
    double *bw;           /* [n_gpus * n_gpus] bytes/s per direction */
    double *lat;          /* [n_gpus * n_gpus] s */
} hs_cluster;

int hs_cluster_load(hs_cluster **out, const char *path, hs_err *err);
/* By name: a file (see hs_resolve), or a shorthand
 *   TERM[+TERM...]   TERM = NODESxGPUSxGPU (NODES nodes of GPUS) or GPUSxGPU (one node)
 * e.g. "4x8xh100-sxm-80g" or "1x4xh100-sxm-80g+1x4xa100-80g".  A
 * shorthand's links come from its GPUs' defaults (hs_gpu intra_*, inter_*);
 * between nodes of different GPUs the slower network and the longer
 * latency.  The cluster's name is the shorthand itself, so a deployment
 * naming it finds it again.  A file JSON node may also say "repeat": N. */
int hs_cluster_find(hs_cluster **out, const char *name, hs_err *err);
/* Checks that hs_cluster_find would find `name` (a shorthand's GPUs, a
 * file's presence) without building it; same errors. */
int hs_cluster_check(const char *name, hs_err *err);
/* 1 when name has the shorthand's form (it may still be invalid). */
int hs_cluster_is_shorthand(const char *name);
void hs_cluster_destroy(hs_cluster *c);

static inline const hs_gpu *hs_cluster_gpu(const hs_cluster *c, int i)
{
    return &c->types[c->gpu_type[i]];
}
static inline double hs_cluster_bw(const hs_cluster *c, int i, int j)
{
    return c->bw[(long)i * c->n_gpus + j];
}
static inline double hs_cluster_lat(const hs_cluster *c, int i, int j)
{
    return c->lat[(long)i * c->n_gpus + j];
}
/* $ per hour of the given GPUs (all when ids is NULL). */
double hs_cluster_price(const hs_cluster *c, const int *ids, int n);

#endif
