/* iserve_multi_int.h - the multi-model runner's private state, shared by iserve_multi.c
 * (FCFS) and iserve_multi_cb.c (the continuous-batching option).  Not public. */
#ifndef HS_MULTI_INT_H
#define HS_MULTI_INT_H

#include "core/evq.h"
#include "plan/iserve_multi.h"

typedef struct hs__mreq {
    int64_t id;                   /* the trace's request id */
    hs_ns arrival, start, finish;
    int32_t prompt, output, model, inst, next;
    int32_t dropped;              /* batched option: the engine dropped it */
    double solo_ns, ttft_ns, slo_ns;
} hs__mreq;

typedef struct hs__inst {
    int model, n_gpus, gpus[64];
    hs_layout layout;
    double lat_ratio, pass_extra_ns;   /* the variant's measured ratio; per pass */
    double true_b[64], charge_b[64], bytes;
    hs_solo solo;
    char label[64];
    int32_t qhead, qtail, qlen;   /* FCFS queue of hs__mreq indices */
    int32_t cur;                  /* request in service, -1 idle */
    double remaining, rate;       /* ns of solo work left; progress per ns */
    int64_t served;
} hs__inst;

struct hs_multi {
    hs_multi_cfg cfg;
    const hs_cluster *c;
    const hs_model *models;
    int n_models, n_gpus;
    hs_solo *base;               /* [n_models] */
    int *has_base, *deployed;
    int *due;                    /* its deployment time has come (tried or done) */
    int deps_left;               /* deployment events still queued */
    hs__inst *in;
    int n_in;
    size_t cap_in;
    hs__mreq *rq;
    int64_t n_rq;
    size_t cap_rq;
    hs__mreq *un;                /* kept arrivals of undeployed models (inst -1), for the request rows */
    int64_t n_un;
    size_t cap_un;
    double *cap_b, *charge_b, *free_b, *true_b, *loadv, *busy_ns;
    int *busy_k;
    hs_loadmon mon;
    hs_ns now;                   /* time the fluid state was advanced to */
    /* The run's events (core/evq.h): deployments (queued by
     * hs_multi_schedule), the pending arrival, the next load sample and the
     * earliest completion, the one queued as (fin_t, fin_i) under fin_seq
     * (0: none). */
    hs_evq q;
    uint64_t fin_seq;
    hs_ns fin_t;
    int fin_i;
    int ran;                     /* hs_multi_run was called */
    int batched;                 /* hs_multi_run_batched re-served the requests: start is the
                                  * engine's first schedule, ttft_ns its first token - arrival */
};

/* Sorts ascending; percentile q of a sorted array (linear interpolation). */
void hs__sort_doubles(double *v, int64_t n);
double hs__pct(const double *v, int64_t n, double q);

#endif
