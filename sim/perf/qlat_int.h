/* qlat_int.h - the calibrated FP16 layer's layout, shared by qlat.c (which
 * reads it) and qlat_cal.c (which builds it with hs_perf_build).  Split so
 * that perf.c, which prices LLM-PQ's kernels (perf.quant_kernels), and
 * qlat.c do not depend on each other both ways. */
#ifndef HS_QLAT_INT_H
#define HS_QLAT_INT_H

#include "perf/qlat.h"

typedef struct qcal_type {
    char gpu[32];
    double *dense;            /* [max_tokens + 1] ns: one FP16 layer's dense ops */
    double *head;             /* [max_seqs + 1] ns: LM head and final norm */
} qcal_type;

struct hs_qlat_cal {
    int n, max_tokens, max_seqs;
    qcal_type *t;
    hs_perf *prov;            /* the builds' provenance (calib, expected_err) */
};

#endif
